// The integer contractions on oneDNN's int8 primitives: u8/s8 activations, s8
// weights, int32 accumulation (exact), zero points and requantization scales as
// primitive attributes. oneDNN requantizes as ONNX Runtime does: float(acc + bias)
// times the float32 multiplier, rounded half to even, plus the output zero point,
// saturated. MatMulInteger or ConvInteger followed by Cast to float and a Mul by its
// scale (what quantize_dynamic writes) becomes one primitive scaled at run time.
#include <omp.h>

#include <cstring>

#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "ops/nn_common.h"
#include "runtime/fusion.h"
#include "runtime/lower_quant.h"
#include "runtime/native.h"

namespace isomer::runtime {

dt dnnl_int(DType t) {
  switch (t) {
    case DType::UInt8: return dt::u8;
    case DType::Int8: return dt::s8;
    case DType::Int32: return dt::s32;
    default: return dt::f32;
  }
}

// A step-local view of value `id` (row-major, any dtype) with oneDNN layout `md`.
int with_md(Compiler& c, int id, const std::vector<int64_t>& dims, const md_t& md) {
  int a = c.alias(id, dims, md, c.val(id).name);
  c.val(a).step_local = true;
  return a;
}

namespace {

// The multiply-adds that pay for one more thread in an integer product
// (kernels::team_for_work): four times a float32 one's (lower_matmul.cpp's 256K,
// lower_conv.cpp's 64K), as VNNI does four int8 multiply-adds where float32 does one.
// Dynamically quantized BERT's 32x256x256 products ran slower on two threads than on
// one, waiting for the second.
constexpr double kInt8MatmulTeamMacs = 1024.0 * 1024;
constexpr double kInt8ConvTeamMacs = 256.0 * 1024;

// A constant for a primitive argument, in oneDNN layout `md`.
int constant_arg(Compiler& c, const Tensor& t, const md_t& md, const std::string& name) {
  int v = c.constant_value(t, name);
  c.val(v).md = md;
  return v;
}

// The run-time zero point scalar `zp` (u8/s8) as the s32 value oneDNN reads: the
// one its producer wrote (DynamicQuantizeLinear's step writes both), or one
// widening step shared by the products reading it (a layer's query, key and value).
int zero_point_s32(Compiler& c, const Node& n, int zp) {
  if (int w = c.widened(zp); w >= 0) return w;
  const DType t = c.val(zp).dtype;
  int out = c.new_value(DType::Int32, {1}, plain_md({1}, dt::s32), n.name() + ".zp32");
  c.set_widened(zp, out);
  add_native_step(c, step_info(n, "zero-point", "zero-point " + std::string(dtype_name(t)) + "->s32"), {zp}, {out},
                  [t](const std::vector<char*>& p) {
                    *reinterpret_cast<int32_t*>(p[1]) = t == DType::UInt8 ? static_cast<int32_t>(*reinterpret_cast<uint8_t*>(p[0]))
                                                                         : static_cast<int32_t>(*reinterpret_cast<int8_t*>(p[0]));
                  });
  return out;
}

}  // namespace

Tensor as_s8(const Tensor& w, std::vector<int32_t>& zp) {
  if (w.dtype() == DType::Int8) return w;
  std::string bytes = w.bytes().str();
  for (char& b : bytes) b = static_cast<char>(static_cast<int>(static_cast<uint8_t>(b)) - 128);
  for (int32_t& z : zp) z -= 128;
  return Tensor(DType::Int8, w.dims(), std::move(bytes));
}

tag channels_last(size_t rank) { return rank == 3 ? tag::nwc : rank == 4 ? tag::nhwc : tag::ndhwc; }

namespace {

void set_requant_attrs(dnnl::primitive_attr& attr, const std::vector<float>& scales, int runtime_scale,
                       bool runtime_per_col, bool relu, int32_t y_zp, int channel_mask) {
  if (runtime_scale >= 0)
    attr.set_output_scales(runtime_per_col ? channel_mask : 0, {DNNL_RUNTIME_F32_VAL});
  else if (!scales.empty())
    attr.set_output_scales(scales.size() > 1 ? channel_mask : 0, scales);
  // oneDNN adds the output zero point in float before rounding: acc * s = 3.5000024
  // plus 129 is 132.5 in float32, and half to even writes 132 where ONNX Runtime's
  // requantization (round(acc * s) + zero point) writes 133. Rounding first keeps
  // the zero point's addition exact.
  const bool round = y_zp != 0 && (runtime_scale >= 0 || !scales.empty());
  if (relu || round) {
    dnnl::post_ops po;
    if (relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    if (round) po.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  if (y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {y_zp});
}

std::string requant_text(const std::vector<float>& scales, bool relu, DType y) {
  return std::string(scales.empty() ? "" : scales.size() > 1 ? " requant-per-channel" : " requant") +
         (relu ? " relu" : "") + " ->" + std::string(dtype_name(y));
}

}  // namespace

Tensor transposed_bytes(const Tensor& w) {
  const int64_t N = w.dims()[0], K = w.dims()[1];
  std::string bytes(w.bytes().size(), '\0');
  std::string_view src = w.bytes();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) bytes[static_cast<size_t>(k * N + j)] = src[static_cast<size_t>(j * K + k)];
  return Tensor(w.dtype(), {K, N}, std::move(bytes));
}

int add_integer_matmul(Compiler& c, const Node& n, const IntMatMul& s) {
  const RtValue& av = c.val(s.a);
  if (av.dims.size() != 2 || s.b.rank() != 2 || av.dims[1] != s.b.dims()[0]) return -1;
  const int64_t rows = av.dims[0], K = av.dims[1], N = s.b.dims()[1];
  const DType a_t = av.dtype;
  if (a_t != DType::UInt8 && a_t != DType::Int8) return -1;
  std::vector<int32_t> b_zps = {s.b_zp};
  const Tensor b = as_s8(s.b, b_zps);
  const int32_t b_zp = b_zps[0];
  const DType y_t = s.out_scale_value >= 0 ? DType::Float32 : s.y_type;
  const Compiler::TeamScope team(
      c, kernels::team_for_work(c.threads(), static_cast<double>(rows * K * N) / kInt8MatmulTeamMacs));
  dnnl::primitive_attr attr;
  if (s.a_zp_value >= 0)
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  else if (s.a_zp != 0)
    attr.set_zero_points(DNNL_ARG_SRC, 0, {s.a_zp});
  if (b_zp != 0) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {b_zp});
  const int64_t out_scales = s.out_scale_value >= 0 ? num_elements(c.val(s.out_scale_value).dims) : 0;
  if (out_scales > 1 && out_scales != N) return -1;
  set_requant_attrs(attr, s.scales, s.out_scale_value, out_scales > 1, s.relu, s.y_zp, 1 << 1);
  const md_t add_md = plain_md({1, N}, dt::f32);
  if (s.add_after) {  // after the output scale: (acc * scale) + add, as Mul then Add
    dnnl::post_ops po = attr.get_post_ops();
    po.append_binary(dnnl::algorithm::binary_add, add_md);
    attr.set_post_ops(po);
  }
  if (s.act_after) {
    dnnl::post_ops po = attr.get_post_ops();
    po.append_eltwise(1.f, s.act_after->alg, s.act_after->alpha, s.act_after->beta);
    attr.set_post_ops(po);
  }
  const md_t a_md = plain_md({rows, K}, dnnl_int(a_t));
  const md_t w_any({K, N}, dt::s8, tag::any);
  const md_t y_md = plain_md({rows, N}, dnnl_int(y_t));
  const md_t bias_md = s.bias.empty() ? md_t() : plain_md({1, N}, dt::s32);
  dnnl::matmul::desc d = s.bias.empty() ? dnnl::matmul::desc(a_md, w_any, y_md)
                                        : dnnl::matmul::desc(a_md, w_any, bias_md, y_md);
  dnnl::matmul::primitive_desc pd(d, attr, c.engine());  // throws dnnl::error where oneDNN has none

