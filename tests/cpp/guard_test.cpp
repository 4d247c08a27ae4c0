// The never-slower guard (pipeline/guard.h): the decision rule on timings it is
// given, and the whole pipeline with an engine on which one rewrite is slow. No
// test asserts a speed: they assert what the guard decided from what it measured.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "check/engines.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/text.h"
#include "pipeline/guard.h"
#include "pipeline/optimize.h"

namespace isomer {
namespace {

// A graph that "runs" in a given number of milliseconds, with a deterministic
// wobble of +-`jitter` (relative) from run to run.
class Scripted : public Prepared {
 public:
  Scripted(double ms, double jitter, double phase = 0) : ms_(ms), jitter_(jitter), phase_(phase) {}
  std::vector<Tensor> run(const std::vector<Tensor>&) override { return {}; }
  std::vector<double> time(const std::vector<Tensor>&, int, int repeats) override {
    std::vector<double> out;
    for (int i = 0; i < repeats; ++i) out.push_back(ms_ * (1 + jitter_ * std::sin(1.7 * static_cast<double>(++n_) + phase_)));
    return out;
  }

 private:
  double ms_, jitter_, phase_;
  int n_ = 0;
};

SpeedComparison compare(double before, double after, double jitter) {
  Scripted a(before, jitter), b(after, jitter, 2.0);
  return compare_speed(a, b, {}, GuardOptions{});
}

TEST(GuardDecision, PairedRatiosAndTheirNoiseDecide) {
  SpeedComparison slower = compare(1.0, 1.5, 0.01);
  EXPECT_EQ(slower.verdict, SpeedComparison::Verdict::Slower);
  EXPECT_NEAR(slower.ratio, 1.5, 0.05);
  EXPECT_EQ(slower.rounds, 7);
  // Each graph runs long enough a round (2 ms): 3 runs of the fastest 1 ms (0.99 ms
  // with the wobble), 2 of 1.5 ms.
  EXPECT_EQ(slower.runs_per_round, 3);
  EXPECT_EQ(slower.candidate_runs_per_round, 2);
  EXPECT_EQ(compare(1.0, 0.5, 0.01).verdict, SpeedComparison::Verdict::Faster);
  SpeedComparison same = compare(1.0, 1.01, 0.01);
  EXPECT_EQ(same.verdict, SpeedComparison::Verdict::Same);
  EXPECT_EQ(same.noise, 0.02);  // the floor: 2% is never called
  // A 10% slowdown inside 30% noise is not called slower: the band widens.
  SpeedComparison noisy = compare(100, 110, 0.3);
  EXPECT_GT(noisy.noise, 0.1);
  EXPECT_NE(noisy.verdict, SpeedComparison::Verdict::Slower);
  EXPECT_EQ(noisy.runs_per_round, 1);
  EXPECT_GT(noisy.rounds, 7);  // nominally slower at first: more rounds before it is called the same
  EXPECT_NE(slower.text().find("x slower (7 rounds of 3 and 2 runs, noise ±2.0%)"), std::string::npos) << slower.text();
  // Medians that point against the paired verdict (a busy machine) are named as such.
  SpeedComparison odd;
  odd.before_ms = 34.65, odd.after_ms = 47.96, odd.ratio = 0.999, odd.noise = 0.16, odd.rounds = 7;
  odd.runs_per_round = odd.candidate_runs_per_round = 1;
  odd.verdict = SpeedComparison::Verdict::Same;
  EXPECT_NE(odd.text().find("34.65 ms -> 47.96 ms, the medians; paired by round: the same within noise (1.00x faster)"),
            std::string::npos)
      << odd.text();
  EXPECT_EQ(same.text().find("the medians"), std::string::npos) << same.text();
}

// TASO's NasRNN at batch 16, the shape of its first step: y = tanh(x W2 + h0 W)
// with h0 and W constant, so folding makes h0 W a [16,64] constant, and MatMul +
// Add with that constant becomes a Gemm whose C is the full matrix
// (fold-gemm-bias); isomer's runtime once ran that Gemm 700x slower.
Graph nasrnn_step() {
  // Constants are made here (the text format wants every element written out).
  GraphBuilder b;
  auto weight = [&](std::vector<int64_t> dims, int seed, const std::string& name) {
    std::vector<double> v(static_cast<size_t>(num_elements(dims)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i) + seed) * 0.1;
    return b.constant(Tensor::from_f64(DType::Float32, dims, v), name);
  };
  Value x = b.input("x", {DType::Float32, make_shape({16, 64})});
  Value w2 = weight({64, 64}, 1, "w2"), h0 = weight({16, 64}, 2, "h0"), w = weight({64, 64}, 3, "w");
  Value y = b.op1("Tanh", {b.op1("Add", {b.op1("MatMul", {x, w2}), b.op1("MatMul", {h0, w})})});
  return b.finish({y}, {"y"});
}

bool has_gemm_with_full_c(const Graph& g) {
  for (const NodePtr& n : g.topo_order())
    if (n->op_type() == "Gemm" && n->inputs().size() > 2 && n->inputs()[2].type().rank() == 2) return true;
  return false;
}

// isomer's runtime for the outputs, with scripted timings so that the decision does
// not depend on how busy the machine is: every graph "runs" in 0.5 ms, plus
// `penalty_ms` for a graph with a Gemm whose C is a full matrix (the slow path of
// issue 14, made certain).
class SlowGemm : public Prepared {
 public:
  SlowGemm(std::unique_ptr<Prepared> inner, double penalty_ms) : inner_(std::move(inner)), penalty_(penalty_ms) {}
  std::vector<Tensor> run(const std::vector<Tensor>& in) override { return inner_->run(in); }
  std::vector<double> time(const std::vector<Tensor>&, int, int repeats) override {
    return std::vector<double>(static_cast<size_t>(repeats), 0.5 + penalty_);
  }

