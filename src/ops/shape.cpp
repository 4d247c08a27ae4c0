// Operators on shapes: Shape (the extents of a tensor as an int64 vector) and
// ConstantOfShape (a tensor of given extents filled with one value). Shape depends
// only on its input's extents, so the constant folding pass can evaluate it as soon
// as those are static. Both have field semantics: extents are small integers.
#include <algorithm>

#include "ir/float_to_int.h"
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
  for (int64_t d : dims) require(d >= 0, "ConstantOfShape shape " + to_string(dims) + " has a negative dimension");
  return dims;
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

std::vector<Tensor> eval_constant_of_shape(const EvalContext& ctx) {
  const Tensor value = fill_value(ctx.attrs);
  const std::vector<int64_t> dims = ints_of(ctx.in(0));
  return with_raw_type(value.dtype(), [&](auto tag) {
    using U = decltype(tag);
    return std::vector<Tensor>{raw_tensor(value.dtype(), constant_of_shape(dims, raw_array<U>(value).data[0]))};
  });
}

std::vector<FieldArray> field_constant_of_shape(const Attributes& attrs, std::span<const FieldArray> in) {
  const double v = fill_value(attrs).f64_at(0);
  require(v == std::floor(v) && std::fabs(v) < 9.0e15, "ConstantOfShape value is not an integer; it has no field value");
  return {constant_of_shape(field_ints(in[0]), Fp::from_signed(checked_float_to_int<int64_t>(v, "ConstantOfShape value")))};
}

std::vector<SymArray> sym_constant_of_shape(const Attributes& attrs, std::span<const SymArray> in) {
  return {constant_of_shape(sym_ints(in[0]), Sym(fill_value(attrs).f64_at(0)))};
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

}  // namespace isomer
