// Quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, and the
// integer contractions MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
//
// Float semantics only. Quantizing rounds (half to even) and saturates, so these
// operators are neither polynomial nor exact over a field: they have no field or
// symbolic semantics, the generator never enumerates them and no rule can match
// through them. The rounding arithmetic lives in kernels/quant.h, shared with the
// runtime's steps, so the reference and the runtime round the same float32 values.
// The integer contractions are exact: their products are summed in double, which
// holds every int32 accumulator exactly, through MatMul's and Conv's own semantics.
#include <optional>

#include "ir/invalid_node.h"
#include "kernels/quant.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

using kernels::QType;

std::optional<QType> qtype(DType t) {
  switch (t) {
    case DType::UInt8: return QType::U8;
    case DType::Int8: return QType::S8;
    case DType::UInt16: return QType::U16;
    case DType::Int16: return QType::S16;
    case DType::Int32: return QType::S32;
    default: return std::nullopt;
  }
}
bool is_q8(DType t) { return t == DType::UInt8 || t == DType::Int8; }
bool is_q16(DType t) { return is_q8(t) || t == DType::UInt16 || t == DType::Int16; }
bool is_scale_type(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16; }
std::string tn(DType t) { return std::string(dtype_name(t)); }

int64_t static_numel(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) {
    if (!d.is_static()) return -1;
    n *= d.value;
  }
  return n;
}

// A scale (and its zero point) of a per-tensor or per-axis quantization of `x`:
// a scalar or a 1-element vector, or a vector of x's extent along `axis`. Higher
// ranks are block quantization, which the importer keeps opaque.
void check_params(const TensorType& x, const TensorType& scale, const TensorType* zp, int64_t axis,
                  const std::string& what) {
  require_valid(is_scale_type(scale.dtype), what + " scale must be float32, float16 or bfloat16, got " + tn(scale.dtype));
  require_valid(scale.rank() <= 1, what + " scale " + to_string(scale.shape) +
                                       " must be a scalar or a vector (block quantization is not supported)");
  if (zp) {  // a scalar and a 1-element vector are one value (quantize_static writes both)
    require_valid(zp->shape == scale.shape || (zp->rank() <= 1 && static_numel(zp->shape) == 1 &&
                                               static_numel(scale.shape) == 1),
                  what + " zero point " + to_string(zp->shape) + " does not match the scale " + to_string(scale.shape));
  }
  if (scale.rank() == 1 && !(scale.shape[0].is_static() && scale.shape[0].value == 1)) {
    require_valid(axis >= -x.rank() && axis < x.rank(),
                  what + " axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    const Dim& ext = x.shape[static_cast<size_t>(axis < 0 ? axis + x.rank() : axis)];
    require_valid(!ext.is_static() || !scale.shape[0].is_static() || ext.value == scale.shape[0].value,
                  what + " scale has " + std::to_string(scale.shape[0].value) + " entries, but axis " +
                      std::to_string(axis) + " of " + to_string(x.shape) + " has " + std::to_string(ext.value));
  }
}

// x's dims around the quantization axis for a scale of `scale_numel` entries.
kernels::QShape qshape(const std::vector<int64_t>& dims, int64_t scale_rank, int64_t scale_numel, int64_t axis) {
  kernels::QShape s;
  if (scale_rank == 0 || scale_numel == 1) {
    s.inner = num_elements(dims);
    return s;
  }
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(dims.size()));
  s.outer = num_elements(dims, 0, static_cast<size_t>(a));
  s.channels = dims[static_cast<size_t>(a)];
  s.inner = num_elements(dims, static_cast<size_t>(a) + 1, dims.size());
  require(s.channels == scale_numel, "the scale has " + std::to_string(scale_numel) + " entries, axis " +
                                         std::to_string(a) + " of " + to_string(dims) + " has " +
                                         std::to_string(s.channels));
  return s;
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<double> d = t.to_f64();
  return std::vector<float>(d.begin(), d.end());
}
std::vector<int32_t> zero_points(const Tensor* zp, int64_t n) {
  if (!zp || zp->dtype() == DType::Undefined) return std::vector<int32_t>(static_cast<size_t>(n), 0);
  std::vector<int64_t> v = zp->to_i64();
  return std::vector<int32_t>(v.begin(), v.end());
}