 private:
  std::unique_ptr<Prepared> inner_;
  double penalty_;
};

OptimizeOptions guarded(bool slow_gemm) {
  OptimizeOptions o;
  o.cost_model = "none";
  o.threads = 1;
  o.check_options.allow_onnxruntime = false;  // runtime against the reference evaluator: no helper needed
  if (slow_gemm)
    o.engine_factories[Engine::Runtime] = [](const Graph& g, const EngineOptions& eo) -> std::unique_ptr<Prepared> {
      return std::make_unique<SlowGemm>(prepare(g, Engine::Runtime, eo), has_gemm_with_full_c(g) ? 3.0 : 0.0);
    };
  return o;
}

TEST(Guard, NasRnnGemmWithAFullCIsNotWrittenWhenItIsSlower) {
  Graph g = nasrnn_step();
  // Without the guard the template passes make exactly that Gemm.
  OptimizeOptions off = guarded(true);
  off.guard = false;
  OptimizeResult unguarded = optimize_graph(g, {}, off);
  ASSERT_TRUE(has_gemm_with_full_c(unguarded.graph)) << print_graph(unguarded.graph);
  EXPECT_EQ(unguarded.report.guard.status, "off");

  OptimizeResult r = optimize_graph(g, {}, guarded(true));
  const GuardResult& guard = r.report.guard;
  EXPECT_EQ(guard.status, "measured");
  ASSERT_EQ(guard.reverted.size(), 1u) << r.report.to_text();
  EXPECT_EQ(guard.reverted[0].rule, "fold-gemm-bias");
  EXPECT_GT(guard.reverted[0].slowdown, 1.0);
  EXPECT_EQ(guard.kept, "reverted");
  EXPECT_FALSE(has_gemm_with_full_c(r.graph)) << print_graph(r.graph);
  EXPECT_EQ(r.report.rules_applied.count("fold-gemm-bias"), 0u);
  EXPECT_EQ(r.report.rules_applied.at("fold-constants"), 1u);  // h0 @ W is still folded
  ASSERT_TRUE(guard.comparison.has_value());
  EXPECT_NE(guard.comparison->verdict, SpeedComparison::Verdict::Slower);
  EXPECT_EQ(r.report.check.status, CheckResult::Status::Passed) << r.report.check.reason;
  const std::string text = r.report.to_text();
  EXPECT_NE(text.find("reverted: fold-gemm-bias (made it"), std::string::npos) << text;
  EXPECT_NE(text.find("kept: reverted"), std::string::npos) << text;
  EXPECT_NE(r.report.to_json().find("\"rule\": \"fold-gemm-bias\""), std::string::npos);
}

// Rules the guard bisected out are "reverted" in the text only when the model
// written is the rewrite without them; otherwise the line says what was tried.
TEST(Guard, ReportNamesRevertedRulesOnlyWhenTheyWereWrittenWithout) {
  OptimizeReport rep;
  rep.guard.status = "measured";
  rep.guard.reverted = {{"cse", 1.03}};
  rep.guard.kept = "reverted";
  EXPECT_NE(rep.to_text().find("reverted: cse (made it 1.03x slower)"), std::string::npos) << rep.to_text();
  rep.guard.kept = "templates";
  EXPECT_NE(rep.to_text().find("reverted: none written (templates kept); tried without cse (made it 1.03x slower)"),
            std::string::npos)
      << rep.to_text();
}

// A guard that timed on an overloaded machine says so (its noise bands widen, but a
// reader of "8.61x slower" should know other processes shared the cores).
TEST(Guard, ReportSaysWhenTheMachineWasBusy) {
  OptimizeReport rep;
  rep.guard.status = "measured";
  rep.guard.load_average = 5.4;
  rep.guard.cores = 2;
  EXPECT_TRUE(rep.guard.overloaded());
  EXPECT_NE(rep.to_text().find("the machine was busy (load average 5.4 on 2 cores)"), std::string::npos)
      << rep.to_text();
  EXPECT_NE(rep.to_json().find("\"guard_overloaded\": true"), std::string::npos);
  rep.guard.load_average = 1.2;
  EXPECT_FALSE(rep.guard.overloaded());
  EXPECT_EQ(rep.to_text().find("the machine was busy"), std::string::npos);
}

TEST(Guard, NasRnnStepOnTheRealRuntimeIsNeverWrittenSlower) {
  // No injected slowness: whatever isomer's runtime makes of the Gemm today, the
  // written model is one the guard did not measure slower than the input.
  OptimizeResult r = optimize_graph(nasrnn_step(), {}, guarded(false));
  const GuardResult& guard = r.report.guard;
  ASSERT_EQ(guard.status, "measured") << guard.reason;
  if (guard.kept == "original") {
    EXPECT_TRUE(same_graph(r.graph, nasrnn_step()));
  } else {
    ASSERT_TRUE(guard.comparison.has_value());
    EXPECT_NE(guard.comparison->verdict, SpeedComparison::Verdict::Slower) << r.report.to_text();
  }
  EXPECT_GE(guard.before_ms, 0);
  EXPECT_GE(guard.after_ms, 0);
}

TEST(Guard, AnUnchangedGraphIsNotTimedAndTheGuardCanBeSwitchedOff) {
  Graph g = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  return %0\n}");
  OptimizeResult r = optimize_graph(g, {}, guarded(false));
  EXPECT_EQ(r.report.guard.status, "unchanged");
  EXPECT_EQ(r.report.guard.kept, "original");
  EXPECT_EQ(r.report.check.method, "identical graphs");
  EXPECT_EQ(r.report.guard.comparisons, 0u);
}

TEST(Guard, ACandidateThatIsTheSameWithinNoiseAndNoSmallerIsNotWritten) {
  // Scripted engines: the optimized graph is as fast as the original and as big.
  Graph original = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  %1 = Neg(%0)\n  return %1\n}");
  Graph same_size = parse_graph("graph g(%x: f32[4]) {\n  %0 = Neg(%x)\n  %1 = Relu(%0)\n  return %1\n}");
  Engines engines;
  engines.set_factory(Engine::Runtime, [](const Graph&, const EngineOptions&) {
    return std::make_unique<Scripted>(1.0, 0.005);
  });
  ModelInputs inputs = valid_random_inputs(original, 0);
  GuardContext ctx;
  ctx.engines = &engines;
  ctx.inputs = &inputs;
  GuardResult r = run_guard(original, same_size, ctx, GuardOptions{});
  EXPECT_EQ(r.kept, "original");
  EXPECT_TRUE(same_graph(r.graph, original));
  ASSERT_FALSE(r.log.empty());
  EXPECT_NE(r.log.back().find("the same within noise and no smaller"), std::string::npos) << r.log.back();
}

}  // namespace
}  // namespace isomer

