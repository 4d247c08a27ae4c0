#pragma once
// The cost model: what a graph costs on isomer's CPU runtime. A graph is costed
// as the runtime will run it — compiled into steps, so layout reorders, concat
// copies and fused post-ops (cheaper than separate operators) are all counted —
// and each step is priced either by timing it (MeasuredCostModel, cached in
// SQLite per machine) or by a roofline estimate against measured peak rates
// (AnalyticCostModel, deterministic given the rates).
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cost/cost_db.h"
#include "cost/plan_cache.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer::cost {

struct StepCost {
  runtime::StepInfo step;
  double ms = 0;
  std::string source;  // "measured" (new), "cached" or "analytic"
};

struct GraphCost {
  double total_ms = 0;
  double io_ms = 0;  // copying inputs in and outputs out, once per run
  std::vector<StepCost> steps;
  size_t measured_new = 0;  // steps timed in this call
  size_t cached = 0;        // steps found in the database
  size_t noisy = 0;         // steps priced by a measurement taken on an overloaded machine
  int threads = 0;
};

// Peak rates of this machine for the roofline.
struct PeakRates {
  double gflops = 100;         // dense float32 arithmetic (GFLOP/s)
  double gbytes_per_s = 20;    // memory traffic (GB/s)
  double step_overhead_us = 2; // fixed cost of launching one primitive
  double reference_ns_per_element = 20;  // reference kernels (double-precision eval)
};

