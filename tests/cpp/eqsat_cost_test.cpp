// E-node prices for extraction (search/enode_cost.h) add up to the price of the whole
// graph as the runtime plans it: a SqueezeNet fire module (a Relu fused into each
// convolution, a Concat the next 1x1 convolution reads in parts, a Flatten view),
// loaded unchanged into an e-graph and extracted, costs what its plan costs. Priced
// by the analytic model with fixed rates: deterministic, no timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <unistd.h>

#include "cost/cost.h"
#include "egraph/egraph.h"
#include "egraph/extract.h"
#include "ir/graph.h"
#include "onnx/onnx_io.h"
#include "ops/op.h"
#include "search/enode_cost.h"
#include "eqsat_test_util.h"
#include "search/eqsat.h"

namespace isomer {
namespace {

using eqsat_test::fixed_model;
using eqsat_test::weights;

// squeeze 1x1 -> Relu -> (expand 1x1 -> Relu, expand 3x3 -> Relu) -> Concat -> 1x1
// -> Relu -> MaxPool -> Flatten.
// A symbolic batch (what torch exports with dynamic axes) when `batch` is empty.
Graph fire_module(const std::string& batch = "") {
  GraphBuilder b;
  Shape shape = make_shape({1, 16, 28, 28});
  if (!batch.empty()) shape[0] = Dim::sym(batch);
  Value x = b.input("x", {DType::Float32, shape});
  auto conv = [&](Value in, int64_t out_c, int64_t in_c, int64_t k) {
    Attributes a;
    if (k == 3) a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    Value c = b.op1("Conv", {in, b.constant(weights({out_c, in_c, k, k}, 0.01)), b.constant(weights({out_c}, 0.1))}, a);
    return b.op1("Relu", {c});
  };
  Value s = conv(x, 8, 16, 1);
  Value e1 = conv(s, 16, 8, 1), e3 = conv(s, 16, 8, 3);
  Attributes axis;
  axis.set("axis", int64_t{1});
  Value cat = b.op1("Concat", {e1, e3}, axis);
  Value next = conv(cat, 8, 32, 1);
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  Value p = b.op1("MaxPool", {next}, pool);
  Value f = b.op1("Flatten", {p});
  return b.finish({f}, {"y"});
}

TEST(EqsatCost, UnchangedGraphExtractsAtItsPlanPrice) {
  cost::AnalyticCostModel model = fixed_model();
  Graph g = fire_module();
  ENodePricer pricer(model);
  const double plan = pricer.learn(g);
  ASSERT_GT(plan, 0);

  eg::EGraph e;
  std::unordered_map<const Node*, eg::ClassId> classes;
  std::vector<eg::ClassId> roots = eg::load_graph(e, g, &classes);
  eg::CostTable costs = pricer.table(e);
  eg::Extraction ex = eg::extract_greedy(e, roots, costs);
  EXPECT_NEAR(ex.cost + pricer.unattributed_ms(), plan, 1e-9 * plan);
  // What belongs to no node: the input and output copied, converted between layouts.
  cost::GraphCost gc = model.graph_cost(g);
  double boundary = gc.io_ms;
  for (const cost::StepCost& s : gc.steps)
    if (s.step.boundary) boundary += s.ms;
  EXPECT_NEAR(pricer.unattributed_ms(), boundary, 1e-9 * plan);

  // What the runtime fuses, reads in parts or views costs nothing; convolutions do.
  double conv_ms = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op) continue;
    const eg::ClassId c = e.find(classes.at(n.get()));
    const double ms = costs.at(c).at(0);
    if (n->op_type() == "Relu" || n->op_type() == "Concat" || n->op_type() == "Flatten") {
      EXPECT_EQ(ms, 0) << n->op_type();
    } else {
      EXPECT_GT(ms, 0) << n->op_type();
    }
    if (n->op_type() == "Conv") conv_ms += ms;
  }
  // The convolutions carry most of the plan, and the e-nodes priced alone (the way
  // prices used to be made) would not have added up: a Relu alone is a pass over
  // memory.
  EXPECT_GT(conv_ms, 0.5 * plan);
}