namespace isomer {
namespace {

TEST(Guard, ASmallerCandidateNominallySlowerInsideAWideBandIsNotWritten) {
  // 5% slower inside a band of about 9%: "the same within noise", and smaller, yet not written.
  Graph original = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  %1 = Neg(%0)\n  return %1\n}");
  Graph smaller = parse_graph("graph g(%x: f32[4]) {\n  %0 = Neg(%x)\n  return %0\n}");
  Engines engines;
  engines.set_factory(Engine::Runtime, [&](const Graph& g, const EngineOptions&) {
    return std::make_unique<Scripted>(g.num_ops() == 1 ? 105 : 100, 0.3, g.num_ops() == 1 ? 2.0 : 0.0);
  });
  ModelInputs inputs = valid_random_inputs(original, 0);
  GuardContext ctx;
  ctx.engines = &engines;
  ctx.inputs = &inputs;
  GuardResult r = run_guard(original, smaller, ctx, GuardOptions{});
  EXPECT_EQ(r.kept, "original");
  ASSERT_FALSE(r.log.empty());
  std::string log;
  for (const std::string& line : r.log) log += line + "\n";
  EXPECT_NE(log.find("nominally"), std::string::npos) << log;
}

TEST(Guard, ASmallerCandidateTheSameOnlyWithinAWideBandIsNotWritten) {
  // As fast as the original, but every round wobbles by 70%: the band stays wider
  // than max_same_noise through the extra rounds, so "the same" shows nothing.
  Graph original = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  %1 = Neg(%0)\n  return %1\n}");
  Graph smaller = parse_graph("graph g(%x: f32[4]) {\n  %0 = Neg(%x)\n  return %0\n}");
  auto guard = [&](double max_same_noise) {
    Engines engines;
    engines.set_factory(Engine::Runtime, [&](const Graph& g, const EngineOptions&) {
      return std::make_unique<Scripted>(100, 0.7, g.num_ops() == 1 ? 2.0 : 0.0);
    });
    ModelInputs inputs = valid_random_inputs(original, 0);
    GuardContext ctx;
    ctx.engines = &engines;
    ctx.inputs = &inputs;
    GuardOptions o;
    o.confirm_other = false;
    o.max_same_noise = max_same_noise;
    return run_guard(original, smaller, ctx, o);
  };
  GuardResult r = guard(GuardOptions{}.max_same_noise);
  std::string log;
  for (const std::string& line : r.log) log += line + "\n";
  EXPECT_EQ(r.kept, "original") << log;
  EXPECT_NE(log.find("too wide to show it is not slower"), std::string::npos) << log;
  // The same comparison with the band allowed is "the same, and smaller": written.
  GuardResult wide = guard(1.0);
  EXPECT_EQ(wide.kept, "optimized");
}

}  // namespace
}  // namespace isomer

