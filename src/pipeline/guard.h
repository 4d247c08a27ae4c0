#pragma once
// The never-slower guard: `isomer optimize` writes nothing slower than its input on
// the target engine (isomer's runtime, or ONNX Runtime with all optimizations).
//
// Measuring. The original and a candidate run in interleaved rounds on the same
// inputs (A B, then B A, ...), each graph long enough per round to be timed
// (several runs of a graph faster than min_round_ms, their median). Round i gives
// the paired ratio r_i = candidate / original; pairing cancels the drift of a
// shared machine, which moves both alike within a round. On a log scale, where
// 2x slower and 2x faster are equally far from 1, the candidate's ratio is
// r = exp(median ln r_i), and its noise band is
//     noise = max(min_noise, 3.7 * MAD(ln r_i) / sqrt(rounds))
// (MAD: median absolute deviation; 1.4826 MAD estimates the spread of one ratio
// and 1.2533 of that over sqrt(rounds) the standard error of their median, so the
// band is two standard errors). Then:
//     ln r >  noise   slower (r > ~1 + noise)
//     ln r < -noise   faster
//     otherwise       the same, within noise
// A candidate that looks slower by more than the floor but not beyond the band
// gets more rounds, up to three times as many, before it may be called the same:
// on a busy machine the band is wide, and "the same" lets a candidate be written.
// So does one whose band is wider than max_same_noise.
//
// Deciding. A candidate that is faster is kept. One that is the same within noise
// is kept only if it is also smaller (fewer nodes or fewer weight bytes): a
// smaller graph at equal speed is a fine result, but a rewrite that bought
// neither speed nor size is not worth a changed model, and the original is
// written. "The same" must also be narrow enough to mean "not slower": one that is
// nominally slower by more than the 2% floor, or whose band stays wider than
// max_same_noise after the extra rounds (a busy machine: swin-T's output measured
// "the same within ±32%" at load 6 and ran 9% slower when timed at load 2), is not
// written either. One that is slower is never written: the guard looks for the rule
// responsible by bisection over the rules that fired (rewriting without one half
// of them and without the other, and following the half whose removal removes
// the slowdown, or the larger part of it; of two halves that both do, the one
// that leaves the smaller graph: without constant folding a later fusion may not
// fire either, but that gives up more), takes it out, rewrites without it and
// measures again, up to max_reverts rules. The written model is then the fastest
// candidate that is not slower: the rewrite without the culprits, the template
// passes alone (after a search), or the original.
//
// Confirming. A model tuned on one engine can be slower on the other (eqsat's
// merges, tuned for isomer's runtime, made NasRNN at batch 16 ~4.5% slower on
// ONNX Runtime), and the promise is "never slower on either". So the candidate
// the target chose is timed against the original on the other engine too
// (isomer's runtime <-> ONNX Runtime), by the same interleaved rounds and noise
// rules. If it is slower there, or the same within noise but nominally slower
// (as above), it is not written: the next candidate the target would take (a
// rewrite without more culprits, the template passes alone, each timed on both
// engines) is confirmed in turn, else the original is written. Where the other
// engine cannot run the original (ONNX Runtime not available or switched off,
// a graph isomer's runtime cannot run) the confirmation is skipped, and said so.
// Every decision is logged with its numbers; the report prints the log.
//
// Waiting. On isomer's runtime, how OpenMP threads wait between steps is part of what
// is timed: with passive waits every step of a small model pays a thread wake-up, and
// a rewrite with fewer steps looked 1.27x faster (0.266 -> 0.210 ms) on a model that
// runs the same (0.028 -> 0.027 ms) with the short spin. libgomp reads its policy once
// per process, so both graphs are always timed under one policy; the CLI chooses the
// one `isomer run` takes on a quiet machine (runtime.h), and the log and the report
// (openmp_waits) name it. That short spin assumes each thread has a CPU of its own, as
// `isomer run` finds on a quiet machine; the scheduler does not promise it (this
// project's VM put the worker on its caller's CPU after the check, and each barrier
// waited out the whole spin: 0.263 -> 0.207 ms, 1.27x faster, for the model above), so
// the runtime's timed runs pin the team one thread per CPU (EngineOptions::
// one_cpu_per_thread; the report's runtime_threads).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "check/compare.h"
#include "check/engines.h"
#include "check/inputs.h"
#include "ir/graph.h"

namespace isomer {

struct GuardOptions {
  bool enabled = true;
  Engine target = Engine::Runtime;  // Runtime or OnnxRuntime
  int rounds = 7;                   // interleaved rounds per comparison
  double min_round_ms = 2;          // a round runs each graph at least this long
  double min_noise = 0.02;          // differences below 2% are never called
  // "The same within noise" in a band wider than this does not show that a candidate
  // is not slower (see "Deciding"): it is not written.
  double max_same_noise = 0.10;
  size_t max_reverts = 3;           // culprits taken out before falling back
  bool confirm_other = true;        // also time what is kept on the other engine (see above)
};

// The other engine of a target: ONNX Runtime for isomer's runtime and back.
Engine other_engine(Engine target);

// One interleaved comparison of a candidate with the original (see above).
struct SpeedComparison {
  enum class Verdict { Faster, Same, Slower };
  double before_ms = 0, after_ms = 0;  // medians over the rounds
  double ratio = 1;                    // median paired ratio, candidate / original
  double noise = 0;                    // half-width of the band around 1, on a log scale (~relative)
  int rounds = 0;
  int runs_per_round = 0, candidate_runs_per_round = 0;  // runs of each graph in one round
  Verdict verdict = Verdict::Same;

