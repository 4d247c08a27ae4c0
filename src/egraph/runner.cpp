#include "egraph/runner.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "egraph/ematch.h"

namespace isomer::eg {

namespace {

// Matches applied so far, by rule and canonical bindings: applying one again would
// rebuild its target (folds included) only to find it merged with its root already.
// A match that was not applicable is not remembered: a class that becomes constant
// later may let its folds through.
class AppliedMatches {
 public:
  // Whether `m` of `rule` was applied before (its classes are canonical now).
  bool contains(const EGraph& g, const Rule* rule, const EMatch& m) const {
    Entry e = entry(g, rule, m);
    auto it = table_.find(e.hash);
    if (it == table_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [&](const Entry& o) { return same(o, e); });
  }
  void insert(const EGraph& g, const Rule* rule, const EMatch& m) {
    Entry e = entry(g, rule, m);
    table_[e.hash].push_back(std::move(e));
  }
  // After a rebuild: every entry's classes canonical again, so that it is found.
  void canonicalize(const EGraph& g) {
    std::unordered_map<size_t, std::vector<Entry>> old;
    old.swap(table_);
    for (auto& [h, entries] : old)
      for (Entry& e : entries) {
        for (ClassId& c : e.classes)
          if (c != kNoClass) c = g.find(c);
        e.hash = hash_of(e);
        std::vector<Entry>& bucket = table_[e.hash];
        if (std::none_of(bucket.begin(), bucket.end(), [&](const Entry& o) { return same(o, e); }))
          bucket.push_back(std::move(e));
      }
  }

 private:
  struct Entry {
    const Rule* rule = nullptr;
    std::vector<ClassId> classes;  // roots, operands, source pattern nodes
    std::vector<std::optional<AttrValue>> attrs;
    std::vector<std::optional<Attributes>> attr_sets;
    size_t hash = 0;
  };
  static void mix(size_t& h, size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }
  static size_t hash_of(const Entry& e) {
    size_t h = std::hash<const void*>{}(e.rule);
    for (ClassId c : e.classes) mix(h, c);
    for (const auto& a : e.attrs) mix(h, a ? attr_hash(*a) + 1 : 0);
    for (const auto& a : e.attr_sets) mix(h, a ? a->hash() + 1 : 0);
    return h;
  }
  static Entry entry(const EGraph& g, const Rule* rule, const EMatch& m) {
    Entry e;
    e.rule = rule;
    auto put = [&](const std::vector<ClassId>& cs) {
      e.classes.push_back(static_cast<ClassId>(cs.size()));  // keeps the three lists apart
      for (ClassId c : cs) e.classes.push_back(c == kNoClass ? kNoClass : g.find(c));
    };
    put(m.roots);
    put(m.operands);
    put(m.node_classes);
    e.attrs = m.attrs;
    e.attr_sets = m.attr_sets;
    e.hash = hash_of(e);
    return e;
  }
  static bool same(const Entry& a, const Entry& b) {
    if (a.hash != b.hash || a.rule != b.rule || a.classes != b.classes || a.attrs.size() != b.attrs.size() ||
        a.attr_sets.size() != b.attr_sets.size())
      return false;
    for (size_t i = 0; i < a.attrs.size(); ++i)
      if (a.attrs[i].has_value() != b.attrs[i].has_value() || (a.attrs[i] && !attr_equal(*a.attrs[i], *b.attrs[i])))
        return false;
    for (size_t i = 0; i < a.attr_sets.size(); ++i)
      if (a.attr_sets[i].has_value() != b.attr_sets[i].has_value() || (a.attr_sets[i] && !(*a.attr_sets[i] == *b.attr_sets[i])))
        return false;
    return true;
  }
  std::unordered_map<size_t, std::vector<Entry>> table_;
};

}  // namespace

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
  AppliedMatches applied;
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
        if (scheduler_.skip_applied && applied.contains(g_, rule, m)) {
          ++rep.skipped;
          continue;
        }
        const ApplyResult result = apply_ematch(g_, *rule, m);
        if (result == ApplyResult::Applied) ++rep.rules[rules_[r]->name].applications;
        if (scheduler_.skip_applied && result != ApplyResult::NotApplicable) applied.insert(g_, rule, m);
        if (g_.num_nodes() >= limits_.nodes) break;
      }
      if (elapsed() >= limits_.time_s) break;
    }
    g_.set_origin(0);
    g_.rebuild();
    if (scheduler_.skip_applied && g_.merges() != merges_before) applied.canonicalize(g_);
    const bool changed =
        g_.merges() != merges_before || g_.num_nodes() != nodes_before || g_.num_classes() != classes_before;
    if (!changed && !any_banned) return done(StopReason::Saturated);
  }
}

}  // namespace isomer::eg