// The confirmation on the other engine (guard.h, "Confirming"): scripted times on
// both engines, so the decision does not depend on the machine.
namespace isomer {
namespace {

struct TwoEngines {
  Graph original = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  %1 = Neg(%0)\n  %2 = Abs(%1)\n  return %2\n}");
  Graph optimized = parse_graph("graph g(%x: f32[4]) {\n  %0 = Neg(%x)\n  return %0\n}");
  Graph templates = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  %1 = Neg(%0)\n  return %1\n}");
  Engines engines;
  ModelInputs inputs = valid_random_inputs(original, 0);
  GuardContext ctx;

  // Milliseconds of the original, the optimized graph and the template passes alone on each engine.
  TwoEngines(std::array<double, 3> runtime, std::array<double, 3> ort) {
    script(Engine::Runtime, runtime);
    script(Engine::OnnxRuntime, ort);
    ctx.engines = &engines;
    ctx.inputs = &inputs;
    ctx.templates_only = templates;
  }
  void script(Engine e, std::array<double, 3> ms) {
    engines.set_factory(e, [this, ms](const Graph& g, const EngineOptions&) {
      const size_t i = same_graph(g, original) ? 0 : same_graph(g, optimized) ? 1 : 2;
      return std::make_unique<Scripted>(ms[i], 0.005, 0.5 * static_cast<double>(i));
    });
  }
  GuardResult run(GuardOptions o = {}) { return run_guard(original, optimized, ctx, o); }
};

