// Lowering of the elementwise, pooling, normalization and data-movement operators
// to oneDNN primitives.
#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "ops/kernels.h"
#include "ops/nn_common.h"
#include "runtime/compiler.h"
#include "runtime/fusion.h"

namespace isomer::runtime {

namespace {

std::string dims_text(const dims_t& d) { return to_string(std::vector<int64_t>(d.begin(), d.end())); }

StepInfo info_of(const Node& n, const std::string& kind, std::string signature, double flops = 0) {
  StepInfo i;
  i.kind = kind;
  i.label = n.name();
  i.ops = {n.op_type()};
  i.signature = std::move(signature);
  i.flops = flops;
  return i;
}

void emit_eltwise(Compiler& c, const Node& head, int x, const EltwiseSpec& e, const Value& out,
                  const std::vector<const Node*>& nodes) {
  const md_t& md = c.val(x).md;
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, e.alg, md, e.alpha, e.beta);
  dnnl::eltwise_forward::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, c.val(x).dims, pd.dst_desc(), head.name());
  StepInfo info = info_of(head, "eltwise", "eltwise " + e.text() + " " + describe_md(md),
                          static_cast<double>(num_elements(c.val(x).dims)));
  for (const Node* n : nodes)
    if (n != &head) info.ops.push_back(n->op_type());
  c.add_primitive(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, dst}}, info);
  c.bind(out, dst);
  for (const Node* n : nodes) c.mark_done(*n);
}

}  // namespace

bool lower_eltwise(Compiler& c, const Node& n) {
  if (n.inputs().empty() || !n.inputs()[0].present() || n.num_outputs() != 1) return false;
  const Value& x = n.inputs()[0];
  auto e = eltwise_of(c, n, x, c.dims(x).size());
  if (!e) return false;
  emit_eltwise(c, n, c.id(x), *e, n.output(0), {});
  return true;
}

bool lower_binary(Compiler& c, const Node& n) {
  if (n.inputs().size() != 2 || n.num_outputs() != 1) return false;
  const std::string& op = n.op_type();
  Value a = n.inputs()[0], b = n.inputs()[1];
  // x / sqrt(2) opening an erf GELU: the whole subgraph is one eltwise.
  if (c.opts().fuse && (op == "Div" || op == "Mul"))
    if (auto g = match_gelu(c, a); g && g->nodes[0] == &n) {
      emit_eltwise(c, n, c.id(a), EltwiseSpec{dnnl::algorithm::eltwise_gelu_erf, 0, 0}, g->out, g->nodes);
      return true;
    }
  // One operand a constant scalar: an affine map (or power) of the other.
  for (const Value& x : {a, b})
    if (!c.known(x))
      if (auto e = eltwise_of(c, n, x, c.dims(x).size())) {
        emit_eltwise(c, n, c.id(x), *e, n.output(0), {});
        return true;
      }
  static const std::map<std::string, dnnl::algorithm> algs = {
      {"Add", dnnl::algorithm::binary_add}, {"Sub", dnnl::algorithm::binary_sub},
      {"Mul", dnnl::algorithm::binary_mul}, {"Div", dnnl::algorithm::binary_div},
      {"Max", dnnl::algorithm::binary_max}, {"Min", dnnl::algorithm::binary_min}};
  auto it = algs.find(op);
  if (it == algs.end()) return false;
  std::vector<int64_t> da = c.dims(a), db = c.dims(b);
  std::vector<int64_t> out = broadcast_dims(da, db);
  if (da != out) {
    if (op == "Sub" || op == "Div") return false;  // oneDNN broadcasts only the second source
    std::swap(a, b);
    std::swap(da, db);
  }
  if (c.known(a)) return false;  // both constant would have been folded; constant first source: reference
  int src0 = c.id(a);
  int src1 = c.id(b);
  if (db == out) {
    src1 = c.as_layout(src1, c.val(src0).md);
  } else {
    std::vector<int64_t> padded = db;
    while (padded.size() < out.size()) padded.insert(padded.begin(), 1);
    if (c.val(src1).known) src1 = c.constant_value(c.val(src1).known->reshaped(padded), c.val(src1).name);
    else src1 = c.alias(c.as_plain(src1), padded, plain_md(padded, dt::f32), c.val(src1).name);
  }
  Fusion fusion = plan_fusion(c, n.output(0), out, /*allow_add=*/false);
  auto attempt = [&](int s0) {
    const md_t& md0 = c.val(s0).md;
    dnnl::binary::desc d(it->second, md0, c.val(src1).md, md0);
    dnnl::binary::primitive_desc pd(d, eltwise_attr(fusion), c.engine());
    return std::make_pair(s0, pd);
  };
  std::pair<int, dnnl::binary::primitive_desc> made;
  try {
    made = attempt(src0);
  } catch (const dnnl::error&) {
    made = attempt(c.as_plain(src0));  // some broadcasts exist only for plain layouts
  }
  auto& [s0, pd] = made;
  int dst = c.new_value(DType::Float32, out, pd.dst_desc(), n.name());
  std::string post;
  for (const PostOp& p : fusion.ops) post += " +" + p.eltwise->text();
  StepInfo info = info_of(n, "binary",
                          "binary " + op + " " + describe_md(c.val(s0).md) + " " + describe_md(c.val(src1).md) + post,
                          static_cast<double>(num_elements(out)));
  info.ops = fusion_ops(op, {}, fusion);
  c.add_primitive(pd, {{DNNL_ARG_SRC_0, s0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}}, info);
  finish_fusion(c, fusion, dst);
  return true;
}