// A model read from ONNX names every node and output: its input plan is the one the
// pricing of the same graph kept (the templates run's, before a search), not compiled
// again under other names, and its steps are charged to the same nodes as a graph
// built in code, which is renamed first.
TEST(EqsatCost, AModelFromOnnxIsPricedFromThePlanKeptForIt) {
  const Graph built = fire_module();
  const Graph named = import_onnx_bytes(export_onnx_bytes(built), ".");
  for (const NodePtr& n : named.topo_order())
    if (n->kind() == NodeKind::Op) ASSERT_FALSE(n->name().empty()) << "the export left a node unnamed";
  cost::AnalyticCostModel model = fixed_model();
  const double whole = model.graph_cost(named).total_ms;
  const size_t compiled = model.compiles();
  ASSERT_GT(compiled, 0u);
  ENodePricer pricer(model);
  EXPECT_EQ(pricer.learn(named), whole);
  EXPECT_EQ(model.compiles(), compiled);
  EXPECT_EQ(model.plans_reused(), 1u);

  cost::AnalyticCostModel other = fixed_model();
  ENodePricer renamed(other);
  renamed.learn(built);
  EXPECT_EQ(other.compiles(), 1u);
  auto extracted = [](ENodePricer& p, const Graph& g) {
    eg::EGraph e;
    std::vector<eg::ClassId> roots = eg::load_graph(e, g);
    return eg::extract_greedy(e, roots, p.table(e)).cost;
  };
  EXPECT_EQ(extracted(pricer, named), extracted(renamed, built));
  EXPECT_EQ(pricer.unattributed_ms(), renamed.unattributed_ms());
}

// A cost database file with its write-ahead log and shared-memory index (SQLite's WAL mode).
void remove_db(const std::string& db) {
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(db + ext);
}

std::string fresh_db(const std::string& name) {
  const std::string db =
      (std::filesystem::temp_directory_path() / ("isomer_" + name + "_" + std::to_string(::getpid()) + ".sqlite")).string();
  remove_db(db);
  return db;
}

// A plan kept in the cost database prices the input, the e-nodes priced alone and
// the fused pairs exactly as compiling them does, and a second pricer (a warm
// search) compiles none of them.
TEST(EqsatCost, KeptPlansPriceAsCompilingDoes) {
  const std::string db = fresh_db("plans");
  auto quiet = [] { return 0.0; };  // a fixed load: no row is measured again as noisy
  Graph g = fire_module();
  struct Priced {
    double plan = 0, unattributed = 0, merged = 0, relu = 0;
    std::optional<double> calibration;
    size_t compiles = 0, reused = 0;
  };
  auto price = [&](bool keep) {
    cost::MeasuredCostModel model(db, 1, 1, 3);
    model.set_load_probe(quiet);
    model.set_keep_plans(keep);
    ENodePricer pricer(model);
    Priced p;
    p.plan = pricer.learn(g);
    p.unattributed = pricer.unattributed_ms();
    p.calibration = pricer.calibration("Conv");
    // A merged convolution (priced alone) with a Relu after it (priced fused).
    eg::EGraph e;
    eg::load_graph(e, g);
    const eg::ClassId x = e.add_input(g.inputs().at(0));
    const eg::ClassId w = e.add_constant(weights({32, 16, 1, 1}, 0.01));
    const eg::ClassId merged = e.add_op(*find_op("Conv"), {x, w}, Attributes{});
    const eg::ClassId relu = e.add_op(*find_op("Relu"), {merged}, Attributes{});
    eg::CostTable costs = pricer.table(e);
    p.merged = costs.at(e.find(merged)).at(0);
    p.relu = costs.at(e.find(relu)).at(0);
    p.compiles = model.compiles();
    p.reused = model.plans_reused();
    return p;
  };
  // The steps are measured first, with no plan kept: the rows all later runs read.
  const Priced measuring = price(false);
  const Priced uncached = price(false);
  EXPECT_GT(uncached.compiles, 0u);
  EXPECT_EQ(uncached.reused, 0u);
  const Priced keeping = price(true);   // compiles, keeps the plans
  EXPECT_EQ(keeping.compiles, uncached.compiles);
  const Priced warm = price(true);      // reads them back: nothing compiled
  EXPECT_EQ(warm.compiles, 0u);
  EXPECT_EQ(warm.reused, uncached.compiles);
  for (const Priced* p : {&keeping, &warm}) {
    EXPECT_EQ(p->plan, uncached.plan);
    EXPECT_EQ(p->unattributed, uncached.unattributed);
    EXPECT_EQ(p->calibration, uncached.calibration);
    EXPECT_EQ(p->merged, uncached.merged);
    EXPECT_EQ(p->relu, uncached.relu);
  }
  (void)measuring;
  remove_db(db);
}