std::string log_of(const GuardResult& r) {
  std::string s;
  for (const std::string& line : r.log) s += line + "\n";
  return s;
}

TEST(GuardConfirm, FasterOnTheTargetButSlowerOnTheOtherEngineFallsBackToTheTemplates) {
  // Twice as fast on isomer's runtime, 1.3x slower on ONNX Runtime; the template
  // passes alone are a little faster on both.
  TwoEngines t({10, 5, 9}, {10, 13, 9.5});
  GuardResult r = t.run();
  const std::string log = log_of(r);
  EXPECT_EQ(r.status, "measured");
  EXPECT_EQ(r.kept, "templates") << log;
  EXPECT_TRUE(same_graph(r.graph, t.templates));
  EXPECT_EQ(r.confirm_status, "confirmed");
  EXPECT_EQ(r.confirm_engine, Engine::OnnxRuntime);
  ASSERT_TRUE(r.confirm_comparison.has_value());
  EXPECT_NEAR(r.confirm_comparison->ratio, 0.95, 0.02);  // the templates' on ONNX Runtime
  ASSERT_TRUE(r.comparison.has_value());
  EXPECT_NEAR(r.comparison->ratio, 0.9, 0.02);  // and on the target
  // Optimized and templates, each on both engines, and optimized once more on
  // ONNX Runtime: a veto takes two comparisons.
  EXPECT_EQ(r.comparisons, 5u);
  EXPECT_NE(log.find("optimized looks slower on ONNX Runtime: 9.99 ms -> 13.03 ms, 1.30x slower (7 rounds of 1 run"), std::string::npos) << log;
  EXPECT_NE(log.find("not written: optimized is slower on ONNX Runtime: 9.99 ms -> 12.96 ms, 1.30x slower (7 rounds of 1 run"), std::string::npos) << log;
  EXPECT_NE(log.find("templates confirmed on ONNX Runtime: 10.01 ms -> 9.52 ms, 1.05x faster (7 rounds of 1 run, noise ±2.0%)"), std::string::npos) << log;
  EXPECT_NE(log.find("kept templates"), std::string::npos) << log;
}

// A graph whose first `slow_runs` timings read `slow_ms` and later ones `ms`: a
// session in a slow state that it leaves.
class Settling : public Prepared {
 public:
  Settling(double slow_ms, double ms, int slow_runs) : slow_(slow_ms), ms_(ms), left_(slow_runs) {}
  std::vector<Tensor> run(const std::vector<Tensor>&) override { return {}; }
  std::vector<double> time(const std::vector<Tensor>&, int, int repeats) override {
    std::vector<double> out;
    for (int i = 0; i < repeats; ++i) out.push_back(left_-- > 0 ? slow_ : ms_ * (1 + 0.005 * std::sin(1.3 * ++n_)));
    return out;
  }

 private:
  double slow_, ms_;
  int left_, n_ = 0;
};