// What the paired rounds say: their median ratio, and the second highest, a
// distribution-free bound above the median (of kPairedRounds = 7 rounds, the median
// lies above it with chance 8/128, 6%); and `noise`, the half-width of the band on a
// log scale in which the median of as many rounds would fall for two graphs that run
// alike, measured from the same rounds' A/A pairs (each round runs one graph twice,
// around the other). At load the rounds of NasRNN b16's Gemm refold ranged 0.97-1.13,
// and their median fell either side of 0.995 from one search to the next (session
// 28); NasNet-A's merges, 0.996-1.007 as run, cleared the bound in some searches of
// three runner-ups and not in others (session 30).
struct PairedRatio {
  double median = 1;
  double high = 1;
  double noise = 0;
  int rounds = 0;
};
// From each round's ratio (the other graph over the one run twice, by the mean of its
// two runs' logs, so that a drift within the round cancels) and its A/A ratio (the
// second run over the first of the graph run twice).
PairedRatio paired_summary(std::vector<double> ratios, const std::vector<double>& same_ratios);
// Faster only where the median clears the minimum gain by the noise band and the
// rounds' bound clears it too; slower where the median is above 1 by more than the
// band; else the same, within noise. A search keeps its input unless faster.
enum class PairedVerdict { Faster, Same, Slower };
PairedVerdict paired_verdict(const PairedRatio& r, double min_gain);
const char* paired_verdict_name(PairedVerdict v);

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  // Called once per compiled graph before its steps are priced.
  virtual void prepare(runtime::Executable& exe) {}
  // Cost of step i of a compiled graph, in milliseconds; `source` says where it came from.
  virtual double step_ms(runtime::Executable& exe, size_t i, std::string& source) = 0;

  // The whole graph as the runtime runs it.
  GraphCost graph_cost(const Graph& g);
  double graph_ms(const Graph& g) { return graph_cost(g).total_ms; }
  // One operator instance: node `n` with its inputs' (static) types, constant
  // inputs kept as constants (weights get their layouts at compile time); the
  // conversions of its graph inputs and outputs are not counted. Measured times of
  // operators alone are stored apart from those of steps in whole graphs.
  // `enough_ms` (0: none) is the price above which the caller's choice is made
  // whatever it is: timing ends after the first timed run that shows every run so
  // far above it (a search's candidate already dearer than what it would replace),
  // and the price is what those runs took.
  double op_ms(const Node& n, double enough_ms = 0);

  // What compiling `g` gives (its steps, nothing timed): from the plans kept (in this
  // model, then in the cost database where the model has one), else compiled and
  // kept. Throws as runtime::compile does.
  Plan plan(const Graph& g);
  // Whole-graph prices answered from a kept plan without compiling, and compiles.
  size_t plans_reused() const { return plans_reused_; }
  size_t compiles() const { return compiles_; }
  // Whole runs timed to measure new steps so far (warm-up runs not counted); 0 for a
  // model that times nothing.
  virtual size_t timed_runs() const { return 0; }
  // Off: every graph is compiled to be priced, and no plan is kept (tests compare
  // both ways).
  void set_keep_plans(bool keep) { keep_plans_ = keep; }

  // `after`'s run time over `before`'s, both run whole in kPairedRounds interleaved
  // rounds (before, after, before; then after, before, after; ...) on the same inputs:
  // the median of the per-round ratios, a bound above it and the A/A noise band
  // (paired_summary). Rows of steps timed at different times, under different
  // loads, misjudge two graphs whose prices are close (NasNet-A's merged cells
  // priced 1.5% cheaper than its input from such rows and ran 4.5% slower); a paired
  // measurement compares them as they run now. Kept per pair of plans in the cost
  // database, so that a search on a filled database decides as before. nullopt
  // where this model times nothing (analytic), the graphs cannot run, or running
  // them so would cost too much (kPairedLongestRunMs, kPairedLargestWeights).
  virtual std::optional<PairedRatio> paired_ratio(const Graph& before, const Graph& after) { return std::nullopt; }

  runtime::RuntimeOptions& runtime_options() { return ropts_; }
  // How many times valid inputs were made for a graph being priced: only when a
  // step of it had to be timed (a graph priced from the database needs none).
  size_t input_sets_made() const { return input_sets_made_; }

 protected:
  // Valid inputs of the graph being priced (check/inputs.h; empty when none can be
  // made), made on first use: timing runs the graph once on them first, so that its
  // buffers hold indices in range and shapes that fit, not whatever memory held.
  const std::vector<Tensor>& inputs();

  runtime::RuntimeOptions ropts_;
  size_t measured_new_ = 0, cached_ = 0, noisy_ = 0;
  // Prefixed to step signatures in the database while op_ms prices an operator alone.
  std::string key_prefix_;
  // op_ms's `enough_ms` while it prices an operator alone (0 otherwise).
  double enough_ms_ = 0;

  // Prices every step of a kept plan as step_ms would, without the executable;
  // false (and nothing counted) when one would have to be timed.
  virtual bool price_plan(const Plan& plan, std::vector<StepCost>& out) { return false; }
  // Plans kept past this model (the cost database): nullopt where none is kept.
  virtual std::optional<Plan> load_plan(const std::string& key) { return std::nullopt; }
  virtual void save_plan(const std::string& key, const Plan& plan) {}

 private:
  // A kept plan of `g` (key `key`), or nullopt.
  std::optional<Plan> kept_plan(const std::string& key);
  // Compiles `g`, keeping its plan under `key` (when not empty).
  std::unique_ptr<runtime::Executable> compile_keeping(const Graph& g, const std::string& key);
  const Graph* priced_ = nullptr;  // the graph being priced (graph_cost, op_ms)
  std::unordered_map<std::string, Plan> plans_;  // by plan_key, this model's
  size_t plans_reused_ = 0, compiles_ = 0;
  bool keep_plans_ = true;
  std::optional<std::vector<Tensor>> inputs_;
  size_t input_sets_made_ = 0;
};

class AnalyticCostModel : public CostModel {
 public:
  explicit AnalyticCostModel(PeakRates rates) : rates_(rates) {}
  std::string name() const override { return "analytic"; }
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override;
  double estimate(const runtime::StepInfo& s) const;
  bool price_plan(const Plan& plan, std::vector<StepCost>& out) override;
  const PeakRates& rates() const { return rates_; }

 private:
  PeakRates rates_;
};

class CostDb;

