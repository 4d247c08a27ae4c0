#pragma once
// The template passes: the hand-written baseline of classic graph optimizations
// (constant folding, CSE, DCE, no-op elimination, Conv/Gemm fusions), run to a
// fixed point. Each rewrite has a stable name that appears in reports and JSON;
// `simplify` counts how often each one was applied.
//
// Every rewrite is "match a small pattern at one node, return replacement values",
// applied through isomer::rebuild(); see passes/rewrite.h for the rule interface.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer {

struct PassStats {
  std::map<std::string, size_t> applied;  // rule name -> times applied (rules that fired only)
  size_t iterations = 0;                  // rounds run, including the one that found nothing to do
};

struct PassOptions {
  size_t max_iterations = 32;
  size_t fold_limit_bytes = 64 << 20;  // don't materialize constants bigger than this
  std::vector<std::string> disabled;   // rule names (see template_rule_names)
};

// Applies all template passes to a fixed point (or max_iterations rounds). A graph
// with nothing to do comes back as the same graph. Graph interface (inputs, output
// names, element types and ranks of outputs) never changes; an output's symbolic
// dims may become static when folding makes them known. Throws Error for an
// unknown rule name in opts.disabled, or for "dce", which cannot be disabled.
//
// What the counts mean:
//   "cse" - operator nodes merged into a structurally equal node.
//   "dce" - operator nodes left without readers by a rewrite elsewhere (the node a
//           rule replaced is counted under that rule, not here). Nodes that were
//           already unreachable when `g` was built are not part of `g` at all, so
//           they cannot be counted here.
Graph simplify(const Graph& g, const PassOptions& opts = {}, PassStats* stats = nullptr);

// The stable names of all template rules, in the order they are documented.
std::vector<std::string> template_rule_names();

}  // namespace isomer
