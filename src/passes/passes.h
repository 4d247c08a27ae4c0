#pragma once
// The template passes: the classic graph simplifications (no-op elimination,
// Conv/Gemm fusions, shape folding) as the rule file rules/templates.rules, run to a
// fixed point by a greedy engine over the same compiled patterns the search and the
// e-graph match; plus what is not a rewrite of a pattern, in C++: constant folding
// (one generic rule over the operator table), CSE and DCE. Each rewrite has a stable
// name that appears in reports and JSON; `simplify` counts how often each fired.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rules/rule.h"

namespace isomer {

struct PassStats {
  std::map<std::string, size_t> applied;  // rule name -> times applied (rules that fired only)
  size_t iterations = 0;                  // rounds run, including the one that found nothing to do
  // Folds left to the runtime by the fold budget (PassOptions' fold limits): the node
  // and why, one line each, in the order first met.
  std::vector<std::string> fold_skipped;
};

struct PassOptions {
  size_t max_iterations = 32;
  size_t fold_limit_bytes = 64 << 20;  // don't materialize constants bigger than this
  // Folding runs at optimization time and writes its results into the model: a fold
  // whose arithmetic is larger than this (a product of two 2048x2048 weights is 1.7e10)
  // is left to the runtime,
  double fold_flops_limit = 4e9;
  // and a call adds at most this many bytes of constants beyond what folding removes (a
  // scalar expanded to a 4 MB bias, an outer product of two vectors).
  size_t fold_growth_bytes = 1 << 20;
  std::vector<std::string> disabled;   // rule names (see template_rule_names)
  // Leave out the rules marked `leave-to-search` (the pass that runs before
  // `--search eqsat`, which decides them by price) and `templates-only` (which the
  // search's cleanup pass applies to its result: the e-graph never sees them).
  bool defer_to_search = false;
};

// Applies all template passes to a fixed point (or max_iterations rounds). A graph
// with nothing to do comes back as the same graph. Graph interface (inputs, output
// names, element types and ranks of outputs) never changes; an output's symbolic
// dims may become static when folding makes them known. Throws Error for an
// unknown rule name in opts.disabled, or for "dce", which cannot be disabled.
//
// One round: fold constants and merge equal nodes (one rebuild), then match every
// template rule at every node (topological order, rules in file order, the first
// match at a node wins, a node is rewritten by one match per round) and apply all
// chosen matches in one rebuild. A match is chosen only where it recomputes nothing
// (see rules/templates.rules).
//
// What the counts mean:
//   "fold-constants" - operators whose inputs were all constants, evaluated.
//   "cse" - operator nodes merged into a structurally equal node.
//   "dce" - operator nodes left without readers by a rewrite elsewhere (the node a
//           rule replaced is counted under that rule, not here). Nodes that were
//           already unreachable when `g` was built are not part of `g` at all, so
//           they cannot be counted here.
//   a template rule's family name (eliminate-dropout for eliminate-dropout/mask).
Graph simplify(const Graph& g, const PassOptions& opts = {}, PassStats* stats = nullptr);

// The stable names of all template rules, in the order they are documented: the C++
// ones (fold-constants, cse, dce), then the families of rules/templates.rules.
std::vector<std::string> template_rule_names();

// The template rules (rules/templates.rules, compiled into isomer), parsed once.
const RuleSet& template_rules();

// What folding may still spend (PassOptions' fold limits); `growth_left` goes down as
// folds add constant bytes.
struct FoldBudget {
  size_t result_bytes = 64 << 20;
  double flops = 4e9;
  size_t growth_left = 1 << 20;
  size_t growth = 1 << 20;  // what growth_left started at
  // The folds the budget left out: the node and why (see PassStats::fold_skipped).
  std::vector<std::string> skipped;
};

// One round's worth of the generic C++ folding: operators whose inputs are all
// constants evaluated (within `budget`), equal nodes merged unless `merge_equal` is
// false. Counts go to `applied` ("fold-constants", "cse").
Graph fold_constants(const Graph& g, FoldBudget& budget, bool merge_equal, std::map<std::string, size_t>& applied);

}  // namespace isomer