  const int w = c.as_layout(constant_arg(c, b, plain_md({K, N}, dt::s8), n.name() + ".weights"), pd.weights_desc());
  const int y = c.new_value(y_t, {rows, N}, plain_md({rows, N}, dnnl_int(y_t)), n.name());
  std::vector<std::pair<int, int>> args = {
      {DNNL_ARG_SRC, with_md(c, s.a, {rows, K}, a_md)}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
  if (!s.bias.empty())
    args.push_back({DNNL_ARG_BIAS, constant_arg(c, Tensor::from_i64(DType::Int32, {1, N}, std::vector<int64_t>(s.bias.begin(), s.bias.end())),
                                                bias_md, n.name() + ".bias")});
  if (s.a_zp_value >= 0) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point_s32(c, n, s.a_zp_value)});
  if (s.out_scale_value >= 0)
    args.push_back({DNNL_ARG_ATTR_OUTPUT_SCALES,
                    with_md(c, c.as_plain(s.out_scale_value), {out_scales}, plain_md({out_scales}, dt::f32))});
  if (s.add_after)
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(s.relu ? 1 : 0) | DNNL_ARG_SRC_1,
                    constant_arg(c, s.add_after->reshaped({1, N}), add_md, n.name() + ".add")});
  c.add_primitive(pd, std::move(args),
                  step_info(n, "int8-matmul",
                            "int8-matmul " + std::string(dtype_name(a_t)) + "x s8 " +
                                to_string(std::vector<int64_t>{rows, K, N}) + (s.bias.empty() ? "" : " bias") +
                                (out_scales > 1 ? " scaled-per-column" : out_scales ? " scaled" : "") + (s.add_after ? " add" : "") +
                                (s.act_after ? " " + s.act_after->text() : "") + requant_text(s.scales, s.relu, y_t),
                            2.0 * static_cast<double>(rows * K * N)));
  return y;
}

