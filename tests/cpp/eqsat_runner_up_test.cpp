// After the paired run rejects the extracted result, the search judges the runner-up
// extractions that leave out one group of its rewrites (search/runner_up.h), so that a
// losing merge does not throw away a winning one; and a search whose step prices
// carry timing noise comes to the same result whichever way the noise falls on a
// rewrite its prices cannot tell apart. Priced by fake models (no timing).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>

#include "cost/cost.h"
#include "egraph/egraph.h"
#include "egraph/extract.h"
#include "egraph/runner.h"
#include "eqsat_test_util.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "pipeline/optimize.h"
#include "ops/op.h"
#include "search/eqsat.h"
#include "search/runner_up.h"
#include "search/search.h"

namespace isomer {
namespace {

using eqsat_test::weights;

// Three products of x ([4,64]) and three of y ([4,32]), a Tanh after each: the
// shipped rules merge each three into one product and a Split.
Graph two_groups() {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({4, 64})});
  Value y = b.input("y", {DType::Float32, make_shape({4, 32})});
  std::vector<Value> outs;
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(b.op1("Tanh", {b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))})}));
    outs.push_back(b.op1("Tanh", {b.op1("MatMul", {y, b.constant(weights({32, 64}, 0.02 * (i + 1)))})}));
    names.push_back("x" + std::to_string(i));
    names.push_back("y" + std::to_string(i));
  }
  return simplify(b.finish(outs, names));
}

// Whether `g` has a product of `rows` x `inner` by `cols` columns.
bool has_product(const Graph& g, int64_t inner, int64_t cols) {
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op && n->op_type() == "MatMul" &&
        n->inputs().at(1).type().shape == make_shape({inner, cols}))
      return true;
  return false;
}

// A product step costs 0.1 ms plus its operations, anything else 0.01 ms, each times
// (1 + noise), the noise a fixed draw in [-bound, bound] per step signature and seed
// (as a fresh cost database would time it). The merged product of y costs what its
// three products do, so its merge saves nothing but noise. The paired run finds any
// result with y's products merged slower than its input, the others faster.
class NoisyMerges : public cost::CostModel {
 public:
  NoisyMerges(uint64_t seed, double bound) : seed_(seed), bound_(bound) {}
  std::string name() const override { return "noisy-merges"; }
  double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
    source = "test";
    const runtime::StepInfo& s = exe.steps()[i];
    const double per_flop = 1.2 / 32768;
    double ms = s.flops > 10000 ? 0.1 + s.flops * per_flop : 0.01;
    if (s.flops == 2.0 * 4 * 32 * 192) ms = 3 * (0.1 + 2.0 * 4 * 32 * 64 * per_flop);  // y's merge
    const uint64_t h = std::hash<std::string>()(s.signature) ^ (seed_ * 0x9E3779B97F4A7C15ull);
    const double u = static_cast<double>((h * 0x2545F4914F6CDD1Dull) >> 11) / static_cast<double>(1ull << 53);
    return ms * (1 + bound_ * (2 * u - 1));
  }
  std::optional<cost::PairedRatio> paired_ratio(const Graph&, const Graph& after) override {
    ++paired;
    const double r = has_product(after, 32, 192) ? 1.05 : 0.9;
    return cost::PairedRatio{r, r, 0.01, 7};
  }
  size_t paired = 0;

 private:
  uint64_t seed_;
  double bound_;
};

