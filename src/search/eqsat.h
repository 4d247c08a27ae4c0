#pragma once
// `--search eqsat`: equality saturation over the verified rules with extraction that
// sees merges (Tensat, Yang et al., MLSys 2021, built on this project's e-graph).
//
//   1. Regions. A model of more than `region_ops` operators is cut, in topological
//      order, at the points where the fewest values cross, into regions saturated
//      separately: search time grows about linearly with the model.
//   2. Saturation. Each region goes into an e-graph (egraph/egraph.h) and the rules
//      (and their reversals) run to saturation or a limit (egraph/runner.h), every
//      region before anything is priced: if no rule changed any e-graph, the input
//      comes back unpriced, and a region no rule changed is passed through without
//      pricing or extraction.
//   3. Costs. The input is priced whole once and each step's cost is charged to the
//      node it computes (search/enode_cost.h): an e-node like an input node costs that
//      node's share (a post-op the runtime fuses, a view or an in-place concatenation
//      costs nothing), so extracting the input unchanged costs what its plan says. New
//      e-nodes are priced alone on the runtime, once per shape, on the same scale.
//   4. Extraction. DAG-aware greedy, then (extractor "ilp") the exact ILP warm-started
//      from it (egraph/extract.h). The regions' results are stitched together and the
//      template passes fold what the merges left as constant computations.
//   5. The result is priced whole (CostModel::graph_ms, fusions and views as the
//      runtime runs them) against the input priced whole; unless it is cheaper by
//      `min_gain` or more, the input comes back (`kept_input`). The never-slower
//      guard then times it.
#include "cost/cost.h"
#include "search/search.h"

namespace isomer {

// The regions of `g` (its operator nodes, topologically ordered, cut into groups of at
// most `region_ops` where the fewest values cross).
std::vector<std::vector<NodePtr>> partition_graph(const Graph& g, size_t region_ops);

// The rules the e-graph uses out of `rules`: every rule whose roots are joined, but
// no reversal that adds operators (unless `expanding_reversals`), and no two-root
// merge of operators a variadic rule merges n at a time (it would only add every
// subset of a group on top: 2^n forms of NasRNN's 8 gates). A two-root rule over
// such operators that keeps their number (a 1x1 convolution enlarged beside a 3x3
// one) is used.
std::vector<const Rule*> eqsat_rules(const std::vector<Rule>& rules, bool expanding_reversals);

// `g` rewritten by equality saturation over `rules` (see above).
Graph eqsat_search(const Graph& g, const std::vector<Rule>& rules, cost::CostModel& model,
                   const SearchOptions& options = {}, SearchStats* stats = nullptr);

}  // namespace isomer