int add_integer_conv(Compiler& c, const Node& n, const IntConv& s) {
  const RtValue& xv = c.val(s.x);
  const std::vector<int64_t> xd = xv.dims, wd = s.w.dims();
  // 1-D, 2-D and 3-D convolutions (TCNs' Conv1d, video models' Conv3d).
  if (xd.size() < 3 || xd.size() > 5 || wd.size() != xd.size() || s.w.dtype() != DType::Int8) return -1;
  if (xv.dtype != DType::UInt8 && xv.dtype != DType::Int8) return -1;
  const int64_t groups = n.attrs().get_int("group", 1), oc = wd[0];
  ops::Window win = ops::read_window(n.attrs(), std::vector<int64_t>(wd.begin() + 2, wd.end()));
  std::vector<ops::WindowAxis> axes = plan_padded_window(win, std::vector<int64_t>(xd.begin() + 2, xd.end()), s.extra_pads);
  const ConvGeometry geometry = conv_geometry(xd[0], oc, axes);
  const std::vector<int64_t>& od = geometry.out;
  const double macs = static_cast<double>(num_elements(od)) * static_cast<double>(num_elements(wd) / oc);
  const Compiler::TeamScope team(c, kernels::team_for_work(c.threads(), macs / kInt8ConvTeamMacs));
  const dims_t &strides = geometry.strides, &dil = geometry.dilations, &pl = geometry.pad_begin,
               &pr = geometry.pad_end;
  const bool scaled = s.out_scale_value >= 0;
  const int64_t out_scales = scaled ? num_elements(c.val(s.out_scale_value).dims) : 0;
  if ((out_scales > 1 && out_scales != oc) || (s.add_after && s.add_after->numel() != oc)) return -1;
  const DType y_t = scaled ? DType::Float32 : s.y_type;
  dnnl::primitive_attr attr;
  if (s.x_zp != 0 || s.x_zp_value >= 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  set_requant_attrs(attr, s.scales, -1, false, s.relu, s.y_zp, 1 << 1);
  if (s.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  // A run-time scale is a binary Mul post-op (oneDNN's int8 convolutions take no
  // run-time output scales): float(acc) * scale, then + add, as ONNX Runtime's Cast,
  // Mul and Add round.
  dims_t per_channel(od.size(), 1), per_scale(od.size(), 1);
  per_channel[1] = oc;
  per_scale[1] = out_scales > 1 ? oc : 1;
  const md_t add_md(per_channel, dt::f32, channels_last(od.size())), scale_md(per_scale, dt::f32, channels_last(od.size()));
  const int first_post_op = attr.get_post_ops().len();
  if (scaled) {
    dnnl::post_ops po = attr.get_post_ops();
    po.append_binary(dnnl::algorithm::binary_mul, scale_md);
    if (s.add_after) po.append_binary(dnnl::algorithm::binary_add, add_md);
    if (s.residual >= 0) po.append_binary(dnnl::algorithm::binary_add, md_t(to_dims(od), dt::f32, channels_last(od.size())));
    if (s.act_after) po.append_eltwise(1.f, s.act_after->alg, s.act_after->alpha, s.act_after->beta);
    attr.set_post_ops(po);
  }
  // Activations stay channels-last between integer convolutions (oneDNN's int8
  // layout, and a strided one that the native kernels read as it is).
  const md_t x_md(to_dims(xd), dnnl_int(xv.dtype), channels_last(xd.size()));
  const md_t y_md(to_dims(od), dnnl_int(y_t), channels_last(od.size()));
  // Grouped weights as [groups, oc / groups, ic / groups, k...].
  dims_t gwd = {groups, oc / groups};
  gwd.insert(gwd.end(), wd.begin() + 1, wd.end());
  const md_t w_any = groups > 1 ? md_t(gwd, dt::s8, tag::any) : md_t(to_dims(wd), dt::s8, tag::any);
  const md_t bias_md = s.bias.empty() ? md_t() : md_t({oc}, dt::s32, tag::a);
  using conv = dnnl::convolution_forward;
  conv::desc d = s.bias.empty() ? conv::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             x_md, w_any, y_md, strides, dil, pl, pr)
                                : conv::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             x_md, w_any, bias_md, y_md, strides, dil, pl, pr);
  conv::primitive_desc pd(d, attr, c.engine());  // throws dnnl::error where oneDNN has none

  int x = s.x;
  if (!xv.md.data.ndims) x = with_md(c, x, xd, plain_md(xd, dnnl_int(xv.dtype)));
  x = c.as_layout(x, x_md);
  const md_t w_plain = groups > 1 ? plain_md(std::vector<int64_t>(gwd.begin(), gwd.end()), dt::s8)
                                  : plain_md(wd, dt::s8);
  const int w = c.as_layout(constant_arg(c, s.w, w_plain, n.name() + ".weights"), pd.weights_desc());
  const int y = c.new_value(y_t, od, y_md, n.name());
  std::vector<std::pair<int, int>> args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
  if (!s.bias.empty())
    args.push_back({DNNL_ARG_BIAS, constant_arg(c, Tensor::from_i64(DType::Int32, {oc}, std::vector<int64_t>(s.bias.begin(), s.bias.end())),
                                                bias_md, n.name() + ".bias")});
  auto s32 = [&](int32_t v, const std::string& what) {
    return constant_arg(c, Tensor::from_i64(DType::Int32, {1}, std::vector<int64_t>{v}), plain_md({1}, dt::s32),
                        n.name() + what);
  };
  if (s.x_zp_value >= 0)
    args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point_s32(c, n, s.x_zp_value)});
  else if (s.x_zp != 0)
    args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, s32(s.x_zp, ".x_zp")});
  if (s.y_zp != 0) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, s32(s.y_zp, ".y_zp")});
  // (one value, or one per channel: the same bytes in any layout)
  if (scaled)
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(first_post_op) | DNNL_ARG_SRC_1,
                    with_md(c, c.as_plain(s.out_scale_value), std::vector<int64_t>(per_scale.begin(), per_scale.end()),
                            scale_md)});
  if (scaled && s.add_after)
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(first_post_op + 1) | DNNL_ARG_SRC_1,
                    constant_arg(c, s.add_after->reshaped(std::vector<int64_t>(per_channel.begin(), per_channel.end())),
                                 add_md, n.name() + ".add")});
  if (scaled && s.residual >= 0)
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(first_post_op + (s.add_after ? 2 : 1)) | DNNL_ARG_SRC_1,
                    c.as_layout(s.residual, md_t(to_dims(od), dt::f32, channels_last(od.size())))});
  const double flops = 2.0 * macs;
  c.add_primitive(pd, std::move(args),
                  step_info(n, "int8-conv",
                            "int8-conv " + std::string(dtype_name(xv.dtype)) + to_string(xd) + " w" + to_string(wd) +
                                " g" + std::to_string(groups) + " s" + to_string(std::vector<int64_t>(strides.begin(), strides.end())) +
                                (s.bias.empty() ? "" : " bias") +
                                (out_scales > 1 ? " scaled-per-channel" : scaled ? " scaled" : "") +
                                (s.add_after ? " add" : "") + (s.residual >= 0 ? " residual" : "") +
                                (s.act_after ? " " + s.act_after->text() : "") + requant_text(s.scales, s.relu, y_t),
                            flops));
  return y;
}