TEST(EqsatCost, NewShapesArePricedAloneOnTheSameScale) {
  cost::AnalyticCostModel model = fixed_model();
  Graph g = fire_module();
  ENodePricer pricer(model);
  pricer.learn(g);
  ASSERT_TRUE(pricer.calibration("Conv"));
  const double scale = *pricer.calibration("Conv");
  EXPECT_GT(scale, 0);

  // The two expand convolutions merged into one of 32 channels (what a merge rule
  // adds): a shape the plan never ran, priced alone and scaled.
  eg::EGraph e;
  eg::load_graph(e, g);
  const eg::ClassId x = e.add_input(g.inputs().at(0));
  const eg::ClassId w = e.add_constant(weights({32, 16, 1, 1}, 0.01));
  const eg::ClassId merged = e.add_op(*find_op("Conv"), {x, w}, Attributes{});
  eg::CostTable costs = pricer.table(e);
  const double price = costs.at(e.find(merged)).at(0);
  EXPECT_GT(price, 0);
  EXPECT_EQ(pricer.priced_alone() > 0, true);

  GraphBuilder b;
  Value xi = b.input("x", {DType::Float32, make_shape({1, 16, 28, 28})});
  Value y = b.op1("Conv", {xi, b.constant(weights({32, 16, 1, 1}, 0.01))});
  Graph alone = b.finish({y}, {"y"});
  EXPECT_NEAR(price, scale * model.op_ms(*alone.outputs()[0].node), 1e-9 * price);
}

// The fire module priced by a pricer and loaded into an e-graph, with the first
// node of each operator (the squeeze convolution, the Relu after it).
struct LearnedFire {
  cost::AnalyticCostModel model = fixed_model();
  Graph g = fire_module();
  ENodePricer pricer{model};
  eg::EGraph e;
  std::unordered_map<const Node*, eg::ClassId> classes;
  std::vector<eg::ClassId> roots;
  std::map<std::string, const Node*> first;

  LearnedFire() {
    pricer.learn(g);
    roots = eg::load_graph(e, g, &classes);
    for (const NodePtr& n : g.topo_order())
      if (n->kind() == NodeKind::Op) first.emplace(n->op_type(), n.get());
  }
};

// An e-node whose class holds another that reads nothing more and costs less than
// its lower bound (arithmetic at kRateMargin times the plan's fastest rate) is priced
// by that bound, not alone: the squeeze 1x1 convolution enlarged to a 7x7 one with
// zero weights (as the enlarge rule adds 3x3 ones, to merge them with a sibling; the
// squeeze is small enough that, at the fixed rates, the bound of a 3x3 one would be
// under its memory-bound price).
TEST(EqsatCost, DominatedENodesArePricedByTheirBoundNotAlone) {
  LearnedFire f;
  cost::AnalyticCostModel& model = f.model;
  const Graph& g = f.g;
  ENodePricer& pricer = f.pricer;
  eg::EGraph& e = f.e;
  const auto& classes = f.classes;
  const std::vector<eg::ClassId>& roots = f.roots;
  const Node* squeeze = f.first.at("Conv");
  const eg::ENode squeeze_node = e.cls(classes.at(squeeze)).nodes.at(0);
  const eg::ClassId x = squeeze_node.children.at(0), bias = squeeze_node.children.at(2);
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{3, 3, 3, 3});
  const eg::ClassId enlarged =
      e.add_op(*find_op("Conv"), {x, e.add_constant(weights({8, 16, 7, 7}, 0.0)), bias}, pads);
  e.merge(classes.at(squeeze), enlarged);
  e.rebuild();

  eg::CostTable costs = pricer.table(e);
  EXPECT_EQ(pricer.bounded(), 1u);
  const eg::EClass& k = e.cls(e.find(enlarged));
  ASSERT_EQ(k.nodes.size(), 2u);
  double original = -1, bound = -1;
  for (size_t i = 0; i < k.nodes.size(); ++i)
    (e.type(k.nodes[i].children[1]).shape.at(2) == Dim(7) ? bound : original) = costs.at(e.find(enlarged)).at(i);
  EXPECT_GT(original, 0);
  EXPECT_GT(bound, original);
  // The extraction keeps the input's convolution: the graph costs what its plan does.
  eg::Extraction ex = eg::extract_greedy(e, roots, costs);
  const double plan = model.graph_ms(g);
  EXPECT_NEAR(ex.cost + pricer.unattributed_ms(), plan, 1e-9 * plan);
}

