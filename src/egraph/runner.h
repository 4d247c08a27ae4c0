#pragma once
// Equality saturation: rules searched and applied in iterations until nothing changes
// or a limit is reached (egg's Runner). Limits in, a report with the stop reason out.
//
// Each iteration searches every rule that is not banned, then applies all matches,
// then rebuilds. A backoff scheduler (egg's BackoffScheduler) keeps rules with many
// matches (associativity, commutativity-like rewrites) from swamping the e-graph: a
// rule whose matches exceed its limit is banned for some iterations, and both its
// limit and its ban double each time. The run is saturated when an iteration changes
// nothing and no rule was banned.
//
// A match is found again in every later iteration, and applying it again changes
// nothing (its target is in the e-graph, merged with its root). Matches are applied
// once: one found again (the same rule, classes and attribute bindings, canonical) is
// skipped. Re-applying them cost NasNet-A's saturation three quarters of its
// instructions, most of it folding the "enlarge" rule's padded kernels again.
#include <cstddef>
#include <string>
#include <vector>

#include "egraph/egraph.h"
#include "egraph/ematch.h"
#include "rules/match.h"
#include "rules/rule.h"

namespace isomer::eg {

enum class StopReason { Saturated, IterationLimit, NodeLimit, TimeLimit };
const char* stop_reason_name(StopReason r);  // "saturated", "iteration limit", ...

struct RunnerLimits {
  size_t iterations = 30;
  size_t nodes = 20000;   // e-nodes
  double time_s = 10;
};

struct SchedulerOptions {
  size_t match_limit = 1000;  // matches per rule and iteration before a ban
  size_t ban_length = 5;      // iterations
  bool skip_applied = true;   // matches applied in an earlier iteration are not applied again
};

struct RunnerReport {
  StopReason stop = StopReason::Saturated;
  size_t iterations = 0;
  double seconds = 0;
  size_t nodes = 0, classes = 0;
  RuleCounts rules;  // per rule: matches found, applications that changed the e-graph
  size_t skipped = 0;  // matches found again after they were applied, not applied again
};

// E-nodes a rule makes are labelled with its position in `rules` + 1 (ENode::origin).
class Runner {
 public:
  Runner(EGraph& g, std::vector<const Rule*> rules, RunnerLimits limits = {}, SchedulerOptions scheduler = {});
  RunnerReport run();

 private:
  EGraph& g_;
  std::vector<const Rule*> rules_;
  VariadicExpansions expansions_;
  RunnerLimits limits_;
  SchedulerOptions scheduler_;
};

}  // namespace isomer::eg