  // "1.32x faster", "2.10x slower", "the same within noise (1.01x)"
  std::string verdict_text() const;
  // True where the medians of each side's times point against the paired verdict by
  // more than the noise (a busy machine); the texts then say which is which.
  bool medians_disagree() const;
  // verdict_text(), prefixed "the medians; paired by round: " where medians_disagree().
  std::string paired_verdict_text() const;
  // "0.133 ms -> 0.094 ms, 1.41x faster (9 rounds of 15 runs, noise ±2.0%)"
  std::string text() const;
};

SpeedComparison compare_speed(Prepared& original, Prepared& candidate, const std::vector<Tensor>& inputs,
                              const GuardOptions& opts);

struct RevertedRule {
  std::string rule;
  double slowdown = 1;  // the candidate's ratio with the rule / without it
};

struct GuardResult {
  // "measured", "skipped" (see reason), "off" (switched off), "unchanged" (nothing to time)
  std::string status = "off";
  std::string reason;
  // What is written: "optimized" (the rewrite as is), "reverted" (the rewrite
  // without the rules in `reverted`), "templates" (the template passes alone),
  // "original".
  std::string kept = "optimized";
  Graph graph;  // the graph to write
  // The engine the guard timed on: the target, or the other engine where the
  // original does not run on the target (as `isomer run` then runs it there).
  Engine engine = Engine::Runtime;
  double before_ms = -1, after_ms = -1;  // the original and the kept graph on `engine` (-1: not measured)
  std::optional<SpeedComparison> comparison;  // the kept graph's, when one was measured
  std::vector<RevertedRule> reverted;
  std::vector<std::string> log;  // each decision and its numbers
  size_t comparisons = 0;        // interleaved comparisons run, on both engines
  // The 1-minute load average when the guard began measuring (-1: it did not) and
  // the cores: above them, other processes took turns on the cores while it timed.
  double load_average = -1;
  unsigned cores = 0;
  // How isomer's runtime's OpenMP threads waited at its barriers while the guard timed
  // both graphs there (runtime::openmp_waits(); one policy per process, so the same for
  // both): `isomer optimize` takes what `isomer run` takes on a quiet machine. Empty
  // where the guard did not time isomer's runtime.
  std::string openmp_waits;
  // The clock ONNX Runtime's runs were timed on, as the bridge read it: "thread" (at
  // 1 intra-op thread the run computes in the calling thread: that thread's CPU
  // time), "process" (the helper's CPU time) or "wall". Empty where the guard did not
  // time ONNX Runtime.
  std::string onnxruntime_clock;
  // The same for isomer's runtime as the target (check/engines.cpp): "thread",
  // "process", or "wall" where a step of the graph is delegated to ONNX Runtime (it
  // computes in the helper process, which neither CPU clock counts).
  std::string runtime_clock;
  // Where isomer's runtime's OpenMP threads ran while the guard timed them: "2 threads,
  // one per CPU (0, 1)" (runtime::OneCpuPerThread, as `isomer run` finds them on a
  // quiet machine), or why they were left where the scheduler put them. Empty where
  // the guard did not time isomer's runtime.
  std::string runtime_threads;
  bool overloaded() const { return load_average > 0 && cores > 0 && load_average > cores; }

  // The confirmation on the other engine: "confirmed" (what is written is not
  // slower there), "slower" (every candidate was slower there: the original is
  // written), "skipped" (see confirm_reason), "off" (switched off), "none"
  // (nothing to confirm: the original is written, or the guard did not measure).
  std::string confirm_status = "none";
  std::string confirm_reason;  // why "skipped"; for "slower", set when the first candidate did not run there
  Engine confirm_engine = Engine::OnnxRuntime;
  // The written graph's comparison there ("confirmed"), or that of the target's
  // first choice, which was slower there ("slower").
  std::optional<SpeedComparison> confirm_comparison;
};

// What the guard needs from the pipeline.
struct GuardContext {
  Engines* engines = nullptr;
  const ModelInputs* inputs = nullptr;
  // The rules that fired and can be switched off, in a stable order.
  std::vector<std::string> rules;
  // The rewrite of the original with these rules switched off.
  std::function<Graph(const std::vector<std::string>& disabled)> rewrite;
  // The template passes alone, when a search ran after them.
  std::optional<Graph> templates_only;
  // Checks a candidate the guard would write that the check has not seen; null:
  // the check is off.
  std::function<CheckResult(const Graph&)> check;
};

GuardResult run_guard(const Graph& original, const Graph& optimized, const GuardContext& ctx,
                      const GuardOptions& opts);

}  // namespace isomer