// The fire module's expand convolutions (those that read the squeeze's Relu).
std::vector<const Node*> expand_convs(const Graph& g) {
  std::vector<const Node*> out;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op && n->op_type() == "Conv" && n->inputs()[0].node->op_type() == "Relu" &&
        n->inputs()[0].node->inputs()[0].node->inputs()[0].node->kind() == NodeKind::Input)
      out.push_back(n.get());
  return out;
}

// The fire module in an e-graph, with its expand convolutions' merge added: their
// input convolved with 32 7x7 filters, split back into the two classes.
struct MergedExpands : LearnedFire {
  eg::ClassId merged = eg::kNoClass;

  MergedExpands() {
    const std::vector<const Node*> expands = expand_convs(g);
    EXPECT_EQ(expands.size(), 2u);
    const eg::ClassId s = e.cls(classes.at(expands[0])).nodes.at(0).children.at(0);
    Attributes pads, axis;
    pads.set("pads", std::vector<int64_t>{3, 3, 3, 3});
    axis.set("axis", int64_t{1});
    merged = e.add_op(*find_op("Conv"), {s, e.add_constant(weights({32, 8, 7, 7}, 0.01)),
                                         e.add_constant(weights({32}, 0.1))}, pads);
    const eg::ClassId split = e.add_op(*find_op("Split"), {merged, e.add_constant(Tensor::vector_i64({16, 16}))}, axis, 2);
    for (uint32_t k = 0; k < 2; ++k) e.merge(classes.at(expands[k]), e.add_proj(split, k));
    e.rebuild();
  }
};

// A merge whose outputs are only projected (a product or convolution on concatenated
// weights, split back into the values it replaces) is priced by its lower bound, not
// alone, when those values computed by priced e-nodes cost less than the bound: the
// fire module's two expand convolutions enlarged to 7x7 and merged into one of 32
// channels. The same merge read by anything but its Split is priced alone.
TEST(EqsatCost, AMergeDearerThanTheValuesItServesIsPricedByItsBound) {
  MergedExpands m;
  eg::CostTable costs = m.pricer.table(m.e);
  EXPECT_EQ(m.pricer.bounded(), 1u);
  // Its bound is more than the two convolutions it would replace cost together.
  double expands = 0;
  for (const Node* n : expand_convs(m.g)) {
    const eg::EClass& k = m.e.cls(m.classes.at(n));
    for (size_t i = 0; i < k.nodes.size(); ++i)
      if (k.nodes[i].kind == eg::ENodeKind::Op) expands += costs.at(m.e.find(m.classes.at(n))).at(i);
  }
  EXPECT_GT(expands, 0);
  EXPECT_GT(costs.at(m.e.find(m.merged)).at(0), expands);
  // The extraction keeps the input's convolutions: the graph costs what its plan does.
  eg::Extraction ex = eg::extract_greedy(m.e, m.roots, costs);
  const double plan = m.model.graph_ms(m.g);
  EXPECT_NEAR(ex.cost + m.pricer.unattributed_ms(), plan, 1e-9 * plan);
}

