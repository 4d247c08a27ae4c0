// The cost model: analytic estimates are deterministic and see fusion; measured
// costs persist in the database and are reused; concurrent writers are safe.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <unistd.h>

#include "cost/cost.h"
#include "cost/cost_db.h"
#include "ir/graph.h"

namespace isomer {
namespace {

// A database file with its write-ahead log and shared-memory index (SQLite's WAL mode).
void remove_db(const std::string& p) {
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(p + ext);
}

std::string temp_db(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("isomer_cost_" + name + "_" + std::to_string(::getpid()) + ".sqlite");
  remove_db(p.string());
  return p.string();
}

Tensor ones(std::vector<int64_t> dims) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)), 0.01);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// conv -> relu, and the same with the relu on a separate tensor (a graph output).
Graph conv_relu(bool keep_conv_output) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 28, 28})});
  Value c = b.op1("Conv", {x, b.constant(ones({32, 16, 3, 3}))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value r = b.op1("Relu", {c});
  return keep_conv_output ? b.finish({r, c}, {"r", "c"}) : b.finish({r}, {"r"});
}

cost::PeakRates fixed_rates() {
  cost::PeakRates r;
  r.gflops = 50;
  r.gbytes_per_s = 10;
  return r;
}

TEST(Cost, AnalyticIsDeterministicAndSeesFusion) {
  cost::AnalyticCostModel m(fixed_rates());
  m.runtime_options().threads = 1;
  double fused = m.graph_ms(conv_relu(false));
  EXPECT_DOUBLE_EQ(fused, m.graph_ms(conv_relu(false)));
  double unfused = m.graph_ms(conv_relu(true));
  EXPECT_GT(fused, 0);
  EXPECT_LT(fused, unfused);  // the separate relu pass is not free
  cost::GraphCost gc = m.graph_cost(conv_relu(false));
  EXPECT_EQ(gc.measured_new, 0u);
  ASSERT_FALSE(gc.steps.empty());
  for (const cost::StepCost& s : gc.steps) EXPECT_EQ(s.source, "analytic");
}

TEST(Cost, ConcatCopiesAreNotFree) {
  cost::AnalyticCostModel m(fixed_rates());
  m.runtime_options().threads = 1;
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 64, 32, 32})});
  Value y = b.input("y", {DType::Float32, make_shape({1, 64, 32, 32})});
  Graph g = b.finish({b.op1("Concat", {x, y}, {{"axis", int64_t{1}}})}, {"z"});
  cost::GraphCost gc = m.graph_cost(g);
  // Graph inputs cannot be written in place: each part is copied.
  int copies = 0;
  for (const cost::StepCost& s : gc.steps)
    if (s.step.ops == std::vector<std::string>{"Concat"}) copies += s.ms > 0;
  EXPECT_EQ(copies, 2);
}

