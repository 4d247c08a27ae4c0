#include "egraph/runner.h"

#include <algorithm>
#include <chrono>

#include "egraph/ematch.h"

namespace isomer::eg {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Saturated: return "saturated";
    case StopReason::IterationLimit: return "iteration limit";
    case StopReason::NodeLimit: return "node limit";
    case StopReason::TimeLimit: return "time limit";
  }
  return "?";
}

Runner::Runner(EGraph& g, std::vector<const Rule*> rules, RunnerLimits limits, SchedulerOptions scheduler)
    : g_(g), rules_(std::move(rules)), limits_(limits), scheduler_(scheduler) {}

RunnerReport Runner::run() {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  struct Backoff {
    size_t times_banned = 0;
    size_t banned_until = 0;
  };
  std::vector<Backoff> backoff(rules_.size());
  // Origins (rule position + 1) of the variadic rules: what they make are merges.
  std::vector<bool> merge_origins(rules_.size() + 1, false);
  for (size_t r = 0; r < rules_.size(); ++r) merge_origins[r + 1] = rules_[r]->variadic != nullptr;
  RunnerReport rep;
  g_.rebuild();
  auto done = [&](StopReason why) {
    rep.stop = why;
    rep.seconds = elapsed();
    rep.nodes = g_.num_nodes();
    rep.classes = g_.num_classes();
    return rep;
  };
  for (size_t iter = 0;; ++iter) {
    if (iter >= limits_.iterations) return done(StopReason::IterationLimit);
    if (elapsed() >= limits_.time_s) return done(StopReason::TimeLimit);
    if (g_.num_nodes() >= limits_.nodes) return done(StopReason::NodeLimit);
    ++rep.iterations;
    const size_t merges_before = g_.merges(), nodes_before = g_.num_nodes(), classes_before = g_.num_classes();
    bool any_banned = false;
    // Search every rule first, then apply (matches refer to the e-graph as it was).
    OpIndex index(g_);
    // Per rule (by position): matches, each with the rule to apply (a variadic rule's
    // expansion for the match's size, or the rule itself).
    std::vector<std::pair<size_t, std::vector<std::pair<const Rule*, EMatch>>>> found;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (elapsed() >= limits_.time_s) return done(StopReason::TimeLimit);
      Backoff& b = backoff[r];
      if (iter < b.banned_until) {
        any_banned = true;
        continue;
      }
      const size_t limit = scheduler_.match_limit << b.times_banned;
      std::vector<std::pair<const Rule*, EMatch>> ms;
      if (rules_[r]->variadic) {
        ms = ematch_variadic(g_, *rules_[r], index, limit, expansions_, merge_origins);
      } else {
        for (EMatch& m : ematch(g_, *rules_[r], index, limit)) ms.emplace_back(rules_[r], std::move(m));
      }
      if (ms.size() > limit) {
        b.banned_until = iter + (scheduler_.ban_length << b.times_banned);
        ++b.times_banned;
        any_banned = true;
        continue;
      }
      if (ms.empty()) continue;
      rep.rules[rules_[r]->name].matches += ms.size();
      found.emplace_back(r, std::move(ms));
    }
    for (auto& [r, ms] : found) {
      g_.set_origin(static_cast<uint32_t>(r) + 1);
      for (const auto& [rule, m] : ms) {
        if (apply_ematch(g_, *rule, m) == ApplyResult::Applied) ++rep.rules[rules_[r]->name].applications;
        if (g_.num_nodes() >= limits_.nodes) break;
      }
      if (elapsed() >= limits_.time_s) break;
    }
    g_.set_origin(0);
    g_.rebuild();
    const bool changed =
        g_.merges() != merges_before || g_.num_nodes() != nodes_before || g_.num_classes() != classes_before;
    if (!changed && !any_banned) return done(StopReason::Saturated);
  }
}

}  // namespace isomer::eg
