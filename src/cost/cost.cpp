#include "cost/cost.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <fstream>

#include "check/inputs.h"
#include "cost/cost_db.h"
#include "ir/error.h"
#include "runtime/clock.h"

namespace isomer::cost {

namespace {

// Bumped when the runtime's lowering changes what a signature means (4: native
// kernels and binary post-ops; 3: rows carry the load they were measured under;
// older rows were never marked noisy; 10: small convolutions and pools on fewer
// threads, a dense pointwise row shared by the team, outputs not zero-filled, the
// generated kernels' per-call overhead: a 16-channel 3x3 convolution on 32x32 at
// two threads priced 0.108 ms under rt-9, 0.025 ms as it now runs).
constexpr const char* kRuntimeVersion = "isomer-rt-10";


}  // namespace

namespace {

std::vector<Tensor> valid_inputs(const Graph& g, const runtime::RuntimeOptions& ro) {
  ModelInputs in = valid_random_inputs(g, 0, ro.bindings);
  return in.ok() ? in.tensors : std::vector<Tensor>{};
}

}  // namespace

const std::vector<Tensor>& CostModel::inputs() {
  if (!inputs_) {
    require(priced_ != nullptr, "inputs() outside graph_cost or op_ms");
    inputs_ = valid_inputs(*priced_, ropts_);
    ++input_sets_made_;
  }
  return *inputs_;
}

std::optional<Plan> CostModel::kept_plan(const std::string& key) {
  if (key.empty()) return std::nullopt;
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  std::optional<Plan> p = load_plan(key);
  if (p) plans_.emplace(key, *p);
  return p;
}

std::unique_ptr<runtime::Executable> CostModel::compile_keeping(const Graph& g, const std::string& key) {
  auto exe = runtime::compile(g, ropts_);
  ++compiles_;
  if (!key.empty() && !plans_.count(key)) {
    Plan p = plan_of(g, *exe);
    if (plan_keepable(p)) {
      save_plan(key, p);
      plans_.emplace(key, std::move(p));
    }
  }
  return exe;
}

namespace {

// plan_key, or empty where plans are not kept (or the key cannot be made).
std::string key_of(const Graph& g, const runtime::RuntimeOptions& ro, bool keep) {
  if (!keep) return {};
  try {
    return plan_key(g, ro);
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

Plan CostModel::plan(const Graph& g) {
  const std::string key = key_of(g, ropts_, keep_plans_);
  if (std::optional<Plan> p = kept_plan(key)) return *p;
  auto exe = compile_keeping(g, key);
  return plan_of(g, *exe);
}

GraphCost CostModel::graph_cost(const Graph& g) {
  const std::string key = key_of(g, ropts_, keep_plans_);
  GraphCost gc;
  size_t measured0 = measured_new_, cached0 = cached_, noisy0 = noisy_;
  std::optional<Plan> plan = kept_plan(key);
  if (plan && price_plan(*plan, gc.steps)) {
    // Priced before on this machine: its steps' rows price it, nothing is compiled.
    ++plans_reused_;
  } else {
    gc.steps.clear();
    auto exe = compile_keeping(g, key);
    plan = plan_of(g, *exe);
    priced_ = &g;
    inputs_.reset();
    prepare(*exe);
    for (size_t i = 0; i < exe->steps().size(); ++i) {
      StepCost sc;
      sc.step = exe->steps()[i];
      sc.ms = step_ms(*exe, i, sc.source);
      gc.steps.push_back(std::move(sc));
    }
    priced_ = nullptr;
    inputs_.reset();
  }
  gc.threads = plan->threads;
  for (const StepCost& sc : gc.steps) gc.total_ms += sc.ms;
  // Inputs are copied in and outputs out on every run (outputs: twice, into a
  // Tensor); priced at the roofline's memory rate.
  PeakRates rates;
  if (auto* a = dynamic_cast<AnalyticCostModel*>(this)) rates = a->rates();
  double out_bytes = 0;
  for (const Value& v : g.outputs())
    if (auto n = num_elements(v.type().shape)) out_bytes += static_cast<double>(*n * static_cast<int64_t>(dtype_size(v.type().dtype)));
  gc.io_ms = (plan->input_bytes + 2 * out_bytes) / (rates.gbytes_per_s * 1e6);
  gc.total_ms += gc.io_ms;
  gc.measured_new = measured_new_ - measured0;
  gc.cached = cached_ - cached0;
  gc.noisy = noisy_ - noisy0;
  return gc;
}

double CostModel::op_ms(const Node& n, double enough_ms) {
  require(n.kind() == NodeKind::Op, "only operator nodes have a cost");
  GraphBuilder b;
  std::vector<Value> ins;
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const Value& v = n.inputs()[i];
    if (!v.present()) {
      ins.emplace_back();
    } else if (const Tensor* t = v.constant()) {
      ins.push_back(b.constant(*t));
    } else {
      require(is_static(v.type().shape), "the cost of " + describe(n) + " needs static input shapes");
      ins.push_back(b.input("in" + std::to_string(i), v.type()));
    }
  }
  std::vector<Value> outs = b.op(n.op_type(), ins, n.attrs(), n.num_outputs());
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) names.push_back("out" + std::to_string(i));
  Graph g = b.finish(outs, names);
  // Kept apart from the steps of whole graphs: alone, an operator runs with its data
  // hot in cache, and a whole graph priced from such a time looks cheaper than it
  // runs (NasRNN's merged products: 2.7 ms priced, 7.2 ms run).
  struct Alone {
    std::string& prefix;
    double& enough;
    Alone(std::string& p, double& e, double enough_ms) : prefix(p), enough(e) {
      prefix = "alone|";
      enough = enough_ms;
    }
    ~Alone() {
      prefix.clear();
      enough = 0;
    }
  } alone(key_prefix_, enough_ms_, enough_ms);
  double total = 0;
  // Compiled to conversions of its inputs and outputs alone (a Split or Reshape the
  // runtime makes a view of its input): nothing it does is counted, so nothing is
  // timed (TASO's BERT timed three such Splits, a quarter of a second each).
  auto only_boundary = [](const std::vector<runtime::StepInfo>& steps) {
    return std::all_of(steps.begin(), steps.end(), [](const runtime::StepInfo& s) { return s.boundary; });
  };
  const std::string key = key_of(g, ropts_, keep_plans_);
  if (std::optional<Plan> plan = kept_plan(key)) {
    if (only_boundary(plan->steps)) return 0;
    std::vector<StepCost> steps;
    if (price_plan(*plan, steps)) {
      ++plans_reused_;
      for (const StepCost& sc : steps)
        if (!sc.step.boundary) total += sc.ms;
      return total;
    }
  }
  auto exe = compile_keeping(g, key);
  if (only_boundary(exe->steps())) return 0;
  priced_ = &g;
  inputs_.reset();
  std::string source;
  prepare(*exe);
  // Every step is priced (and so stored), the boundary conversions too, though they
  // are not counted: a step never stored made every later call time the graph again.
  for (size_t i = 0; i < exe->steps().size(); ++i) {
    const double ms = step_ms(*exe, i, source);
    if (!exe->steps()[i].boundary) total += ms;
  }
  priced_ = nullptr;
  inputs_.reset();
  return total;
}

double AnalyticCostModel::estimate(const runtime::StepInfo& s) const {
  if (s.kind == "reference")
    return s.bytes / 4 * rates_.reference_ns_per_element * 1e-6 + rates_.step_overhead_us * 1e-3;
  double compute = s.flops / (rates_.gflops * 1e6);
  double memory = s.bytes / (rates_.gbytes_per_s * 1e6);
  return std::max(compute, memory) + rates_.step_overhead_us * 1e-3;
}

double AnalyticCostModel::step_ms(runtime::Executable& exe, size_t i, std::string& source) {
  source = "analytic";
  return estimate(exe.steps()[i]);
}

bool AnalyticCostModel::price_plan(const Plan& plan, std::vector<StepCost>& out) {
  out.clear();
  for (const runtime::StepInfo& s : plan.steps) out.push_back(StepCost{s, estimate(s), "analytic"});
  return true;
}

MeasuredCostModel::MeasuredCostModel(const std::string& db_path, int threads, int warmup, int repeats,
                                     double budget_ms)
    : load_probe_(load_average),
      db_(std::make_unique<CostDb>(db_path.empty() ? default_db_path() : db_path)),
      warmup_(warmup),
      repeats_(repeats),
      budget_ms_(budget_ms) {
  ropts_.threads = threads > 0 ? threads : runtime::hardware_threads();
  // On one thread a step is timed in processor time: the work is the step's alone,
  // and preemption by other jobs on a busy machine drops out of it (at load 7-9 on
  // the 2 cores, wall-clock rows priced NasNet-A's 128-channel Conv+Add at 5.1 ms,
  // 5.7x its 0.9 ms, and the search chose merges that ran 3% slower). Such rows are
  // kept apart from wall-clock ones.
  ropts_.processor_clock = ropts_.threads == 1;
  fingerprint_ = machine_fingerprint(ropts_.threads) + (ropts_.processor_clock ? "|clock=cpu" : "");
}

MeasuredCostModel::~MeasuredCostModel() = default;

bool MeasuredCostModel::overloaded(double load) const {
  // Processor time is not inflated by the jobs that overload the machine.
  return !ropts_.processor_clock && load > static_cast<double>(runtime::hardware_threads());
}

std::string MeasuredCostModel::db_key(const std::string& signature) const {
  std::string key;
  key.reserve(key_prefix_.size() + signature.size());
  key.append(key_prefix_);
  key.append(signature);
  return key;
}

bool MeasuredCostModel::usable(const std::string& signature) { return usable(db_->find(fingerprint_, signature)); }

bool MeasuredCostModel::usable(const std::optional<CostDb::Entry>& e) const {
  // A noisy entry stands only while the machine is about as loaded as when it was
  // taken, or more: one from a heavier burst is measured again (SqueezeNet 1.1 priced
  // at 285 ms from such entries, 24x its run time measured a minute later). The
  // margin keeps a load average that wanders a little from re-measuring every time.
  return e && (!e->noisy || (overloaded_now_ && load_before_ >= 0.75 * e->load));
}

bool MeasuredCostModel::price_plan(const Plan& plan, std::vector<StepCost>& out) {
  // As prepare() and step_ms() price a compiled graph whose steps are all in the
  // database: the same rows, read under the same load.
  out.clear();
  profiled_.clear();
  measured_here_.clear();
  load_before_ = load_probe_();
  overloaded_now_ = overloaded(load_before_);
  std::unordered_map<std::string, std::optional<CostDb::Entry>> rows;
  std::vector<StepCost> steps;
  steps.reserve(plan.steps.size());
  size_t noisy = 0;
  for (const runtime::StepInfo& s : plan.steps) {
    const std::string sig = db_key(s.signature);
    auto it = rows.find(sig);
    if (it == rows.end()) it = rows.emplace(sig, db_->find(fingerprint_, sig)).first;
    const std::optional<CostDb::Entry>& e = it->second;
    if (!usable(e)) return false;
    steps.push_back(StepCost{s, e->ms, e->noisy ? "cached-noisy" : "cached"});
    noisy += e->noisy;
  }
  cached_ += steps.size();
  noisy_ += noisy;
  out = std::move(steps);
  return true;
}

std::optional<Plan> MeasuredCostModel::load_plan(const std::string& key) {
  std::optional<std::string> bytes = db_->find_plan(fingerprint_, key);
  return bytes ? decode_plan(*bytes) : std::nullopt;
}

void MeasuredCostModel::save_plan(const std::string& key, const Plan& plan) {
  db_->store_plan(fingerprint_, key, encode_plan(plan));
}

void MeasuredCostModel::prepare(runtime::Executable& exe) {
  profiled_.clear();
  measured_here_.clear();
  load_before_ = load_probe_();
  overloaded_now_ = overloaded(load_before_);
  for (const runtime::StepInfo& s : exe.steps())
    if (!usable(db_key(s.signature))) {
      profiled_ = profile(exe);
      return;
    }
}

std::vector<double> MeasuredCostModel::profile(runtime::Executable& exe) {
  auto total = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
  // The buffers first hold data the kernels accept: one run on valid inputs. It is
  // not a warm-up: it writes the graph's outputs into the tensors it returns, so the
  // arena's output buffers are first touched by the next run (a 12 MB product's
  // first timed run alone paid its page faults, and merged products looked dearer).
  // Then the warm-up as Executable::profile_steps does it: at most warmup_ runs,
  // stopping once they took a fifth of the budget.
  // A long graph's valid run is its warm-up too (BERT's input plan, 0.66 s a run on
  // one thread, took four runs where three tell as much): the warm-up would stop after
  // one run anyway, and what that run would still do, touching the arena's output
  // buffers first, costs under a hundredth of a run (at 1 GB/s, slower than page
  // faults are) for graphs whose outputs are that small.
  // An operator alone (op_ms) is timed within a smaller budget: its price is a guide
  // for the search, scaled by context prices, and the search's result is priced whole.
  const double budget = key_prefix_.empty() ? budget_ms_ : budget_ms_ * kAloneBudget;
  double spent = 0, last = 0;
  // A graph whose run alone outlasts the budget's share of a timed run is timed in
  // the fewest runs the budget allows whatever it does, so its steps that repeat an
  // earlier step's signature (TASO's BERT is eight equal layers) are left out of
  // those runs and priced by the earlier step's time, and so are steps the database
  // prices already (they are priced from it: most of a search's result), except where
  // a step that is timed reads what they write: the same number of runs, each costing
  // only the graph's new steps and what feeds them (runtime::Executable::steps_to_skip).
  std::vector<bool> skip;
  if (!inputs().empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Tensor> outs = exe.run(inputs());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double out_bytes = 0;
    for (const Tensor& t : outs) out_bytes += static_cast<double>(t.byte_size());
    if (budget > 0 && ms >= budget / 5 && out_bytes / 1e6 <= ms / 100) spent = last = ms;
    if (budget > 0 && last > 0 && runtime::timed_runs(repeats_, budget, last) <= runtime::kMinTimedRuns)
      skip = exe.steps_to_skip([&](size_t i) { return usable(db_key(exe.steps()[i].signature)); });
  }
  // The warm-up runs leave out what the timed runs leave out (the steps left out need
  // no warming), so that the last one is a run like them: it is counted as the first
  // timed run when the next run agrees with it (keep_warmup_run), and a long graph or
  // operator is then timed in one run fewer (of the four a 160 ms product alone took).
  const std::vector<bool>* left_out = skip.empty() ? nullptr : &skip;
  std::vector<double> warm;
  for (int warmed = 0; warmed < warmup_ && !(budget > 0 && spent >= budget / 5); ++warmed) {
    warm = exe.profile_steps(0, 1, 0, left_out);
    last = total(warm);
    spent += last;
  }
  const int planned = runtime::timed_runs(repeats_, budget, last);
  std::vector<std::vector<double>> runs;
  std::vector<double> totals;
  // An operator alone whose every run so far cost more than op_ms's `enough_ms` (what
  // op_ms counts: its steps but the boundary conversions) is priced by those runs: a
  // further run would not bring it under the price that decides for the caller.
  double counted_min = std::numeric_limits<double>::infinity();
  auto counted = [&](const std::vector<double>& run) {
    double ms = 0;
    for (size_t s = 0; s < run.size(); ++s)
      if (!exe.steps()[s].boundary) ms += run[s];
    return ms;
  };
  bool above = false;
  const bool alone = !key_prefix_.empty();
  auto settled = [&] {
    const size_t n = static_cast<size_t>(planned);
    return alone ? alone_timing_settled(totals, n) : timing_settled(totals, n);
  };
  do {
    runs.push_back(exe.profile_steps(0, 1, 0, left_out));
    totals.push_back(total(runs.back()));
    if (runs.size() == 1 && !warm.empty() && keep_warmup_run(total(warm), totals[0])) {
      runs.insert(runs.begin(), std::move(warm));
      totals.insert(totals.begin(), last);
      ++warmups_kept_;
      counted_min = counted(runs.front());
    }
    counted_min = std::min(counted_min, counted(runs.back()));
    above = enough_ms_ > 0 && counted_min > enough_ms_;
  } while (!above && !settled());
  if (above && !settled()) ++ended_above_;
  if (std::count(skip.begin(), skip.end(), true) > 0) skipped_runs_ += runs.size();
  timed_runs_ += runs.size();
  // The steps of typical runs, each step averaged over them.
  const std::vector<size_t> typical = typical_runs(totals, alone);
  std::vector<double> out(exe.steps().size(), 0.0);
  for (size_t r : typical)
    for (size_t s = 0; s < out.size(); ++s) out[s] += runs[r][s];
  for (double& v : out) v /= static_cast<double>(typical.size());
  // A step left out costs what the first step of its signature took.
  if (!skip.empty()) {
    std::unordered_map<std::string, double> first;
    for (size_t s = 0; s < out.size(); ++s) {
      const std::string& sig = exe.steps()[s].signature;
      if (!skip[s]) first.emplace(sig, out[s]);
      else if (auto it = first.find(sig); it != first.end()) out[s] = it->second;
    }
    if (key_prefix_.empty()) to_database_scale(exe, skip, out);
  }
  return out;
}

void MeasuredCostModel::to_database_scale(runtime::Executable& exe, const std::vector<bool>& skip,
                                          std::vector<double>& out) {
  // The steps the database prices already that ran anyway (they write what a new
  // step reads): their rows against their times now say how much slower or faster
  // the machine runs than when the rows were timed. Processor time is not immune
  // to other jobs (a core's sibling, caches, the host's steal): NasNet-A's input,
  // timed in a burst of other jobs, priced 421 ms and five minutes later 313 ms,
  // so that its search's new steps, timed after the burst, made merges look 8%
  // cheaper that ran 2-3% slower. New steps go on the rows' scale, as the
  // priced graph compares them with those rows.
  double rows = 0, now = 0;
  for (size_t s = 0; s < out.size(); ++s) {
    if (skip[s] || exe.steps()[s].boundary) continue;
    const std::optional<CostDb::Entry> e = db_->find(fingerprint_, db_key(exe.steps()[s].signature));
    if (!usable(e) || e->ms <= 0 || out[s] <= 0) continue;
    rows += e->ms;
    now += out[s];
  }
  // Too little known work timed to tell a scale from a step's own noise.
  if (now < kScaleMinKnownMs) return;
  const double scale = std::clamp(rows / now, 1.0 / kScaleLimit, kScaleLimit);
  ++rescaled_;
  last_scale_ = scale;
  for (size_t s = 0; s < out.size(); ++s)
    if (!skip[s] && !usable(db_key(exe.steps()[s].signature))) out[s] *= scale;
}

bool keep_warmup_run(double warmup_total, double first_total) {
  return timing_settled({warmup_total, first_total}, std::numeric_limits<size_t>::max());
}

bool timing_settled(const std::vector<double>& totals, size_t planned) {
  if (totals.size() >= std::max<size_t>(planned, 1)) return true;
  if (totals.size() < kSettledRuns) return false;
  const auto [lo, hi] = std::minmax_element(totals.begin(), totals.end());
  return *lo > 0 && (*hi - *lo) / *lo <= kSettledSpread;
}

bool alone_timing_settled(const std::vector<double>& totals, size_t planned) {
  if (totals.size() >= std::max<size_t>(planned, 1)) return true;
  if (totals.size() < kAloneSettledRuns) return false;
  std::vector<double> fastest(totals);
  std::partial_sort(fastest.begin(), fastest.begin() + 2, fastest.end());
  if (fastest[0] < kAloneShortRunMs) return false;
  return (fastest[1] - fastest[0]) / fastest[0] <= kSettledSpread;
}

std::vector<size_t> typical_runs(const std::vector<double>& totals, bool alone) {
  std::vector<size_t> order(totals.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return totals[a] < totals[b]; });
  const size_t n = order.size();
  const size_t lo = alone ? 0 : n / 4;
  const size_t hi = alone ? std::max<size_t>(1, n / 4) : std::max(lo + 1, n - n / 4);
  return std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(std::min(lo, n)),
                             order.begin() + static_cast<std::ptrdiff_t>(std::min(hi, n)));
}