TEST(Cost, OperatorInstanceCost) {
  cost::AnalyticCostModel m(fixed_rates());
  m.runtime_options().threads = 1;
  Graph g = conv_relu(true);
  const Node& conv = *g.outputs()[1].node;
  double small = m.op_ms(conv);
  EXPECT_GT(small, 0);
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 56, 56})});
  Value c = b.op1("Conv", {x, b.constant(ones({32, 16, 3, 3}))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  EXPECT_GT(m.op_ms(*c.node), 3 * small);
}

TEST(Cost, MeasuredCostsPersistAcrossModels) {
  std::string db = temp_db("persist");
  auto quiet = [] { return 0.0; };  // a fixed load: no measurement is re-taken as noisy
  {
    cost::MeasuredCostModel m(db, 1, 1, 3);
    m.set_load_probe(quiet);
    cost::GraphCost first = m.graph_cost(conv_relu(false));
    EXPECT_GT(first.measured_new, 0u);
    EXPECT_EQ(first.cached, 0u);
    EXPECT_GT(first.total_ms, 0);
  }
  cost::MeasuredCostModel again(db, 1, 1, 3);  // a new process would see the same
  again.set_load_probe(quiet);
  cost::GraphCost second = again.graph_cost(conv_relu(false));
  EXPECT_EQ(second.measured_new, 0u);
  EXPECT_EQ(second.cached, second.steps.size());
  // Another thread count is another machine configuration.
  cost::MeasuredCostModel two(db, 2, 1, 3);
  two.set_load_probe(quiet);
  EXPECT_GT(two.graph_cost(conv_relu(false)).measured_new, 0u);
  remove_db(db);
}

// A graph priced before is priced from its kept plan and the step rows, without
// compiling, to the same GraphCost; the plan holds no time, so a step measured
// again prices the next reuse; another graph or thread count is another plan.
TEST(Cost, KeptPlansPriceWithoutCompiling) {
  std::string db = temp_db("plans");
  auto quiet = [] { return 0.0; };
  cost::GraphCost compiled;
  {
    cost::MeasuredCostModel m(db, 1, 1, 3);
    m.set_load_probe(quiet);
    m.graph_cost(conv_relu(false));  // measures the steps, keeps the plan
    compiled = m.graph_cost(conv_relu(false));
    EXPECT_EQ(m.compiles(), 1u);
    EXPECT_EQ(m.plans_reused(), 1u);
  }
  cost::GraphCost plain;
  {
    cost::MeasuredCostModel m(db, 1, 1, 3);
    m.set_load_probe(quiet);
    m.set_keep_plans(false);
    plain = m.graph_cost(conv_relu(false));
    EXPECT_EQ(m.compiles(), 1u);
  }
  cost::MeasuredCostModel again(db, 1, 1, 3);
  again.set_load_probe(quiet);
  cost::GraphCost kept = again.graph_cost(conv_relu(false));
  EXPECT_EQ(again.compiles(), 0u);
  EXPECT_EQ(again.plans_reused(), 1u);
  for (const cost::GraphCost* gc : {&compiled, &kept}) {
    EXPECT_EQ(gc->total_ms, plain.total_ms);
    EXPECT_EQ(gc->io_ms, plain.io_ms);
    EXPECT_EQ(gc->threads, plain.threads);
    EXPECT_EQ(gc->cached, plain.cached);
    EXPECT_EQ(gc->measured_new, 0u);
    ASSERT_EQ(gc->steps.size(), plain.steps.size());
    for (size_t i = 0; i < plain.steps.size(); ++i) {
      EXPECT_EQ(gc->steps[i].ms, plain.steps[i].ms);
      EXPECT_EQ(gc->steps[i].source, plain.steps[i].source);
      EXPECT_EQ(gc->steps[i].step.signature, plain.steps[i].step.signature);
      EXPECT_EQ(gc->steps[i].step.nodes, plain.steps[i].step.nodes);
      EXPECT_EQ(gc->steps[i].step.label, plain.steps[i].step.label);
      EXPECT_EQ(gc->steps[i].step.flops, plain.steps[i].step.flops);
      EXPECT_EQ(gc->steps[i].step.boundary, plain.steps[i].step.boundary);
    }
  }
  // A step's row changed: the kept plan prices with the new time.
  {
    cost::CostDb d(db);
    d.store(again.fingerprint(), plain.steps[0].step.signature, plain.steps[0].ms + 1.0, 3);
  }
  cost::MeasuredCostModel changed(db, 1, 1, 3);
  changed.set_load_probe(quiet);
  EXPECT_NEAR(changed.graph_ms(conv_relu(false)), plain.total_ms + 1.0, 1e-9);
  EXPECT_EQ(changed.compiles(), 0u);
  // A noisy row taken under more load than now is measured again: compiled.
  {
    cost::CostDb d(db);
    d.store(again.fingerprint(), plain.steps[0].step.signature, plain.steps[0].ms, 3, true, 100.0);
  }
  cost::MeasuredCostModel remeasure(db, 1, 1, 3);
  remeasure.set_load_probe(quiet);
  cost::GraphCost re = remeasure.graph_cost(conv_relu(false));
  EXPECT_EQ(remeasure.compiles(), 1u);
  EXPECT_GT(re.measured_new, 0u);
  // Keys: another graph, constant or thread count is another plan.
  runtime::RuntimeOptions one, two;
  one.threads = 1;
  two.threads = 2;
  EXPECT_EQ(cost::plan_key(conv_relu(false), one), cost::plan_key(conv_relu(false), one));
  EXPECT_NE(cost::plan_key(conv_relu(false), one), cost::plan_key(conv_relu(true), one));
  EXPECT_NE(cost::plan_key(conv_relu(false), one), cost::plan_key(conv_relu(false), two));
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 28, 28})});
  Value c = b.op1("Conv", {x, b.constant(Tensor::from_f64(DType::Float32, {32, 16, 3, 3},
                                                          std::vector<double>(32 * 16 * 9, 0.02)))},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  EXPECT_NE(cost::plan_key(b.finish({b.op1("Relu", {c})}, {"r"}), one), cost::plan_key(conv_relu(false), one));
  // Encoded and decoded unchanged; anything else is not a plan.
  cost::Plan p;
  p.threads = 3;
  p.input_bytes = 1234.5;
  p.steps = {runtime::StepInfo{"conv", "a:b", "sig|x:1", {"Conv", "Relu"}, {"a", ""}, 1e9 / 3, 17.25, true}};
  std::optional<cost::Plan> q = cost::decode_plan(cost::encode_plan(p));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->threads, 3);
  EXPECT_EQ(q->input_bytes, p.input_bytes);
  ASSERT_EQ(q->steps.size(), 1u);
  EXPECT_EQ(q->steps[0].signature, p.steps[0].signature);
  EXPECT_EQ(q->steps[0].nodes, p.steps[0].nodes);
  EXPECT_EQ(q->steps[0].ops, p.steps[0].ops);
  EXPECT_EQ(q->steps[0].flops, p.steps[0].flops);
  EXPECT_TRUE(q->steps[0].boundary);
  EXPECT_FALSE(cost::decode_plan(cost::encode_plan(p) + "x"));
  EXPECT_FALSE(cost::decode_plan("garbage"));
  remove_db(db);
}