// A graph with steps not in the database is timed in whole runs (after a warm-up),
// as many as runtime::timed_runs plans (`planned`: at least 3, more for a short
// graph, at most the model's repeats), but it stops early once kSettledRuns runs
// or more agree: their totals spread by at most kSettledSpread of the fastest.
// A further run of a measurement already that steady moves the typical run's time
// by less than the spread (TASO's BERT runs 0.66 s a run on one thread: its third
// run of each of the two graphs the search prices whole took 1.3 s of its 5.5 s
// of pricing). On a loaded machine runs spread more, and all planned runs are
// taken. True when no further run is to be taken after `totals`.
inline constexpr size_t kSettledRuns = 2;
// The share of the budget an operator priced alone (op_ms) is timed within: a
// 15 ms convolution alone took 15 runs and a quarter of a second, ResNeXt-50's
// twenty such shapes most of its cold search; a few runs price it as well.
inline constexpr double kAloneBudget = 0.4;
// MeasuredCostModel::to_database_scale: the known work (ms) a profile must have
// timed beside its new steps to rescale them, and the largest factor it applies.
inline constexpr double kScaleMinKnownMs = 2.0;
inline constexpr double kScaleLimit = 2.0;
inline constexpr double kSettledSpread = 0.01;
// CostModel::paired_ratio: rounds, and the least milliseconds one side of a round
// runs (a short graph is run several times per round). Rounds of one 4 ms run each
// scatter at load: NasRNN b16's second highest round ratio stood a median 8% above the
// median ratio over 9 searches at load 6-10; with 20 ms rounds, 3% over 5 (session 28).
inline constexpr int kPairedRounds = 7;
inline constexpr double kPairedRoundMs = 20.0;
// paired_summary: the noise band's width over the A/A pairs' median absolute log ratio
// at one round (divided by the square root of the rounds).
inline constexpr double kPairedNoiseScale = 3.2;
// ... and the longest run and the most weights it takes on (longer or larger graphs
// are decided by their prices; NasNet-A runs 0.14 s on 152 MiB).
inline constexpr double kPairedLongestRunMs = 1000.0;
inline constexpr size_t kPairedLargestWeights = size_t{512} << 20;
bool timing_settled(const std::vector<double>& totals, size_t planned);
// Whether the last warm-up run (taken as the timed runs are) counts as a timed run:
// only when the first timed run agrees with it as two settled runs agree (a warm-up
// slowed by a cold cache or page faults does not, and is dropped as before).
bool keep_warmup_run(double warmup_total, double first_total);
// An operator priced alone (op_ms) is timed in runs as short as a few microseconds,
// and a run that follows other jobs on the core pays for what they evicted (NasRNN's
// time-step merge, a 5x512 by 512x512 product, priced alone 0.074 ms in one fresh
// search and 0.012 ms in another, in processor time): such runs can agree with each
// other, and the search then skips the merges. Preemption only ever adds time, so an
// operator alone is priced by its fastest runs (typical_runs), and its timing stops
// early only once kAloneSettledRuns are taken and the two fastest agree within
// kSettledSpread; one whose fastest run is under kAloneShortRunMs takes every planned
// run (at most the model's repeats: under 15 ms). True when no further run is to be
// taken after `totals`.
inline constexpr size_t kAloneSettledRuns = 3;
inline constexpr double kAloneShortRunMs = 1.0;
bool alone_timing_settled(const std::vector<double>& totals, size_t planned);
// The runs (indices into `totals`) whose steps' times are averaged into a profile's:
// a whole graph's typical runs, those whose total is in the middle half; an operator
// alone's fastest quarter, at least one run.
std::vector<size_t> typical_runs(const std::vector<double>& totals, bool alone);

