#pragma once
// The search strategies over the verified rules, behind one small interface (egg's
// shape): typed options in (SearchOptions), a graph and a report out (SearchStats:
// why it stopped, per-rule match and application counts, what the result used).
// `backtrack` is below; `eqsat` (equality saturation with DAG extraction) is in
// search/eqsat.h. Both match the same compiled patterns as the template passes.
//
// Backtracking: the cost-based search of TASO (Jia et al., SOSP 2019, section 5).
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

#include <nlohmann/json.hpp>

#include "cost/cost.h"
#include "egraph/runner.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "rules/match.h"
#include "rules/rule.h"

namespace isomer {

// Why a search stopped (egg's StopReason): it ran out of things to try, or a limit.
using StopReason = eg::StopReason;

// The options of both strategies (typed, builder-friendly: set what you need).
struct SearchOptions {
  double budget_s = 10;             // wall-clock limit (both)
  PassOptions passes;               // cleanup after rewriting (template passes)
  std::vector<std::string> disabled;  // rule names (or families) not to use (culprit search, users)
  // backtrack
  size_t max_expansions = 100000;   // graphs popped from the queue
  double alpha = 1.05;              // keep candidates costing < alpha * best
  size_t max_matches_per_rule = 32; // per graph and rule
  size_t max_queue = 2000;          // the cheapest are kept when the queue grows past this
  // eqsat
  size_t iteration_limit = 30;      // saturation iterations per region
  size_t node_limit = 20000;        // e-nodes per region
  size_t match_limit = 1000;        // backoff scheduler: matches per rule and iteration before a ban
  size_t ban_length = 5;            // backoff scheduler: iterations a first ban lasts
  size_t region_ops = 400;          // operators per region of a large model
  std::string extractor = "ilp";    // "greedy", or "ilp" (exact, warm-started from greedy)
  // Reversed rules whose target has more operators than their source (x + x into
  // x - (-x): the reversals of simplifications) only grow the e-graph with forms that
  // are never cheaper; they are left out unless this is set.
  bool expanding_reversals = false;
  double ilp_time_s = 10;           // the ILP's limit per region
  // The result replaces the input only if priced at least this fraction cheaper: a
  // different graph within the cost model's error (NasRNN at batch 16: 7.12 -> 7.11
  // ms predicted, 2% slower measured) is churn, not a win.
  double min_gain = 0.005;
  // Extents of the model's open input dims where the search prices it (optimize
  // gives the drawn inputs' or the user's: check/open_dims.h); an open dim not here
  // is priced at 1.
  std::map<std::string, int64_t> bindings;
  // Lines saying how long work is going (pricing operators on the runtime); none if empty.
  std::function<void(const std::string&)> progress;
};

// What a search did. Both strategies fill the common part; each its own.
struct SearchStats {
  std::string strategy;         // "backtrack" or "eqsat"
  StopReason stop = StopReason::Saturated;
  double seconds = 0;           // the whole search
  // eqsat: processor time of the whole search, every thread of the process (on a
  // machine other processes load, the wall time above says how long it waited too).
  double cpu_seconds = 0;
  size_t rules_used = 0;        // usable rules, reversed ones included
  RuleCounts rules;             // per rule: matches found, applications
  double cost_before = 0, cost_after = 0;  // the strategy's own cost of input and result (ms)
  // The rules the result was rewritten with: backtrack, along the path from the input
  // to the best graph (and the cleanups' template rules); eqsat, the rules that made
  // e-nodes the extraction chose.
  std::map<std::string, size_t> rules_applied;
  bool budget_exhausted = false;  // stopped by a limit, not because nothing was left
  // backtrack
  size_t expanded = 0;          // graphs popped and rewritten
  size_t generated = 0;         // rewrites that built a new graph
  size_t duplicates = 0;        // ... of which had been seen before
  size_t pruned = 0;            // ... of which cost >= alpha * best
  // eqsat
  size_t regions = 0;           // parts of the model saturated separately
  size_t iterations = 0;        // saturation iterations, all regions
  size_t egraph_nodes = 0, egraph_classes = 0;  // e-graph sizes, all regions
  double saturation_seconds = 0, extraction_seconds = 0;
  double pricing_seconds = 0;   // pricing e-nodes (the input's plan, operators alone), in extraction_seconds
  size_t priced_alone = 0;      // distinct operator shapes priced alone (not in the input's plan)
  size_t timed_runs = 0;        // whole runs the cost model timed to measure new steps (warm-ups not counted)
  size_t graphs_compiled = 0;   // graphs the cost model compiled (the others were priced from kept plans)
  std::string extractor;        // "greedy" or "ilp"
  double extraction_gap = -1;   // ILP: relative optimality gap (0 = optimal, -1 = not run)
  bool extraction_optimal = false;  // ILP proved optimal in every region
  double greedy_cost = 0, ilp_cost = 0;  // DAG costs of the two extractions (ms, sum of regions)
  double greedy_plain_cost = 0;  // greedy's bottom-up pass alone, before its local search (ms)
  double greedy_seconds = 0;     // greedy extraction, all regions (in extraction_seconds)
  size_t cycles_cut = 0;        // extraction: cycles broken
  bool kept_input = false;      // the result priced whole was not cheaper: the input came back
  // eqsat: the result's run time over the input's, both run whole and interleaved,
  // where its price alone could not tell (CostModel::paired_ratio); -1 if not run.
  double measured_ratio = -1;
  // ... and the second highest of its rounds' ratios, the bound that must clear
  // SearchOptions::min_gain (cost::PairedRatio); -1 if not run.
  double measured_ratio_high = -1;
  // ... the A/A noise band of its median (on a log scale), and what they say together
  // (cost::paired_verdict: only a result faster beyond the band is kept); -1 if not run.
  double measured_noise = -1;
  cost::PairedVerdict measured_verdict = cost::PairedVerdict::Same;
  // eqsat: runner-up extractions judged after the first result was rejected (each
  // leaving out one group of its rewrites, search/runner_up.h).
  size_t runner_ups = 0;

  // The fields as the report JSON has them (search_*), and a line for the text report.
  void to_json(nlohmann::ordered_json& j) const;
  std::string to_text(size_t rules_loaded) const;
};

// Cost of one operator node in milliseconds (its inputs' types are known).
using OpCostFn = std::function<double(const Node&)>;

// The usable rules of `set` the search applies: each rule whose source is a
// pattern, and the reversal of each rule whose target is one too, minus `disabled`
// (rule names, `-rev` names, or family names) and the `templates-only` rules.
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