namespace {

std::optional<int32_t> scalar_zp(const Tensor* t) {
  if (!t) return 0;
  std::vector<int64_t> v = t->to_i64();
  for (int64_t x : v)
    if (x != v[0]) return std::nullopt;
  return v.empty() ? 0 : static_cast<int32_t>(v[0]);
}
const Tensor* opt_known(Compiler& c, const Node& n, size_t i) {
  return i < n.inputs().size() && n.inputs()[i].present() ? c.known(n.inputs()[i]) : nullptr;
}
bool has(const Node& n, size_t i) { return i < n.inputs().size() && n.inputs()[i].present(); }

// The [rows, K] reading of a run-time left operand [..., M, K] (row-major).
int rows_of(Compiler& c, const Value& v) {
  int a = c.as_plain(c.id(v));
  const std::vector<int64_t> d = c.val(a).dims;
  if (d.size() < 2) return -1;
  return with_md(c, a, {num_elements(d) / d.back(), d.back()}, md_t());
}

// What quantize_dynamic writes after an integer contraction's int32 result `out`
// (dims od): Cast to float, a Mul by a run-time float32 scale (the activation's
// scale times the weights': one, or one per output channel, the channels on axis
// `axis`), then perhaps an Add of a constant float32 per channel (the layer's bias)
// and an activation oneDNN has. The contraction takes them as its output scale and
// post-ops: one float32 result. Nodes another kernel has claimed while planning it
// (a pointwise chain that reads the result and asked for this product) stay its own.
struct ScaledTail {
  const Node* cast = nullptr;
  const Node* mul = nullptr;  // none: nothing taken
  const Node* add = nullptr;
  const Node* residual_add = nullptr;  // then an Add of a run-time value of the output's dims
  Value residual;
  int scale = -1;
  std::optional<Tensor> add_after;
  std::optional<EltwiseSpec> act;
  std::vector<const Node*> act_nodes;
  Value act_out;

  Value last() const { return act ? act_out : (residual_add ? residual_add : add ? add : mul)->output(0); }
  void drop_act() {
    act.reset();
    act_nodes.clear();
  }
  void drop_post_ops() {
    add = nullptr;
    add_after.reset();
    residual_add = nullptr;
    drop_act();
  }
  void mark_done(Compiler& c) const {
    for (const Node* m : {cast, mul, add, residual_add})
      if (m) c.mark_done(*m);
    for (const Node* m : act_nodes) c.mark_done(*m);
  }
};

// A static float32 value of one element, or of `channels` along `axis` of dims od
// (right-aligned, every other dim 1).
bool per_tensor_or_channel(const std::vector<int64_t>& d, const std::vector<int64_t>& od, size_t axis,
                           int64_t channels) {
  if (d.size() > od.size()) return false;
  const int64_t count = num_elements(d);
  if (count == 1) return true;
  const size_t off = od.size() - d.size();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != (i + off == axis ? channels : 1)) return false;
  return true;
}

