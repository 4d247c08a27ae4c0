#include "pipeline/guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "cost/cost.h"
#include "ir/error.h"
#include "runtime/runtime.h"

namespace isomer {

namespace {

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string ms_text(double ms) { return fmt(ms < 1 ? "%.3f ms" : ms < 100 ? "%.2f ms" : "%.1f ms", ms); }

std::string rules_text(const std::vector<std::string>& rules) {
  std::string s;
  for (const std::string& r : rules) s += (s.empty() ? "" : ", ") + r;
  return s;
}

std::string clock_text(const std::string& clock, Engine e) {
  if (clock == "thread")
    return e == Engine::OnnxRuntime ? "the calling thread's CPU time (1 intra-op thread)" : "the thread's CPU time (1 thread)";
  if (clock == "process") return "its process's CPU time";
  return "the wall clock";
}

bool smaller(const Graph& g, const Graph& than) {
  return g.num_ops() < than.num_ops() || g.constant_bytes() < than.constant_bytes();
}

std::string size_text(const Graph& g, const Graph& original) {
  return std::to_string(original.num_ops()) + " -> " + std::to_string(g.num_ops()) + " nodes";
}

struct Candidate {
  std::string kind;  // "optimized", "reverted", "templates"
  Graph graph;
  SpeedComparison cmp;
  std::vector<std::string> disabled;
};

// Which of two rewrites (each without some rules) to follow in a bisection: the
// one that is not slower; of two such, the faster unless they are the same within
// noise, then the smaller graph (taking out a folding pass can also remove a
// slowdown that a later fusion made, but it gives up more).
bool better(const Candidate& a, const Candidate& b) {
  using V = SpeedComparison::Verdict;
  const bool a_ok = a.cmp.verdict != V::Slower, b_ok = b.cmp.verdict != V::Slower;
  if (a_ok != b_ok) return a_ok;
  const double noise = std::max(a.cmp.noise, b.cmp.noise);
  if (a_ok && std::fabs(a.cmp.ratio - b.cmp.ratio) <= noise) {
    if (a.graph.num_ops() != b.graph.num_ops()) return a.graph.num_ops() < b.graph.num_ops();
    return a.graph.constant_bytes() <= b.graph.constant_bytes();
  }
  return a.cmp.ratio <= b.cmp.ratio;
}

// Why "the same within noise" does not show that a candidate is not slower (empty:
// it does): nominally slower beyond the 2% floor, or a band wider than
// max_same_noise. The band can be wide (ONNX Runtime at every thread of a busy
// 2-core machine measured +-44%), and "the same" inside it could hide a real
// slowdown; a smaller graph is not worth that risk when the promise is "never
// slower".
std::string not_shown_not_slower(const SpeedComparison& c, const GuardOptions& o) {
  if (c.verdict != SpeedComparison::Verdict::Same) return "";
  if (c.ratio > 1 + o.min_noise) return fmt("nominally %.2fx slower", c.ratio);
  if (c.noise > o.max_same_noise)
    return "the same only within a band of " + fmt("±%.0f%%", 100 * c.noise) +
           ", too wide to show it is not slower (a busy machine: optimize again on a quieter one)";
  return "";
}

// A candidate's run failed on the target; the original's did not.
struct CandidateFailed : Error {
  using Error::Error;
};

class Guard {
 public:
  Guard(const Graph& original, const GuardContext& ctx, const GuardOptions& opts, GuardResult& r)
      : original_(original), ctx_(ctx), opts_(opts), r_(r) {}

  // Measures `g` against the original; nullopt (logged) when it cannot run on the target.
  // `log_result` false: the caller logs the comparison with its decision.
  std::optional<SpeedComparison> measure(const Graph& g, const std::string& label, bool log_result = true) {
    for (const auto& [seen, cmp] : measured_)
      if (same_graph(seen, g)) return cmp;
    if (same_graph(g, original_)) {  // no need to time the original against itself
      r_.log.push_back(label + ": the original graph");
      SpeedComparison same;
      same.ratio = 1;
      same.noise = opts_.min_noise;
      same.before_ms = same.after_ms = first_before_ms_;
      return same;
    }
    std::string why;
    Prepared* p = ctx_.engines->get(g, opts_.target, &why);
    if (!p) {
      r_.log.push_back(label + ": does not run on " + engine_name(opts_.target) + " (" + why + ")");
      return std::nullopt;
    }
    SpeedComparison cmp;
    try {
      cmp = timed(*p);
    } catch (const CandidateFailed& e) {
      r_.log.push_back(label + ": " + e.what());
      return std::nullopt;
    }
    ++r_.comparisons;
    measured_.emplace_back(g, cmp);
    if (log_result) r_.log.push_back(label + ": " + cmp.text());
    return cmp;
  }