namespace {

// A pooling primitive for `n` reading `src`, with `extra` zero padding (begin,
// end per spatial axis) folded in from a Pad node that `src` skips.
bool pool_with_padding(Compiler& c, const Node& n, const Value& src, const std::vector<int64_t>& extra) {
  const std::string& op = n.op_type();
  std::vector<int64_t> xd = c.dims(src);
  if (xd.size() < 3 || xd.size() > 5) return false;
  std::vector<int64_t> spatial(xd.begin() + 2, xd.end());
  bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  dims_t kernel, strides, dil, pl, pr;
  std::vector<int64_t> od = {xd[0], xd[1]};
  if (global) {
    for (int64_t s : spatial) {
      kernel.push_back(s);
      strides.push_back(1);
      dil.push_back(0);
      pl.push_back(0);
      pr.push_back(0);
      od.push_back(1);
    }
  } else {
    ops::Window w = ops::read_window(n.attrs(), n.attrs().get_ints("kernel_shape"));
    std::vector<int64_t> padded = spatial;
    for (size_t i = 0; i < extra.size() / 2; ++i) padded[i] += extra[i] + extra[extra.size() / 2 + i];
    auto axes = ops::plan_window(w, padded);
    for (size_t i = 0; i < axes.size(); ++i) {
      const ops::WindowAxis& a = axes[i];
      int64_t eb = extra.empty() ? 0 : extra[i];
      kernel.push_back(a.kernel);
      strides.push_back(a.stride);
      dil.push_back(a.dilation - 1);
      pl.push_back(a.pad_begin + eb);
      pr.push_back((a.out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1 - spatial[i] - (a.pad_begin + eb));
      od.push_back(a.out);
    }
  }
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if (op == "AveragePool" || op == "GlobalAveragePool")
    alg = n.attrs().get_int("count_include_pad", 0) || !extra.empty() ? dnnl::algorithm::pooling_avg_include_padding
                                                                      : dnnl::algorithm::pooling_avg_exclude_padding;
  int x = c.id(src);
  const md_t& md = c.val(x).md;
  md_t dst_any(to_dims(od), dt::f32, tag::any);
  dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, dst_any, strides, kernel, dil, pl, pr);
  dnnl::pooling_v2_forward::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  double flops = static_cast<double>(num_elements(od)) * static_cast<double>(num_elements(std::vector<int64_t>(kernel.begin(), kernel.end())));
  c.add_primitive(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, dst}},
                  info_of(n, "pool",
                          "pool " + std::to_string(static_cast<int>(alg)) + " " + describe_md(md) + " -> " +
                              describe_md(pd.dst_desc()) + " k" + dims_text(kernel) + " s" + dims_text(strides) +
                              " pl" + dims_text(pl) + " pr" + dims_text(pr) + " d" + dims_text(dil),
                          flops));
  c.bind(n.output(0), dst);
  return true;
}

}  // namespace

