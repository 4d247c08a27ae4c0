// E-node prices of a graph other than the one the pricer learned add up to what that
// graph's own plan charges its nodes: an elementwise operator is priced as it runs
// (fused into the convolution it reads, or a pass of its own), and a merge over a
// Concat is put on the scale of the operators it replaces. A result priced close to
// its input is run against it (kept in the cost database), and a model with open dims
// is searched at its drawn extents. Priced by the analytic model with fixed rates
// (deterministic, no timing) but for the paired run's database.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "cost/cost.h"
#include "egraph/egraph.h"
#include "egraph/extract.h"
#include "ir/graph.h"
#include "ops/op.h"
#include "pipeline/optimize.h"
#include "passes/passes.h"
#include "search/enode_cost.h"
#include "eqsat_test_util.h"
#include "search/eqsat.h"
#include "search/search.h"

namespace isomer {
namespace {

using eqsat_test::fixed_model;
using eqsat_test::weights;

const TensorType kImage{DType::Float32, make_shape({1, 16, 28, 28})};

Value conv1x1(GraphBuilder& b, Value in, int64_t in_c, double w) {
  return b.op1("Conv", {in, b.constant(weights({16, in_c, 1, 1}, w))});
}

Value pool(GraphBuilder& b, Value in, const char* op) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  return b.op1(op, {in}, a);
}

// The price `pricer` gives the e-node of each of `g`'s nodes of operator `op`, in order.
std::vector<double> prices_of(ENodePricer& pricer, const Graph& g, const std::string& op) {
  eg::EGraph e;
  std::unordered_map<const Node*, eg::ClassId> classes;
  eg::load_graph(e, g, &classes);
  eg::CostTable costs = pricer.table(e);
  std::vector<double> out;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op && n->op_type() == op) out.push_back(costs.at(e.find(classes.at(n.get()))).at(0));
  return out;
}

// A sum of two convolutions (the runtime adds one into the other as a post-op) and a
// sum of two pooled values (a pass of its own), with one signature. A graph that has
// only the second sum (a merge took the first away) prices it as its own plan does,
// not at the mean of the two.
TEST(EqsatCostContext, AnAddIsPricedAsItRunsFusedIntoAConvolutionOrAlone) {
  auto build = [](bool with_conv_sum) {
    GraphBuilder b;
    Value x = b.input("x", kImage);
    std::vector<Value> outs;
    if (with_conv_sum) outs.push_back(b.op1("Add", {conv1x1(b, x, 16, 0.01), conv1x1(b, x, 16, 0.02)}));
    outs.push_back(b.op1("Add", {pool(b, x, "MaxPool"), pool(b, x, "AveragePool")}));
    std::vector<std::string> names;
    for (size_t i = 0; i < outs.size(); ++i) names.push_back("y" + std::to_string(i));
    return b.finish(outs, names);
  };
  cost::AnalyticCostModel model = fixed_model();
  const Graph both = build(true), pools = build(false);
  ENodePricer learned_both(model), learned_pools(model);
  learned_both.learn(both);
  learned_pools.learn(pools);
  const std::vector<double> in_both = prices_of(learned_both, both, "Add");
  ASSERT_EQ(in_both.size(), 2u);
  EXPECT_LT(in_both[0], 0.5 * in_both[1]) << "the sum of convolutions runs fused";
  // The pooled sum, priced by what the graph with both learned, and by its own plan.
  const double pooled = prices_of(learned_both, pools, "Add").at(0);
  const double own = prices_of(learned_pools, pools, "Add").at(0);
  EXPECT_GT(own, 0);
  EXPECT_NEAR(pooled, own, 1e-9 * own);
}