// ONNX import of QuantizeLinear and DequantizeLinear: block quantization and types
// beyond 16-bit integers stay opaque (ONNX Runtime runs them).
std::string import_qdq(OnnxForm& form, int64_t, GraphBuilder&) {
  const int64_t block = form.attrs.get_int("block_size", 0);
  require_valid(block >= 0, "block_size " + std::to_string(block) + " is negative");  // kept opaque, it would pass unchecked
  if (block != 0) return "block quantization (block_size) is not supported natively";
  const int64_t precision = form.attrs.get_int("precision", 0);
  if (precision != 0 && precision != static_cast<int64_t>(DType::Float32))
    return "precision " + std::to_string(precision) + " is not supported natively (float32 is)";
  const int64_t out = form.attrs.get_int("output_dtype", 0);
  if (out != 0 && !is_q16(static_cast<DType>(out)) && !is_scale_type(static_cast<DType>(out)))
    return "output_dtype " + std::to_string(out) + " is not supported natively";
  if (form.inputs.size() > 2 && form.inputs[2].present() && !qtype(form.inputs[2].type().dtype))
    return "zero point of type " + tn(form.inputs[2].type().dtype) + " is not supported natively";
  // A scale of rank 2 or more is a block quantization's and needs its block_size.
  require_valid(block != 0 || !(form.inputs.size() >= 2 && form.inputs[1].present() && form.inputs[1].type().rank() > 1),
                "a scale of rank " + std::to_string(form.inputs.size() >= 2 ? form.inputs[1].type().rank() : 0) +
                    " without block_size (per-tensor and per-axis scales have rank 0 or 1)");
  if (form.inputs.size() >= 2 && form.inputs[1].present() && form.inputs[1].type().rank() > 1)
    return "block quantization (a scale of rank " + std::to_string(form.inputs[1].type().rank()) +
           ") is not supported natively";
  return "";
}

// ---- QuantizeLinear ----------------------------------------------------------------

DType quantize_output(const InferContext& ctx) {
  const int64_t attr = ctx.attrs.get_int("output_dtype", 0);
  if (ctx.has_input(2)) {
    const DType z = ctx.in(2).dtype;
    require_valid(attr == 0 || static_cast<DType>(attr) == z,
                  "QuantizeLinear output_dtype " + std::to_string(attr) + " differs from the zero point's type " + tn(z));
    return z;
  }
  return attr == 0 ? DType::UInt8 : static_cast<DType>(attr);
}

std::vector<TensorType> infer_quantize(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_valid(is_scale_type(x.dtype) || x.dtype == DType::Int32,
                "QuantizeLinear input must be float32, float16, bfloat16 or int32, got " + tn(x.dtype));
  const DType out = quantize_output(ctx);
  require(is_q16(out), "QuantizeLinear to " + tn(out) + " is not supported (8- and 16-bit integers are)");
  require(ctx.attrs.get_int("block_size", 0) == 0, "QuantizeLinear block quantization is not supported");
  check_params(x, ctx.in(1), ctx.has_input(2) ? &ctx.in(2) : nullptr, ctx.attrs.get_int("axis", 1), "QuantizeLinear");
  return {{out, x.shape}};
}

std::vector<Tensor> eval_quantize(const EvalContext& ctx) {
  const Tensor &x = ctx.in(0), &scale = ctx.in(1);
  const DType out = ctx.has_input(2) ? ctx.in(2).dtype()
                    : ctx.attrs.get_int("output_dtype", 0) ? static_cast<DType>(ctx.attrs.get_int("output_dtype"))
                                                           : DType::UInt8;
  const kernels::QShape s = qshape(x.dims(), scale.rank(), scale.numel(), ctx.attrs.get_int("axis", 1));
  const std::vector<float> xf = floats_of(x), sf = floats_of(scale);
  const std::vector<int32_t> zp = zero_points(ctx.has_input(2) ? &ctx.in(2) : nullptr, scale.numel());
  std::string bytes(static_cast<size_t>(x.numel()) * dtype_size(out), '\0');
  kernels::quantize(xf.data(), bytes.data(), *qtype(out), s, sf.data(), zp.data());
  return {Tensor(out, x.dims(), std::move(bytes))};
}

