#include "passes/rewrite.h"

namespace isomer::passes {

UseCounts count_uses(const Graph& g) {
  UseCounts uses;
  for (const NodePtr& n : g.topo_order())
    for (const Value& v : n->inputs())
      if (v.present()) ++uses[v];
  for (const Value& v : g.outputs()) ++uses[v];
  return uses;
}

const std::vector<TensorType>& MatchContext::output_types() const {
  if (!output_types_cache)
    output_types_cache = in == node.inputs() ? node.output_types() : node.with_inputs(in)->output_types();
  return *output_types_cache;
}

size_t MatchContext::input_uses(size_t i) const {
  if (i >= node.inputs().size() || !node.inputs()[i].present()) return 0;
  auto it = uses.find(node.inputs()[i]);
  return it == uses.end() ? 0 : it->second;
}

bool MatchContext::output_used(size_t i) const {
  auto it = uses.find(Value{node.shared_from_this(), static_cast<uint32_t>(i)});
  return it != uses.end() && it->second > 0;
}

bool is_op(const Value& v, std::string_view op_type, uint32_t index) {
  return v.present() && v.index == index && v.node->kind() == NodeKind::Op && v.node->op_type() == op_type;
}

std::optional<std::vector<int64_t>> constant_ints(const Value& v) {
  const Tensor* t = v.constant();
  if (!t || !is_integer(t->dtype())) return std::nullopt;
  return t->to_i64();
}

bool is_static_type(const TensorType& t) { return t.dtype != DType::Undefined && is_static(t.shape); }

std::optional<std::vector<double>> per_channel_values(const Tensor& c, int64_t rank, int64_t channels) {
  if (rank < 2 || c.rank() > rank || !is_float(c.dtype())) return std::nullopt;
  const int64_t pad = rank - c.rank();
  for (int64_t a = 0; a < c.rank(); ++a) {
    int64_t d = c.dims()[a];
    if (d == 1) continue;
    if (a + pad != 1 || d != channels) return std::nullopt;
  }
  std::vector<double> values = c.to_f64();
  if (values.size() == 1) return std::vector<double>(static_cast<size_t>(channels), values[0]);
  if (static_cast<int64_t>(values.size()) != channels) return std::nullopt;
  return values;
}

}  // namespace isomer::passes