TEST(GuardConfirm, OneSlowComparisonOnTheOtherEngineIsMeasuredAgainBeforeAVeto) {
  // Twice as fast on isomer's runtime; on ONNX Runtime as fast as the original,
  // but its session reads 1.4x slower for the whole first comparison.
  TwoEngines t({10, 5, 9}, {10, 10, 10});
  t.engines.set_factory(Engine::OnnxRuntime, [&t](const Graph& g, const EngineOptions&) -> std::unique_ptr<Prepared> {
    if (same_graph(g, t.optimized)) return std::make_unique<Settling>(14, 10, 7);
    return std::make_unique<Scripted>(10, 0.005);
  });
  GuardResult r = t.run();
  const std::string log = log_of(r);
  EXPECT_EQ(r.kept, "optimized") << log;
  EXPECT_EQ(r.confirm_status, "confirmed") << log;
  EXPECT_EQ(r.comparisons, 3u) << log;  // on the target, then twice on ONNX Runtime
  EXPECT_NE(log.find("optimized looks slower on ONNX Runtime"), std::string::npos) << log;
  EXPECT_NE(log.find("optimized confirmed on ONNX Runtime"), std::string::npos) << log;
}

TEST(GuardConfirm, SlowerOnTheOtherEngineEverywhereKeepsTheOriginal) {
  // The template passes alone are 4% slower on ONNX Runtime: not written either.
  TwoEngines t({10, 5, 9}, {10, 13, 10.4});
  GuardResult r = t.run();
  const std::string log = log_of(r);
  EXPECT_EQ(r.kept, "original") << log;
  EXPECT_TRUE(same_graph(r.graph, t.original));
  EXPECT_EQ(r.confirm_status, "slower");
  ASSERT_TRUE(r.confirm_comparison.has_value());
  EXPECT_NEAR(r.confirm_comparison->ratio, 1.3, 0.02);  // the target's first choice
  EXPECT_FALSE(r.comparison.has_value());
  EXPECT_NE(log.find("not written: templates is slower on ONNX Runtime"), std::string::npos) << log;
  EXPECT_NE(log.find("kept the original: every rewrite that is not slower on isomer's runtime is slower on ONNX Runtime"),
            std::string::npos)
      << log;
}

TEST(GuardConfirm, WhenBothEnginesAgreeTheOptimizedModelIsKept) {
  TwoEngines t({10, 5, 9}, {10, 8, 9});
  GuardResult r = t.run();
  const std::string log = log_of(r);
  EXPECT_EQ(r.kept, "optimized") << log;
  EXPECT_EQ(r.confirm_status, "confirmed");
  ASSERT_TRUE(r.confirm_comparison.has_value());
  EXPECT_EQ(r.confirm_comparison->verdict, SpeedComparison::Verdict::Faster);
  EXPECT_EQ(r.comparisons, 2u);  // the templates are not timed
  EXPECT_NE(log.find("optimized confirmed on ONNX Runtime: 9.99 ms -> 8.02 ms, 1.25x faster"), std::string::npos) << log;
}

TEST(GuardConfirm, SwitchedOffTheTargetAloneDecides) {
  TwoEngines t({10, 5, 9}, {10, 13, 9.5});
  GuardOptions o;
  o.confirm_other = false;
  GuardResult r = t.run(o);
  EXPECT_EQ(r.kept, "optimized");
  EXPECT_EQ(r.confirm_status, "off");
  EXPECT_FALSE(r.confirm_comparison.has_value());
  EXPECT_EQ(r.comparisons, 1u);
  EXPECT_NE(log_of(r).find("not confirmed on ONNX Runtime: switched off"), std::string::npos) << log_of(r);
}

