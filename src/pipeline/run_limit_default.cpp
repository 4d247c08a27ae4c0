#include "pipeline/run_limit_default.h"

#include <algorithm>
#include <vector>

#include "ops/fold_cost.h"

namespace isomer {

double default_run_limit_seconds(const Graph& g) {
  constexpr double kFlopsPerSecond = 1e9, kWeightBytesPerSecond = 1e8, kSecondsPerNode = 1e-4, kMargin = 20,
                   kFloorSeconds = 10;
  double flops = 0;
  size_t nodes = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
    ++nodes;
    std::vector<TensorType> in;
    for (const Value& v : n->inputs()) in.push_back(v.present() ? v.type() : TensorType{});
    if (std::optional<double> f = fold_flops(n->op_type(), n->attrs(), in, n->output_types())) flops += *f;
  }
  const double seconds = flops / kFlopsPerSecond + static_cast<double>(g.constant_bytes()) / kWeightBytesPerSecond +
                         static_cast<double>(nodes) * kSecondsPerNode;
  return std::max(kFloorSeconds, kMargin * seconds);
}

}  // namespace isomer
