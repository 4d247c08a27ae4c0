// LSTM, GRU and RNN on the runtime: isomer's own recurrence where it was measured
// faster (runtime/native_recurrence.cpp: one GEMM for the layer input of every
// step, then per step h R^T over packed R and the fused gates); elsewhere oneDNN's
// recurrent primitives (lstm_forward, gru_forward, lbr_gru_forward,
// vanilla_rnn_forward), one per direction, with the weights reordered once, when
// the graph is compiled, from ONNX's [directions, gates*hidden, input] in ONNX's
// gate order to oneDNN's ldigo in oneDNN's, biases summed. A GRU without
// linear_before_reset runs on oneDNN.
//
// The fast paths cover the default activations, no input_forget, no peepholes and
// constant weights; clip, sequences shorter than the input and an RNN on Relu run
// on the native recurrence only. Other instances run on the reference kernel (ops/rnn.cpp).
#include <cstdlib>
#include <memory>
#include <optional>

#include "ops/rnn.h"
#include "runtime/compiler.h"
#include "runtime/native.h"
#include "runtime/native_recurrence.h"

namespace isomer::runtime {

namespace {

// oneDNN's gate k is ONNX's gate kOnnxGate[k]: LSTM oneDNN i f c~ o, ONNX i o f c;
// GRU oneDNN u r o, ONNX z r h (the same); RNN has one gate.
int64_t onnx_gate(RnnCell cell, int64_t k) {
  static const int64_t kLstm[] = {0, 2, 3, 1};
  return cell == RnnCell::Lstm ? kLstm[k] : k;
}

// Direction d of W or R ([D, G*H, K] in ONNX's gate order) as oneDNN's ldigo [1, 1, K, G, H].
Tensor onnx_to_ldigo(const Tensor& w, RnnCell cell, int64_t d, int64_t G, int64_t H, int64_t K) {
  const std::vector<double> src = w.to_f64();
  std::vector<double> dst(static_cast<size_t>(K * G * H));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = 0; h < H; ++h)
        dst[static_cast<size_t>((k * G + g) * H + h)] = src[static_cast<size_t>(((d * G + onnx_gate(cell, g)) * H + h) * K + k)];
  return Tensor::from_f64(DType::Float32, {1, 1, K, G, H}, dst);
}

// Direction d of B ([D, 2*G*H]: Wb then Rb) as oneDNN's ldgo [1, 1, G', H]: Wb + Rb per gate; a
// linear-before-reset GRU keeps the candidate's two biases apart (G' = 4: u, r,
// the candidate's Wb, its Rb, which the reset gate scales).
Tensor onnx_to_ldgo(const Tensor* b, RnnCell cell, bool lbr, int64_t d, int64_t G, int64_t H) {
  const int64_t out_gates = lbr ? G + 1 : G;
  std::vector<double> dst(static_cast<size_t>(out_gates * H), 0.0);
  if (b) {
    const std::vector<double> src = b->to_f64();
    const double* wb = src.data() + d * 2 * G * H;
    const double* rb = wb + G * H;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t from = onnx_gate(cell, g) * H + h;
        dst[static_cast<size_t>(g * H + h)] = wb[from] + (lbr && g == 2 ? 0.0 : rb[from]);
        if (lbr && g == 2) dst[static_cast<size_t>(3 * H + h)] = rb[from];
      }
  }
  return Tensor::from_f64(DType::Float32, {1, 1, out_gates, H}, dst);
}

// Why this instance has no fast path at all, or "" if one of the two may take it.
std::string unsupported(Compiler& c, const Node& n, const RnnConfig& cfg) {
  const auto& in = n.inputs();
  for (size_t k = 0; k < in.size(); ++k)  // sequence_lens (input 4) is int32 by the operator's definition
    if (k != 4 && in[k].present() && in[k].type().dtype != DType::Float32) return "not float32";
  for (const TensorType& t : n.output_types())
    if (t.dtype != DType::Float32) return "not float32";
  if (!cfg.default_activations() && !cfg.relu_rnn()) return "activations other than the defaults or Relu";
  if (cfg.input_forget) return "input_forget";
  if (in.size() > 7 && in[7].present()) return "peepholes";
  for (size_t k : {size_t{1}, size_t{2}, size_t{3}})
    if (k < in.size() && in[k].present() && !c.known(in[k])) return "weights that are not constants";
  return "";
}