PairedRatio paired_summary(std::vector<double> ratios, const std::vector<double>& same_ratios) {
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  PairedRatio r;
  r.rounds = static_cast<int>(n);
  // The second highest of at least 5 rounds; of fewer, the highest.
  r.median = ratios[n / 2];
  r.high = ratios[n >= 5 ? n - 2 : n - 1];
  // A run's log time scatters by s, so an A/A pair's log ratio by sqrt(2) s, and the
  // median of its absolute value is 0.954 s; a round's ratio (one run over the mean
  // of two logs) scatters by sqrt(1.5) s, and the median of n rounds by 1.535 s /
  // sqrt(n). Two of those, about a 98% one-sided band: 3.2 m / sqrt(n).
  std::vector<double> spread;
  for (double aa : same_ratios)
    if (aa > 0) spread.push_back(std::fabs(std::log(aa)));
  if (!spread.empty()) {
    std::sort(spread.begin(), spread.end());
    const size_t m = spread.size();
    const double mid = m % 2 ? spread[m / 2] : (spread[m / 2 - 1] + spread[m / 2]) / 2;
    r.noise = kPairedNoiseScale * mid / std::sqrt(static_cast<double>(n));
  }
  return r;
}

PairedVerdict paired_verdict(const PairedRatio& r, double min_gain) {
  if (r.median <= 0) return PairedVerdict::Same;
  const double log_ratio = std::log(r.median);
  if (log_ratio > r.noise) return PairedVerdict::Slower;
  if (log_ratio < std::log(1 - min_gain) - r.noise && r.high <= 1 - min_gain) return PairedVerdict::Faster;
  return PairedVerdict::Same;
}