  // Measures `g` again, afresh: the earlier comparison is forgotten.
  std::optional<SpeedComparison> remeasure(const Graph& g, const std::string& label, bool log_result = true) {
    std::erase_if(measured_, [&](const auto& seen) { return same_graph(seen.first, g); });
    return measure(g, label, log_result);
  }

  // `g` rewritten without `disabled`, measured.
  std::optional<Candidate> without(const std::vector<std::string>& disabled) {
    const std::string label = "without " + rules_text(disabled);
    Graph g;
    try {
      g = ctx_.rewrite(disabled);
    } catch (const Error& e) {
      r_.log.push_back(label + ": cannot rewrite (" + e.what() + ")");
      return std::nullopt;
    }
    std::optional<SpeedComparison> cmp = measure(g, label);
    if (!cmp) return std::nullopt;
    return Candidate{"reverted", g, *cmp, disabled};
  }

  // The rule among `suspects` (beyond `disabled`) whose removal takes away the
  // slowdown, or the larger part of it; see guard.h.
  std::optional<std::pair<std::string, Candidate>> bisect(std::vector<std::string> suspects,
                                                          const std::vector<std::string>& disabled,
                                                          double ratio_now) {
    auto plus = [&](const std::vector<std::string>& more) {
      std::vector<std::string> d = disabled;
      d.insert(d.end(), more.begin(), more.end());
      return d;
    };
    while (suspects.size() > 1) {
      const auto mid = suspects.begin() + static_cast<std::ptrdiff_t>(suspects.size() / 2);
      std::vector<std::string> lo(suspects.begin(), mid), hi(mid, suspects.end());
      std::optional<Candidate> a = without(plus(lo)), b = without(plus(hi));
      if (!a && !b) return std::nullopt;
      suspects = !b || (a && better(*a, *b)) ? lo : hi;
    }
    std::optional<Candidate> c = without(plus(suspects));
    if (!c) return std::nullopt;
    const bool helps = c->cmp.verdict != SpeedComparison::Verdict::Slower || c->cmp.ratio < ratio_now * (1 - c->cmp.noise);
    if (!helps) return std::nullopt;
    return std::make_pair(suspects[0], *c);
  }

  double first_before_ms_ = 0;
  Prepared* original_prepared_ = nullptr;

 private:
  SpeedComparison timed(Prepared& candidate) {
    SpeedComparison cmp;
    if (!original_prepared_) {  // let go while the other engine confirmed
      std::string why;
      original_prepared_ = ctx_.engines->get(original_, opts_.target, &why);
      if (!original_prepared_) throw CandidateFailed("the original no longer prepares (" + why + ")");
    }
    try {
      cmp = compare_speed(*original_prepared_, candidate, ctx_.inputs->tensors, opts_);
      std::string& recorded = opts_.target == Engine::OnnxRuntime ? r_.onnxruntime_clock : r_.runtime_clock;
      if (opts_.target != Engine::Reference && recorded.empty() && !candidate.clock.empty()) {
        recorded = candidate.clock;
        r_.log.push_back(engine_name(opts_.target) + " times both graphs on " + clock_text(candidate.clock, opts_.target));
      }
      if (opts_.target == Engine::Runtime && r_.runtime_threads.empty() && !candidate.placement.empty()) {
        r_.runtime_threads = candidate.placement;
        r_.log.push_back("isomer's runtime times both graphs on " + candidate.placement);
      }
    } catch (const CandidateFailed&) {
      throw;
    } catch (const Error& e) {
      // Which one failed? The original ran before (the first comparison); a
      // candidate that fails where it runs is one not to write.
      throw CandidateFailed(std::string("fails on ") + engine_name(opts_.target) + " (" + e.what() + ")");
    }
    return cmp;
  }