// conv(x, W1) + conv(y, W2) merged into conv(concat(x, y), [W1 | W2]): the merge's
// price alone is scaled by the convolutions it replaces (those reading the Concat's
// parts), not by the calibration of every convolution of the graph (here dominated
// by a 3x3 one over 64 channels).
TEST(EqsatCostContext, AMergeOverAConcatIsScaledByTheConvolutionsOfItsParts) {
  GraphBuilder b;
  Value x = b.input("x", kImage), y = b.input("y", kImage);
  Value sum = b.op1("Add", {conv1x1(b, x, 16, 0.01), conv1x1(b, y, 16, 0.02)});
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Value wide = b.op1("Conv", {sum, b.constant(weights({64, 16, 3, 3}, 0.01))}, pads);
  Value depthwise_in = b.op1("Conv", {wide, b.constant(weights({64, 1, 3, 3}, 0.01))}, [&] {
    Attributes a = pads;
    a.set("group", int64_t{64});
    return a;
  }());
  Graph g = b.finish({depthwise_in}, {"out"});

  // The graph's own nodes (finish() builds them anew): the two 1x1
  // convolutions and their sum.
  std::vector<const Node*> convs;
  const Node* add = nullptr;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op) continue;
    if (n->op_type() == "Add") add = n.get();
    if (n->op_type() == "Conv" && n->inputs().at(0).node->kind() == NodeKind::Input) convs.push_back(n.get());
  }
  ASSERT_TRUE(add);
  ASSERT_EQ(convs.size(), 2u);

  cost::AnalyticCostModel model = fixed_model();
  ENodePricer pricer(model);
  pricer.learn(g);
  eg::EGraph e;
  std::unordered_map<const Node*, eg::ClassId> classes;
  eg::load_graph(e, g, &classes);
  Attributes axis;
  axis.set("axis", int64_t{1});
  // The inputs' classes: what the two convolutions read.
  const eg::ClassId cx = e.cls(e.find(classes.at(convs[0]))).nodes.at(0).children.at(0);
  const eg::ClassId cy = e.cls(e.find(classes.at(convs[1]))).nodes.at(0).children.at(0);
  ASSERT_NE(e.find(cx), e.find(cy));
  const eg::ClassId stacked = e.add_op(*find_op("Concat"), {cx, cy}, axis);
  const eg::ClassId merged = e.add_op(*find_op("Conv"), {stacked, e.add_constant(weights({16, 32, 1, 1}, 0.01))}, {});
  e.merge(merged, classes.at(add));
  e.rebuild();
  eg::CostTable costs = pricer.table(e);
  double price = -1;
  const eg::EClass& k = e.cls(e.find(merged));
  for (size_t i = 0; i < k.nodes.size(); ++i)
    if (k.nodes[i].op->name == "Conv") price = costs.at(e.find(merged)).at(i);
  ASSERT_GT(price, 0);

  // Each convolution alone, as op_ms prices it.
  auto alone = [&](Value in, int64_t in_c) {
    GraphBuilder a;
    Value v = a.input("v", in.type());
    Value c = a.op1("Conv", {v, a.constant(weights({16, in_c, 1, 1}, 0.01))});
    return model.op_ms(*c.node);
  };
  GraphBuilder s;
  Value sx = s.input("s", {DType::Float32, make_shape({1, 32, 28, 28})});
  const double merged_alone = [&] {
    Value c = s.op1("Conv", {sx, s.constant(weights({16, 32, 1, 1}, 0.01))});
    return model.op_ms(*c.node);
  }();
  // The two replaced convolutions' context prices: what the input graph's e-nodes of
  // them cost.
  eg::EGraph plain;
  std::unordered_map<const Node*, eg::ClassId> plain_classes;
  eg::load_graph(plain, g, &plain_classes);
  eg::CostTable plain_costs = pricer.table(plain);
  const double ctx = plain_costs.at(plain.find(plain_classes.at(convs[0]))).at(0) +
                     plain_costs.at(plain.find(plain_classes.at(convs[1]))).at(0);
  const double scale = ctx / (alone(x, 16) + alone(y, 16));
  ASSERT_TRUE(pricer.calibration("Conv"));
  ASSERT_GT(std::abs(scale - *pricer.calibration("Conv")), 0.01 * scale) << "the test needs two scales apart";
  EXPECT_NEAR(price, scale * merged_alone, 1e-9 * price)
      << "ctx " << ctx << " alone " << alone(x, 16) << " merged alone " << merged_alone << " calibration "
      << *pricer.calibration("Conv");
}