TEST(GuardConfirm, AnOtherEngineThatCannotRunTheOriginalIsSkipped) {
  {  // ONNX Runtime switched off (no factory stands in for it): skipped, and the target decides.
    Engines engines(EngineOptions{.allow_onnxruntime = false});
    TwoEngines t({10, 5, 9}, {10, 13, 9.5});
    engines.set_factory(Engine::Runtime, [&](const Graph& g, const EngineOptions&) {
      return std::make_unique<Scripted>(same_graph(g, t.original) ? 10 : 5, 0.005);
    });
    t.ctx.engines = &engines;
    GuardResult r = t.run();
    EXPECT_EQ(r.kept, "optimized");
    EXPECT_EQ(r.confirm_status, "skipped");
    EXPECT_EQ(r.confirm_reason, "ONNX Runtime is switched off");
    EXPECT_NE(log_of(r).find("not confirmed on ONNX Runtime: ONNX Runtime is switched off"), std::string::npos);
  }
  {  // Target ONNX Runtime; isomer's runtime cannot run the original.
    TwoEngines t({10, 5, 9}, {10, 5, 9});
    t.engines.set_factory(Engine::Runtime, [](const Graph&, const EngineOptions&) -> std::unique_ptr<Prepared> {
      throw Error("an opaque node it cannot run");
    });
    GuardOptions o;
    o.target = Engine::OnnxRuntime;
    GuardResult r = t.run(o);
    EXPECT_EQ(r.kept, "optimized");
    EXPECT_EQ(r.confirm_status, "skipped");
    EXPECT_EQ(r.confirm_engine, Engine::Runtime);
    EXPECT_NE(log_of(r).find("not confirmed on isomer's runtime: the original does not run there (an opaque node"),
              std::string::npos)
        << log_of(r);
  }
}

// isomer's runtime cannot plan the original (data-dependent shapes), so `isomer run`
// runs it on ONNX Runtime: the guard times the rewrite there, and keeps the original
// where it is slower there or where no engine runs it.
TEST(GuardConfirm, AnOriginalTheTargetCannotRunIsTimedOnTheOtherEngine) {
  auto cannot_plan = [](const Graph&, const EngineOptions&) -> std::unique_ptr<Prepared> {
    throw Error("NonZero: its output shapes depend on the data");
  };
  {  // faster on ONNX Runtime: written, timed there
    TwoEngines t({10, 5, 9}, {10, 5, 9});
    t.engines.set_factory(Engine::Runtime, cannot_plan);
    GuardResult r = t.run();
    EXPECT_EQ(r.status, "measured") << r.reason;
    EXPECT_EQ(r.engine, Engine::OnnxRuntime);
    EXPECT_EQ(r.kept, "optimized") << log_of(r);
    EXPECT_NEAR(r.before_ms, 10, 0.5);
    EXPECT_NE(r.reason.find("timed on ONNX Runtime, which runs it instead"), std::string::npos) << r.reason;
    EXPECT_EQ(r.confirm_engine, Engine::Runtime);
    EXPECT_EQ(r.confirm_status, "skipped");
  }
  {  // 1.3x slower on ONNX Runtime, as the templates are: the original is written
    TwoEngines t({10, 5, 5}, {10, 13, 13});
    t.engines.set_factory(Engine::Runtime, cannot_plan);
    GuardResult r = t.run();
    EXPECT_EQ(r.status, "measured");
    EXPECT_EQ(r.kept, "original") << log_of(r);
    EXPECT_TRUE(same_graph(r.graph, t.original));
  }
  {  // no engine runs it: nothing shows the rewrite is not slower
    TwoEngines t({10, 5, 9}, {10, 5, 9});
    t.engines.set_factory(Engine::Runtime, cannot_plan);
    t.engines.set_factory(Engine::OnnxRuntime, cannot_plan);
    GuardResult r = t.run();
    EXPECT_EQ(r.status, "skipped");
    EXPECT_EQ(r.kept, "original");
    EXPECT_TRUE(same_graph(r.graph, t.original));
    EXPECT_NE(r.reason.find("so the original is kept"), std::string::npos) << r.reason;
  }
}