  const Graph& original_;
  const GuardContext& ctx_;
  const GuardOptions& opts_;
  GuardResult& r_;
  std::vector<std::pair<Graph, SpeedComparison>> measured_;
};

}  // namespace

std::string SpeedComparison::verdict_text() const {
  switch (verdict) {
    case Verdict::Faster: return fmt("%.2fx faster", 1 / ratio);
    case Verdict::Slower: return fmt("%.2fx slower", ratio);
    case Verdict::Same:
      return ratio > 1 ? fmt("the same within noise (%.2fx slower)", ratio)
                       : fmt("the same within noise (%.2fx faster)", 1 / ratio);
  }
  return "";
}

// The verdict is the rounds' median paired ratio; on a busy machine the medians of
// each side's times can point the other way (a slow spell in the candidate's turns).
bool SpeedComparison::medians_disagree() const {
  return before_ms > 0 && after_ms > 0 && (after_ms > before_ms) != (ratio > 1) &&
         std::fabs(std::log(after_ms / before_ms)) > noise;
}

std::string SpeedComparison::paired_verdict_text() const {
  return (medians_disagree() ? "the medians; paired by round: " : "") + verdict_text();
}

std::string SpeedComparison::text() const {
  char buf[224];
  std::string runs = runs_per_round == candidate_runs_per_round
                         ? std::to_string(runs_per_round) + (runs_per_round == 1 ? " run" : " runs")
                         : std::to_string(runs_per_round) + " and " + std::to_string(candidate_runs_per_round) + " runs";
  std::snprintf(buf, sizeof buf, "%s -> %s, %s (%d rounds of %s, noise ±%.1f%%)", ms_text(before_ms).c_str(),
                ms_text(after_ms).c_str(), paired_verdict_text().c_str(), rounds, runs.c_str(), noise * 100);
  return buf;
}

SpeedComparison compare_speed(Prepared& original, Prepared& candidate, const std::vector<Tensor>& inputs,
                              const GuardOptions& opts) {
  // A warm-up run for a graph that has not run yet (first-touch costs), then one
  // timed run each, A then B, which sizes the rounds: a model faster than
  // min_round_ms runs several times per round (their median is the round's time).
  // For slower models that first pair is the first round.
  SpeedComparison c;
  c.rounds = std::max(opts.rounds, 1);
  std::vector<double> before, after, log_ratios;
  auto sample = [&](Prepared& p, int runs) {
    double ms = runtime::median(p.time(inputs, p.warm ? 0 : 1, runs));
    p.warm = true;
    return ms;
  };
  auto add_round = [&](double a, double b) {
    before.push_back(a);
    after.push_back(b);
    log_ratios.push_back(std::log(std::max(b, 1e-9) / std::max(a, 1e-9)));
  };
  const double ta = sample(original, 1), tb = sample(candidate, 1);
  // A run's length sizes the rounds: the fastest of three for a graph under
  // 50 ms (one slow first run on a busy machine would make too few runs a round).
  auto runs_for = [&](Prepared& p, double first) {
    double ms = first;
    if (ms < 50) ms = std::min(ms, runtime::median(p.time(inputs, 0, 1)));
    if (ms < 50) ms = std::min(ms, runtime::median(p.time(inputs, 0, 1)));
    return static_cast<int>(std::clamp(std::ceil(opts.min_round_ms / std::max(ms, 1e-4)), 1.0, 1000.0));
  };
  c.runs_per_round = runs_for(original, ta);
  c.candidate_runs_per_round = runs_for(candidate, tb);
  int first = 0;
  if (c.runs_per_round == 1 && c.candidate_runs_per_round == 1) {
    add_round(ta, tb);
    first = 1;
  }
  // A verdict from the rounds so far; a candidate that looks slower by more than
  // the noise floor but not beyond the band gets more rounds (up to 3x) to
  // settle it, since "the same" would let it be written.
  double log_ratio = 0;
  auto settle = [&] {
    c.before_ms = runtime::median(before);
    c.after_ms = runtime::median(after);
    log_ratio = runtime::median(log_ratios);
    c.ratio = std::exp(log_ratio);
    std::vector<double> dev;
    for (double r : log_ratios) dev.push_back(std::fabs(r - log_ratio));
    const double mad = runtime::median(dev);
    c.noise = std::max(opts.min_noise, 3.7 * mad / std::sqrt(static_cast<double>(log_ratios.size())));
  };
  const int max_rounds = 3 * c.rounds;
  for (int i = first; i < max_rounds; ++i) {
    if (i >= c.rounds && i % c.rounds == 0) {
      settle();
      // A wide band matters only where it would give "the same": a candidate already
      // beyond it (faster or slower) needs no more rounds.
      const bool same_in_wide_band = c.noise > opts.max_same_noise && std::fabs(log_ratio) <= c.noise;
      const bool unsettled = (log_ratio > opts.min_noise && log_ratio <= c.noise) || same_in_wide_band;
      if (!unsettled) break;
    }
    if (i % 2 == 0) {  // A B, then B A: neither always runs first
      double a = sample(original, c.runs_per_round);
      add_round(a, sample(candidate, c.candidate_runs_per_round));
    } else {
      double b = sample(candidate, c.candidate_runs_per_round);
      add_round(sample(original, c.runs_per_round), b);
    }
  }
  c.rounds = static_cast<int>(log_ratios.size());
  // Ratios are compared on a log scale, where 2x slower and 2x faster are as far
  // from 1 and the spread does not grow with the ratio.
  settle();
  c.verdict = log_ratio > c.noise    ? SpeedComparison::Verdict::Slower
              : log_ratio < -c.noise ? SpeedComparison::Verdict::Faster
                                     : SpeedComparison::Verdict::Same;
  return c;
}

Engine other_engine(Engine target) { return target == Engine::Runtime ? Engine::OnnxRuntime : Engine::Runtime; }

GuardResult run_guard(const Graph& original, const Graph& optimized, const GuardContext& ctx,
                      const GuardOptions& requested) {
  GuardOptions opts = requested;
  GuardResult r;
  r.graph = optimized;
  r.engine = opts.target;
  r.confirm_engine = other_engine(opts.target);
  if (!opts.enabled) {
    r.status = "off";
    r.reason = "switched off";
    return r;
  }
  if (same_graph(original, optimized)) {
    r.status = "unchanged";
    r.kept = "original";
    r.graph = original;
    r.reason = "the rewrites changed nothing";
    return r;
  }
  r.status = "skipped";
  if (!ctx.inputs->ok()) {
    r.reason = "no valid inputs: " + ctx.inputs->impossible;
    return r;
  }
  // The original prepared on `engine` and run once, or null with the reason.
  auto prepare = [&](Engine engine, std::string* why) -> Prepared* {
    std::string not_planned;
    Prepared* p = ctx.engines->get(original, engine, &not_planned);
    if (!p) {
      *why = "the original does not run on " + engine_name(engine) + " (" + not_planned + ")";
      return nullptr;
    }
    try {
      p->time(ctx.inputs->tensors, 0, 1);
    } catch (const Error& e) {
      *why = "the original does not run on " + engine_name(engine) + " on the " + ctx.inputs->source + " inputs (" +
             e.what() + ")";
      return nullptr;
    }
    return p;
  };
  std::string why;
  bool fell_back = false;  // timed on the other engine, which runs the original instead
  Prepared* o = prepare(opts.target, &why);
  if (!o) {
    // `isomer run` runs such a model (data-dependent shapes, say) on the other
    // engine: the rewrite must not be slower there. Where neither runs it, nothing
    // shows that the rewrite is not slower, and the original is written.
    std::string why_other;
    const Engine other = other_engine(opts.target);
    o = prepare(other, &why_other);
    if (!o) {
      r.kept = "original";
      r.graph = original;
      r.reason = why + "; " + why_other + ": nothing shows the rewrite is not slower, so the original is kept";
      return r;
    }
    r.reason = why + ": timed on " + engine_name(other) + ", which runs it instead";
    fell_back = true;
    opts.target = other;
    r.engine = other;
    r.confirm_engine = other_engine(other);
  }
  r.status = "measured";
  if (opts.target == Engine::Runtime || (opts.confirm_other && !fell_back)) {
    r.openmp_waits = runtime::openmp_waits();
    r.log.push_back("isomer's runtime times both graphs with OpenMP waits: " + r.openmp_waits);
  }
  r.load_average = cost::load_average();
  r.cores = std::max(1u, std::thread::hardware_concurrency());
  if (!opts.confirm_other) r.confirm_status = "off";
  Guard guard(original, ctx, opts, r);
  guard.original_prepared_ = o;

  std::optional<SpeedComparison> first = guard.measure(optimized, "optimized");
  auto keep_original = [&](const std::string& why_original) {
    r.kept = "original";
    r.graph = original;
    r.comparison.reset();
    if (first) r.before_ms = r.after_ms = first->before_ms;
    r.log.push_back("kept the original: " + why_original);
    return r;
  };
  if (!first) return keep_original("the optimized model does not run on " + engine_name(opts.target));
  guard.first_before_ms_ = first->before_ms;
  r.before_ms = first->before_ms;
  auto accept = [&](const Candidate& c) {
    r.kept = c.kind;
    r.graph = c.graph;
    r.comparison = c.cmp;
    r.before_ms = c.cmp.before_ms;
    r.after_ms = c.cmp.after_ms;
    std::string what = c.kind == "reverted" ? "the rewrite without " + rules_text(c.disabled) : c.kind;
    r.log.push_back("kept " + what + ": " + c.cmp.verdict_text() +
                    (c.cmp.verdict == SpeedComparison::Verdict::Same
                         ? ", and smaller (" + size_text(c.graph, original) + ")"
                         : ""));
  };

  // The candidates the target would write, best first. The first is written
  // unless the other engine finds it slower; then the next is tried.
  std::vector<Candidate> candidates;
  bool templates_measured = false;
  auto add_templates = [&] {
    templates_measured = true;
    if (ctx.templates_only && !same_graph(*ctx.templates_only, optimized))
      if (auto cmp = guard.measure(*ctx.templates_only, "template passes alone"))
        candidates.push_back({"templates", *ctx.templates_only, *cmp, {}});
  };
  Candidate full{"optimized", optimized, *first, {}};
  if (first->verdict != SpeedComparison::Verdict::Slower) {
    if (first->verdict == SpeedComparison::Verdict::Same && !smaller(optimized, original))
      return keep_original("the optimized model is the same within noise and no smaller (" +
                           size_text(optimized, original) + ")");
    if (std::string why = not_shown_not_slower(*first, opts); !why.empty())
      return keep_original("the optimized model is the same within noise but " + why);
    candidates.push_back(full);
  } else {
    // Slower: find the rules responsible, take them out.
    std::vector<std::string> suspects = ctx.rules, disabled;
    Candidate current = full;
    while (current.cmp.verdict == SpeedComparison::Verdict::Slower && r.reverted.size() < opts.max_reverts &&
           !suspects.empty()) {
      r.log.push_back("looking for the rule that makes it slower among " + std::to_string(suspects.size()) +
                      " (bisection)");
      auto found = guard.bisect(suspects, disabled, current.cmp.ratio);
      if (!found) {
        r.log.push_back("no single rule is responsible for the slowdown");
        break;
      }
      const double slowdown = current.cmp.ratio / found->second.cmp.ratio;
      r.reverted.push_back({found->first, slowdown});
      r.log.push_back("reverted " + found->first + ": it made the model " + fmt("%.2fx", slowdown) + " slower");
      disabled.push_back(found->first);
      std::erase(suspects, found->first);
      current = found->second;
      candidates.push_back(current);
    }
    add_templates();
    // The fastest first.
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.cmp.ratio < b.cmp.ratio; });
  }

  // The confirmation on the other engine, set up when the first candidate needs it.
  const Engine other = r.confirm_engine;
  std::optional<Guard> other_guard;
  GuardOptions other_opts = opts;
  other_opts.target = other;
  bool confirming = false, set_up = false;
  auto set_up_confirmation = [&] {
    set_up = true;
    if (!opts.confirm_other) {
      r.log.push_back("not confirmed on " + engine_name(other) + ": switched off");
      return;
    }
    auto skip = [&](const std::string& reason) {
      r.confirm_status = "skipped";
      r.confirm_reason = reason;
      r.log.push_back("not confirmed on " + engine_name(other) + ": " + reason);
    };
    if (other != Engine::Runtime && !ctx.engines->options().allow_onnxruntime && !ctx.engines->has_factory(other))
      return skip("ONNX Runtime is switched off");
    if (original.constant_bytes() >= kLargeGraphBytes) {
      // The target's compiled graphs would hold their weights while the other
      // engine loads them again; a later timing on the target prepares anew.
      ctx.engines->forget(opts.target);
      guard.original_prepared_ = nullptr;
    }
    std::string why_not;
    Prepared* po = ctx.engines->get(original, other, &why_not);
    if (!po) return skip("the original does not run there (" + why_not + ")");
    try {
      po->time(ctx.inputs->tensors, 0, 1);
    } catch (const Error& e) {
      return skip("the original does not run there on the " + ctx.inputs->source + " inputs (" + e.what() + ")");
    }
    other_guard.emplace(original, ctx, other_opts, r);
    other_guard->original_prepared_ = po;
    confirming = true;
  };
  // Whether `c` is not slower on the other engine (logged either way).
  auto confirmed = [&](const Candidate& c) {
    const std::string on = "on " + engine_name(other);
    std::optional<SpeedComparison> cmp = other_guard->measure(c.graph, c.kind + " " + on, false);
    if (!cmp) {
      r.log.push_back("not written: the " + c.kind + " candidate does not run " + on);
      if (!r.confirm_comparison && r.confirm_reason.empty()) r.confirm_reason = c.kind + " does not run " + on;
      return false;
    }
    if (!r.confirm_comparison) r.confirm_comparison = cmp;
    // A veto takes two comparisons that agree: ONNX Runtime's sessions of a small
    // model settle in a fast or a slow state for many runs at a time (the demo
    // model: 0.05 or 0.088 ms a run, whole rounds alike on a busy 2-core machine),
    // so that one comparison of two equal graphs can read 1.4x slower within a
    // noise band of 2%.
    if (cmp->verdict == SpeedComparison::Verdict::Slower || !not_shown_not_slower(*cmp, other_opts).empty()) {
      r.log.push_back(c.kind + " looks slower " + on + ": " + cmp->text() + "; measured again");
      if (auto again = other_guard->remeasure(c.graph, c.kind + " " + on, false)) cmp = again;
    }
    if (cmp->verdict == SpeedComparison::Verdict::Slower) {
      r.log.push_back("not written: " + c.kind + " is slower " + on + ": " + cmp->text());
      return false;
    }
    if (std::string why = not_shown_not_slower(*cmp, other_opts); !why.empty()) {
      r.log.push_back("not written: " + c.kind + " " + on + " is " + why + ": " + cmp->text());
      return false;
    }
    r.confirm_comparison = cmp;
    r.confirm_status = "confirmed";
    r.log.push_back(c.kind + " confirmed " + on + ": " + cmp->text());
    return true;
  };

  // The fastest candidate that is not slower (and, at equal speed, smaller),
  // checked, and not slower on the other engine either.
  bool rejected_on_other = false;
  for (size_t i = 0;; ++i) {
    if (i == candidates.size()) {
      // The target's choice was slower on the other engine: the template passes
      // alone, if not measured yet, are the next candidate.
      if (!rejected_on_other || templates_measured) break;
      add_templates();
      if (i == candidates.size()) break;
    }
    const Candidate& c = candidates[i];
    if (c.cmp.verdict == SpeedComparison::Verdict::Slower) continue;
    if (same_graph(c.graph, original)) continue;
    if (c.cmp.verdict == SpeedComparison::Verdict::Same && !smaller(c.graph, original)) continue;
    if (!not_shown_not_slower(c.cmp, opts).empty()) continue;
    if (ctx.check && !same_graph(c.graph, optimized)) {  // the pipeline checked the optimized graph
      CheckResult check = ctx.check(c.graph);
      if (check.status == CheckResult::Status::Failed) {
        r.log.push_back(c.kind + " candidate fails the check (" + check.reason + "): not written");
        continue;
      }
    }
    if (!set_up) set_up_confirmation();
    if (confirming && !confirmed(c)) {
      rejected_on_other = true;
      continue;
    }
    accept(c);
    return r;
  }
  if (rejected_on_other) {
    r.confirm_status = "slower";
    return keep_original("every rewrite that is not slower on " + engine_name(opts.target) + " is slower on " +
                         engine_name(other));
  }
  return keep_original("no rewrite that is not slower (and, at equal speed, smaller) was found");
}

}  // namespace isomer
