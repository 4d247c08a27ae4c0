// Elimination: operators that compute nothing (or undo each other) are bypassed.
#include <algorithm>
#include <numeric>

#include "ops/op.h"
#include "passes/rewrite.h"

namespace isomer::passes {

namespace {

bool is_reshape_like(const Value& v) {
  return is_op(v, "Reshape") || is_op(v, "Flatten") || is_op(v, "Squeeze") || is_op(v, "Unsqueeze");
}

// Output 0 has the type of input 0 and that type is fully static.
bool keeps_static_type(const MatchContext& ctx) {
  return is_static_type(ctx.in[0].type()) && ctx.output_types()[0] == ctx.in[0].type();
}

// Identity(x) => x
Replacement eliminate_identity(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Identity") return {};
  return {ctx.in[0]};
}

// Dropout(x) => x   [inference mode, mask output unread]
Replacement eliminate_dropout(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Dropout") return {};
  if (ctx.in.size() > 2 && ctx.in[2].present()) {
    std::optional<std::vector<int64_t>> training = constant_ints(ctx.in[2]);
    if (!training || training->empty() || (*training)[0] != 0) return {};
  }
  if (ctx.node.num_outputs() == 1) return {ctx.in[0]};
  if (ctx.node.num_outputs() != 2 || ctx.output_used(1)) return {};
  // The mask is read by no one: any bool value can stand in for it, and vanishes.
  Value unread_mask = ctx.builder.constant(Tensor::from_i64(DType::Bool, {}, std::vector<int64_t>{1}));
  return {ctx.in[0], unread_mask};
}

// Reshape|Flatten|Squeeze|Unsqueeze(x) => x   [output type == input type, static]
Replacement eliminate_reshape_noop(const MatchContext& ctx) {
  Value self = ctx.node.output(0);
  if (!is_reshape_like(self) || !keeps_static_type(ctx)) return {};
  return {ctx.in[0]};
}

// The permutation a Transpose node applies (ONNX default: reverse the axes).
std::vector<int64_t> transpose_perm(const Node& transpose) {
  int64_t rank = transpose.inputs()[0].type().rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
  return transpose.attrs().get_ints("perm", reversed);
}

// Transpose(Transpose(x, p), q) => Transpose(x, p[q[i]]), or x if that is the identity
Replacement eliminate_transpose_pair(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Transpose" || !is_op(ctx.in[0], "Transpose")) return {};
  const Node& inner = *ctx.in[0].node;
  std::vector<int64_t> p = transpose_perm(inner);
  std::vector<int64_t> q = transpose_perm(ctx.node);
  if (p.size() != q.size()) return {};
  std::vector<int64_t> composed;
  for (int64_t axis : q) {
    if (axis < 0 || axis >= static_cast<int64_t>(p.size())) return {};
    composed.push_back(p[static_cast<size_t>(axis)]);
  }
  const Value& x = inner.inputs()[0];
  bool identity = true;
  for (size_t i = 0; i < composed.size(); ++i) identity = identity && composed[i] == static_cast<int64_t>(i);
  if (identity) return {x};
  return {ctx.builder.op1("Transpose", {x}, {{"perm", composed}})};
}

// Reshape(Reshape|Flatten|Squeeze|Unsqueeze(x), s) => Reshape(x, s)   [final shape static, no 0 dims]
Replacement eliminate_reshape_chain(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Reshape" || !is_reshape_like(ctx.in[0])) return {};
  const TensorType& out = ctx.output_types()[0];
  if (!is_static_type(out)) return {};
  std::vector<int64_t> dims = static_dims(out.shape);
  // A 0 in a Reshape shape means "copy this dim" unless allowzero; avoid the question.
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return {};
  const Value& x = ctx.in[0].node->inputs()[0];
  return {ctx.builder.op1("Reshape", {x, ctx.builder.constant(Tensor::vector_i64(dims))})};
}

// Cast(x, to = dtype(x)) => x
Replacement eliminate_cast_noop(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Cast") return {};
  if (ctx.node.attrs().get_int("to") != static_cast<int64_t>(ctx.in[0].type().dtype)) return {};
  return {ctx.in[0]};
}

// Slice(x, starts, ends, axes, steps = 1) => x   [output type == input type, static]
Replacement eliminate_slice_noop(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Slice" || !keeps_static_type(ctx)) return {};
  // With step 1 an unchanged extent means the whole axis; a negative step of the
  // same extent would reverse it.
  if (ctx.in.size() > 4 && ctx.in[4].present()) {
    std::optional<std::vector<int64_t>> steps = constant_ints(ctx.in[4]);
    if (!steps || std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s != 1; })) return {};
  }
  return {ctx.in[0]};
}

// Pad(x, pads = 0) => x
Replacement eliminate_pad_noop(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Pad" || ctx.in.size() < 2) return {};
  std::optional<std::vector<int64_t>> pads = constant_ints(ctx.in[1]);
  if (!pads || std::any_of(pads->begin(), pads->end(), [](int64_t p) { return p != 0; })) return {};
  return {ctx.in[0]};
}

// Concat(x) => x
Replacement eliminate_concat_single(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Concat" || ctx.in.size() != 1) return {};
  return {ctx.in[0]};
}

// Expand(x, s) => x   [output type == input type, static]
Replacement eliminate_expand_noop(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Expand" || !keeps_static_type(ctx)) return {};
  return {ctx.in[0]};
}

}  // namespace

const std::vector<Rule>& eliminate_rules() {
  static const std::vector<Rule> rules{
      {"eliminate-identity", eliminate_identity},
      {"eliminate-dropout", eliminate_dropout},
      {"eliminate-reshape-noop", eliminate_reshape_noop},
      {"eliminate-transpose-pair", eliminate_transpose_pair},
      {"eliminate-reshape-chain", eliminate_reshape_chain},
      {"eliminate-cast-noop", eliminate_cast_noop},
      {"eliminate-slice-noop", eliminate_slice_noop},
      {"eliminate-pad-noop", eliminate_pad_noop},
      {"eliminate-concat-single", eliminate_concat_single},
      {"eliminate-expand-noop", eliminate_expand_noop},
  };
  return rules;
}

}  // namespace isomer::passes