ScaledTail scaled_tail(Compiler& c, const Value& out, const std::vector<int64_t>& od, size_t axis, int64_t channels,
                       bool allow_act, bool allow_residual = false) {
  ScaledTail t;
  const Node* cast = c.opts().fuse ? c.sole_consumer(out) : nullptr;
  if (!cast || cast->op_type() != "Cast" || cast->attrs().get_int("to", 0) != 1 || !c.takeable(*cast)) return t;
  const Node* m = c.sole_consumer(cast->output(0));
  if (!m || m->op_type() != "Mul" || !c.takeable(*m)) return t;
  const size_t other = m->inputs()[0] == cast->output(0) ? 1 : 0;
  const Value& sv = m->inputs()[other];
  if (m->inputs()[1 - other] != cast->output(0) || sv.type().dtype != DType::Float32 || !is_static(sv.type().shape) ||
      !per_tensor_or_channel(static_dims(sv.type().shape), od, axis, channels) || c.depends_on_pending(sv))
    return t;
  t.cast = cast;
  t.mul = m;
  t.scale = c.as_plain(c.id(sv));
  // Then an Add of a constant float32 per channel: a post-op.
  if (const Node* a = c.sole_consumer(m->output(0)); a && a->op_type() == "Add" && c.takeable(*a)) {
    const size_t o = a->inputs()[0] == m->output(0) ? 1 : 0;
    const Tensor* b = a->inputs()[1 - o] == m->output(0) ? c.peek_known(a->inputs()[o]) : nullptr;
    if (b && b->dtype() == DType::Float32 && b->numel() == channels &&
        per_tensor_or_channel(b->dims(), od, axis, channels)) {
      t.add = a;
      t.add_after = b->reshaped({channels});
    }
  }
  // Then an Add of a run-time float32 value of the output's dims (a residual block's
  // sum after its second convolution), computed apart from this one.
  if (const Node* a = allow_residual ? c.sole_consumer(t.last()) : nullptr; a && a->op_type() == "Add" && c.takeable(*a)) {
    const Value last = t.last();
    const Value& r = a->inputs()[a->inputs()[0] == last ? 1 : 0];
    if (r != last && (a->inputs()[0] == last || a->inputs()[1] == last) && r.type().dtype == DType::Float32 &&
        is_static(r.type().shape) && static_dims(r.type().shape) == od && !c.peek_known(r) &&
        !c.depends_on_pending(r)) {
      t.residual_add = a;
      t.residual = r;
    }
  }
  // Then an activation oneDNN has (Relu, Tanh, ...): the last post-op. Not the erf
  // GELU where the vector unit has AVX-512: isomer's own pass is faster there
  // (lower_matmul.cpp).
  if (!allow_act) return t;
  const Value last = t.last();
  if (const Node* a = c.sole_consumer(last); a && c.takeable(*a))
    if (auto e = eltwise_of(c, *a, last, od.size())) {
      t.act = e;
      t.act_nodes = {a};
      t.act_out = a->output(0);
      return t;
    }
  if (auto am = match_activation(c, last);
      am && std::all_of(am->nodes.begin(), am->nodes.end(), [&c](const Node* x) { return c.takeable(*x); }) &&
      (am->spec.alg != dnnl::algorithm::eltwise_gelu_erf || kernels::best_vector_isa() != kernels::VectorIsa::Avx512)) {
    t.act = am->spec;
    t.act_nodes = am->nodes;
    t.act_out = am->out;
  }
  return t;
}

// Binds `out` to the [rows, N] result y, seen in dims `od`.
void bind_rows(Compiler& c, const std::vector<int64_t>& od, const Value& out, int y) {
  const RtValue& yv = c.val(y);
  c.bind(out, c.alias(y, od, yv.md.data.ndims ? plain_md(od, yv.md.data_type()) : md_t(), yv.name));
}

// A matmul whose weights have a zero point per column z[j] (u8 weights quantized per
// channel; oneDNN's matmul takes one for all): sum (a - az)(w - z[j]) =
// sum (a - az) w - z[j] sum (a - az). The row sums are one more column of all-ones
// weights in the same product; a native step subtracts z[j] times them (in int32,
// wrapping as the accumulation does), then, where `s` has a run-time scale (one or
// one per column) and a float32 row to add, scales and adds as ONNX Runtime's Cast,
// Mul and Add do (two roundings).
int add_weight_zero_point_matmul(Compiler& c, const Node& n, const IntMatMul& s, std::vector<int32_t> zp) {
  const int64_t K = s.b.dims()[0], N = s.b.dims()[1];
  if (static_cast<int64_t>(zp.size()) != N) return -1;
  const Tensor b = as_s8(s.b, zp);
  std::string bytes(static_cast<size_t>(K * (N + 1)), static_cast<char>(1));
  std::string_view src = b.bytes();
  for (int64_t k = 0; k < K; ++k)
    std::memcpy(&bytes[static_cast<size_t>(k * (N + 1))], &src[static_cast<size_t>(k * N)], static_cast<size_t>(N));
  IntMatMul acc_spec;
  acc_spec.a = s.a;
  acc_spec.a_zp = s.a_zp;
  acc_spec.a_zp_value = s.a_zp_value;
  acc_spec.b = Tensor(DType::Int8, {K, N + 1}, std::move(bytes));
  const int acc = add_integer_matmul(c, n, acc_spec);
  if (acc < 0) return -1;
  const int64_t rows = c.val(acc).dims[0];
  const bool scaled = s.out_scale_value >= 0;
  const int64_t scales = scaled ? num_elements(c.val(s.out_scale_value).dims) : 0;
  if (scales > 1 && scales != N) return -1;
  const DType yt = scaled ? DType::Float32 : DType::Int32;
  const int y = c.new_value(yt, {rows, N}, plain_md({rows, N}, dnnl_int(yt)), n.name());
  std::vector<int> ins = {acc};
  if (scaled) ins.push_back(c.as_plain(s.out_scale_value));
  std::vector<float> add;
  if (s.add_after)
    for (double v : s.add_after->to_f64()) add.push_back(static_cast<float>(v));
  add_native_step(
      c,
      step_info(n, "zero-point",
                "weight zero-point per-column" + to_string(std::vector<int64_t>{rows, N}) +
                    (scales > 1 ? " scaled-per-column" : scaled ? " scaled" : "") + (add.empty() ? "" : " add")),
      ins, {y}, [=](const std::vector<char*>& p) {
        const auto* a = reinterpret_cast<const int32_t*>(p[0]);
        const float* sc = scaled ? reinterpret_cast<const float*>(p[1]) : nullptr;
        char* out = p[scaled ? 2 : 1];
        for (int64_t r = 0; r < rows; ++r) {
          const int32_t* row = a + r * (N + 1);
          const auto sum = static_cast<uint32_t>(row[N]);
          for (int64_t j = 0; j < N; ++j) {
            const auto v = static_cast<int32_t>(static_cast<uint32_t>(row[j]) -
                                                static_cast<uint32_t>(zp[static_cast<size_t>(j)]) * sum);
            if (!scaled) {
              reinterpret_cast<int32_t*>(out)[r * N + j] = v;
              continue;
            }
            float f = static_cast<float>(v) * sc[scales > 1 ? j : 0];
            if (!add.empty()) f = f + add[static_cast<size_t>(j)];
            reinterpret_cast<float*>(out)[r * N + j] = f;
          }
        }
      });
  return y;
}

}  // namespace