TEST(Cost, TimingStopsEarlyOnlyWhenRunsAgree) {
  // Two runs within 1% of each other: settled before the three planned.
  EXPECT_FALSE(cost::timing_settled({660.0}, 3));
  EXPECT_TRUE(cost::timing_settled({660.0, 663.0}, 3));
  // Spread by more: every planned run is taken, and no more.
  EXPECT_FALSE(cost::timing_settled({660.0, 700.0}, 3));
  EXPECT_TRUE(cost::timing_settled({660.0, 700.0, 690.0}, 3));
  // A short graph planned for 15 runs stops once its runs agree, all of them: one
  // that strayed keeps it going.
  EXPECT_TRUE(cost::timing_settled({1.000, 1.005}, 15));
  EXPECT_FALSE(cost::timing_settled({1.0, 1.2, 0.9}, 15));
  EXPECT_FALSE(cost::timing_settled({1.0, 1.2, 0.9, 0.95, 0.951}, 15));
  // One run settles nothing unless one was all that was planned; none never does.
  EXPECT_FALSE(cost::timing_settled({5.0}, 15));
  EXPECT_TRUE(cost::timing_settled({5.0}, 1));
  EXPECT_FALSE(cost::timing_settled({}, 1));
}

TEST(Cost, AWarmUpRunIsTimedOnlyWhenTheNextRunAgrees) {
  // The next run within 1%: the warm-up was warm already, and counts.
  EXPECT_TRUE(cost::keep_warmup_run(660.0, 663.0));
  EXPECT_TRUE(cost::keep_warmup_run(663.0, 660.0));
  // A warm-up slowed by a cold cache or page faults, or one the next run outlasts by
  // more, is dropped.
  EXPECT_FALSE(cost::keep_warmup_run(700.0, 660.0));
  EXPECT_FALSE(cost::keep_warmup_run(660.0, 700.0));
  EXPECT_FALSE(cost::keep_warmup_run(0.0, 0.0));
}

// Runs of an operator alone, timed in turn until its rule settles, and the price the
// typical runs give (the step times of a one-step graph are its run totals).
static double price_of_runs(const std::vector<double>& timings, size_t planned, bool alone, size_t* taken) {
  std::vector<double> totals;
  for (double t : timings) {
    totals.push_back(t);
    if (alone ? cost::alone_timing_settled(totals, planned) : cost::timing_settled(totals, planned)) break;
  }
  *taken = totals.size();
  double ms = 0;
  const std::vector<size_t> typical = cost::typical_runs(totals, alone);
  for (size_t r : typical) ms += totals[r];
  return ms / static_cast<double>(typical.size());
}