bool lower_pool(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1) return false;  // MaxPool's Indices: the reference kernel
  return pool_with_padding(c, n, n.inputs()[0], {});
}

// Zero Pad feeding only an AveragePool (torch's export of count_include_pad):
// the padding becomes the pool's, counted in the average as the zeros were.
bool lower_pad(Compiler& c, const Node& pad) {
  const Node* pool = c.sole_consumer(pad.output(0));
  if (!c.opts().fuse || !pool || pool->op_type() != "AveragePool" || pool->num_outputs() != 1 ||
      pad.attrs().get_string("mode", "constant") != "constant")
    return false;
  const auto& in = pad.inputs();
  if (in.size() > 3 && in[3].present()) return false;  // axes
  if (in.size() > 2 && in[2].present()) {
    const Tensor* v = c.known(in[2]);
    if (!v || v->numel() != 1 || v->f64_at(0) != 0.0) return false;
  }
  const Tensor* pt = c.known(in[1]);
  if (!pt) return false;
  std::vector<int64_t> pads = pt->to_i64();
  size_t r = c.dims(in[0]).size();
  if (pads.size() != 2 * r || r < 3) return false;
  std::vector<int64_t> begin, end;
  for (size_t i = 0; i < r; ++i) {
    if (pads[i] < 0 || pads[r + i] < 0 || (i < 2 && (pads[i] || pads[r + i]))) return false;
    if (i >= 2) begin.push_back(pads[i]), end.push_back(pads[r + i]);
  }
  // The pool's own padding must count its zeros too, or be absent.
  std::vector<int64_t> own = pool->attrs().get_ints("pads", {});
  bool own_pads = std::any_of(own.begin(), own.end(), [](int64_t p) { return p != 0; }) ||
                  pool->attrs().get_string("auto_pad", "NOTSET") != "NOTSET";
  if (own_pads && !pool->attrs().get_int("count_include_pad", 0)) return false;
  begin.insert(begin.end(), end.begin(), end.end());
  if (!pool_with_padding(c, *pool, in[0], begin)) return false;
  c.mark_done(*pool);
  return true;
}

bool lower_softmax(Compiler& c, const Node& n) {
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  if (xd.empty()) return false;
  int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis", -1), static_cast<int64_t>(xd.size())));
  int x = c.as_plain(c.id(n.inputs()[0]));
  const md_t& md = c.val(x).md;
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, axis);
  dnnl::softmax_forward::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, xd, md, n.name());
  c.add_primitive(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, dst}},
                  info_of(n, "softmax", "softmax " + describe_md(md) + " axis" + std::to_string(axis),
                          5.0 * static_cast<double>(num_elements(xd))));
  c.bind(n.output(0), dst);
  return true;
}

bool lower_batchnorm(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1 || n.attrs().get_int("training_mode", 0) != 0) return false;
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  if (xd.size() < 2 || xd.size() > 5) return false;
  int64_t ch = xd[1];
  int params[4];
  for (int i = 0; i < 4; ++i) {
    const Tensor* t = c.known(n.inputs()[i + 1]);
    if (!t || t->numel() != ch) return false;
    params[i] = c.constant_value(t->reshaped({ch}), n.name());
  }
  int x = c.id(n.inputs()[0]);
  if (xd.size() == 2) x = c.as_plain(x);
  const md_t& md = c.val(x).md;
  float eps = static_cast<float>(n.attrs().get_float("epsilon", 1e-5));
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps, flags);
  dnnl::batch_normalization_forward::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, xd, md, n.name());
  c.add_primitive(pd,
                  {{DNNL_ARG_SRC, x},
                   {DNNL_ARG_SCALE, params[0]},
                   {DNNL_ARG_SHIFT, params[1]},
                   {DNNL_ARG_MEAN, params[2]},
                   {DNNL_ARG_VARIANCE, params[3]},
                   {DNNL_ARG_DST, dst}},
                  info_of(n, "batchnorm", "batchnorm " + describe_md(md), 2.0 * static_cast<double>(num_elements(xd))));
  c.bind(n.output(0), dst);
  return true;
}