bool lower_matmul_integer(Compiler& c, const Node& n) {
  const Tensor* b = c.known(n.inputs()[1]);
  if (!b || b->rank() != 2) return false;
  IntMatMul s;
  if (has(n, 2)) {
    if (const Tensor* z = c.known(n.inputs()[2])) {
      auto v = scalar_zp(z);
      if (!v || z->numel() != 1) return false;
      s.a_zp = *v;
    } else {
      const int zv = c.as_plain(c.id(n.inputs()[2]));
      if (num_elements(c.val(zv).dims) != 1) return false;
      s.a_zp_value = zv;
    }
  }
  if (has(n, 3) && !c.known(n.inputs()[3])) return false;
  auto bz = scalar_zp(opt_known(c, n, 3));
  std::vector<int32_t> column_zps;  // one per column, not all the same
  if (!bz) {
    for (int64_t z : c.known(n.inputs()[3])->to_i64()) column_zps.push_back(static_cast<int32_t>(z));
    if (static_cast<int64_t>(column_zps.size()) != b->dims()[1]) return false;
  }
  s.b = *b;
  s.b_zp = bz.value_or(0);
  s.a = rows_of(c, n.inputs()[0]);
  if (s.a < 0) return false;
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  const Value out = n.output(0);
  const int64_t N = s.b.dims()[1];
  ScaledTail t = scaled_tail(c, out, od, od.size() - 1, N, column_zps.empty());
  s.out_scale_value = t.scale;
  s.add_after = t.add_after;
  s.act_after = t.act;
  int y = -1;
  if (!column_zps.empty()) {
    y = add_weight_zero_point_matmul(c, n, s, column_zps);
  } else {
    try {
      y = add_integer_matmul(c, n, s);
    } catch (const dnnl::error&) {
      if (!t.add && !s.act_after) throw;
      t.drop_post_ops();  // no such post-ops here: the Add and the activation run on their own
      s.add_after.reset();
      s.act_after.reset();
      y = add_integer_matmul(c, n, s);
    }
  }
  if (y < 0) return false;
  if (t.mul) {
    bind_rows(c, od, t.last(), y);
    c.bind(out, y);  // nothing else reads it
    t.mark_done(c);
    return true;
  }
  bind_rows(c, od, out, y);
  return true;
}

bool lower_qlinear_matmul(Compiler& c, const Node& n) {
  const Tensor* b = c.known(n.inputs()[3]);
  auto a_p = constant_quant_params(c, n, 1, 2);
  auto b_p = constant_quant_params(c, n, 4, 5);
  auto y_p = constant_quant_params(c, n, 6, 7);
  if (!b || b->rank() != 2 || !a_p || !b_p || !y_p || a_p->scale.size() != 1 || y_p->scale.size() != 1) return false;
  auto bz = scalar_zp(c.known(n.inputs()[5]));
  if (!bz) return false;
  IntMatMul s;
  s.a = rows_of(c, n.inputs()[0]);
  if (s.a < 0) return false;
  s.a_zp = a_p->zp[0];
  s.b = *b;
  s.b_zp = *bz;
  for (float bs : b_p->scale) s.scales.push_back(a_p->scale[0] * bs / y_p->scale[0]);
  s.y_type = n.output_types()[0].dtype;
  s.y_zp = y_p->zp[0];
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  const int y = add_integer_matmul(c, n, s);
  if (y < 0) return false;
  bind_rows(c, od, n.output(0), y);
  return true;
}

namespace {

// The correction's operands as its kernel reads them: the products at p[0], the
// window sums at p[1] where a step of their own wrote them, else among the products.
kernels::ZeroPointRows zero_point_rows(const ZeroPointSums& z, const std::vector<char*>& p) {
  kernels::ZeroPointRows in;
  in.acc = reinterpret_cast<const int32_t*>(p[0]);
  in.sums = reinterpret_cast<const int32_t*>(p[z.sums >= 0 ? 1 : 0]) + z.sum_offset;
  in.acc_stride = in.sum_stride = z.stride;
  in.sum_per_col = z.sum_step != 0;
  return in;
}

}  // namespace

