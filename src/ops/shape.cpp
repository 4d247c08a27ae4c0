// Operators on shapes: Shape (the extents of a tensor as an int64 vector), Size
// (their product, an int64 scalar),
// ConstantOfShape (a tensor of given extents filled with one value) and Range (an
// arithmetic sequence, whose length is known when its inputs are) and EyeLike (ones
// on a diagonal of a matrix of its input's extents: XLNet's TorchScript export).
// Shape and EyeLike depend only on their input's extents, so the constant folding pass can evaluate it as soon
// as those are static. Both have field semantics: extents are small integers.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/float_to_int.h"
#include "ir/invalid_node.h"
#include "ops/layout_kernels.h"

namespace isomer {
using namespace ops;

namespace {

// ---- Shape -------------------------------------------------------------------------

// [start, end) of the extents Shape returns (opset 15): negative values count from
// the end, then both are clamped to [0, rank].
std::pair<int64_t, int64_t> shape_range(const Attributes& attrs, int64_t rank) {
  auto clamped = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  const int64_t start = clamped(attrs.get_int("start", 0));
  const int64_t end = attrs.has("end") ? clamped(attrs.get_int("end")) : rank;
  return {start, std::max(start, end)};
}

std::vector<TensorType> infer_shape(const InferContext& ctx) {
  auto [start, end] = shape_range(ctx.attrs, ctx.in(0).rank());
  return {{DType::Int64, {end - start}}};
}

std::vector<int64_t> shape_values(const Attributes& attrs, const std::vector<int64_t>& dims) {
  auto [start, end] = shape_range(attrs, static_cast<int64_t>(dims.size()));
  return std::vector<int64_t>(dims.begin() + start, dims.begin() + end);
}

std::vector<Tensor> eval_shape(const EvalContext& ctx) {
  return {Tensor::vector_i64(shape_values(ctx.attrs, ctx.in(0).dims()))};
}

std::vector<FieldArray> field_shape(const Attributes& attrs, std::span<const FieldArray> in) {
  std::vector<int64_t> v = shape_values(attrs, in[0].dims);
  FieldArray out;
  out.dims = {static_cast<int64_t>(v.size())};
  for (int64_t d : v) out.data.push_back(Fp(static_cast<uint64_t>(d)));
  return {out};
}

std::vector<SymArray> sym_shape(const Attributes& attrs, std::span<const SymArray> in) {
  std::vector<int64_t> v = shape_values(attrs, in[0].dims);
  SymArray out;
  out.dims = {static_cast<int64_t>(v.size())};
  for (int64_t d : v) out.data.push_back(Sym::rational(d));
  return {out};
}

// ---- Size: the element count, an int64 scalar --------------------------------------

std::vector<TensorType> infer_size(const InferContext&) { return {{DType::Int64, {}}}; }

std::vector<Tensor> eval_size(const EvalContext& ctx) {
  return {Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{num_elements(ctx.in(0).dims())})};
}

std::vector<FieldArray> field_size(const Attributes&, std::span<const FieldArray> in) {
  return {FieldArray({}, std::vector<Fp>{Fp(static_cast<uint64_t>(num_elements(in[0].dims)))})};
}

std::vector<SymArray> sym_size(const Attributes&, std::span<const SymArray> in) {
  return {SymArray({}, std::vector<Sym>{Sym::rational(num_elements(in[0].dims))})};
}

void export_shape(OnnxForm& f, int64_t opset) {
  if (opset >= 15) return;
  const int64_t rank = f.inputs[0].type().rank();
  auto [start, end] = shape_range(f.attrs, rank);
  require(start == 0 && end == rank,
          "Shape with start/end cannot be written at opset " + std::to_string(opset));
  f.attrs.erase("start");
  f.attrs.erase("end");
}

// ---- ConstantOfShape ---------------------------------------------------------------

Tensor fill_value(const Attributes& attrs) {
  if (!attrs.has("value")) return Tensor::scalar_f32(0.0f);
  const Tensor& v = attrs.get_tensor("value");
  require(v.numel() == 1, "ConstantOfShape value must have one element, it has " + std::to_string(v.numel()));
  require(is_numeric(v.dtype()), "ConstantOfShape value must be numeric");
  return v;
}

std::vector<int64_t> checked_extents(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) require_valid(d >= 0, "ConstantOfShape shape " + to_string(dims) + " has a negative dimension");
  return dims;
}

// ---- EyeLike -----------------------------------------------------------------------

DType eye_like_dtype(const Attributes& attrs, DType input) {
  return attrs.has("dtype") ? static_cast<DType>(attrs.get_int("dtype")) : input;
}

std::vector<TensorType> infer_eye_like(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_valid(x.rank() == 2, "EyeLike input " + to_string(x.shape) + " must be 2-D");
  const DType t = eye_like_dtype(ctx.attrs, x.dtype);
  require_valid(is_numeric(t), "EyeLike of element type " + std::string(dtype_name(t)));
  return {{t, x.shape}};
}