// A model whose rows are an open "seq" dim is searched at the extent its drawn inputs
// give it (64, check/open_dims.h), as the check, the guard and the report run it: the
// search prices its input as it prices the model with 64 rows written in, not 1.
TEST(EqsatCostContext, AnOpenDimIsPricedAtTheDrawnExtent) {
  // Two products of one input (the shipped rules merge them) with an activation each.
  auto products = [](std::optional<int64_t> rows) {
    GraphBuilder b;
    Shape shape = make_shape({1, 64});
    shape[0] = rows ? Dim(*rows) : Dim::sym("seq");
    Value x = b.input("x", {DType::Float32, shape});
    Value y1 = b.op1("Relu", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.5))})});
    Value y2 = b.op1("Relu", {b.op1("MatMul", {x, b.constant(weights({64, 32}, 0.25))})});
    return b.finish({y1, y2}, {"y1", "y2"});
  };
  auto search_price = [](const Graph& g) {
    OptimizeOptions o;
    o.search = "eqsat";
    o.cost_model = "analytic";
    o.check = false;
    o.guard = false;
    o.threads = 1;
    o.cost_threads = 1;
    OptimizeResult r = optimize_graph(g, {}, o);
    return r.report.search_stats.cost_before;
  };
  const double open = search_price(products(std::nullopt)), at64 = search_price(products(64)),
               at1 = search_price(products(1));
  ASSERT_GT(at1, 0);
  EXPECT_GT(at64, 2 * at1);
  // The same steps (the outputs' copy, of a size the open dim leaves unknown to the
  // graph, apart).
  EXPECT_NEAR(open, at64, 0.2 * at64) << "at 1 row: " << at1;
}

// Prices a product's step at 0.1 ms plus its operations, anything else at 0.01 ms: three products of one input merged into one save two steps' 0.1 ms, about
// 5% of the graph, inside the band where a result priced whole is run against its
// input. The paired run says `ratio` (its rounds up to `high`, by default the same;
// its A/A noise band `noise`).
class CloseCall : public cost::CostModel {
 public:
  explicit CloseCall(double ratio, double high = -1, double noise = 0)
      : ratio_(ratio), high_(high < 0 ? ratio : high), noise_(noise) {}
  std::string name() const override { return "close-call"; }
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
    source = "test";
    const runtime::StepInfo& s = exe.steps()[i];
    return s.flops > 10000 ? 0.1 + s.flops * (1.2 / 32768) : 0.01;
  }
  std::optional<cost::PairedRatio> paired_ratio(const Graph&, const Graph&) override {
    ++paired;
    return cost::PairedRatio{ratio_, high_, noise_, cost::kPairedRounds};
  }
  size_t paired = 0;

 private:
  double ratio_, high_, noise_;
};

// Three products of one input, a Tanh after each (the shipped rules merge them).
Graph three_products() {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({4, 64})});
  std::vector<Value> outs;
  for (int i = 0; i < 3; ++i)
    outs.push_back(b.op1("Tanh", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))})}));
  return simplify(b.finish(outs, {"a", "b", "c"}));
}

// A result priced a few percent cheaper is kept only if it runs faster than its input
// when both run against each other; the report gives the measured ratio.
TEST(EqsatCostContext, AResultPricedCloseToItsInputIsRunAgainstIt) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = three_products();
  for (const double ratio : {1.05, 0.9}) {
    CloseCall model(ratio);
    SearchStats st;
    const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
    ASSERT_EQ(model.paired, 1u) << "the result was not priced within the band: the test would check nothing";
    EXPECT_EQ(st.measured_ratio, ratio);
    EXPECT_EQ(st.kept_input, ratio > 1);
    EXPECT_EQ(same_graph(out, g), ratio > 1);
  }
}