int add_zero_point_correction(Compiler& c, const Node& n, const ZeroPointSums& z, const std::vector<int64_t>& od,
                              const md_t& y_md, const std::vector<int32_t>& w_zp, const std::vector<int32_t>& bias_in,
                              const std::vector<float>& scales, DType y_type, int32_t y_zp) {
  const int64_t cols = od[1];  // output channels, or a matmul's columns
  const int64_t rows = num_elements(od) / cols;
  const bool requant = !scales.empty();
  const DType yt = requant ? y_type : DType::Int32;
  const int y = c.new_value(yt, od, y_md, n.name());
  const int team = c.threads();  // the kernel takes what the pass pays for
  std::vector<int32_t> zp(static_cast<size_t>(cols)), bias(static_cast<size_t>(cols), 0);
  std::vector<float> scale(static_cast<size_t>(cols), 1.0f);
  for (int64_t m = 0; m < cols; ++m) {
    const auto i = static_cast<size_t>(m);
    zp[i] = w_zp[w_zp.size() == 1 ? 0 : i];
    if (!bias_in.empty()) bias[i] = bias_in[i];
    if (requant) scale[i] = scales[scales.size() == 1 ? 0 : i];
  }
  const kernels::QType qt =
      !requant ? kernels::QType::S32 : yt == DType::UInt8 ? kernels::QType::U8 : kernels::QType::S8;
  const bool per_col = scales.size() > 1;
  const bool apart = z.sums >= 0;
  std::vector<int> ins = {z.acc};
  if (apart) ins.push_back(z.sums);
  add_native_step(
      c,
      step_info(n, "zero-point",
                "weight zero-point" + std::string(w_zp.size() > 1 ? " per-channel" : "") + to_string(od) +
                    (bias_in.empty() ? "" : " bias") + requant_text(scales, false, yt)),
      ins, {y}, [=](const std::vector<char*>& p) {
        kernels::correct_zero_points(zero_point_rows(z, p), rows, cols, zp.data(), bias.data(), p[apart ? 2 : 1], qt, scale.data(),
                                     per_col, y_zp, team);
      });
  return y;
}

namespace {

// An integer convolution whose weights have zero points z[m] (oneDNN's
// convolutions take none; u8 weights as quantizers write them, per tensor or per
// output channel): sum (x - xz)(w - z) = sum (x - xz) w - z sum (x - xz). The
// window sums of x - xz are one more output channel of all-ones weights (one
// group), or a convolution of all-ones weights of the same shape (grouped and
// depthwise ones: an extra channel per group, or one output per group, leaves
// oneDNN only its gemm kernel, 13x slower on 4 groups of 8). A native step subtracts z[m] times the sum (in
// int32, wrapping as the accumulation does), then adds the bias and requantizes
// where `s` asks (QLinearConv), rounding half to even as oneDNN does.
// The correction's float32 form: scaled at run time, a constant per channel added,
// perhaps a Relu (s.act_after: none other), channels-last as the convolution writes.
int add_scaled_zero_point_correction(Compiler& c, const Node& n, const ZeroPointSums& z, const std::vector<int64_t>& od,
                                     const std::vector<int32_t>& w_zp, const IntConv& s) {
  const int64_t cols = od[1], rows = num_elements(od) / cols;
  const int64_t scales = num_elements(c.val(s.out_scale_value).dims);
  if (scales != 1 && scales != cols) return -1;
  const bool relu = s.act_after.has_value();
  if (relu && (s.act_after->alg != dnnl::algorithm::eltwise_relu || s.act_after->alpha != 0)) return -1;
  std::vector<int32_t> zp(static_cast<size_t>(cols));
  std::vector<float> add(static_cast<size_t>(cols), 0.0f);
  const std::vector<double> a = s.add_after ? s.add_after->to_f64() : std::vector<double>();
  for (size_t m = 0; m < zp.size(); ++m) {
    zp[m] = w_zp[w_zp.size() == 1 ? 0 : m];
    if (!a.empty()) add[m] = static_cast<float>(a[m]);
  }
  const int y = c.new_value(DType::Float32, od, md_t(to_dims(od), dt::f32, channels_last(od.size())), n.name());
  const bool apart = z.sums >= 0;
  std::vector<int> ins = {z.acc};
  if (apart) ins.push_back(z.sums);
  ins.push_back(c.as_plain(s.out_scale_value));
  const bool residual = s.residual >= 0;  // read as the step writes y: [rows, cols] channels-last
  if (residual) ins.push_back(c.as_layout(s.residual, md_t(to_dims(od), dt::f32, channels_last(od.size()))));
  const size_t scale_at = ins.size() - (residual ? 2 : 1);
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "zero-point",
                            "weight zero-point" + std::string(w_zp.size() > 1 ? " per-channel" : "") + to_string(od) +
                                (scales > 1 ? " scaled-per-channel" : " scaled") + (s.add_after ? " add" : "") +
                                (residual ? " residual" : "") + (relu ? " relu" : "") + " ->f32"),
                  ins, {y}, [=](const std::vector<char*>& p) {
                    kernels::correct_zero_points_scaled(
                        zero_point_rows(z, p), rows, cols, zp.data(), reinterpret_cast<float*>(p[ins.size()]),
                        reinterpret_cast<const float*>(p[scale_at]), scales > 1, add.data(),
                        residual ? reinterpret_cast<const float*>(p[ins.size() - 1]) : nullptr, relu, team);
                  });
  return y;
}