// A merge over a Concat (products of several values stacked into one) needs what the
// Concat reads: the values it serves, computed from those alone, rule it out as
// they do a merge reading the values itself. The pricer does not look at what the
// merge computes: here the squeeze's output stacked twice, convolved and split back
// into the expand convolutions' classes.
TEST(EqsatCost, AMergeOverAConcatIsRuledOutByTheValuesItServes) {
  MergedExpands m;
  const eg::ENode merged = m.e.cls(m.merged).nodes.at(0);
  Attributes axis;
  axis.set("axis", int64_t{1});
  const eg::ClassId s = merged.children.at(0);
  const eg::ClassId stacked = m.e.add_op(*find_op("Concat"), {s, s}, axis);
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{3, 3, 3, 3});
  const eg::ClassId over_concat = m.e.add_op(
      *find_op("Conv"), {stacked, m.e.add_constant(weights({32, 16, 7, 7}, 0.01)), merged.children.at(2)}, pads);
  const eg::ClassId split =
      m.e.add_op(*find_op("Split"), {over_concat, m.e.add_constant(Tensor::vector_i64({16, 16}))}, axis, 2);
  const std::vector<const Node*> expands = expand_convs(m.g);
  for (uint32_t k = 0; k < 2; ++k) m.e.merge(m.classes.at(expands[k]), m.e.add_proj(split, k));
  m.e.rebuild();
  eg::CostTable costs = m.pricer.table(m.e);
  EXPECT_EQ(m.pricer.bounded(), 2u);  // both merges, neither priced alone
  eg::Extraction ex = eg::extract_greedy(m.e, m.roots, costs);
  const double plan = m.model.graph_ms(m.g);
  EXPECT_NEAR(ex.cost + m.pricer.unattributed_ms(), plan, 1e-9 * plan);
}

// An e-node that reads its own class (a cycle the e-graph may hold) computes nothing
// without it: it never rules out an e-node of its class, though that one needs the
// class's value through a class it reads (the squeeze convolution redone from its
// own Relu, an Identity of the squeeze beside it).
TEST(EqsatCost, AnENodeReadingItsOwnClassRulesNothingOut) {
  LearnedFire f;
  const Node* squeeze = f.first.at("Conv");
  const Node* relu = f.first.at("Relu");
  ASSERT_EQ(relu->inputs()[0].node.get(), squeeze);
  const eg::ClassId s = f.classes.at(squeeze), r = f.classes.at(relu);
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{3, 3, 3, 3});
  f.e.merge(s, f.e.add_op(*find_op("Conv"), {r, f.e.add_constant(weights({8, 8, 7, 7}, 0.0))}, pads));
  f.e.merge(s, f.e.add_op(*find_op("Identity"), {s}, Attributes{}));
  f.e.rebuild();
  const size_t alone = f.pricer.priced_alone();
  f.pricer.table(f.e);
  EXPECT_EQ(f.pricer.bounded(), 0u);
  EXPECT_GT(f.pricer.priced_alone(), alone);
}

TEST(EqsatCost, AMergeReadByMoreThanItsSplitIsPricedAlone) {
  MergedExpands m;
  m.e.add_op(*find_op("Relu"), {m.merged}, Attributes{});
  m.e.rebuild();
  const size_t alone = m.pricer.priced_alone();
  m.pricer.table(m.e);
  EXPECT_EQ(m.pricer.bounded(), 0u);
  EXPECT_GT(m.pricer.priced_alone(), alone);
}

// A model with a symbolic batch: new e-nodes are priced alone at the extents the
// runtime gives the batch when it prices the whole graph (1), as for a static
// model, not at a nominal rate per element (which made every new convolution of
// the corpus's CNNs look ten times cheaper than the ones it replaces).
TEST(EqsatCost, SymbolicBatchIsPricedAtTheRuntimesExtent) {
  cost::AnalyticCostModel model = fixed_model();
  double price[2];
  for (int symbolic = 0; symbolic < 2; ++symbolic) {
    Graph g = fire_module(symbolic ? "batch" : "");
    ENodePricer pricer(model);
    pricer.learn(g);
    eg::EGraph e;
    eg::load_graph(e, g);
    const eg::ClassId x = e.add_input(g.inputs().at(0));
    const eg::ClassId w = e.add_constant(weights({32, 16, 1, 1}, 0.01));
    const eg::ClassId merged = e.add_op(*find_op("Conv"), {x, w}, Attributes{});
    price[symbolic] = pricer.table(e).at(e.find(merged)).at(0);
  }
  EXPECT_GT(price[0], 0);
  EXPECT_NEAR(price[1], price[0], 1e-9 * price[0]);
}