// ---- DequantizeLinear --------------------------------------------------------------

std::vector<TensorType> infer_dequantize(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &scale = ctx.in(1);
  require_valid(qtype(x.dtype).has_value(), "DequantizeLinear input must be an 8-, 16- or 32-bit integer, got " +
                                                tn(x.dtype));
  require(ctx.attrs.get_int("block_size", 0) == 0, "DequantizeLinear block quantization is not supported");
  if (ctx.has_input(2))
    require_valid(ctx.in(2).dtype == x.dtype, "DequantizeLinear zero point has type " + tn(ctx.in(2).dtype) +
                                                  ", the input " + tn(x.dtype));
  check_params(x, scale, ctx.has_input(2) ? &ctx.in(2) : nullptr, ctx.attrs.get_int("axis", 1), "DequantizeLinear");
  const int64_t attr = ctx.attrs.get_int("output_dtype", 0);
  require_valid(attr == 0 || static_cast<DType>(attr) == scale.dtype,
                "DequantizeLinear output_dtype " + std::to_string(attr) + " differs from the scale's type " + tn(scale.dtype));
  return {{scale.dtype, x.shape}};
}

std::vector<Tensor> eval_dequantize(const EvalContext& ctx) {
  const Tensor &x = ctx.in(0), &scale = ctx.in(1);
  const kernels::QShape s = qshape(x.dims(), scale.rank(), scale.numel(), ctx.attrs.get_int("axis", 1));
  const std::vector<float> sf = floats_of(scale);
  const std::vector<int32_t> zp = zero_points(ctx.has_input(2) ? &ctx.in(2) : nullptr, scale.numel());
  std::vector<float> y(static_cast<size_t>(x.numel()));
  kernels::dequantize(x.bytes().data(), *qtype(x.dtype()), y.data(), s, sf.data(), zp.data());
  if (scale.dtype() == DType::Float32)
    return {Tensor(DType::Float32, x.dims(), std::string(reinterpret_cast<const char*>(y.data()), y.size() * 4))};
  return {Tensor::from_f64(scale.dtype(), x.dims(), std::vector<double>(y.begin(), y.end()))};
}

// ---- DynamicQuantizeLinear ---------------------------------------------------------

std::vector<TensorType> infer_dynamic_quantize(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_valid(x.dtype == DType::Float32, "DynamicQuantizeLinear input must be float32, got " + tn(x.dtype));
  return {{DType::UInt8, x.shape}, {DType::Float32, {}}, {DType::UInt8, {}}};
}

std::vector<Tensor> eval_dynamic_quantize(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const std::vector<float> xf = floats_of(x);
  const kernels::DynamicParams p = kernels::dynamic_params(xf.data(), x.numel());
  std::string bytes(static_cast<size_t>(x.numel()), '\0');
  const int32_t zp = p.zero_point;
  kernels::QShape s;
  s.inner = x.numel();
  kernels::quantize(xf.data(), bytes.data(), QType::U8, s, &p.scale, &zp);
  return {Tensor(DType::UInt8, x.dims(), std::move(bytes)), Tensor::scalar_f32(p.scale),
          Tensor(DType::UInt8, {}, std::string(1, static_cast<char>(p.zero_point)))};
}

// ---- Integer contractions ----------------------------------------------------------

// `t - zp` as exact float64 values; zp broadcasts as numpy does, except that a
// vector zero point of a left operand holds one value per row ([M] reads as [M, 1]).
Tensor minus_zero_point(const Tensor& t, const Tensor* zp, bool per_row) {
  Array<double> a = f64(t);
  if (zp && zp->dtype() != DType::Undefined) {
    Array<double> z = f64(*zp);
    if (per_row && z.rank() == 1 && z.numel() > 1) z.dims = {z.numel(), 1};
    a = broadcast_map(a, z, [](double u, double v) { return u - v; });
  }
  return Tensor::from_f64(DType::Float64, a.dims, a.data);
}