TEST(Cost, AnOperatorAloneIsPricedByItsFastestRuns) {
  // NasRNN's time-step merge priced alone: its first two runs inflated alike (data
  // evicted by other jobs), 0.074 ms, the rest 0.012 ms. A whole graph's rule stops at
  // the agreeing pair; an operator alone's goes on and takes its fastest runs.
  const std::vector<double> inflated = {0.074, 0.0745, 0.012, 0.0121, 0.0120, 0.090, 0.0122, 0.0121,
                                        0.0120, 0.0121, 0.012, 0.0125, 0.0121, 0.0120, 0.0122};
  size_t taken = 0;
  EXPECT_NEAR(price_of_runs(inflated, 15, true, &taken), 0.012, 0.0002);
  EXPECT_EQ(taken, 15u);  // a short operator takes every planned run
  EXPECT_GT(price_of_runs(inflated, 15, false, &taken), 0.07);
  EXPECT_EQ(taken, 2u);
  // A longer operator stops once three runs are taken and its two fastest agree,
  // however the others ran; an inflated agreeing pair does not stop it.
  EXPECT_NEAR(price_of_runs({9.0, 9.05, 6.0, 7.0, 6.02, 6.01}, 15, true, &taken), 6.0, 1e-9);
  EXPECT_EQ(taken, 5u);
  EXPECT_FALSE(cost::alone_timing_settled({9.0, 9.05}, 15));
  EXPECT_TRUE(cost::alone_timing_settled({6.0, 9.0, 6.05}, 15));
  EXPECT_TRUE(cost::alone_timing_settled({40.0, 44.0, 48.0}, 3));  // planned runs all taken
  EXPECT_FALSE(cost::alone_timing_settled({}, 1));
  // Whole graphs keep their typical runs: the middle half.
  EXPECT_EQ(cost::typical_runs({5.0, 1.0, 3.0, 2.0}, false), (std::vector<size_t>{3, 2}));
  EXPECT_EQ(cost::typical_runs({5.0, 1.0, 3.0, 2.0}, true), (std::vector<size_t>{1}));
  EXPECT_EQ(cost::typical_runs({5.0}, true), (std::vector<size_t>{0}));
}

TEST(Cost, AnOperatorTheRuntimeRunsAsAViewIsPricedWithoutTiming) {
  // A Split along rows of a graph input is a view: compiled alone it is the
  // conversions of its input and outputs, which op_ms does not count, so nothing is
  // run (TASO's BERT timed three such Splits); a product beside it is timed.
  std::string db = temp_db("view_alone");
  cost::MeasuredCostModel m(db, 1, 1, 3);
  m.set_load_probe([] { return 0.0; });
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({96, 64})});
  std::vector<Value> parts = b.op("Split", {x, b.constant(Tensor::vector_i64({32, 32, 32}))}, {{"axis", int64_t{0}}}, 3);
  Graph split = b.finish(parts, {"a", "b", "c"});
  for (const runtime::StepInfo& s : m.plan(split).steps) EXPECT_TRUE(s.boundary) << s.label;
  EXPECT_EQ(m.op_ms(*parts[0].node), 0.0);
  EXPECT_EQ(m.timed_runs(), 0u);
  EXPECT_EQ(m.input_sets_made(), 0u);
  EXPECT_EQ(m.op_ms(*parts[0].node), 0.0);  // again, from the kept plan
  EXPECT_EQ(m.timed_runs(), 0u);
  GraphBuilder p;
  Value y = p.op1("MatMul", {p.input("y", {DType::Float32, make_shape({96, 64})}), p.constant(ones({64, 64}))});
  EXPECT_GT(m.op_ms(*y.node), 0.0);
  EXPECT_GE(m.timed_runs(), cost::kSettledRuns);
  EXPECT_LE(m.warmup_runs_kept(), m.timed_runs());
  remove_db(db);
}

