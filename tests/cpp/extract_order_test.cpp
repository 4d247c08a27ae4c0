// Same e-graph, same prices, same result: the extraction of equal-cost alternatives
// does not depend on the order their e-nodes were added in (which rule fired first),
// and a small search on a fixed cost table decides the same way every time.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "egraph/egraph.h"
#include "egraph/extract.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "ops/op.h"
#include "rules/rule.h"
#include "search/eqsat.h"
#include "search/search.h"
#include "eqsat_test_util.h"
#include "pipeline/optimize.h"

namespace isomer {
namespace {

using eg::ClassId;
using eqsat_test::fixed_model;
using eqsat_test::weights;

// Relu(a + b), with the e-nodes Add(a, b) and Add(b, a) in one class, added in
// the one order or the other (the inputs too): the same e-graph up to its ids.
std::string extracted(bool swapped_first) {
  eg::EGraph g;
  const Graph inputs = parse_graph(R"(graph g(%a: f32[4], %b: f32[4]) {
  %0 = Add(%a, %b)
  return %0
}
)");
  const OpDef& add = *find_op("Add");
  const OpDef& relu = *find_op("Relu");
  NodePtr na = inputs.inputs()[0], nb = inputs.inputs()[1];
  ClassId a, b;
  if (swapped_first) {
    b = g.add_input(nb);
    a = g.add_input(na);
  } else {
    a = g.add_input(na);
    b = g.add_input(nb);
  }
  ClassId first = g.add_op(add, swapped_first ? std::vector{b, a} : std::vector{a, b}, {});
  ClassId second = g.add_op(add, swapped_first ? std::vector{a, b} : std::vector{b, a}, {});
  g.merge(first, second);
  g.rebuild();
  const ClassId root = g.add_op(relu, {first}, {});
  g.rebuild();
  eg::CostTable costs;
  for (ClassId c : g.class_ids()) costs[c].assign(g.cls(c).nodes.size(), 1.0);
  const eg::Extraction ex = eg::extract_greedy(g, {root}, costs);
  GraphBuilder builder;
  std::vector<Value> values = eg::build_values(g, ex, {root}, builder, [&](uint32_t leaf) {
    return builder.intern(g.leaf_node(leaf))->output(0);
  });
  return print_graph(builder.finish(values, {"y"}));
}

TEST(ExtractOrder, EqualCostAlternativesAreChosenTheSameWhateverTheirInsertionOrder) {
  const std::string one = extracted(false), other = extracted(true);
  EXPECT_EQ(one, other);
  EXPECT_NE(one.find("Add"), std::string::npos) << one;
}

// A sum of three products of one input (merged or not), priced by the fixed analytic model: two
// searches of one graph give the same graph and the same rules.
TEST(ExtractOrder, ASmallSearchOnAFixedCostTableIsDeterministic) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({8, 64})});
  Value sum;
  for (int i = 0; i < 3; ++i) {
    Value p = b.op1("MatMul", {x, b.constant(weights({64, 64}, 0.01 * (i + 1)))});
    sum = i == 0 ? p : b.op1("Add", {sum, p});
  }
  const Graph g = b.finish(std::vector<Value>{b.op1("Tanh", {sum})}, {"y"});
  std::string first;
  std::map<std::string, size_t> first_rules;
  for (int run = 0; run < 3; ++run) {
    cost::AnalyticCostModel model = fixed_model();
    SearchStats st;
    const std::string out = print_graph(eqsat_search(g, rules, model, SearchOptions{}, &st));
    const std::map<std::string, size_t>& applied = st.rules_applied;
    if (run == 0) {
      first = out;
      first_rules = applied;
      continue;
    }
    EXPECT_EQ(out, first) << "run " << run;
    EXPECT_EQ(applied, first_rules) << "run " << run;
  }
}

}  // namespace
}  // namespace isomer