// A rewrite the target runtime computes wrongly (while it computes the original right
// and the reference evaluator finds both equal) is not written: optimize keeps the
// original, names the fault, and still succeeds.
TEST(Guard, ARewriteTheRuntimeComputesWronglyKeepsTheOriginal) {
  Graph g = nasrnn_step();
  OptimizeOptions o = guarded(false);
  o.engine_factories[Engine::Runtime] = [g](const Graph& h, const EngineOptions& eo) -> std::unique_ptr<Prepared> {
    class Off : public Prepared {
     public:
      Off(std::unique_ptr<Prepared> inner, bool wrong) : inner_(std::move(inner)), wrong_(wrong) {}
      std::vector<Tensor> run(const std::vector<Tensor>& in) override {
        std::vector<Tensor> out = inner_->run(in);
        if (wrong_)
          for (Tensor& t : out) {
            std::vector<double> v = t.to_f64();
            for (double& x : v) x = x * 2 + 1;
            t = Tensor::from_f64(t.dtype(), t.dims(), v);
          }
        return out;
      }
      std::vector<double> time(const std::vector<Tensor>& in, int warmup, int repeats) override {
        return inner_->time(in, warmup, repeats);
      }

     private:
      std::unique_ptr<Prepared> inner_;
      bool wrong_;
    };
    return std::make_unique<Off>(prepare(h, Engine::Runtime, eo), !same_graph(h, g));
  };
  OptimizeResult r = optimize_graph(g, {}, o);
  EXPECT_EQ(r.report.check.status, CheckResult::Status::Failed);
  EXPECT_TRUE(r.report.check.engine_fault);
  EXPECT_EQ(r.report.guard.kept, "original") << r.report.to_text();
  EXPECT_TRUE(same_graph(r.graph, g));
  EXPECT_TRUE(r.report.rules_applied.empty()) << r.report.to_text();
  EXPECT_NE(r.report.guard.reason.find("computes the rewritten graph wrongly"), std::string::npos)
      << r.report.guard.reason;
  EXPECT_NE(r.report.guard.reason.find("the original is kept"), std::string::npos) << r.report.guard.reason;
  EXPECT_NE(r.report.to_json().find("\"check_engine_fault\": true"), std::string::npos);
}

// The whole pipeline: the options reach the guard, the report carries the confirmation.
TEST(GuardConfirm, ThePipelineFallsBackWhenEveryRewriteIsSlowerOnOnnxRuntime) {
  Graph g = nasrnn_step();
  OptimizeOptions o = guarded(true);  // the Gemm with a full C is slow on isomer's runtime
  // On "ONNX Runtime" (scripted; the check does not use it, it is switched off
  // there) every rewrite is 1.5x slower than the original.
  o.engine_factories[Engine::OnnxRuntime] = [](const Graph& h, const EngineOptions&) -> std::unique_ptr<Prepared> {
    return std::make_unique<Scripted>(same_graph(h, nasrnn_step()) ? 1.0 : 1.5, 0.005);
  };
  OptimizeResult r = optimize_graph(g, {}, o);
  const GuardResult& guard = r.report.guard;
  EXPECT_EQ(guard.kept, "original") << r.report.to_text();
  EXPECT_EQ(guard.confirm_status, "slower");
  EXPECT_TRUE(same_graph(r.graph, g));
  EXPECT_TRUE(r.report.rules_applied.count("fold-constants") == 0) << r.report.to_text();
  const std::string json = r.report.to_json();
  EXPECT_NE(json.find("\"guard_confirm\": \"slower\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"guard_confirm_engine\": \"onnxruntime\""), std::string::npos) << json;
  EXPECT_NE(r.report.to_text().find("slower on ONNX Runtime: 0.999 ms -> 1.501 ms (1.50x slower)"), std::string::npos)
      << r.report.to_text();

  o.guard_options.confirm_other = false;
  OptimizeResult off = optimize_graph(g, {}, o);
  EXPECT_EQ(off.report.guard.kept, "reverted") << off.report.to_text();
  EXPECT_EQ(off.report.guard.confirm_status, "off");
  EXPECT_NE(off.report.to_text().find("not confirmed on ONNX Runtime: switched off"), std::string::npos);
}

}  // namespace
}  // namespace isomer