const Tensor* optional_input(const EvalContext& ctx, size_t i) { return ctx.has_input(i) ? &ctx.in(i) : nullptr; }

// A zero point or scale of an operand with `rows` rows (left, per row) or `cols`
// columns (right, per column): a scalar, a 1-element vector, a vector of that
// extent, or (zero points) the operand's rank with the other matrix dim 1.
void check_matmul_param(const TensorType& operand, const TensorType& p, bool left, const std::string& what) {
  if (p.rank() == 0 || (p.rank() == 1 && p.shape[0].is_static() && p.shape[0].value == 1)) return;
  const Shape& s = operand.shape;
  require_valid(s.size() >= 2, what + " " + to_string(p.shape) + " needs a matrix operand, got " + to_string(s));
  const Dim& ext = left ? s[s.size() - 2] : s.back();
  if (p.rank() == 1) {
    require_valid(!ext.is_static() || !p.shape[0].is_static() || ext.value == p.shape[0].value,
                  what + " " + to_string(p.shape) + " does not match the operand " + to_string(s));
    return;
  }
  require_valid(p.rank() == operand.rank() && (left ? p.shape.back() : p.shape[p.shape.size() - 2]) == Dim(1),
                what + " " + to_string(p.shape) + " does not match the operand " + to_string(s));
}

std::vector<TensorType> matmul_shape(const InferContext& ctx, const TensorType& a, const TensorType& b) {
  std::vector<TensorType> in{{DType::Int32, a.shape}, {DType::Int32, b.shape}};
  std::vector<const Tensor*> none(2, nullptr);
  return get_op("MatMul").infer(InferContext{ctx.attrs, in, none, 1});
}

std::vector<TensorType> infer_matmul_integer(const InferContext& ctx) {
  const TensorType &a = ctx.in(0), &b = ctx.in(1);
  require_valid(is_q8(a.dtype) && is_q8(b.dtype), "MatMulInteger operands must be int8 or uint8, got " + tn(a.dtype) +
                                                      " and " + tn(b.dtype));
  for (size_t i : {2u, 3u}) {
    if (!ctx.has_input(i)) continue;
    const TensorType& op = i == 2 ? a : b;
    require_valid(ctx.in(i).dtype == op.dtype, "MatMulInteger zero point " + std::to_string(i - 1) + " has type " +
                                                   tn(ctx.in(i).dtype) + ", its operand " + tn(op.dtype));
    check_matmul_param(op, ctx.in(i), i == 2, "MatMulInteger zero point");
  }
  std::vector<TensorType> out = matmul_shape(ctx, a, b);
  out[0].dtype = DType::Int32;
  return out;
}

Tensor integer_matmul(const EvalContext& ctx, const Tensor& a, const Tensor* azp, const Tensor& b, const Tensor* bzp) {
  std::vector<Tensor> args{minus_zero_point(a, azp, true), minus_zero_point(b, bzp, false)};
  return get_op("MatMul").eval(EvalContext{ctx.attrs, args, 1})[0];
}

std::vector<Tensor> eval_matmul_integer(const EvalContext& ctx) {
  Tensor acc = integer_matmul(ctx, ctx.in(0), optional_input(ctx, 2), ctx.in(1), optional_input(ctx, 3));
  return {Tensor::from_f64(DType::Int32, acc.dims(), acc.to_f64())};
}

// Shape rule of Conv for the integer convolutions (x at 0, w at `w_index`).
std::vector<TensorType> conv_shape(const InferContext& ctx, const TensorType& x, const TensorType& w) {
  std::vector<TensorType> in{{DType::Float32, x.shape}, {DType::Float32, w.shape}};
  std::vector<const Tensor*> none(2, nullptr);
  return get_op("Conv").infer(InferContext{ctx.attrs, in, none, 1});
}