int add_weight_zero_point_conv(Compiler& c, const Node& n, IntConv s, const std::vector<int32_t>& w_zp) {
  const int64_t groups = n.attrs().get_int("group", 1);
  const std::vector<int64_t> wd = s.w.dims();
  const int64_t oc = wd[0], per_channel = num_elements(wd) / oc;
  if (w_zp.size() != 1 && static_cast<int64_t>(w_zp.size()) != oc) return -1;
  IntConv acc_spec = s;
  acc_spec.out_scale_value = -1;
  acc_spec.add_after.reset();
  acc_spec.residual = -1;
  acc_spec.act_after.reset();
  acc_spec.bias.clear();
  acc_spec.scales.clear();
  acc_spec.y_type = DType::Int32;
  acc_spec.y_zp = 0;
  acc_spec.relu = false;
  IntConv ones = acc_spec;
  std::vector<int64_t> ones_dims = wd;
  ones_dims[0] = groups == 1 ? 1 : oc;
  ones.w = Tensor(DType::Int8, ones_dims, std::string(static_cast<size_t>(ones_dims[0] * per_channel), static_cast<char>(1)));
  int acc = -1, sums = -1;
  if (groups == 1) {
    std::vector<int64_t> both = wd;
    both[0] = oc + 1;
    acc_spec.w = Tensor(DType::Int8, both, s.w.bytes().str() + ones.w.bytes().str());
    acc = add_integer_conv(c, n, acc_spec);
  } else {
    acc = add_integer_conv(c, n, acc_spec);
    sums = acc < 0 ? -1 : add_integer_conv(c, n, ones);
    if (sums < 0) return -1;
  }
  if (acc < 0) return -1;
  std::vector<int64_t> od = c.val(acc).dims;
  od[1] = oc;
  const DType yt = s.out_scale_value >= 0 ? DType::Float32 : s.scales.empty() ? DType::Int32 : s.y_type;
  // Row r's products at acc + r * stride, channel m's window sum at the extra
  // channel (one group) or at the sums' channel m.
  ZeroPointSums z;
  z.acc = acc;
  z.sums = sums;
  z.stride = groups == 1 ? oc + 1 : oc;
  z.sum_offset = groups == 1 ? oc : 0;
  z.sum_step = groups == 1 ? 0 : 1;
  if (s.out_scale_value >= 0) return add_scaled_zero_point_correction(c, n, z, od, w_zp, s);
  const int y = add_zero_point_correction(c, n, z, od, md_t(to_dims(od), dnnl_int(yt), channels_last(od.size())), w_zp,
                                          s.bias, s.scales, s.y_type, s.y_zp);
  return y;
}

}  // namespace

bool lower_integer_conv(Compiler& c, const Node& n) {
  const bool qlinear = n.op_type() == "QLinearConv";
  const size_t wi = qlinear ? 3 : 1;
  const Tensor* w = c.known(n.inputs()[wi]);
  if (!w || (w->dtype() != DType::Int8 && w->dtype() != DType::UInt8)) return false;
  IntConv s;
  std::vector<int32_t> w_zp;  // u8 weights as s8 (as_s8), their zero points moved with them
  if (qlinear) {
    auto x_p = constant_quant_params(c, n, 1, 2);
    auto w_p = constant_quant_params(c, n, 4, 5);
    auto y_p = constant_quant_params(c, n, 6, 7);
    if (!x_p || !w_p || !y_p || x_p->scale.size() != 1 || y_p->scale.size() != 1) return false;
    w_zp = w_p->zp;
    s.w = as_s8(*w, w_zp);
    s.x_zp = x_p->zp[0];
    for (float ws : w_p->scale) s.scales.push_back(x_p->scale[0] * ws / y_p->scale[0]);
    s.y_type = n.output_types()[0].dtype;
    s.y_zp = y_p->zp[0];
    if (has(n, 8)) {
      const Tensor* bias = c.known(n.inputs()[8]);
      if (!bias) return false;
      for (int64_t v : bias->to_i64()) s.bias.push_back(static_cast<int32_t>(v));
    }
  } else {
    if (has(n, 3) && !c.known(n.inputs()[3])) return false;
    const Tensor* wz = opt_known(c, n, 3);
    if (wz) {
      for (int64_t z : wz->to_i64()) w_zp.push_back(static_cast<int32_t>(z));
    } else {
      w_zp = {0};
    }
    s.w = as_s8(*w, w_zp);
    if (has(n, 2) && !c.known(n.inputs()[2])) {  // DynamicQuantizeLinear's zero point
      s.x_zp_value = c.as_plain(c.id(n.inputs()[2]));
      if (num_elements(c.val(s.x_zp_value).dims) != 1) return false;
    } else {
      auto xz = scalar_zp(opt_known(c, n, 2));
      if (!xz) return false;
      s.x_zp = *xz;
    }
  }
  s.x = c.id(n.inputs()[0]);
  const bool zero = std::all_of(w_zp.begin(), w_zp.end(), [](int32_t z) { return z == 0; });
  // ConvInteger's Cast, scale Mul, bias Add and activation: the int8 convolution's
  // post-ops, or (weights with zero points) the correction step's, which applies a
  // Relu only.
  ScaledTail t;
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  if (!qlinear && od.size() >= 3) t = scaled_tail(c, n.output(0), od, 1, s.w.dims()[0], true, true);
  if (!zero && t.act && (t.act->alg != dnnl::algorithm::eltwise_relu || t.act->alpha != 0)) t.drop_act();
  s.out_scale_value = t.scale;
  s.add_after = t.add_after;
  s.residual = t.residual_add ? c.id(t.residual) : -1;
  s.act_after = t.act;
  int y = -1;
  try {
    y = zero ? add_integer_conv(c, n, s) : add_weight_zero_point_conv(c, n, s, w_zp);
  } catch (const dnnl::error&) {
    if (!t.mul) throw;
    t = ScaledTail();  // no such attributes here: the Cast, Mul, Add and activation run on their own
    s.out_scale_value = -1;
    s.add_after.reset();
    s.residual = -1;
    s.act_after.reset();
    y = zero ? add_integer_conv(c, n, s) : add_weight_zero_point_conv(c, n, s, w_zp);
  }
  if (y < 0) return false;
  c.bind(n.output(0), y);  // with a tail taken, nothing else reads it
  if (t.mul) {
    c.bind(t.last(), y);
    t.mark_done(c);
  }
  return true;
}

}  // namespace isomer::runtime
