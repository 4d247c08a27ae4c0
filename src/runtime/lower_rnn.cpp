// LSTM, GRU and RNN on oneDNN's recurrent primitives (lstm_forward, gru_forward,
// lbr_gru_forward, vanilla_rnn_forward): one primitive runs every time step and
// both directions. The weights are reordered once, when the graph is compiled, from
// ONNX's [directions, gates*hidden, input] in ONNX's gate order to oneDNN's
// [layers, directions, input, gates, hidden] in oneDNN's, biases summed.
//
// The fast path covers what exporters write: the default activations, no clip, no
// input_forget, no peepholes, constant weights, every sequence full length. Other
// instances run on the reference kernel (ops/rnn.cpp).
#include "ops/rnn.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

namespace {

// oneDNN's gate k is ONNX's gate kOnnxGate[k]: LSTM oneDNN i f c~ o, ONNX i o f c;
// GRU oneDNN u r o, ONNX z r h (the same); RNN has one gate.
int64_t onnx_gate(RnnCell cell, int64_t k) {
  static const int64_t kLstm[] = {0, 2, 3, 1};
  return cell == RnnCell::Lstm ? kLstm[k] : k;
}

// W or R ([D, G*H, K] in ONNX's gate order) as oneDNN's ldigo [1, D, K, G, H].
Tensor onnx_to_ldigo(const Tensor& w, RnnCell cell, int64_t D, int64_t G, int64_t H, int64_t K) {
  const std::vector<double> src = w.to_f64();
  std::vector<double> dst(src.size());
  for (int64_t d = 0; d < D; ++d)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t h = 0; h < H; ++h)
          dst[(((d * K + k) * G + g) * H + h)] = src[((d * G + onnx_gate(cell, g)) * H + h) * K + k];
  return Tensor::from_f64(DType::Float32, {1, D, K, G, H}, dst);
}

// B ([D, 2*G*H]: Wb then Rb) as oneDNN's ldgo [1, D, G', H]: Wb + Rb per gate; a
// linear-before-reset GRU keeps the candidate's two biases apart (G' = 4: u, r,
// the candidate's Wb, its Rb, which the reset gate scales).
Tensor onnx_to_ldgo(const Tensor* b, RnnCell cell, bool lbr, int64_t D, int64_t G, int64_t H) {
  const int64_t out_gates = lbr ? G + 1 : G;
  std::vector<double> dst(static_cast<size_t>(D * out_gates * H), 0.0);
  if (b) {
    const std::vector<double> src = b->to_f64();
    for (int64_t d = 0; d < D; ++d) {
      const double* wb = src.data() + d * 2 * G * H;
      const double* rb = wb + G * H;
      for (int64_t g = 0; g < G; ++g)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t from = onnx_gate(cell, g) * H + h;
          double& to = dst[static_cast<size_t>((d * out_gates + g) * H + h)];
          to = wb[from] + (lbr && g == 2 ? 0.0 : rb[from]);
          if (lbr && g == 2) dst[static_cast<size_t>((d * out_gates + 3) * H + h)] = rb[from];
        }
    }
  }
  return Tensor::from_f64(DType::Float32, {1, D, out_gates, H}, dst);
}

// Why this instance has no fast path, or "" if it has one.
std::string unsupported(Compiler& c, const Node& n, const RnnConfig& cfg, int64_t seq) {
  if (!all_float32(n)) return "not float32";
  if (!cfg.default_activations()) return "activations other than the defaults";
  if (cfg.has_clip) return "clip";
  if (cfg.input_forget) return "input_forget";
  const auto& in = n.inputs();
  if (in.size() > 7 && in[7].present()) return "peepholes";
  for (size_t k : {size_t{1}, size_t{2}, size_t{3}})
    if (k < in.size() && in[k].present() && !c.known(in[k])) return "weights that are not constants";
  if (in.size() > 4 && in[4].present()) {
    const Tensor* lens = c.known(in[4]);
    if (!lens) return "sequence_lens that is not a constant";
    for (int64_t v : lens->to_i64())
      if (v != seq) return "sequences shorter than the input";
  }
  return "";
}

}  // namespace