// No rule changes the e-graph: the input comes back without pricing anything (VGG-19
// spent 10 of its 14 search seconds pricing a graph no rule applied to).
TEST(EqsatCost, SearchWithoutRulesReturnsTheInputUnpriced) {
  cost::AnalyticCostModel model = fixed_model();
  Graph g = fire_module();
  SearchOptions o;
  SearchStats st;
  Graph out = eqsat_search(g, {}, model, o, &st);
  EXPECT_TRUE(same_graph(out, g));
  EXPECT_TRUE(st.kept_input);
  EXPECT_EQ(st.cost_before, -1);
  EXPECT_EQ(st.priced_alone, 0u);
  EXPECT_EQ(st.pricing_seconds, 0);
  EXPECT_NE(st.to_text(0).find("no rule applied"), std::string::npos);
}

// A result replaces the input only when priced cheaper by SearchOptions::min_gain:
// the merge of three products of one input is kept at a minimum gain of 0 and
// given up when the minimum exceeds what it saves.
// Every product costs 1 ms whatever its width, anything else 0.01 ms: a merge of n
// products is cheaper alone and whole.
// With `per_flop`, a product costs that much more per operation. Counts the graphs
// priced whole (not operators alone).
class ProductCounter : public cost::CostModel {
 public:
  explicit ProductCounter(double per_flop = 0) : per_flop_(per_flop) {}
  std::string name() const override { return "products"; }
  void prepare(runtime::Executable&) override { whole += key_prefix_.empty(); }
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
    source = "test";
    const runtime::StepInfo& s = exe.steps()[i];
    return s.kind == "matmul" ? 1.0 + per_flop_ * s.flops : 0.01;
  }
  size_t whole = 0;

 private:
  double per_flop_;
};

// NasRNN's gates in small: three products of one input, each under a Tanh.
Graph three_gates() {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 64})});
  std::vector<Value> outs;
  for (int i = 0; i < 3; ++i) outs.push_back(b.op1("Tanh", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))})}));
  return simplify(b.finish(outs, {"a", "b", "c"}));
}

TEST(EqsatCost, ResultMustBeCheaperByTheMinimumGain) {
  ProductCounter model;
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  Graph g = three_gates();
  SearchOptions o;
  o.min_gain = 0;
  SearchStats st;
  Graph out = eqsat_search(g, rules, model, o, &st);
  ASSERT_FALSE(st.kept_input) << "nothing cheaper was found: the test would check nothing";
  // Processor time is counted, and no more of it than the wall time allows.
  EXPECT_GT(st.cpu_seconds, 0);
  EXPECT_LE(st.cpu_seconds, st.seconds * std::max(1u, std::thread::hardware_concurrency()) + 0.02);
  ASSERT_LT(st.cost_after, st.cost_before);
  EXPECT_FALSE(same_graph(out, g));
  const double saved = 1 - st.cost_after / st.cost_before;
  o.min_gain = saved * 1.01;
  SearchStats kept;
  Graph again = eqsat_search(g, rules, model, o, &kept);
  EXPECT_TRUE(kept.kept_input);
  EXPECT_TRUE(same_graph(again, g));
  EXPECT_EQ(kept.cost_after, kept.cost_before);
}

// A result whose e-node prices save less than a quarter of the minimum gain is not
// compiled and priced whole: the input comes back after the input's own pricing.
// Each 64-wide product costs 1 + 10 ms, the three merged 1 + 30: the merge saves
// 2 ms of about 33, 6%.
TEST(EqsatCost, AResultItsPricesShowShortOfTheMinimumGainIsNotPricedWhole) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  Graph g = three_gates();
  const double per_flop = 10.0 / (2 * 64 * 64);
  auto search = [&](double min_gain, ProductCounter& model, SearchStats& st) {
    SearchOptions o;
    o.min_gain = min_gain;
    return eqsat_search(g, rules, model, o, &st);
  };
  ProductCounter found(per_flop);
  SearchStats st;
  search(0, found, st);
  ASSERT_FALSE(st.kept_input) << "nothing cheaper was found: the test would check nothing";
  EXPECT_EQ(found.whole, 2u);  // the input and the result
  const double saved = 1 - st.cost_after / st.cost_before;
  ASSERT_GT(saved, 0.05);
  ASSERT_LT(saved, 0.07);
  // Under a minimum of 20%: a quarter of it is below the 6% the prices show, so the
  // result is priced whole, and then given up.
  ProductCounter confirmed(per_flop);
  SearchStats priced;
  EXPECT_TRUE(same_graph(search(0.2, confirmed, priced), g));
  EXPECT_TRUE(priced.kept_input);
  EXPECT_EQ(confirmed.whole, 2u);
  // Under a minimum of 50%, whose quarter the prices do not reach: the input only.
  ProductCounter short_of(per_flop);
  SearchStats kept;
  EXPECT_TRUE(same_graph(search(0.5, short_of, kept), g));
  EXPECT_TRUE(kept.kept_input);
  EXPECT_EQ(kept.cost_after, kept.cost_before);
  EXPECT_EQ(short_of.whole, 1u);
  EXPECT_TRUE(kept.rules_applied.empty());
}