// y[i, j] = 1 where j = i + k, else 0.
std::vector<Tensor> eval_eye_like(const EvalContext& ctx) {
  const std::vector<int64_t>& d = ctx.in(0).dims();
  const DType t = eye_like_dtype(ctx.attrs, ctx.in(0).dtype());
  const int64_t k = ctx.attrs.get_int("k", 0);
  std::vector<int64_t> v(static_cast<size_t>(d[0] * d[1]), 0);
  for (int64_t i = 0; i < d[0]; ++i)
    if (i + k >= 0 && i + k < d[1]) v[static_cast<size_t>(i * d[1] + i + k)] = 1;
  if (is_float(t)) return {Tensor::from_f64(t, d, std::vector<double>(v.begin(), v.end()))};
  return {Tensor::from_i64(t, d, v)};
}

std::vector<TensorType> infer_constant_of_shape(const InferContext& ctx) {
  const DType dtype = fill_value(ctx.attrs).dtype();
  const TensorType& s = ctx.in(0);
  require(s.rank() == 1 && s.dtype == DType::Int64, "ConstantOfShape shape must be a 1-D int64 tensor, got " +
                                                        to_string(s));
  if (std::optional<std::vector<int64_t>> dims = constant_ints(ctx, 0))
    return {{dtype, make_shape(checked_extents(*dims))}};
  require(s.shape[0].is_static(), "ConstantOfShape with a dynamic shape of unknown length has unknown rank");
  return {{dtype, Shape(static_cast<size_t>(s.shape[0].value), Dim::unknown())}};
}

// The one kernel of both semantics: `value` repeated over `dims`.
template <class T>
Array<T> constant_of_shape(const std::vector<int64_t>& dims, T value) {
  return Array<T>(checked_extents(dims), value);
}

// The value's bytes repeated into the tensor itself: a constant of 10^9 elements takes
// its own size, not twice it (an array of the elements beside the tensor ran the
// runtime's compile out of memory where ONNX Runtime runs the model).
std::vector<Tensor> eval_constant_of_shape(const EvalContext& ctx) {
  const Tensor value = fill_value(ctx.attrs);
  std::vector<int64_t> dims = checked_extents(ints_of(ctx.in(0)));
  const size_t size = dtype_size(value.dtype());
  size_t total = size;
  for (int64_t d : dims)
    require(!__builtin_mul_overflow(total, static_cast<size_t>(d), &total),
            "ConstantOfShape shape " + to_string(dims) + " has more bytes than memory can address");
  Bytes bytes = Bytes::uninitialized(total);
  // One element, then the filled prefix copied onto the rest, doubling.
  if (total) std::memcpy(bytes.data(), value.bytes().data(), size);
  for (size_t filled = size; filled < total; filled *= 2)
    std::memcpy(bytes.data() + filled, bytes.data(), std::min(filled, total - filled));
  return {Tensor(value.dtype(), std::move(dims), std::move(bytes))};
}

std::vector<FieldArray> field_constant_of_shape(const Attributes& attrs, std::span<const FieldArray> in) {
  const double v = fill_value(attrs).f64_at(0);
  require(v == std::floor(v) && std::fabs(v) < 9.0e15, "ConstantOfShape value is not an integer; it has no field value");
  return {constant_of_shape(field_ints(in[0]), Fp::from_signed(checked_float_to_int<int64_t>(v, "ConstantOfShape value")))};
}

std::vector<SymArray> sym_constant_of_shape(const Attributes& attrs, std::span<const SymArray> in) {
  return {constant_of_shape(sym_ints(in[0]), Sym(fill_value(attrs).f64_at(0)))};
}

// ---- Range -------------------------------------------------------------------------

// The most elements a Range may have: a bound on what a hostile model can allocate.
constexpr int64_t kMaxRange = int64_t{1} << 28;

// max(ceil((limit - start) / delta), 0), exactly for integers.
int64_t range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  int64_t n = 0;
  if (is_float(start.dtype())) {
    const double s = start.f64_at(0), l = limit.f64_at(0), d = delta.f64_at(0);
    // A delta of 0 makes no count (ONNX divides by it; ONNX Runtime fails on it): the node
    // is refused, not kept opaque and written back.
    require_valid(d != 0, "Range delta is 0");
    require(std::isfinite(s) && std::isfinite(l) && std::isfinite(d), "Range bound or delta is not finite");
    const double c = std::ceil((l - s) / d);
    require(c < static_cast<double>(kMaxRange), "Range of " + std::to_string(c) + " elements is too large");
    n = c > 0 ? static_cast<int64_t>(c) : 0;
  } else {
    const int64_t s = start.i64_at(0), l = limit.i64_at(0), d = delta.i64_at(0);
    require_valid(d != 0, "Range delta is 0");
    // Differences of int64 values may overflow: compute in double where they are large.
    const double span = static_cast<double>(l) - static_cast<double>(s);
    require(span / static_cast<double>(d) < static_cast<double>(kMaxRange), "Range is too large");
    if ((l > s && d > 0) || (l < s && d < 0)) {
      // |limit - start| and |delta| in uint64: the difference of two int64 values
      // (-2^63 to 2^63 - 1) needs 64 bits without a sign.
      const uint64_t span_u = l > s ? static_cast<uint64_t>(l) - static_cast<uint64_t>(s)
                                    : static_cast<uint64_t>(s) - static_cast<uint64_t>(l);
      const uint64_t step = d > 0 ? static_cast<uint64_t>(d) : uint64_t{0} - static_cast<uint64_t>(d);
      n = static_cast<int64_t>(span_u / step + (span_u % step != 0 ? 1 : 0));
    }
  }
  return n;
}