// Saturated and extracted with products dear, both merges are chosen: two groups, one
// per input, each holding its merged product; banning one group leaves the other merge.
TEST(EqsatRunnerUp, TwoMergesOfDifferentInputsAreTwoGroups) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  eg::EGraph e;
  std::vector<eg::ClassId> roots = eg::load_graph(e, two_groups());
  e.rebuild();
  eg::Runner(e, eqsat_rules(rules, false)).run();
  auto cost_table = [&] {
    eg::CostTable costs;
    for (eg::ClassId c : e.class_ids())
      for (const eg::ENode& n : e.cls(c).nodes)
        costs[c].push_back(n.kind == eg::ENodeKind::Op && n.op->name == "MatMul" ? 10.0 : 1.0);
    return costs;
  };
  const eg::CostTable costs = cost_table();
  const eg::Extraction ex = eg::extract_greedy(e, roots, costs);
  // The merged products' widths among a group's e-nodes.
  auto merged_inner = [&](const ENodeRefs& group) {
    std::set<int64_t> inner;
    for (const auto& [c, i] : group) {
      const eg::ENode& n = e.cls(c).nodes.at(i);
      if (n.kind == eg::ENodeKind::Op && n.op->name == "MatMul" && e.type(n.children.at(1)).shape.size() == 2 &&
          e.type(c).shape.back() == Dim(192))
        inner.insert(e.type(n.children.at(1)).shape.front().value);
    }
    return inner;
  };
  const std::vector<ENodeRefs> groups = rewrite_groups(e, ex, roots);
  ASSERT_EQ(groups.size(), 2u);
  std::set<int64_t> seen;
  for (const ENodeRefs& group : groups) {
    const std::set<int64_t> inner = merged_inner(group);
    ASSERT_EQ(inner.size(), 1u);
    seen.insert(*inner.begin());
    // Without this group, the other merge is still chosen and this one is not.
    const eg::Extraction without = eg::extract_greedy(e, roots, banning(costs, e, group));
    const std::vector<ENodeRefs> left = rewrite_groups(e, without, roots);
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(merged_inner(left.front()), inner);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{32, 64}));
}

// The first extraction merges both groups; its paired run says slower (y's merge). The
// runner-up that leaves out y's merge keeps x's, and is kept.
TEST(EqsatRunnerUp, ARejectedResultGivesWayToTheExtractionWithoutItsLosingMerge) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = two_groups();
  // y's merge 2% cheaper than its products on every seed: the first extraction takes it.
  class Rejects : public NoisyMerges {
   public:
    Rejects() : NoisyMerges(0, 0) {}
    double step_ms(runtime::Executable& exe, size_t i, std::string& source) override {
      const double ms = NoisyMerges::step_ms(exe, i, source);
      return exe.steps()[i].flops == 2.0 * 4 * 32 * 192 ? 0.98 * ms : ms;
    }
  } model;
  SearchStats st;
  const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
  EXPECT_GE(model.paired, 2u) << "the first result was not rejected by its paired run: nothing to check";
  EXPECT_FALSE(st.kept_input);
  EXPECT_GE(st.runner_ups, 1u);
  EXPECT_TRUE(has_product(out, 64, 192)) << "x's merge lost with y's";
  EXPECT_FALSE(has_product(out, 32, 192));
  EXPECT_EQ(st.measured_ratio, 0.9);
  EXPECT_FALSE(st.rules_applied.empty());
}

// Noise of up to 2% on every step decides whether y's merge looks cheaper; the search's
// result is x's merge alone whichever way it falls.
TEST(EqsatRunnerUp, NoisyPricesOfARewriteTheyCannotTellApartGiveOneResult) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  const Graph g = two_groups();
  std::set<uint64_t> results;
  size_t took_y = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    NoisyMerges model(seed, 0.02);
    SearchStats st;
    const Graph out = eqsat_search(g, rules, model, SearchOptions{}, &st);
    results.insert(structural_hash(out));
    took_y += st.runner_ups > 0;
    EXPECT_TRUE(has_product(out, 64, 192)) << "seed " << seed;
    EXPECT_FALSE(has_product(out, 32, 192)) << "seed " << seed;
  }
  EXPECT_EQ(results.size(), 1u);
  EXPECT_GT(took_y, 0u) << "no seed's first extraction took y's merge: the noise decided nothing";
}

}  // namespace
}  // namespace isomer