// auto_pad resolved as Conv resolves it.
std::string import_integer_conv(OnnxForm& form, int64_t opset, GraphBuilder& builder, size_t w_index) {
  if (form.inputs.size() <= w_index) return "";
  OnnxForm conv{form.attrs, {form.inputs[0], form.inputs[w_index]}, 1, {}};
  std::string why = get_op("Conv").onnx_import(conv, opset, builder);
  form.attrs = conv.attrs;
  return why;
}

// A per-output-channel parameter of a convolution weight [M, ...]: scalar or [M].
void check_channel_param(const TensorType& w, const TensorType& p, const std::string& what) {
  require_valid(p.rank() == 0 || (p.rank() == 1 && (!p.shape[0].is_static() || p.shape[0].value == 1 ||
                                                    !w.shape[0].is_static() || p.shape[0] == w.shape[0])),
                what + " " + to_string(p.shape) + " must be a scalar or hold one value per output channel of " +
                    to_string(w.shape));
}
void check_scalar_param(const TensorType& p, const std::string& what) {
  require_valid(static_numel(p.shape) == 1 && p.rank() <= 1, what + " must be a scalar, got " + to_string(p.shape));
}

std::vector<TensorType> infer_conv_integer(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &w = ctx.in(1);
  require_valid(is_q8(x.dtype) && is_q8(w.dtype), "ConvInteger operands must be int8 or uint8, got " + tn(x.dtype) +
                                                      " and " + tn(w.dtype));
  if (ctx.has_input(2)) {
    require_valid(ctx.in(2).dtype == x.dtype, "ConvInteger x_zero_point has type " + tn(ctx.in(2).dtype));
    check_scalar_param(ctx.in(2), "ConvInteger x_zero_point");
  }
  if (ctx.has_input(3)) {
    require_valid(ctx.in(3).dtype == w.dtype, "ConvInteger w_zero_point has type " + tn(ctx.in(3).dtype));
    check_channel_param(w, ctx.in(3), "ConvInteger w_zero_point");
  }
  std::vector<TensorType> out = conv_shape(ctx, x, w);
  out[0].dtype = DType::Int32;
  return out;
}

// The weight minus its per-output-channel zero point ([M] read as [M, 1, ...]).
Tensor weight_minus_zero_point(const Tensor& w, const Tensor* zp) {
  if (!zp || zp->dtype() == DType::Undefined || zp->numel() == 1) return minus_zero_point(w, zp, false);
  std::vector<int64_t> d(static_cast<size_t>(w.rank()), 1);
  d[0] = zp->numel();
  Tensor z = zp->reshaped(d);
  return minus_zero_point(w, &z, false);
}

Tensor integer_conv(const EvalContext& ctx, const Tensor& x, const Tensor* xzp, const Tensor& w, const Tensor* wzp) {
  std::vector<Tensor> args{minus_zero_point(x, xzp, false), weight_minus_zero_point(w, wzp)};
  return get_op("Conv").eval(EvalContext{ctx.attrs, args, 1})[0];
}

std::vector<Tensor> eval_conv_integer(const EvalContext& ctx) {
  Tensor acc = integer_conv(ctx, ctx.in(0), optional_input(ctx, 2), ctx.in(1), optional_input(ctx, 3));
  return {Tensor::from_f64(DType::Int32, acc.dims(), acc.to_f64())};
}

// Requantizes exact accumulators: y = saturate(round(acc * (sa * sb / sy)) + zp_y) in
// float32, the multiplier formed as ONNX Runtime forms it. `mult_of(i)` gives
// element i's sa * sb.
template <class F>
Tensor requantize_exact(const Tensor& acc, float y_scale, const Tensor& y_zp, F scale_product) {
  const DType out = y_zp.dtype();
  const QType t = *qtype(out);
  const int32_t zp = static_cast<int32_t>(y_zp.i64_at(0)), lo = kernels::qmin(t), hi = kernels::qmax(t);
  const std::vector<double> a = acc.to_f64();
  std::vector<int64_t> q(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const float mult = scale_product(static_cast<int64_t>(i)) / y_scale;
    q[i] = kernels::saturate_round(static_cast<float>(static_cast<int32_t>(a[i])) * mult, zp, lo, hi);
  }
  return Tensor::from_i64(out, acc.dims(), q);
}