std::vector<TensorType> infer_range(const InferContext& ctx) {
  const DType t = ctx.in(0).dtype;
  require(t == DType::Float32 || t == DType::Float64 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 ||
              t == DType::Float16 || t == DType::BFloat16,
          "Range type must be a float or a signed integer of 16 to 64 bits, got " + std::string(dtype_name(t)));
  // Range-27's stash_type: 16-bit floats are computed in float (1, the default) or in
  // their own type (0). isomer computes in double and rounds once, which is the former.
  require(!(t == DType::Float16 || t == DType::BFloat16) || ctx.attrs.get_int("stash_type", 1) != 0,
          "Range on 16-bit floats with stash_type=0 (accumulating in the type itself) is not implemented");
  const char* names[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    require(ctx.in(i).dtype == t, std::string("Range ") + names[i] + " has another type than start");
    require(ctx.in(i).rank() == 0 || num_elements(ctx.in(i).shape) == std::optional<int64_t>(1),
            std::string("Range ") + names[i] + " must be a scalar, got " + to_string(ctx.in(i).shape));
  }
  if (ctx.constant(0) && ctx.constant(1) && ctx.constant(2))
    return {{t, {range_count(*ctx.constant(0), *ctx.constant(1), *ctx.constant(2))}}};
  return {{t, {Dim::unknown()}}};
}

// start + i delta: integers exactly, floats in double rounded to the type.
std::vector<Tensor> eval_range(const EvalContext& ctx) {
  const Tensor &start = ctx.in(0), &delta = ctx.in(2);
  const int64_t n = range_count(start, ctx.in(1), delta);
  if (is_float(start.dtype())) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = start.f64_at(0) + static_cast<double>(i) * delta.f64_at(0);
    return {Tensor::from_f64(start.dtype(), {n}, v)};
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  // start + i delta stays between start and limit, but i delta alone may pass int64
  // (start -2^63, delta 2^62): computed modulo 2^64, which gives the exact element.
  const uint64_t s = static_cast<uint64_t>(start.i64_at(0)), d = static_cast<uint64_t>(delta.i64_at(0));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(s + static_cast<uint64_t>(i) * d);
  return {Tensor::from_i64(start.dtype(), {n}, v)};
}

}  // namespace

OpDef def_Shape() {
  OpDef d;
  d.name = "Shape";
  d.min_opset = 1;  // opsets 1-14 are the same operator without start/end (export_shape)
  d.attributes = {{"start", "int"}, {"end", "int"}};
  d.infer = infer_shape;
  d.eval = eval_shape;
  d.eval_field = field_shape;
  d.eval_sym = sym_shape;
  d.onnx_export = export_shape;
  d.lower = Lowering::ShapeOf;
  return d;
}

OpDef def_Size() {
  OpDef d;
  d.name = "Size";
  d.infer = infer_size;
  d.eval = eval_size;
  d.eval_field = field_size;
  d.eval_sym = sym_size;
  d.lower = Lowering::ShapeOf;
  return d;
}

OpDef def_ConstantOfShape() {
  OpDef d;
  d.name = "ConstantOfShape";
  d.min_opset = 9;
  d.attributes = {{"value", "tensor"}};
  d.infer = infer_constant_of_shape;
  d.eval = eval_constant_of_shape;
  d.eval_field = field_constant_of_shape;
  d.eval_sym = sym_constant_of_shape;
  d.lower = Lowering::ConstantOfShape;
  return d;
}

OpDef def_Range() {
  OpDef d;
  d.name = "Range";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 11;
  d.attributes = {{"stash_type", "int"}};
  d.infer = infer_range;
  d.eval = eval_range;
  d.lower = Lowering::Range;
  return d;
}

OpDef def_EyeLike() {
  OpDef d;
  d.name = "EyeLike";
  d.min_opset = 9;
  d.attributes = {{"dtype", "int"}, {"k", "int"}};
  d.infer = infer_eye_like;
  d.eval = eval_eye_like;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = attrs;
    set_default(a, "k", int64_t{0});
    if (!in.empty()) set_default(a, "dtype", static_cast<int64_t>(in[0].dtype));
    return a;
  };
  d.lower = Lowering::ShapeOf;  // a constant once the input's extents are
  return d;
}

}  // namespace isomer
