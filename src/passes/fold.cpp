// Folding: values computable at optimization time become constants.
#include <algorithm>

#include "ops/op.h"
#include "passes/rewrite.h"

namespace isomer::passes {

namespace {

// op(c0, c1, ...) => constant(op.eval(c0, c1, ...))   [deterministic op, result <= fold_limit_bytes]
Replacement fold_constants(const MatchContext& ctx) {
  const Node& node = ctx.node;
  if (!node.op()->props.deterministic) return {};
  std::vector<Tensor> args;
  for (const Value& v : ctx.in) {
    if (!v.present()) {
      args.emplace_back();  // an omitted optional input, as the evaluator passes it
      continue;
    }
    const Tensor* t = v.constant();
    if (!t || !is_numeric(t->dtype())) return {};
    args.push_back(*t);
  }
  // Size the result from the shape rule before computing it: a large Expand or
  // ConstantOfShape must not be materialized at all.
  size_t bytes = 0;
  for (const TensorType& t : ctx.output_types()) {
    std::optional<int64_t> numel = num_elements(t.shape);
    if (!numel || !is_numeric(t.dtype)) return {};
    bytes += static_cast<size_t>(*numel) * dtype_size(t.dtype);
  }
  if (bytes > ctx.opts.fold_limit_bytes) return {};

  EvalContext eval_ctx{node.attrs(), args, node.num_outputs()};
  std::vector<Tensor> results = node.op()->eval(eval_ctx);
  if (results.size() != node.num_outputs()) return {};
  Replacement out;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string name = i < node.output_names().size() ? node.output_names()[i] : "";
    out.push_back(ctx.builder.constant(std::move(results[i]), std::move(name)));
  }
  return out;
}

// The dims [start, end) that Shape(x) reports (ONNX Shape-15 start/end semantics).
std::pair<int64_t, int64_t> shape_range(const Node& shape_node, int64_t rank) {
  auto clamp_axis = [rank](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
  int64_t start = clamp_axis(shape_node.attrs().get_int("start", 0));
  int64_t end = clamp_axis(shape_node.attrs().get_int("end", rank));
  return {start, std::max(start, end)};
}

// Shape(x) => constant(dims of x)   [the reported dims of x are static]
Replacement fold_shape_of_static(const MatchContext& ctx) {
  const Shape& x = ctx.in[0].type().shape;
  auto [start, end] = shape_range(ctx.node, static_cast<int64_t>(x.size()));
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) {
    if (!x[d].is_static()) return {};
    dims.push_back(x[d].value);
  }
  return {ctx.builder.constant(Tensor::vector_i64(dims))};
}

// Gather(Shape(x), c) => constant(dims of x at c)   [those dims are static, others may be symbolic]
Replacement fold_gather_of_shape(const MatchContext& ctx) {
  if (!is_op(ctx.in[0], "Shape")) return {};
  if (int64_t axis = ctx.node.attrs().get_int("axis", 0); axis != 0 && axis != -1) return {};
  const Tensor* indices = ctx.in[1].constant();
  if (!indices || !is_integer(indices->dtype())) return {};
  const Node& shape_node = *ctx.in[0].node;
  const Shape& x = shape_node.inputs()[0].type().shape;
  auto [start, end] = shape_range(shape_node, static_cast<int64_t>(x.size()));
  const int64_t len = end - start;
  std::vector<int64_t> dims;
  for (int64_t i : indices->to_i64()) {
    if (i < 0) i += len;
    if (i < 0 || i >= len || !x[start + i].is_static()) return {};
    dims.push_back(x[start + i].value);
  }
  return {ctx.builder.constant(Tensor::from_i64(DType::Int64, indices->dims(), dims))};
}

// Both forms count as "fold-shape": they read static dims off a value's type.
Replacement fold_shape(const MatchContext& ctx) {
  if (ctx.node.op_type() == "Shape") return fold_shape_of_static(ctx);
  if (ctx.node.op_type() == "Gather") return fold_gather_of_shape(ctx);
  return {};
}

}  // namespace

const std::vector<Rule>& fold_rules() {
  static const std::vector<Rule> rules{
      {"fold-constants", fold_constants},
      {"fold-shape", fold_shape},
  };
  return rules;
}

}  // namespace isomer::passes