// An operator alone whose runs show it dearer than what the caller needs to know
// (a candidate of the search already above what it would replace) is timed in one
// run, not until its runs agree; without that price, the same product (a new
// database: nothing kept) is timed in the two agreeing runs at least. No warm-up
// run: a kept one would count as a timed run either way.
TEST(Cost, AnOperatorAloneDearerThanEnoughIsTimedOnce) {
  struct Timed {
    double ms = 0;
    size_t runs = 0, ended_above = 0;
  };
  auto timed = [](const std::string& name, double enough_ms) {
    const std::string db = temp_db(name);
    cost::MeasuredCostModel m(db, 1, /*warmup=*/0, /*repeats=*/15);
    m.set_load_probe([] { return 0.0; });
    GraphBuilder b;
    Value y = b.op1("MatMul", {b.input("y", {DType::Float32, make_shape({128, 256})}), b.constant(ones({256, 256}))});
    Timed t;
    t.ms = m.op_ms(*y.node, enough_ms);
    t.runs = m.timed_runs();
    t.ended_above = m.timings_ended_above();
    remove_db(db);
    return t;
  };
  const Timed once = timed("alone_enough", 1e-6);
  EXPECT_EQ(once.runs, 1u);
  EXPECT_EQ(once.ended_above, 1u);
  EXPECT_GT(once.ms, 1e-6);
  for (double enough : {0.0, 1e6}) {  // none, or one never reached: timed as before
    const Timed all = timed("alone_all", enough);
    EXPECT_GE(all.runs, cost::kSettledRuns) << enough;
    EXPECT_EQ(all.ended_above, 0u) << enough;
  }
}

// Six equal layers (MatMul + Relu on [128,256] x [256,256]) and a small product out,
// so that a run's outputs are small next to its time.
Graph equal_layers() {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({128, 256})});
  for (int i = 0; i < 6; ++i) x = b.op1("Relu", {b.op1("MatMul", {x, b.constant(ones({256, 256}))})});
  return b.finish({b.op1("MatMul", {x, b.constant(ones({256, 1}))})}, {"y"});
}

TEST(Cost, LongGraphsAreTimedWithoutTheirRepeatedSteps) {
  auto quiet = [] { return 0.0; };
  // A budget every run outlasts: the fewest runs are taken whatever they cost, so the
  // steps repeating an earlier one's signature are left out of them and priced by
  // the first one's time.
  std::string db = temp_db("repeats");
  cost::MeasuredCostModel m(db, 1, 1, 5, /*budget_ms=*/1e-6);
  m.set_load_probe(quiet);
  cost::GraphCost gc = m.graph_cost(equal_layers());
  EXPECT_GT(m.runs_without_repeats(), 0u);
  EXPECT_EQ(m.runs_without_repeats(), m.timed_runs());
  // Every repeat but the last layer's (the last product, which is timed, reads it)
  // costs exactly what the first of its signature does.
  std::map<std::string, double> first;
  size_t repeats = 0, priced_as_first = 0;
  for (const cost::StepCost& s : gc.steps) {
    EXPECT_GT(s.ms, 0) << s.step.label;
    auto [it, inserted] = first.emplace(s.step.signature, s.ms);
    if (!inserted) {
      ++repeats;
      priced_as_first += s.ms == it->second;
    }
  }
  EXPECT_GE(repeats, 4u);
  EXPECT_GE(priced_as_first + 1, repeats);
  EXPECT_GE(priced_as_first, 3u);
  remove_db(db);
  // A short graph within the usual budget takes as many runs as the budget holds, every
  // step in each: nothing is left out.
  std::string db2 = temp_db("repeats_short");
  cost::MeasuredCostModel short_budget(db2, 1, 1, 5);
  short_budget.set_load_probe(quiet);
  short_budget.graph_cost(equal_layers());
  EXPECT_GT(short_budget.timed_runs(), 0u);
  EXPECT_EQ(short_budget.runs_without_repeats(), 0u);
  remove_db(db2);
}

// Layers of [512,512] x [512,512] products (each a few ms: known work enough to
// tell a scale), then a product down to `out` columns.
// Layers wide enough that the known product timed alongside a new one is well past
// kScaleMinKnownMs on a fast core: 1024 x 768 x 768 is 1.2 GFLOP, over 8 ms at 140
// GFLOP/s (512 x 512 x 512 took 2.0-2.3 ms on session 24's Xeon, and fell below the
// 2 ms floor about half the time, so nothing was rescaled).
Graph wide_layers(int64_t out) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1024, 768})});
  for (int i = 0; i < 3; ++i) x = b.op1("Relu", {b.op1("MatMul", {x, b.constant(ones({768, 768}))})});
  return b.finish({b.op1("MatMul", {x, b.constant(ones({768, out}))})}, {"y"});
}