// Rounds that straddle the minimum gain (a median 3% faster, the second slowest round
// 1% slower: a loaded machine's noise) keep the input, as do rounds all slower; only
// rounds that clear it keep the result.
TEST(EqsatCostContext, APairedRunWhoseRoundsStraddleTheMinimumGainKeepsTheInput) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = three_products();
  const double gain = SearchOptions{}.min_gain;
  struct Case {
    double median, high;
    bool kept;
  };
  for (const Case c : {Case{0.97, 1.01, true}, Case{0.97, 1 - gain / 2, true}, Case{0.97, 1 - 2 * gain, false}}) {
    CloseCall model(c.median, c.high);
    SearchStats st;
    const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
    ASSERT_EQ(model.paired, 1u);
    EXPECT_EQ(st.kept_input, c.kept) << c.median << " up to " << c.high;
    EXPECT_EQ(same_graph(out, g), c.kept);
    EXPECT_EQ(st.measured_ratio_high, c.high);
  }
}

// The summary of a paired run's rounds: the median and the second highest, whatever
// order the rounds came in; the noise band from the A/A pairs' median absolute log
// ratio, scaled to the median of as many rounds.
TEST(EqsatCostContext, PairedRoundsAreSummedUpByTheirMedianSecondHighestAndAANoise) {
  const std::vector<double> same = {1.02, 0.98, 1.0, 1 / 1.03, 1.01, 1.05, 0.99};
  const cost::PairedRatio r = cost::paired_summary({1.13, 0.97, 0.99, 0.96, 1.02, 0.98, 0.95}, same);
  EXPECT_EQ(r.median, 0.98);
  EXPECT_EQ(r.high, 1.02);
  EXPECT_EQ(r.rounds, 7);
  // |ln| of the A/A ratios sorted: 0, ln 1/0.99, ln 1.01, ln 1.02, ... : the median is ln 1.02.
  EXPECT_NEAR(r.noise, cost::kPairedNoiseScale * std::log(1.02) / std::sqrt(7.0), 1e-12);
  EXPECT_EQ(cost::paired_summary({0.9, 0.8}, {}).high, 0.9);
  EXPECT_EQ(cost::paired_summary({0.9, 0.8}, {}).noise, 0);
  // Twice the rounds with the same A/A spread: a band narrower by a square root of two.
  std::vector<double> twice = same;
  twice.insert(twice.end(), same.begin(), same.end());
  EXPECT_NEAR(cost::paired_summary(std::vector<double>(14, 0.98), twice).noise * std::sqrt(2.0), r.noise, 1e-12);
}

// Three ways: faster only beyond the minimum gain and the noise band (with the rounds'
// bound under the minimum gain too), slower beyond the band above 1, else the same.
TEST(EqsatCostContext, APairedRunIsFasterSlowerOrTheSameWithinItsNoise) {
  using cost::PairedVerdict;
  const double gain = 0.005;
  auto verdict = [&](double median, double high, double noise) {
    return cost::paired_verdict(cost::PairedRatio{median, high, noise, 7}, gain);
  };
  EXPECT_EQ(verdict(0.97, 0.98, 0.01), PairedVerdict::Faster);
  EXPECT_EQ(verdict(0.97, 0.98, 0.04), PairedVerdict::Same);   // 3% inside 4% noise
  EXPECT_EQ(verdict(0.97, 1.01, 0.0), PairedVerdict::Same);    // the bound straddles
  EXPECT_EQ(verdict(0.992, 0.994, 0.0), PairedVerdict::Faster);
  EXPECT_EQ(verdict(0.992, 0.994, 0.004), PairedVerdict::Same);  // the gain not beyond the band
  EXPECT_EQ(verdict(1.03, 1.05, 0.01), PairedVerdict::Slower);
  EXPECT_EQ(verdict(1.03, 1.05, 0.04), PairedVerdict::Same);
  EXPECT_STREQ(cost::paired_verdict_name(PairedVerdict::Same), "same");
}