// Whether oneDNN's primitives compute this instance: no clip, every sequence full length.
bool onednn_supports(Compiler& c, const Node& n, const RnnConfig& cfg, int64_t seq) {
  if (cfg.has_clip || !cfg.default_activations()) return false;
  const auto& in = n.inputs();
  if (in.size() > 4 && in[4].present()) {
    const Tensor* lens = c.known(in[4]);
    if (!lens) return false;
    for (int64_t v : lens->to_i64())
      if (v != seq) return false;
  }
  return true;
}

// The shapes of one direction's primitive.
struct Direction {
  RnnConfig cfg;
  int64_t seq, batch, input, hidden;
  md_t src_layer, dst_layer, state;
};

// A oneDNN recurrent primitive for one direction; the weights' layouts it chose in
// w_layer and w_iter. nullopt when oneDNN has no implementation.
std::optional<dnnl::primitive> make_primitive(Compiler& c, const Direction& s, bool reverse, bool has_h0,
                                              bool has_c0, md_t& w_layer, md_t& w_iter) {
  const RnnConfig& cfg = s.cfg;
  const int64_t G = cfg.gates, H = s.hidden;
  const bool lbr = cfg.linear_before_reset;
  const md_t any_w_layer(to_dims({1, 1, s.input, G, H}), dt::f32, tag::any);
  const md_t any_w_iter(to_dims({1, 1, H, G, H}), dt::f32, tag::any);
  const md_t bias(to_dims({1, 1, lbr ? G + 1 : G, H}), dt::f32, tag::ldgo);
  // An absent initial state is a zero descriptor: oneDNN starts from zeros.
  const md_t h0 = has_h0 ? s.state : md_t(), c0 = has_c0 ? s.state : md_t();
  const auto dir = reverse ? dnnl::rnn_direction::unidirectional_right2left : dnnl::rnn_direction::unidirectional_left2right;
  const auto fwd = dnnl::prop_kind::forward_inference;
  try {
    if (cfg.cell == RnnCell::Lstm) {
      dnnl::lstm_forward::primitive_desc p(
          dnnl::lstm_forward::desc(fwd, dir, s.src_layer, h0, c0, any_w_layer, any_w_iter, bias, s.dst_layer, s.state, s.state),
          c.engine());
      w_layer = p.weights_layer_desc(), w_iter = p.weights_iter_desc();
      return dnnl::lstm_forward(p);
    }
    if (cfg.cell == RnnCell::Gru && lbr) {
      dnnl::lbr_gru_forward::primitive_desc p(
          dnnl::lbr_gru_forward::desc(fwd, dir, s.src_layer, h0, any_w_layer, any_w_iter, bias, s.dst_layer, s.state),
          c.engine());
      w_layer = p.weights_layer_desc(), w_iter = p.weights_iter_desc();
      return dnnl::lbr_gru_forward(p);
    }
    if (cfg.cell == RnnCell::Gru) {
      dnnl::gru_forward::primitive_desc p(
          dnnl::gru_forward::desc(fwd, dir, s.src_layer, h0, any_w_layer, any_w_iter, bias, s.dst_layer, s.state),
          c.engine());
      w_layer = p.weights_layer_desc(), w_iter = p.weights_iter_desc();
      return dnnl::gru_forward(p);
    }
    dnnl::vanilla_rnn_forward::primitive_desc p(
        dnnl::vanilla_rnn_forward::desc(fwd, dnnl::algorithm::eltwise_tanh, dir, s.src_layer, h0, any_w_layer,
                                        any_w_iter, bias, s.dst_layer, s.state),
        c.engine());
    w_layer = p.weights_layer_desc(), w_iter = p.weights_iter_desc();
    return dnnl::vanilla_rnn_forward(p);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// Values of one direction's results: [T, N, H] (layer output) and [1, 1, N, H] states.
struct DirectionOutputs {
  int layer = -1, h = -1, c = -1;
};

}  // namespace

// A bidirectional node runs as two unidirectional primitives and concatenations:
// oneDNN's bidirectional primitive was 2-3x slower at batch 1 (it multiplies the
// layer input step by step instead of in one product).
bool lower_recurrent(Compiler& c, const Node& n) {
  const RnnConfig cfg = rnn_config(n.op_type(), n.attrs());
  const auto& in = n.inputs();
  const std::vector<int64_t> xd = c.dims(in[0]);
  const int64_t seq = xd[cfg.layout == 0 ? 0 : 1], batch = xd[cfg.layout == 0 ? 1 : 0], input = xd[2];
  if (seq < 1 || batch < 1 || !unsupported(c, n, cfg).empty()) return false;
  const int64_t D = cfg.directions, G = cfg.gates, H = c.dims(in[2])[2];
  const bool has_c = cfg.cell == RnnCell::Lstm;
  const std::string who = n.name();
  const bool native = native_recurrence_supports(n, cfg), onednn = onednn_supports(c, n, cfg, seq);
  if (native && (!onednn || native_recurrence_preferred(cfg, batch, H, c.opts().threads))) {
    lower_native_recurrence(c, n, cfg, seq, batch, input, H);
    return true;
  }
  if (!onednn) return false;

  // oneDNN's layer input and output: [T, N, C] in memory order tnc, or ntc for layout 1.
  const tag seq_tag = cfg.layout == 0 ? tag::tnc : tag::ntc;
  Direction s{cfg, seq, batch, input, H, md_t(to_dims({seq, batch, input}), dt::f32, seq_tag),
              md_t(to_dims({seq, batch, H}), dt::f32, seq_tag), md_t(to_dims({1, 1, batch, H}), dt::f32, tag::ldnc)};

  // Direction d of an initial state as ldnc [1, 1, N, H]: a slice of [D, N, H], or of
  // layout 1's [N, D, H] transposed.
  auto initial_state = [&](size_t k, int64_t d, const std::string& what) -> int {
    if (k >= in.size() || !in[k].present()) return -1;
    int all = c.as_plain(c.id(in[k]));
    const int64_t at = (cfg.layout == 0 ? d * batch * H : d * H) * 4;
    const std::vector<int64_t> strides = cfg.layout == 0 ? std::vector<int64_t>{batch * H, batch * H, H, 1}
                                                         : std::vector<int64_t>{batch * D * H, batch * D * H, D * H, 1};
    int v = c.view(all, {1, 1, batch, H}, strides, at, who + what + std::to_string(d));
    return c.is_dense(v) ? v : c.as_layout(v, s.state);
  };

  const Tensor* b = in.size() > 3 && in[3].present() ? c.known(in[3]) : nullptr;
  int x = c.alias(c.as_plain(c.id(in[0])), {seq, batch, input}, s.src_layer, who + ".src_layer");
  const std::vector<TensorType> types = c.concrete_types(n);
  const std::vector<int64_t> y_dims = static_dims(types[0].shape);
  std::vector<DirectionOutputs> outs;
  for (int64_t d = 0; d < D; ++d) {
    int h0 = initial_state(5, d, ".initial_h"), c0 = has_c ? initial_state(6, d, ".initial_c") : -1;
    // oneDNN's LSTM takes both initial states or neither: the absent one is zeros.
    if (has_c && (h0 >= 0) != (c0 >= 0)) {
      const int zeros = c.constant_value(Tensor::from_f64(DType::Float32, {1, 1, batch, H},
                                                          std::vector<double>(static_cast<size_t>(batch * H), 0.0)),
                                         who + ".zero_state");
      (h0 >= 0 ? c0 : h0) = zeros;
    }
    md_t w_layer_md, w_iter_md;
    std::optional<dnnl::primitive> prim =
        make_primitive(c, s, cfg.reverse || d == 1, h0 >= 0, c0 >= 0, w_layer_md, w_iter_md);
    if (!prim) return false;  // before any step: the reference kernel runs the node
    const std::string part = D == 2 ? (d == 0 ? ".forward" : ".reverse") : "";
    int w_layer = c.as_layout(
        c.constant_value(onnx_to_ldigo(*c.known(in[1]), cfg.cell, d, G, H, input), who + part + ".weights_layer"),
        w_layer_md);
    int w_iter = c.as_layout(
        c.constant_value(onnx_to_ldigo(*c.known(in[2]), cfg.cell, d, G, H, H), who + part + ".weights_iter"), w_iter_md);
    int bias = c.constant_value(onnx_to_ldgo(b, cfg.cell, cfg.linear_before_reset, d, G, H), who + part + ".bias");
    // One direction's layer output is Y itself ([T, 1, N, H] or [N, T, 1, H]).
    DirectionOutputs o;
    o.layer = D == 1 ? c.new_value(DType::Float32, y_dims, plain_md(y_dims, dt::f32), who)
                     : c.new_value(DType::Float32, {seq, batch, H}, s.dst_layer, who + part);
    const int layer_arg = D == 1 ? c.alias(o.layer, {seq, batch, H}, s.dst_layer, who + ".dst_layer") : o.layer;
    o.h = c.new_value(DType::Float32, {1, 1, batch, H}, s.state, who + part + ".dst_iter");
    if (has_c) o.c = c.new_value(DType::Float32, {1, 1, batch, H}, s.state, who + part + ".dst_iter_c");

    RtStep step;
    step.prim = *prim;
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
    arg(DNNL_ARG_DST_LAYER, layer_arg, true);
    arg(DNNL_ARG_DST_ITER, o.h, true);
    if (o.c >= 0) arg(DNNL_ARG_DST_ITER_C, o.c, true);
    const double flops = 2.0 * static_cast<double>(seq * batch * G * H * (input + H));
    step.info = step_info(n, "rnn",
                          n.op_type() + (cfg.linear_before_reset ? " lbr" : "") + (cfg.reverse || d == 1 ? " reverse" : "") +
                              " T" + std::to_string(seq) + " N" + std::to_string(batch) + " I" + std::to_string(input) +
                              " H" + std::to_string(H) + " layout" + std::to_string(cfg.layout) +
                              (h0 >= 0 ? " h0" : "") + (c0 >= 0 ? " c0" : "") + " t" + std::to_string(c.opts().threads),
                          flops);
    for (const auto& [key, id] : step.args) step.info.bytes += static_cast<double>(c.val(id).bytes);
    c.add_step(std::move(step));
    outs.push_back(o);
  }

  // Concatenates the directions' parts along `axis` of `dims` (each part has extent 1 there).
  auto concat = [&](std::vector<int> parts, std::vector<int64_t> dims, int axis, const std::string& name) {
    std::vector<md_t> mds;
    std::vector<int64_t> part_dims = dims;
    part_dims[static_cast<size_t>(axis)] = 1;
    std::vector<std::pair<int, int>> args;
    for (size_t i = 0; i < parts.size(); ++i) {
      parts[i] = c.alias(parts[i], part_dims, plain_md(part_dims, dt::f32), name + ".part");
      mds.push_back(c.val(parts[i]).md);
      args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), parts[i]});
    }
    const md_t out_md = plain_md(dims, dt::f32);
    dnnl::concat::primitive_desc pd(out_md, axis, mds, c.engine());
    int out = c.new_value(DType::Float32, dims, out_md, name);
    args.push_back({DNNL_ARG_DST, out});
    c.add_primitive(dnnl::concat(pd), args, step_info(n, "concat", "rnn directions " + to_string(dims)));
    return out;
  };
  auto bind_state = [&](size_t k, int DirectionOutputs::*which) {
    if (k >= n.num_outputs()) return;
    const std::vector<int64_t> dims = static_dims(types[k].shape);
    if (D == 1) return c.bind(n.output(k), c.alias(outs[0].*which, dims, plain_md(dims, dt::f32), who + ".state"));
    c.bind(n.output(k), concat({outs[0].*which, outs[1].*which}, dims, cfg.layout == 0 ? 0 : 1, who + ".state"));
  };
  if (D == 1) c.bind(n.output(0), outs[0].layer);
  else c.bind(n.output(0), concat({outs[0].layer, outs[1].layer}, y_dims, cfg.layout == 0 ? 1 : 2, who));
  bind_state(1, &DirectionOutputs::h);
  if (has_c) bind_state(2, &DirectionOutputs::c);
  return true;
}

}  // namespace isomer::runtime