// Measurements taken while the machine is overloaded (1-minute load average
// above the number of cores: other processes compete for the cores, so the times
// are inflated by preemption) are stored marked "noisy" with the load seen. A
// noisy entry is reused only while the machine is still overloaded at least as
// much as when it was measured (measuring again then would be no better); at a
// lower load it is measured again, and once the load is back at or below the
// core count it is replaced by a clean one. Clean entries are always reused.
// On one thread steps are timed in processor time (RuntimeOptions::processor_clock),
// which preemption does not inflate: nothing is noisy, and the rows are kept under
// their own fingerprint ("|clock=cpu").
class MeasuredCostModel : public CostModel {
 public:
  // `db_path` empty: default_db_path(). A graph is timed in up to `repeats` runs
  // after up to `warmup`; a long one in as many as `budget_ms` holds, at least 3,
  // or 2 that agree (timing_settled).
  MeasuredCostModel(const std::string& db_path, int threads, int warmup = 3, int repeats = 15,
                    double budget_ms = 250);
  ~MeasuredCostModel() override;
  std::string name() const override { return "measured"; }
  // Steps not in the database are timed inside whole runs of their graph (a
  // step alone, with its data hot in cache, would look cheaper than it is);
  // once a graph is timed, each of its steps is priced by its own time, also
  // where an earlier step of the same signature was stored (ResNet-50 repeats
  // its blocks' convolutions): the first one's time is what the database keeps.
  // A graph long enough to be timed in the fewest runs leaves out of those runs
  // the steps that repeat an earlier one (priced by the earlier one's time) and
  // those the database prices already, but not the steps that write what a timed
  // step reads (runtime::Executable::steps_to_skip).
  void prepare(runtime::Executable& exe) override;
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override;
  const std::string& fingerprint() const { return fingerprint_; }
  // Whole runs timed so far (warm-up runs not counted).
  size_t timed_runs() const override { return timed_runs_; }
  // Of those, runs that left out steps repeating an earlier step (see profile()).
  size_t runs_without_repeats() const { return skipped_runs_; }
  // Of those, warm-up runs counted as timed runs (keep_warmup_run).
  size_t warmup_runs_kept() const { return warmups_kept_; }
  // Operators alone whose timing ended early, above op_ms's `enough_ms`.
  size_t timings_ended_above() const { return ended_above_; }
  // Profiles whose new steps were put on the database's scale (to_database_scale),
  // and the last factor applied.
  size_t profiles_rescaled() const { return rescaled_; }
  double last_scale() const { return last_scale_; }
  std::optional<PairedRatio> paired_ratio(const Graph& before, const Graph& after) override;
  // Where the load average comes from (tests substitute their own).
  void set_load_probe(std::function<double()> probe) { load_probe_ = std::move(probe); }

 private:
  bool overloaded(double load) const;
  bool usable(const std::string& signature);
  bool usable(const std::optional<CostDb::Entry>& e) const;
  // Times every step of `exe` inside whole runs (see timing_settled): per step, the
  // mean over the typical runs.
  std::vector<double> profile(runtime::Executable& exe);
  // A profile that left out steps the database prices: its new steps' times put on
  // the scale of the database's rows for the known steps that ran with them.
  void to_database_scale(runtime::Executable& exe, const std::vector<bool>& skip, std::vector<double>& out);
  std::string db_key(const std::string& signature) const;  // the signature under key_prefix_
  bool price_plan(const Plan& plan, std::vector<StepCost>& out) override;
  std::optional<Plan> load_plan(const std::string& key) override;
  void save_plan(const std::string& key, const Plan& plan) override;
  std::function<double()> load_probe_;
  double load_before_ = 0;  // load when this graph's measurements began
  bool overloaded_now_ = false;
  std::vector<double> profiled_;  // this graph's steps, when some were new
  std::set<std::string> measured_here_;  // signatures stored from profiled_
  std::unique_ptr<CostDb> db_;
  std::string fingerprint_;
  int warmup_, repeats_;
  double budget_ms_;
  size_t timed_runs_ = 0;
  size_t skipped_runs_ = 0;
  size_t warmups_kept_ = 0;
  size_t ended_above_ = 0;
  size_t rescaled_ = 0;
  double last_scale_ = 1.0;
};

// The 1-minute load average (/proc/loadavg; $ISOMER_LOAD_AVERAGE overrides it);
// 0 where unknown.
double load_average();

// ~/.cache/isomer/costs.sqlite ($XDG_CACHE_HOME respected).
std::string default_db_path();
// CPU model, thread count, oneDNN version (and the runtime's version): the
// machine part of every cache key.
std::string machine_fingerprint(int threads);
// Peak rates for the roofline: from the database when present, else measured on
// this machine (a large matmul and a large copy) and stored.
PeakRates peak_rates(const std::string& db_path, int threads);

// "measured" or "analytic".
std::unique_ptr<CostModel> make_cost_model(const std::string& kind, const std::string& db_path, int threads);

}  // namespace isomer::cost