TEST(EqsatCost, ASearchOnAFilledDatabaseTimesNothing) {
  const std::string db = fresh_db("search_runs");
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  // Three products of one input (NasRNN's gates in small): the merges are new shapes.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({4, 64})});
  std::vector<Value> outs;
  for (int i = 0; i < 3; ++i) outs.push_back(b.op1("Tanh", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))})}));
  const Graph g = simplify(b.finish(outs, {"a", "b", "c"}));
  auto search = [&](SearchStats& st) {
    cost::MeasuredCostModel model(db, 1, 1, 3);
    model.set_load_probe([] { return 0.0; });
    return eqsat_search(g, rules, model, SearchOptions{}, &st);
  };
  SearchStats first, second, third;
  search(first);
  ASSERT_GT(first.priced_alone, 0u) << "no new shape was priced: the test would check nothing";
  EXPECT_GT(first.timed_runs, 0u);
  EXPECT_GT(first.graphs_compiled, 0u);
  // Every step and plan is in the database now: nothing is run or compiled again, and
  // the search, priced from the same rows, comes out the same each time.
  const Graph again = search(second);
  EXPECT_EQ(second.timed_runs, 0u);
  EXPECT_EQ(second.graphs_compiled, 0u);
  const Graph once_more = search(third);
  EXPECT_EQ(third.timed_runs, 0u);
  EXPECT_TRUE(same_graph(again, once_more));
  EXPECT_EQ(second.cost_after, third.cost_after);
  remove_db(db);
}

// Convolutions cost the square of their arithmetic: merging two that read one input
// (the shipped conv_shared_input_merge) doubles it and costs twice as much, so the
// extraction keeps the input's own e-nodes. Counts the graphs priced whole.
class SquaredConvs : public cost::CostModel {
 public:
  std::string name() const override { return "squared-convs"; }
  void prepare(runtime::Executable&) override { whole += key_prefix_.empty(); }
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
    source = "test";
    const runtime::StepInfo& s = exe.steps()[i];
    return s.kind == "conv" ? std::pow(s.flops / 1e4, 2) : 0.01;  // ~25 ms each here
  }
  size_t whole = 0;
};

TEST(EqsatCost, InputEnodesExtractedBackAreNotPricedAgain) {
  SquaredConvs model;
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 14, 14})});
  // No attributes: the e-graph spells out their defaults.
  Value c1 = b.op1("Conv", {x, b.constant(weights({16, 8, 1, 1}, 0.01))});
  Value c2 = b.op1("Conv", {x, b.constant(weights({16, 8, 1, 1}, 0.02))});
  Graph g = b.finish({b.op1("Relu", {c1}), b.op1("Relu", {c2})}, {"a", "b"});
  SearchStats st;
  Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
  ASSERT_GT(st.rules.count("conv_shared_input_merge") ? st.rules.at("conv_shared_input_merge").applications : 0, 0u)
      << "the merge never entered the e-graph: the test would check nothing";
  EXPECT_TRUE(st.kept_input);
  EXPECT_TRUE(same_graph(out, g));
  EXPECT_EQ(st.cost_after, st.cost_before);
  // The input's plan only: the extracted input was not compiled and priced again.
  EXPECT_EQ(model.whole, 1u);
}

}  // namespace
}  // namespace isomer