bool lower_layernorm(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1) return false;  // mean / inverse std outputs: the reference kernel
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  if (xd.empty()) return false;
  int64_t axis = normalize_axis(n.attrs().get_int("axis", -1), static_cast<int64_t>(xd.size()));
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(xd.size()); ++i) (i < axis ? rows : cols) *= xd[i];
  const Tensor* scale = c.known(n.inputs()[1]);
  const Tensor* bias = n.inputs().size() > 2 && n.inputs()[2].present() ? c.known(n.inputs()[2]) : nullptr;
  bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();
  if (!scale || scale->numel() != cols || (has_bias && (!bias || bias->numel() != cols))) return false;
  int x = c.as_plain(c.id(n.inputs()[0]));
  md_t md2 = plain_md({rows, cols}, dt::f32);
  int x2 = c.alias(x, {rows, cols}, md2, n.name());
  float eps = static_cast<float>(n.attrs().get_float("epsilon", 1e-5));
  auto flags = dnnl::normalization_flags::use_scale;
  if (has_bias) flags = flags | dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md2, eps, flags);
  dnnl::layer_normalization_forward::primitive_desc pd(d, c.engine());
  int out2 = c.new_value(DType::Float32, {rows, cols}, md2, n.name());
  std::vector<std::pair<int, int>> args = {{DNNL_ARG_SRC, x2},
                                           {DNNL_ARG_SCALE, c.constant_value(scale->reshaped({cols}), n.name())},
                                           {DNNL_ARG_DST, out2}};
  if (has_bias) args.push_back({DNNL_ARG_SHIFT, c.constant_value(bias->reshaped({cols}), n.name())});
  c.add_primitive(pd, args,
                  info_of(n, "layernorm", "layernorm " + describe_md(md2) + (has_bias ? " shift" : ""),
                          8.0 * static_cast<double>(rows * cols)));
  c.bind(n.output(0), c.alias(out2, xd, plain_md(xd, dt::f32), n.name()));
  return true;
}

namespace {

// True if `n` is a 1x1 convolution (stride 1, no padding, one group) of input
// `x` with constant weights: it can read a channel concatenation part by part.
bool is_pointwise_conv_of(Compiler& c, const Node& n, size_t input, const std::vector<int64_t>& xd) {
  if (n.op_type() != "Conv" || input != 0 || n.attrs().get_int("group", 1) != 1) return false;
  const Tensor* w = c.peek_known(n.inputs()[1]);
  if (!w || w->rank() != 4 || w->dims()[2] != 1 || w->dims()[3] != 1 || w->dims()[1] != xd[1]) return false;
  if (n.inputs().size() > 2 && n.inputs()[2].present() && !c.peek_known(n.inputs()[2])) return false;
  try {
    ops::Window win = ops::read_window(n.attrs(), {1, 1});
    for (const ops::WindowAxis& a : ops::plan_window(win, {xd[2], xd[3]}))
      if (a.stride != 1 || a.pad_begin != 0 || a.dilation != 1 || a.out != a.in) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

}  // namespace

bool lower_concat(Compiler& c, const Node& n) {
  std::vector<int64_t> d0 = c.dims(n.inputs()[0]);
  if (d0.empty()) return false;
  int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis"), static_cast<int64_t>(d0.size())));
  // Channels of a 4-D tensor read only by 1x1 convolutions (SqueezeNet's fire
  // modules): each convolution sums its products with the parts (a sum
  // post-op), and the concatenation's copy is never made.
  if (c.opts().fuse && c.opts().blocked_layouts && axis == 1 && d0.size() == 4 && n.inputs().size() >= 2 &&
      !c.is_output(n.output(0)) && !c.consumers(n.output(0)).empty()) {
    std::vector<int64_t> od = d0;
    od[1] = 0;
    bool parts_ok = true;
    for (const Value& v : n.inputs()) {
      const std::vector<int64_t>& d = c.dims(v);
      parts_ok = parts_ok && d.size() == 4 && d[1] > 0 && c.dtype(v) == DType::Float32 && !c.peek_known(v);
      if (parts_ok) od[1] += d[1];
    }
    bool all_pointwise = parts_ok;
    for (const auto& [consumer, index] : c.consumers(n.output(0)))
      all_pointwise = all_pointwise && is_pointwise_conv_of(c, *consumer, index, od);
    if (all_pointwise) {
      c.defer_concat(n.output(0), n.inputs());
      // Its type for the consumers' shape inference; no step writes or reads it,
      // so it gets no buffer.
      c.bind(n.output(0), c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name()));
      return true;
    }
  }
  std::vector<int> ids;
  std::vector<md_t> mds;
  std::vector<int64_t> od = d0;
  od[axis] = 0;
  std::string sig = "concat axis" + std::to_string(axis);
  for (const Value& v : n.inputs()) {
    if (num_elements(c.dims(v)) == 0) continue;  // empty inputs add nothing
    int id = c.id(v);
    ids.push_back(id);
    mds.push_back(c.val(id).md);
    od[axis] += c.val(id).dims[axis];
    sig += " " + describe_md(c.val(id).md);
  }
  if (ids.empty()) return false;
  dnnl::concat::primitive_desc pd(axis, mds, c.engine());
  int dst = c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  std::vector<std::pair<int, int>> args;
  for (size_t i = 0; i < ids.size(); ++i) args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), ids[i]});
  args.push_back({DNNL_ARG_DST, dst});
  c.add_primitive(dnnl::concat(pd), args, info_of(n, "concat", sig + " -> " + describe_md(pd.dst_desc())));
  c.bind(n.output(0), dst);
  return true;
}

