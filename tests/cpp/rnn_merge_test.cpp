// The shipped shared-weight merge (rules/handwritten.rules) on an unrolled RNN:
// the steps' input products x_t W, which do not depend on the recurrence, become one
// product of the stacked inputs; the recurrent products h_{t-1} U cannot (each
// step's input is the previous step's output) and extraction never returns that
// cycle. Graph text in, the extracted graph's outputs checked against the input's.
#include <gtest/gtest.h>

#include <set>

#include "check/compare.h"
#include "egraph/egraph.h"
#include "egraph/extract.h"
#include "egraph/runner.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "rules/rule.h"

namespace isomer {
namespace {

using eg::ClassId;

// h_t = tanh(x_t W + h_{t-1} U) for 4 steps; W and U are 3x3.
const char* kRnn = R"(graph rnn(%x1: f32[1,3], %x2: f32[1,3], %x3: f32[1,3], %x4: f32[1,3], %h0: f32[1,3]) {
  %w = const f32[3,3] {0.5, -1, 0.25, 1, 0.75, -0.5, -0.25, 0.5, 1}
  %u = const f32[3,3] {0.1, 0.2, -0.3, -0.4, 0.5, 0.6, 0.7, -0.8, 0.9}
  %a1 = MatMul(%x1, %w)
  %b1 = MatMul(%h0, %u)
  %s1 = Add(%a1, %b1)
  %h1 = Tanh(%s1)
  %a2 = MatMul(%x2, %w)
  %b2 = MatMul(%h1, %u)
  %s2 = Add(%a2, %b2)
  %h2 = Tanh(%s2)
  %a3 = MatMul(%x3, %w)
  %b3 = MatMul(%h2, %u)
  %s3 = Add(%a3, %b3)
  %h3 = Tanh(%s3)
  %a4 = MatMul(%x4, %w)
  %b4 = MatMul(%h3, %u)
  %s4 = Add(%a4, %b4)
  %h4 = Tanh(%s4)
  return %h4
}
)";

TEST(RnnMerge, InputProductsOfAllStepsBecomeOneAndTheRecurrenceStays) {
  RuleSet shipped = load_rules(std::string(ISOMER_SOURCE_DIR) + "/rules/handwritten.rules");
  const Rule* rule = shipped.find("matmul_shared_weight_merge");
  ASSERT_NE(rule, nullptr);
  ASSERT_TRUE(rule->variadic);
  const Graph model = parse_graph(kRnn);
  eg::EGraph g;
  std::vector<ClassId> roots = eg::load_graph(g, model);
  eg::Runner runner(g, {rule}, {10, 5000, 10});
  eg::RunnerReport rep = runner.run();
  EXPECT_EQ(rep.stop, eg::StopReason::Saturated);
  EXPECT_GE(rep.rules.at("matmul_shared_weight_merge").applications, 1u);

  // A product costs 1 to read its weights plus 0.1 per row: batch-1 products are
  // bound by reading the weights, so the stacked product (1.4) beats four (4.4).
  size_t widest = 0;
  eg::CostTable costs;
  for (ClassId c : g.class_ids())
    for (const eg::ENode& n : g.cls(c).nodes) {
      const bool mm = n.kind == eg::ENodeKind::Op && n.op->name == "MatMul";
      const int64_t rows = g.type(c).shape.size() == 2 ? g.type(c).shape[0].value : 1;
      if (mm) widest = std::max<size_t>(widest, static_cast<size_t>(rows));
      costs[c].push_back(mm ? 1 + 0.1 * static_cast<double>(rows) : n.kind == eg::ENodeKind::Op ? 0.01 : 0.0);
    }
  EXPECT_EQ(widest, 4u);  // all four steps' inputs stacked at once
  // The recurrent products are never grouped (h_2 is computed from h_1 U: their merge
  // would read its own output), so every stacked product is one of W.
  std::set<ClassId> stacked_weights;
  for (ClassId c : g.class_ids())
    for (const eg::ENode& n : g.cls(c).nodes)
      if (n.kind == eg::ENodeKind::Op && n.op->name == "MatMul" && g.type(c).shape[0].value > 1)
        stacked_weights.insert(g.find(n.children[1]));
  EXPECT_EQ(stacked_weights.size(), 1u);
  eg::Extraction greedy = eg::extract_greedy(g, roots, costs);
  std::optional<eg::Extraction> ilp = eg::extract_ilp(g, roots, costs, greedy, 10);
  ASSERT_TRUE(ilp);
  EXPECT_TRUE(eg::find_cycle(g, ilp->choice, roots).empty());
  EXPECT_LE(ilp->cost, greedy.cost + 1e-9);

  GraphBuilder b;
  std::vector<Value> inputs;
  for (const NodePtr& in : model.inputs()) inputs.push_back(b.input(in->name(), in->output(0).type()));
  std::vector<Value> out = eg::build_values(g, *ilp, roots, b, [&](uint32_t i) { return inputs[i]; });
  Graph extracted = b.finish(out, {"h4"});
  // One product for the inputs' side (4 rows), four recurrent ones.
  size_t stacked = 0, products = 0;
  for (const NodePtr& n : extracted.topo_order())
    if (n->kind() == NodeKind::Op && n->op_type() == "MatMul") {
      ++products;
      stacked += n->inputs()[0].type().shape[0].value == 4;
    }
  EXPECT_EQ(stacked, 1u) << print_graph(extracted);
  EXPECT_EQ(products, 5u) << print_graph(extracted);
  std::vector<Tensor> feeds = random_inputs(model, 3);
  CheckResult r = compare_outputs(evaluate(model, feeds), evaluate(extracted, feeds), {"h4"}, 1e-5);
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
}

// The template pass before `--search eqsat` leaves MatMul+Add unfused (the rule is
// marked `leave-to-search`), so that the search sees every step's product; the
// plain template pass still folds it into Gemm.
TEST(RnnMerge, TemplatesLeaveGemmBiasFoldingToTheSearch) {
  const Rule* rule = template_rules().find("fold-gemm-bias");
  ASSERT_NE(rule, nullptr);
  EXPECT_TRUE(rule->leave_to_search);
  EXPECT_NE(print_rule(*rule).find("\n  leave-to-search\n"), std::string::npos);
  EXPECT_TRUE(parse_rules(print_rule(*rule)).rules.at(0).leave_to_search);
  const Graph g = parse_graph(R"(graph g(%x: f32[1,3]) {
  %w = const f32[3,2] {1, 2, 3, 4, 5, 6}
  %b = const f32[2] {0.5, -1}
  %0 = MatMul(%x, %w)
  %1 = Add(%0, %b)
  return %1
}
)");
  EXPECT_EQ(simplify(g).op_histogram(), (std::map<std::string, size_t>{{"Gemm", 1}}));
  PassOptions deferred;
  deferred.defer_to_search = true;
  EXPECT_EQ(simplify(g, deferred).op_histogram(), (std::map<std::string, size_t>{{"Add", 1}, {"MatMul", 1}}));
}

}  // namespace
}  // namespace isomer