TEST(Cost, NewStepsArePricedOnTheScaleOfTheRowsTheyJoin) {
  // The layers priced first; then their rows made 16x dearer (as a burst of other
  // jobs leaves them) or 16x cheaper (far past kScaleLimit, so that one timing
  // several times off, as a first run can be, still clamps); then a graph of the
  // same layers and a new last product is priced in runs that leave out the known
  // layers but the last (it feeds the new product): the new product goes on the
  // rows' scale, the factor capped at kScaleLimit either way.
  auto quiet = [] { return 0.0; };
  auto new_product_ms = [&](double factor) {
    std::string db = temp_db("scale");
    cost::MeasuredCostModel first(db, 1, 1, 5, /*budget_ms=*/1e-6);
    first.set_load_probe(quiet);
    const cost::GraphCost layers = first.graph_cost(wide_layers(8));
    {
      cost::CostDb rows(db);
      for (const cost::StepCost& s : layers.steps) rows.store(first.fingerprint(), s.step.signature, s.ms * factor, 5);
    }
    cost::MeasuredCostModel then(db, 1, 1, 5, /*budget_ms=*/1e-6);
    then.set_load_probe(quiet);
    const cost::GraphCost gc = then.graph_cost(wide_layers(24));
    EXPECT_GT(then.runs_without_repeats(), 0u);
    EXPECT_EQ(then.profiles_rescaled(), 1u);
    EXPECT_EQ(then.last_scale(), factor > 1 ? cost::kScaleLimit : 1.0 / cost::kScaleLimit);
    remove_db(db);
    return gc.steps.back().ms;
  };
  // kScaleLimit^2 (4) apart, give or take the timings' noise: the median of three
  // pairs (one pair at CI's load came out 1.9x apart).
  std::vector<double> ratios;
  std::string seen;
  for (int i = 0; i < 3; ++i) {
    const double cheaper = new_product_ms(1.0 / 16), dearer = new_product_ms(16.0);
    ratios.push_back(dearer / cheaper);
    seen += " " + std::to_string(cheaper) + "/" + std::to_string(dearer);
  }
  std::sort(ratios.begin(), ratios.end());
  EXPECT_GT(ratios[1], 2.0) << seen;
}

TEST(Cost, PricingFromTheDatabaseMakesNoInputs) {
  std::string db = temp_db("lazy_inputs");
  auto quiet = [] { return 0.0; };
  {
    cost::MeasuredCostModel m(db, 1, 1, 3);
    m.set_load_probe(quiet);
    EXPECT_GT(m.graph_cost(conv_relu(false)).measured_new, 0u);
    EXPECT_EQ(m.input_sets_made(), 1u);  // timed: run once on valid inputs first
    EXPECT_GE(m.timed_runs(), cost::kSettledRuns);
  }
  cost::MeasuredCostModel again(db, 1, 1, 3);
  again.set_load_probe(quiet);
  cost::GraphCost second = again.graph_cost(conv_relu(false));
  EXPECT_EQ(second.measured_new, 0u);
  // Every step came from the database: nothing ran, so no inputs were drawn (TASO's
  // BERT spent a tenth of a warm search drawing them).
  EXPECT_EQ(again.input_sets_made(), 0u);
  EXPECT_EQ(again.timed_runs(), 0u);
  remove_db(db);
}

TEST(Cost, ConcurrentWritersKeepTheDatabaseConsistent) {
  std::string db = temp_db("concurrent");
  { cost::CostDb create(db); }
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&db, t] {
      cost::CostDb d(db);  // one connection each, as separate processes would have
      for (int i = 0; i < 50; ++i) d.store("fp", "sig" + std::to_string(t) + "_" + std::to_string(i), i, 1);
    });
  for (auto& w : writers) w.join();
  cost::CostDb d(db);
  EXPECT_EQ(d.size(), 200u);
  EXPECT_EQ(d.lookup("fp", "sig3_7").value_or(-1), 7);
  EXPECT_FALSE(d.lookup("other", "sig3_7").has_value());
  remove_db(db);
}

}  // namespace
}  // namespace isomer