bool lower_recurrent(Compiler& c, const Node& n) {
  const RnnConfig cfg = rnn_config(n.op_type(), n.attrs());
  const auto& in = n.inputs();
  const std::vector<int64_t> xd = c.dims(in[0]);
  const int64_t seq = xd[cfg.layout == 0 ? 0 : 1], batch = xd[cfg.layout == 0 ? 1 : 0], input = xd[2];
  if (seq < 1 || batch < 1 || !unsupported(c, n, cfg, seq).empty()) return false;
  const int64_t D = cfg.directions, G = cfg.gates, H = c.dims(in[2])[2];
  const bool lbr = cfg.linear_before_reset;
  const bool has_c = cfg.cell == RnnCell::Lstm;
  const std::string who = n.name();

  // oneDNN's layer input and output: [T, N, C] in memory order tnc, or ntc for layout 1,
  // which is Y's own order when there is one direction (and for layout 1, both).
  const tag seq_tag = cfg.layout == 0 ? tag::tnc : tag::ntc;
  const md_t src_layer_md(to_dims({seq, batch, input}), dt::f32, seq_tag);
  const md_t dst_layer_md(to_dims({seq, batch, D * H}), dt::f32, seq_tag);
  const md_t state_md(to_dims({1, D, batch, H}), dt::f32, tag::ldnc);
  const md_t any_w_layer(to_dims({1, D, input, G, H}), dt::f32, tag::any);
  const md_t any_w_iter(to_dims({1, D, H, G, H}), dt::f32, tag::any);
  const md_t bias_md(to_dims({1, D, lbr ? G + 1 : G, H}), dt::f32, tag::ldgo);
  const dnnl::rnn_direction dir = D == 2      ? dnnl::rnn_direction::bidirectional_concat
                                  : cfg.reverse ? dnnl::rnn_direction::unidirectional_right2left
                                                : dnnl::rnn_direction::unidirectional_left2right;
  const auto fwd = dnnl::prop_kind::forward_inference;

  // Initial states as ldnc: layout 0's [D, N, H] already is; layout 1's [N, D, H] is transposed.
  auto initial_state = [&](size_t k, const std::string& what) -> int {
    if (k >= in.size() || !in[k].present()) return -1;
    int s = c.as_plain(c.id(in[k]));
    if (cfg.layout == 0) return c.alias(s, {1, D, batch, H}, state_md, who + what);
    int t = c.view(s, {1, D, batch, H}, {D * batch * H, H, D * H, 1}, 0, who + what + ".view");
    return c.as_layout(t, state_md);
  };
  const int h0 = initial_state(5, ".initial_h"), c0 = has_c ? initial_state(6, ".initial_c") : -1;

  // An absent initial state is a zero descriptor: oneDNN starts from zeros.
  const md_t h0_md = h0 >= 0 ? state_md : md_t(), c0_md = c0 >= 0 ? state_md : md_t();
  md_t w_layer_md, w_iter_md;  // the weights' layouts the primitive chose
  dnnl::primitive prim;
  try {
    if (cfg.cell == RnnCell::Lstm) {
      dnnl::lstm_forward::desc desc(fwd, dir, src_layer_md, h0_md, c0_md, any_w_layer, any_w_iter, bias_md,
                                    dst_layer_md, state_md, state_md);
      dnnl::lstm_forward::primitive_desc p(desc, c.engine());
      w_layer_md = p.weights_layer_desc();
      w_iter_md = p.weights_iter_desc();
      prim = dnnl::lstm_forward(p);
    } else if (cfg.cell == RnnCell::Gru && lbr) {
      dnnl::lbr_gru_forward::desc desc(fwd, dir, src_layer_md, h0_md, any_w_layer, any_w_iter, bias_md,
                                       dst_layer_md, state_md);
      dnnl::lbr_gru_forward::primitive_desc p(desc, c.engine());
      w_layer_md = p.weights_layer_desc();
      w_iter_md = p.weights_iter_desc();
      prim = dnnl::lbr_gru_forward(p);
    } else if (cfg.cell == RnnCell::Gru) {
      dnnl::gru_forward::desc desc(fwd, dir, src_layer_md, h0_md, any_w_layer, any_w_iter, bias_md, dst_layer_md,
                                   state_md);
      dnnl::gru_forward::primitive_desc p(desc, c.engine());
      w_layer_md = p.weights_layer_desc();
      w_iter_md = p.weights_iter_desc();
      prim = dnnl::gru_forward(p);
    } else {
      dnnl::vanilla_rnn_forward::desc desc(fwd, dnnl::algorithm::eltwise_tanh, dir, src_layer_md, h0_md,
                                           any_w_layer, any_w_iter, bias_md, dst_layer_md, state_md);
      dnnl::vanilla_rnn_forward::primitive_desc p(desc, c.engine());
      w_layer_md = p.weights_layer_desc();
      w_iter_md = p.weights_iter_desc();
      prim = dnnl::vanilla_rnn_forward(p);
    }
  } catch (const dnnl::error&) {
    return false;  // no implementation for these shapes: the reference kernel
  }

  // Weights and biases, reordered once.
  const Tensor* b = in.size() > 3 && in[3].present() ? c.known(in[3]) : nullptr;
  int w_layer = c.as_layout(
      c.constant_value(onnx_to_ldigo(*c.known(in[1]), cfg.cell, D, G, H, input), who + ".weights_layer"),
      w_layer_md);
  int w_iter = c.as_layout(c.constant_value(onnx_to_ldigo(*c.known(in[2]), cfg.cell, D, G, H, H), who + ".weights_iter"),
                           w_iter_md);
  int bias = c.constant_value(onnx_to_ldgo(b, cfg.cell, lbr, D, G, H), who + ".bias");

  // Layer input in the layout the primitive reads (X itself when dense).
  int x = c.alias(c.as_plain(c.id(in[0])), {seq, batch, input}, src_layer_md, who + ".src_layer");

  // Outputs. Y is the layer output itself except for bidirectional layout 0, where
  // oneDNN's [T, N, 2H] becomes Y's [T, 2, N, H] with one reorder.
  const std::vector<TensorType> types = c.concrete_types(n);
  const bool y_direct = D == 1 || cfg.layout == 1;
  const std::vector<int64_t> y_dims = static_dims(types[0].shape);
  int dst_layer = y_direct ? c.new_value(DType::Float32, y_dims, plain_md(y_dims, dt::f32), who)
                           : c.new_value(DType::Float32, {seq, batch, D * H}, dst_layer_md, who + ".dst_layer");
  int dst_layer_arg = y_direct ? c.alias(dst_layer, {seq, batch, D * H}, dst_layer_md, who + ".dst_layer") : dst_layer;
  int h_out = c.new_value(DType::Float32, {1, D, batch, H}, state_md, who + ".dst_iter");
  int c_out = has_c ? c.new_value(DType::Float32, {1, D, batch, H}, state_md, who + ".dst_iter_c") : -1;

  RtStep step;
  step.prim = prim;
  auto arg = [&](int key, int id, bool write) {
    step.args.emplace_back(key, id);
    (write ? step.writes : step.reads).push_back(id);
  };
  arg(DNNL_ARG_SRC_LAYER, x, false);
  if (h0 >= 0) arg(DNNL_ARG_SRC_ITER, h0, false);
  if (c0 >= 0) arg(DNNL_ARG_SRC_ITER_C, c0, false);
  arg(DNNL_ARG_WEIGHTS_LAYER, w_layer, false);
  arg(DNNL_ARG_WEIGHTS_ITER, w_iter, false);
  arg(DNNL_ARG_BIAS, bias, false);
  arg(DNNL_ARG_DST_LAYER, dst_layer_arg, true);
  arg(DNNL_ARG_DST_ITER, h_out, true);
  if (c_out >= 0) arg(DNNL_ARG_DST_ITER_C, c_out, true);
  const double flops = 2.0 * static_cast<double>(D * seq * batch * G * H * (input + H));
  step.info = step_info(n, "rnn",
                        n.op_type() + (lbr ? " lbr" : "") + " T" + std::to_string(seq) + " N" + std::to_string(batch) +
                            " I" + std::to_string(input) + " H" + std::to_string(H) + " D" + std::to_string(D) +
                            " layout" + std::to_string(cfg.layout) + (h0 >= 0 ? " h0" : "") + (c0 >= 0 ? " c0" : "") +
                            " t" + std::to_string(c.opts().threads),
                        flops);
  for (const auto& [key, id] : step.args) step.info.bytes += static_cast<double>(c.val(id).bytes);
  c.add_step(std::move(step));

  // Y: [T, N, 2, H] in memory read as [T, 2, N, H] and made dense.
  int y = dst_layer;
  if (!y_direct) y = c.as_plain(c.view(dst_layer, y_dims, {batch * D * H, H, D * H, 1}, 0, who + ".y_view"));
  c.bind(n.output(0), y);
  // Y_h, Y_c: ldnc is [D, N, H]; layout 1 wants [N, D, H].
  auto state_output = [&](int id, size_t k) {
    if (k >= n.num_outputs()) return;
    const std::vector<int64_t> dims = static_dims(types[k].shape);
    int out = cfg.layout == 0 ? c.alias(id, dims, plain_md(dims, dt::f32), who + ".state")
                              : c.as_plain(c.view(id, dims, {H, batch * H, 1}, 0, who + ".state_view"));
    c.bind(n.output(k), out);
  };
  state_output(h_out, 1);
  if (has_c) state_output(c_out, 2);
  return true;
}

}  // namespace isomer::runtime
