#pragma once
// Cost-based backtracking search over verified rewrite rules (TASO, Jia et al.,
// SOSP 2019, section 5).
//
// A priority queue holds candidate graphs ordered by cost, starting with the input.
// Each step pops the cheapest, applies every usable rule at every match (up to a
// limit per rule), cleans the result up with the template passes (a rule that
// concatenates two weight tensors leaves a Concat of constants that folding turns
// into one weight), and queues each new graph whose cost is below alpha * best.
// alpha > 1 lets the search go through slightly worse graphs to reach better ones
// (merging two convolutions costs a Concat and a Split before it pays off). The
// best graph seen is returned when the queue is empty or the budget (wall time,
// expansions) is spent; with a zero budget the input comes back unchanged.
//
// Only rules that are usable (proved, or field-tested with error < 2^-60) are ever
// applied; a rule whose target is a valid pattern is also used from right to left
// (equivalence is symmetric; see reversed_rule). The graph cost is the sum of the
// costs of its operator nodes (as TASO: each operator instance priced alone by the
// cost model, memoized per instance).
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"
#include "rules/rule.h"

namespace isomer {

struct SearchOptions {
  double budget_s = 10;             // wall-clock limit
  size_t max_expansions = 100000;   // graphs popped from the queue
  double alpha = 1.05;              // keep candidates costing < alpha * best
  size_t max_matches_per_rule = 32; // per graph and rule
  size_t max_queue = 2000;          // the cheapest are kept when the queue grows past this
  PassOptions passes;               // cleanup after each rewrite (template passes)
  std::vector<std::string> disabled;  // rule names not to use (culprit search, users)
};

struct SearchStats {
  size_t rules_used = 0;        // usable rules, reversed ones included
  size_t expanded = 0;          // graphs popped and rewritten
  size_t generated = 0;         // rewrites that built a new graph
  size_t duplicates = 0;        // ... of which had been seen before
  size_t pruned = 0;            // ... of which cost >= alpha * best
  double cost_before = 0, cost_after = 0;
  double seconds = 0;
  bool budget_exhausted = false;  // stopped by the budget, not by an empty queue
  // The rules along the path from the input to the best graph (with counts), and
  // the template rules the cleanups applied on that path.
  std::map<std::string, size_t> rules_applied;
};

// Cost of one operator node in milliseconds (its inputs' types are known).
using OpCostFn = std::function<double(const Node&)>;

// The usable rules of `set` the search applies: each rule whose source is a
// pattern, and the reversal of each rule whose target is one too, minus `disabled`.
std::vector<Rule> search_rules(const RuleSet& set, const std::vector<std::string>& disabled = {});

// The best graph found; `g` itself when nothing cheaper was found.
Graph backtracking_search(const Graph& g, const std::vector<Rule>& rules, const OpCostFn& op_cost,
                          const SearchOptions& options = {}, SearchStats* stats = nullptr);

// Loads the rule files `paths` (a directory stands for its *.rules files, sorted)
// into one set; throws Error naming the file on a parse error.
RuleSet load_rule_files(const std::vector<std::string>& paths);

// Where isomer's shipped rule set is: $ISOMER_RULES if set, else the rules/
// directory of the source tree isomer was built from.
std::string default_rules_path();

}  // namespace isomer