const char* paired_verdict_name(PairedVerdict v) {
  switch (v) {
    case PairedVerdict::Faster: return "faster";
    case PairedVerdict::Slower: return "slower";
    case PairedVerdict::Same: break;
  }
  return "same";
}

std::optional<PairedRatio> MeasuredCostModel::paired_ratio(const Graph& before, const Graph& after) {
  // Both compiled at once hold a copy of the weights each: not for a large model.
  if (before.constant_bytes() > kPairedLargestWeights || after.constant_bytes() > kPairedLargestWeights)
    return std::nullopt;
  const std::string kb = key_of(before, ropts_, true), ka = key_of(after, ropts_, true);
  if (kb.empty() || ka.empty()) return std::nullopt;
  const std::string pair = kb + "|" + ka;
  const std::string fact = "paired-aa|" + pair, fact_high = "paired-aa-high|" + pair,
                    fact_noise = "paired-aa-noise|" + pair, fact_rounds = "paired-aa-rounds|" + pair;
  {
    std::optional<double> median = db_->lookup_fact(fingerprint_, fact);
    std::optional<double> high = db_->lookup_fact(fingerprint_, fact_high);
    std::optional<double> noise = db_->lookup_fact(fingerprint_, fact_noise);
    std::optional<double> rounds = db_->lookup_fact(fingerprint_, fact_rounds);
    if (median && high && noise && rounds) return PairedRatio{*median, *high, *noise, static_cast<int>(*rounds)};
  }
  std::unique_ptr<runtime::Executable> eb, ea;
  std::vector<Tensor> ins;
  try {
    eb = runtime::compile(before, ropts_);
    ea = runtime::compile(after, ropts_);
    ins = valid_inputs(before, ropts_);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (ins.empty()) return std::nullopt;
  const auto compiled = std::chrono::steady_clock::now();
  // Processor time on one thread (as the steps are priced), else the wall clock.
  const runtime::StepClock clock = ropts_.processor_clock ? runtime::StepClock::process : runtime::StepClock::wall;
  auto timed = [&](runtime::Executable& exe, int times) {
    const double t0 = runtime::clock_ms(clock);
    for (int k = 0; k < times; ++k) exe.run(ins);
    return runtime::clock_ms(clock) - t0;
  };
  // The first runs touch the buffers and the weights' layouts, and tell how many runs
  // a round side needs.
  const double first = std::min(timed(*eb, 1), timed(*ea, 1));
  if (first > kPairedLongestRunMs) return std::nullopt;  // the prices decide
  const int times = std::max(1, static_cast<int>(std::ceil(kPairedRoundMs / std::max(first, 1e-3))));
  // Each round runs one graph, the other, then the first again (before in even
  // rounds, after in odd ones): the two runs of one graph give the round's A/A ratio,
  // the mean of their logs the side the other is compared with.
  std::vector<double> ratios, same_ratios;
  for (int r = 0; r < kPairedRounds; ++r) {
    const bool before_twice = r % 2 == 0;
    runtime::Executable& twice = before_twice ? *eb : *ea;
    runtime::Executable& once = before_twice ? *ea : *eb;
    const double t1 = timed(twice, times), t = timed(once, times), t2 = timed(twice, times);
    if (t1 <= 0 || t2 <= 0 || t <= 0) continue;
    const double ratio = t / std::sqrt(t1 * t2);
    ratios.push_back(before_twice ? ratio : 1 / ratio);
    same_ratios.push_back(t2 / t1);
  }
  timed_runs_ += 3 * static_cast<size_t>(kPairedRounds * times);
  if (ratios.empty()) return std::nullopt;
  const PairedRatio summary = paired_summary(ratios, same_ratios);
  if (std::getenv("ISOMER_DEBUG_COST"))
    std::fprintf(stderr, "paired: %d rounds of 3 x %d runs each in %.3f s after compiling\n", summary.rounds, times,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - compiled).count());
  db_->store_fact(fingerprint_, fact, summary.median);
  db_->store_fact(fingerprint_, fact_high, summary.high);
  db_->store_fact(fingerprint_, fact_noise, summary.noise);
  db_->store_fact(fingerprint_, fact_rounds, summary.rounds);
  return summary;
}