// A transpose is a view: the same buffer read with permuted strides. A consumer
// that needs plain data gets one reorder (the copy), shared by all such consumers;
// MatMul reads the strided view directly.
bool lower_transpose(Compiler& c, const Node& n) {
  int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t>& xd = c.val(x).dims;
  size_t r = xd.size();
  if (r == 0) return false;
  std::vector<int64_t> perm = n.attrs().get_ints("perm", {});
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return false;
  const auto& strides = c.val(x).md.data.format_desc.blocking.strides;
  std::vector<int64_t> od;
  dims_t os;
  for (int64_t p : perm) {
    od.push_back(xd[static_cast<size_t>(p)]);
    os.push_back(strides[p]);
  }
  c.bind(n.output(0), c.alias(x, od, md_t(to_dims(od), dt::f32, os), n.name()));
  return true;
}

bool lower_reduce(Compiler& c, const Node& n) {
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  int64_t rank = static_cast<int64_t>(xd.size());
  if (rank == 0) return false;
  std::vector<int64_t> axes;
  bool mean = n.op_type() == "ReduceMean";
  if (mean) {
    axes = n.attrs().get_ints("axes", {});
  } else if (n.inputs().size() > 1 && n.inputs()[1].present()) {
    const Tensor* t = c.known(n.inputs()[1]);
    if (!t) return false;
    axes = t->to_i64();
  }
  if (axes.empty()) {
    if (!mean && n.attrs().get_int("noop_with_empty_axes", 0)) return false;
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<int64_t> kd = xd, od;
  for (int64_t a : axes) kd[static_cast<size_t>(normalize_axis(a, rank))] = 1;
  bool keep = n.attrs().get_int("keepdims", 1) != 0;
  for (int64_t i = 0; i < rank; ++i)
    if (keep || kd[i] != 1 || xd[i] == 1) {
      bool reduced = std::find_if(axes.begin(), axes.end(), [&](int64_t a) { return normalize_axis(a, rank) == i; }) !=
                     axes.end();
      if (keep || !reduced) od.push_back(kd[i]);
    }
  int x = c.as_plain(c.id(n.inputs()[0]));
  md_t kmd = plain_md(kd, dt::f32);
  dnnl::reduction::desc d(mean ? dnnl::algorithm::reduction_mean : dnnl::algorithm::reduction_sum, c.val(x).md, kmd,
                          0.f, 0.f);
  dnnl::reduction::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, kd, kmd, n.name());
  c.add_primitive(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, dst}},
                  info_of(n, "reduce", std::string(mean ? "reduce_mean " : "reduce_sum ") + describe_md(c.val(x).md) +
                                           " -> " + describe_md(kmd),
                          static_cast<double>(num_elements(xd))));
  c.bind(n.output(0), od == kd ? dst : c.alias(dst, od, plain_md(od, dt::f32), n.name()));
  return true;
}

}  // namespace isomer::runtime