std::vector<TensorType> infer_qlinear_matmul(const InferContext& ctx) {
  const TensorType &a = ctx.in(0), &b = ctx.in(3), &yzp = ctx.in(7);
  require_valid(is_q8(a.dtype) && is_q8(b.dtype) && is_q8(yzp.dtype),
                "QLinearMatMul operands and output must be int8 or uint8, got " + tn(a.dtype) + ", " + tn(b.dtype) +
                    " and " + tn(yzp.dtype));
  require_valid(ctx.in(2).dtype == a.dtype && ctx.in(5).dtype == b.dtype, "QLinearMatMul zero points must have their operands' types");
  for (size_t i : {1u, 4u, 6u})
    require_valid(is_scale_type(ctx.in(i).dtype), "QLinearMatMul scales must be floats, got " + tn(ctx.in(i).dtype));
  check_matmul_param(a, ctx.in(1), true, "QLinearMatMul a_scale");
  check_matmul_param(a, ctx.in(2), true, "QLinearMatMul a_zero_point");
  check_matmul_param(b, ctx.in(4), false, "QLinearMatMul b_scale");
  check_matmul_param(b, ctx.in(5), false, "QLinearMatMul b_zero_point");
  check_scalar_param(ctx.in(6), "QLinearMatMul y_scale");
  check_scalar_param(yzp, "QLinearMatMul y_zero_point");
  std::vector<TensorType> out = matmul_shape(ctx, a, b);
  out[0].dtype = yzp.dtype;
  return out;
}

std::vector<Tensor> eval_qlinear_matmul(const EvalContext& ctx) {
  const Tensor &a_scale = ctx.in(1), &b_scale = ctx.in(4);
  Tensor acc = integer_matmul(ctx, ctx.in(0), &ctx.in(2), ctx.in(3), &ctx.in(5));
  require(acc.rank() >= 2, "QLinearMatMul of vectors is not supported");
  const int64_t N = acc.dims().back(), M = acc.dims()[acc.dims().size() - 2];
  const std::vector<float> sa = floats_of(a_scale), sb = floats_of(b_scale);
  return {requantize_exact(acc, floats_of(ctx.in(6))[0], ctx.in(7), [&](int64_t i) {
    const float x = sa.size() == 1 ? sa[0] : sa[static_cast<size_t>((i / N) % M)];
    return x * (sb.size() == 1 ? sb[0] : sb[static_cast<size_t>(i % N)]);
  })};
}

std::vector<TensorType> infer_qlinear_conv(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &w = ctx.in(3), &yzp = ctx.in(7);
  require_valid(is_q8(x.dtype) && is_q8(w.dtype) && is_q8(yzp.dtype),
                "QLinearConv input, weight and output must be int8 or uint8, got " + tn(x.dtype) + ", " + tn(w.dtype) +
                    " and " + tn(yzp.dtype));
  require_valid(ctx.in(2).dtype == x.dtype && ctx.in(5).dtype == w.dtype,
                "QLinearConv zero points must have their operands' types");
  for (size_t i : {1u, 4u, 6u})
    require_valid(is_scale_type(ctx.in(i).dtype), "QLinearConv scales must be floats, got " + tn(ctx.in(i).dtype));
  check_scalar_param(ctx.in(1), "QLinearConv x_scale");
  check_scalar_param(ctx.in(2), "QLinearConv x_zero_point");
  check_channel_param(w, ctx.in(4), "QLinearConv w_scale");
  check_channel_param(w, ctx.in(5), "QLinearConv w_zero_point");
  check_scalar_param(ctx.in(6), "QLinearConv y_scale");
  check_scalar_param(yzp, "QLinearConv y_zero_point");
  if (ctx.has_input(8)) {
    const TensorType& bias = ctx.in(8);
    require_valid(bias.dtype == DType::Int32 && bias.rank() == 1 &&
                      (!bias.shape[0].is_static() || !w.shape[0].is_static() || bias.shape[0] == w.shape[0]),
                  "QLinearConv bias must be int32 with one value per output channel, got " + tn(bias.dtype) +
                      to_string(bias.shape));
  }
  std::vector<TensorType> out = conv_shape(ctx, x, w);
  out[0].dtype = yzp.dtype;
  return out;
}