double MeasuredCostModel::step_ms(runtime::Executable& exe, size_t i, std::string& source) {
  const std::string sig = db_key(exe.steps()[i].signature);
  if (i < profiled_.size() && measured_here_.count(sig)) {
    // Timed in this very profile: priced by its own time, not by an earlier
    // step with the same signature (ResNet-50 repeats a block's convolutions
    // at other places, where the caches hold other data), so that the steps
    // of a profiled graph add up to the typical run they were timed in.
    source = "measured";
    ++measured_new_;
    return profiled_[i];
  }
  if (usable(sig)) {
    auto e = db_->find(fingerprint_, sig);
    source = e->noisy ? "cached-noisy" : "cached";
    ++cached_;
    noisy_ += e->noisy;
    return e->ms;
  }
  double ms = i < profiled_.size() ? profiled_[i] : exe.time_step(i, warmup_, repeats_, budget_ms_);
  // The load at either end of the measurement: a 1-minute average lags, so a
  // burst that began during it shows at the end.
  double load = std::max(load_before_, load_probe_());
  bool noisy = overloaded(load);
  db_->store(fingerprint_, sig, ms, repeats_, noisy, load);
  if (i < profiled_.size()) measured_here_.insert(sig);
  source = noisy ? "measured-noisy" : "measured";
  ++measured_new_;
  noisy_ += noisy;
  return ms;
}