// A result whose rounds all ran 2-3% faster, a gain inside the A/A noise the same
// rounds measured (NasNet-A's merges at load: 0.996-1.007 as run, a bound that cleared
// 0.995 in some searches and not others), keeps the input; with little noise, the
// same rounds keep the result. The report gives the band and the verdict.
TEST(EqsatCostContext, AGainInsideTheAANoiseKeepsTheInput) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = three_products();
  for (const double noise : {0.04, 0.005}) {
    CloseCall model(0.975, 0.985, noise);
    SearchStats st;
    const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
    ASSERT_EQ(model.paired, 1u);
    const bool noisy = noise > 0.025;
    EXPECT_EQ(st.kept_input, noisy) << noise;
    EXPECT_EQ(same_graph(out, g), noisy);
    EXPECT_EQ(st.measured_noise, noise);
    EXPECT_EQ(st.measured_verdict, noisy ? cost::PairedVerdict::Same : cost::PairedVerdict::Faster);
    nlohmann::ordered_json j;
    st.to_json(j);
    EXPECT_EQ(j["search_measured_verdict"], noisy ? "same" : "faster");
  }
}

// CloseCall's prices, but in a whole graph of more than two steps a product of
// three products' work costs 0.3 ms more: the e-node prices (each operator alone,
// the input's own steps) say the merge saves 5%, the result priced whole costs 2.5%
// more. Within the rows' error either way: the paired run decides.
class WholeDisagrees : public CloseCall {
 public:
  using CloseCall::CloseCall;
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
    const double ms = CloseCall::step_ms(exe, i, source);
    return exe.steps().size() > 2 && exe.steps()[i].flops > 3 * 32768 - 1 ? ms + 0.3 : ms;
  }
};

TEST(EqsatCostContext, AResultTheWholePriceCallsSlightlyDearerIsRunAgainstItsInput) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = three_products();
  for (const double ratio : {1.05, 0.9}) {
    WholeDisagrees model(ratio);
    SearchStats st;
    const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
    ASSERT_GT(st.cost_before, 0);
    EXPECT_EQ(model.paired, 1u) << "priced whole " << st.cost_before << " -> " << st.cost_after;
    EXPECT_EQ(st.kept_input, ratio > 1);
    EXPECT_EQ(same_graph(out, g), ratio > 1);
  }
}

// The paired run of two graphs is kept in the cost database: asked again (a second
// search on the filled database), the same ratio comes back and nothing is run.
TEST(EqsatCostContext, APairedRunIsKeptInTheDatabase) {
  const std::string db = (std::filesystem::temp_directory_path() / "isomer_paired_test.sqlite").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  auto tanh_of_products = [](int n) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({4, 64})});
    std::vector<Value> outs;
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
      outs.push_back(b.op1("Tanh", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))})}));
      names.push_back("y" + std::to_string(i));
    }
    return b.finish(outs, names);
  };
  const Graph one = tanh_of_products(1), two = tanh_of_products(2);
  cost::PairedRatio first;
  {
    cost::MeasuredCostModel model(db, 1, 1, 3);
    std::optional<cost::PairedRatio> r = model.paired_ratio(one, two);
    ASSERT_TRUE(r);
    EXPECT_GT(r->median, 0);
    EXPECT_GE(r->high, r->median);
    EXPECT_GT(model.timed_runs(), 0u);
    first = *r;
  }
  cost::MeasuredCostModel again(db, 1, 1, 3);
  std::optional<cost::PairedRatio> r = again.paired_ratio(one, two);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->median, first.median);
  EXPECT_EQ(r->high, first.high);
  EXPECT_EQ(r->noise, first.noise);
  EXPECT_EQ(r->rounds, first.rounds);
  EXPECT_EQ(first.rounds, cost::kPairedRounds);
  EXPECT_EQ(again.timed_runs(), 0u);
  // The analytic model times nothing: no paired ratio.
  cost::AnalyticCostModel analytic = fixed_model();
  EXPECT_FALSE(analytic.paired_ratio(one, two));
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
}

}  // namespace
}  // namespace isomer