std::vector<Tensor> eval_qlinear_conv(const EvalContext& ctx) {
  Tensor acc = integer_conv(ctx, ctx.in(0), &ctx.in(2), ctx.in(3), &ctx.in(5));
  const std::vector<int64_t>& d = acc.dims();
  const int64_t M = d[1], spatial = num_elements(d, 2, d.size());
  if (ctx.has_input(8)) {
    Array<double> a = f64(acc);
    const std::vector<int64_t> bias = ctx.in(8).to_i64();
    for (size_t i = 0; i < a.data.size(); ++i) a.data[i] += static_cast<double>(bias[static_cast<size_t>((static_cast<int64_t>(i) / spatial) % M)]);
    acc = Tensor::from_f64(DType::Float64, a.dims, a.data);
  }
  const float xs = floats_of(ctx.in(1))[0];
  const std::vector<float> ws = floats_of(ctx.in(4));
  return {requantize_exact(acc, floats_of(ctx.in(6))[0], ctx.in(7), [&](int64_t i) {
    return xs * (ws.size() == 1 ? ws[0] : ws[static_cast<size_t>((i / spatial) % M)]);
  })};
}

const std::vector<AttrSpec> kConvAttrs = {{"auto_pad", "string"},   {"dilations", "ints"}, {"group", "int"},
                                          {"kernel_shape", "ints"}, {"pads", "ints"},      {"strides", "ints"}};

OpDef quant_op(std::string_view name, int min_in, int max_in, int opset) {
  OpDef d;
  d.name = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.min_opset = opset;
  d.lower = Lowering::Quant;
  return d;
}

}  // namespace

OpDef def_QuantizeLinear() {
  OpDef d = quant_op("QuantizeLinear", 2, 3, 10);
  d.attributes = {{"axis", "int"}, {"saturate", "int"}, {"block_size", "int"}, {"output_dtype", "int"},
                  {"precision", "int"}};
  d.infer = infer_quantize;
  d.eval = eval_quantize;
  d.onnx_import = import_qdq;
  return d;
}

OpDef def_DequantizeLinear() {
  OpDef d = quant_op("DequantizeLinear", 2, 3, 10);
  d.attributes = {{"axis", "int"}, {"block_size", "int"}, {"output_dtype", "int"}};
  d.props.widens_constants = true;
  d.infer = infer_dequantize;
  d.eval = eval_dequantize;
  d.onnx_import = import_qdq;
  return d;
}

OpDef def_DynamicQuantizeLinear() {
  OpDef d = quant_op("DynamicQuantizeLinear", 1, 1, 11);
  d.infer = infer_dynamic_quantize;
  d.eval = eval_dynamic_quantize;
  return d;
}

OpDef def_MatMulInteger() {
  OpDef d = quant_op("MatMulInteger", 2, 4, 10);
  d.infer = infer_matmul_integer;
  d.eval = eval_matmul_integer;
  return d;
}

OpDef def_ConvInteger() {
  OpDef d = quant_op("ConvInteger", 2, 4, 10);
  d.attributes = kConvAttrs;
  d.infer = infer_conv_integer;
  d.eval = eval_conv_integer;
  d.onnx_import = [](OnnxForm& f, int64_t opset, GraphBuilder& b) { return import_integer_conv(f, opset, b, 1); };
  return d;
}

OpDef def_QLinearMatMul() {
  OpDef d = quant_op("QLinearMatMul", 8, 8, 10);
  d.infer = infer_qlinear_matmul;
  d.eval = eval_qlinear_matmul;
  return d;
}

OpDef def_QLinearConv() {
  OpDef d = quant_op("QLinearConv", 8, 9, 10);
  d.attributes = kConvAttrs;
  d.infer = infer_qlinear_conv;
  d.eval = eval_qlinear_conv;
  d.onnx_import = [](OnnxForm& f, int64_t opset, GraphBuilder& b) { return import_integer_conv(f, opset, b, 3); };
  return d;
}

}  // namespace isomer
