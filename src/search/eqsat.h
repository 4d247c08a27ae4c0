#pragma once
// `--search eqsat`: equality saturation over the verified rules with extraction that
// sees merges (Tensat, Yang et al., MLSys 2021, built on this project's e-graph).
//
//   1. Regions. A model of more than `region_ops` operators is cut, in topological
//      order, at the points where the fewest values cross, into regions saturated
//      separately: search time grows about linearly with the model.
//   2. Saturation. Each region goes into an e-graph (egraph/egraph.h) and the rules
//      (and their reversals) run to saturation or a limit (egraph/runner.h).
//   3. Costs. Each e-node is priced on isomer's runtime (cost/cost.h) as the runtime
//      would run it: a constant computation costs nothing (it is folded); an
//      elementwise operator that reads a convolution or product costs what it adds when
//      fused into it as a post-op (the pair priced together, minus the contraction
//      alone); every other operator is priced alone, views (a Split or Reshape the
//      runtime does not copy) at what the runtime makes of them.
//   4. Extraction. DAG-aware greedy, then (extractor "ilp") the exact ILP warm-started
//      from it (egraph/extract.h). The regions' results are stitched together and the
//      template passes fold what the merges left as constant computations.
//   5. The result is priced whole (CostModel::graph_ms, fusions and views as the
//      runtime runs them) against the input priced whole; if it is not cheaper, the
//      input comes back (`kept_input`). The never-slower guard then times it.
#include "cost/cost.h"
#include "search/search.h"

namespace isomer {

// The regions of `g` (its operator nodes, topologically ordered, cut into groups of at
// most `region_ops` where the fewest values cross).
std::vector<std::vector<NodePtr>> partition_graph(const Graph& g, size_t region_ops);

// `g` rewritten by equality saturation over `rules` (see above).
Graph eqsat_search(const Graph& g, const std::vector<Rule>& rules, cost::CostModel& model,
                   const SearchOptions& options = {}, SearchStats* stats = nullptr);

}  // namespace isomer
