#include "ops/kernels.h"

#include "ir/invalid_node.h"

namespace isomer::ops {

std::vector<TensorType> same_as_input0(const InferContext& ctx) { return {ctx.in(0)}; }

std::vector<TensorType> broadcast_inputs(const InferContext& ctx) {
  TensorType out = ctx.in(0);
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    require(ctx.in(i).dtype == out.dtype, "input " + std::to_string(i) + " has type " +
                                              std::string(dtype_name(ctx.in(i).dtype)) + ", expected " +
                                              std::string(dtype_name(out.dtype)));
    out.shape = broadcast_shapes(out.shape, ctx.in(i).shape);
  }
  return {out};
}

void require_float(const TensorType& t, const std::string& what) {
  require(is_float(t.dtype), what + " must be a float tensor, got " + std::string(dtype_name(t.dtype)));
}

std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, size_t i) {
  const Tensor* t = ctx.constant(i);
  if (!t) return std::nullopt;
  require(is_integer(t->dtype()), "input " + std::to_string(i) + " must be an integer tensor");
  return t->to_i64();
}

void require_constant_indices(const InferContext& ctx, size_t i, const std::function<std::optional<int64_t>(size_t)>& extent,
                              std::string_view op) {
  const std::optional<std::vector<int64_t>> v = constant_ints(ctx, i);
  if (!v) return;
  for (size_t k = 0; k < v->size(); ++k) {
    const int64_t x = (*v)[k];
    const std::optional<int64_t> e = extent(k);
    require_valid(!e || (x >= -*e && x < *e), std::string(op) + " index " + std::to_string(x) +
                                                  " is out of range for an axis of extent " + std::to_string(e.value_or(0)));
  }
}

std::vector<int64_t> ints_of(const Tensor& t) {
  require(is_integer(t.dtype()), "expected an integer tensor, got " + std::string(dtype_name(t.dtype())));
  return t.to_i64();
}

}  // namespace isomer::ops

namespace isomer::ops {

void set_default(Attributes& attrs, const std::string& name, AttrValue value) {
  if (!attrs.has(name)) attrs.set(name, std::move(value));
}

void canonical_axis(Attributes& attrs, const std::string& name, int64_t dflt, int64_t rank) {
  int64_t axis = attrs.get_int(name, dflt);
  if (rank >= 0 && axis < 0 && axis >= -rank) axis += rank;
  attrs.set(name, axis);
}

int64_t input_rank(std::span<const TensorType> inputs, size_t i) {
  if (i >= inputs.size() || inputs[i].dtype == DType::Undefined) return -1;
  return static_cast<int64_t>(inputs[i].rank());
}

}  // namespace isomer::ops