double load_average() {
  // $ISOMER_LOAD_AVERAGE stands in for the machine's (tests; forcing a policy).
  if (const char* o = std::getenv("ISOMER_LOAD_AVERAGE"); o && *o) return std::strtod(o, nullptr);
  std::ifstream f("/proc/loadavg");
  double load = 0;
  if (!(f >> load)) return 0;
  return load;
}

std::string default_db_path() {
  if (const char* p = std::getenv("ISOMER_COST_DB")) return p;
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = x;
  else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache";
  else base = "/tmp";
  return base + "/isomer/costs.sqlite";
}

std::string machine_fingerprint(int threads) {
  return runtime::cpu_model() + "|threads=" + std::to_string(threads) + "|onednn=" + runtime::dnnl_version() + "|" +
         kRuntimeVersion;
}

PeakRates peak_rates(const std::string& db_path, int threads) {
  threads = threads > 0 ? threads : runtime::hardware_threads();
  CostDb db(db_path.empty() ? default_db_path() : db_path);
  std::string fp = machine_fingerprint(threads);
  PeakRates r;
  auto f = db.lookup_fact(fp, "gflops");
  auto b = db.lookup_fact(fp, "gbytes_per_s");
  if (f && b) {
    r.gflops = *f;
    r.gbytes_per_s = *b;
    return r;
  }
  runtime::RuntimeOptions o;
  o.threads = threads;
  // Compute: a 1024^3 matmul. Memory: an elementwise pass over 64 MB.
  {
    GraphBuilder gb;
    Value x = gb.input("x", {DType::Float32, make_shape({1024, 1024})});
    Value w = gb.constant(Tensor(DType::Float32, {1024, 1024}, std::string(1024 * 1024 * 4, '\0')));
    Graph g = gb.finish({gb.op1("MatMul", {x, w})}, {"y"});
    auto exe = runtime::compile(g, o);
    for (size_t i = 0; i < exe->steps().size(); ++i)
      if (exe->steps()[i].kind == "matmul") r.gflops = exe->steps()[i].flops / (exe->time_step(i, 2, 7) * 1e6);
  }
  {
    GraphBuilder gb;
    Value x = gb.input("x", {DType::Float32, make_shape({16, 1024, 1024})});
    Graph g = gb.finish({gb.op1("Relu", {x})}, {"y"});
    auto exe = runtime::compile(g, o);
    for (size_t i = 0; i < exe->steps().size(); ++i)
      if (exe->steps()[i].kind == "eltwise") r.gbytes_per_s = exe->steps()[i].bytes / (exe->time_step(i, 2, 7) * 1e6);
  }
  db.store_fact(fp, "gflops", r.gflops);
  db.store_fact(fp, "gbytes_per_s", r.gbytes_per_s);
  return r;
}

std::unique_ptr<CostModel> make_cost_model(const std::string& kind, const std::string& db_path, int threads) {
  threads = threads > 0 ? threads : runtime::hardware_threads();
  std::unique_ptr<CostModel> m;
  if (kind == "measured") m = std::make_unique<MeasuredCostModel>(db_path, threads);
  else if (kind == "analytic") m = std::make_unique<AnalyticCostModel>(peak_rates(db_path, threads));
  else throw Error("unknown cost model '" + kind + "' (measured or analytic)");
  m->runtime_options().threads = threads;
  return m;
}

}  // namespace isomer::cost
