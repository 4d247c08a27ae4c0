// The cost-based backtracking search (search/search.h) and its place in the
// optimize pipeline: it finds cheaper graphs with verified rules, never applies an
// unverified one, stays within its budget, and the pipeline's check catches (and
// names) a rule whose verdict was forged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cost/cost.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "pipeline/optimize.h"
#include "rules/rule.h"
#include "rules/match.h"
#include "search/search.h"

namespace isomer {
namespace {

Tensor weights(std::vector<int64_t> dims, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(seed * 131 + i * 7 + 1));
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// (x y) z with a tall y and a thin z: x (y z) is far cheaper, and y z folds.
Graph chain(int64_t n = 64) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({n, n})});
  Value y = b.constant(weights({n, n}, 1), "y");
  Value z = b.constant(weights({n, 2}, 2), "z");
  Value t = b.op1("MatMul", {x, y});
  return b.finish({b.op1("MatMul", {t, z})}, {"o"});
}

// FLOPs of the matmuls: a deterministic cost for the tests.
double matmul_flops(const Node& n) {
  if (n.op_type() != "MatMul") return 0;
  const Shape& a = n.inputs()[0].type().shape;
  const Shape& c = n.output_types()[0].shape;
  return static_cast<double>(a[0].value * a[1].value * c[1].value);
}

const char* kAssociate = R"(
rule matmul_associate {
  vars %x, %y, %z
  where rank(%x) == 2
  where rank(%y) == 2
  where rank(%z) == 2
  verify-shapes %x: f32[2,3], %y: f32[3,4], %z: f32[4,5]
  source {
    %0 = MatMul(%x, %y)
    %1 = MatMul(%0, %z)
    return %1
  }
  target {
    %0 = MatMul(%y, %z)
    %1 = MatMul(%x, %0)
    return %1
  }
  VERDICT
}
)";

RuleSet associate_rule(const std::string& verdict) {
  std::string text = kAssociate;
  if (verdict.empty())
    text.replace(text.find("  VERDICT\n"), 10, "");
  else
    text.replace(text.find("VERDICT"), 7, "verdict " + verdict);
  return parse_rules(text);
}

TEST(Search, FindsTheCheaperAssociationAndKeepsTheFunction) {
  Graph g = chain();
  SearchStats st;
  Graph best = backtracking_search(g, search_rules(associate_rule("proved")), matmul_flops, {}, &st);
  EXPECT_LT(st.cost_after, st.cost_before / 10);
  EXPECT_EQ(st.rules_applied.at("matmul_associate"), 1u);
  EXPECT_EQ(best.num_ops(), 1u);  // y z folded into one constant
  std::vector<Tensor> in = random_inputs(g, 7);
  std::vector<double> a = evaluate(g, in)[0].to_f64(), c = evaluate(best, in)[0].to_f64();
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], c[i], 1e-3 * (1 + std::fabs(a[i])));
}

TEST(Search, NeverAppliesARuleWithoutAUsableVerdict) {
  for (const std::string verdict : {"", "unknown \"needs Z3\"", "tested p<2^-40 trials=1 degree=2"}) {
    RuleSet set = associate_rule(verdict);
    EXPECT_TRUE(search_rules(set).empty()) << verdict;
    SearchStats st;
    Graph best = backtracking_search(chain(), search_rules(set), matmul_flops, {}, &st);
    EXPECT_TRUE(st.rules_applied.empty()) << verdict;
  }
}

TEST(Search, ZeroBudgetReturnsTheInput) {
  Graph g = chain();
  SearchOptions o;
  o.budget_s = 0;
  SearchStats st;
  Graph best = backtracking_search(g, search_rules(associate_rule("proved")), matmul_flops, o, &st);
  EXPECT_TRUE(same_graph(g, best));
  EXPECT_TRUE(st.budget_exhausted);
}

TEST(Search, DisabledRulesAreLeftOut) {
  EXPECT_TRUE(search_rules(associate_rule("proved"), {"matmul_associate", "matmul_associate-rev"}).empty());
}

TEST(Search, RulesAreAlsoUsedRightToLeftWhereTheTargetIsAPattern) {
  RuleSet set = associate_rule("proved");
  std::optional<Rule> rev = reversed_rule(set.rules[0]);
  ASSERT_TRUE(rev);
  EXPECT_EQ(rev->name, "matmul_associate-rev");
  EXPECT_EQ(rev->source_lines, set.rules[0].target_lines);
  EXPECT_TRUE(rev->usable());
  // A target that computes a constant with $(...) is a pattern too: the constant is
  // checked against the computed value once the variables are bound.
  RuleSet split = parse_rules(R"(
rule matmul_shared_lhs_merge {
  vars %x, %w1, %w2
  where rank(%w1) == 2
  where rank(%w2) == 2
  verify-shapes %x: f32[2,3], %w1: f32[3,4], %w2: f32[3,5]
  source {
    %0 = MatMul(%x, %w1)
    %1 = MatMul(%x, %w2)
    return %0, %1
  }
  target {
    %c = Concat(%w1, %w2) {axis=1}
    %m = MatMul(%x, %c)
    %s = const i64[2] {$(dim(%w1, 1)), $(dim(%w2, 1))}
    %0, %1 = Split(%m, %s) {axis=-1}
    return %0, %1
  }
  verdict proved
}
)");
  std::optional<Rule> unsplit = reversed_rule(split.rules[0]);
  ASSERT_TRUE(unsplit);
  EXPECT_EQ(search_rules(split).size(), 2u);
  // It matches a merged product split at the right sizes, and only there.
  for (int64_t first : {4, 3}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
    Value w1 = b.input("w1", {DType::Float32, make_shape({3, first})});
    Value w2 = b.input("w2", {DType::Float32, make_shape({3, 9 - first})});
    Value m = b.op1("MatMul", {x, b.op1("Concat", {w1, w2}, {{"axis", int64_t{1}}})});
    std::vector<Value> parts = b.op("Split", {m, b.constant(Tensor::vector_i64({4, 5}))}, {{"axis", int64_t{-1}}}, 2);
    Graph g = b.finish(parts, {"a", "b"});
    EXPECT_EQ(find_matches(g, *unsplit).size(), first == 4 ? 1u : 0u) << first;
  }
}

// Commuting two independent Adds reaches the same graph in either order, and a
// second commutation gives the input back: the search must recognise those graphs
// (built by different rewrites) as seen, so it expands the 4 distinct graphs once.
TEST(Search, ExpandsEachDistinctGraphOnce) {
  RuleSet comm = parse_rules(R"(
rule add_commute {
  vars %x, %y
  verify-shapes %x: f32[2,3], %y: f32[2,3]
  source {
    %0 = Add(%x, %y)
    return %0
  }
  target {
    %0 = Add(%y, %x)
    return %0
  }
  verdict proved
}
)");
  GraphBuilder b;
  const TensorType t{DType::Float32, make_shape({2, 3})};
  Value x = b.input("x", t), y = b.input("y", t), z = b.input("z", t), w = b.input("w", t);
  Graph g = b.finish({b.op1("Add", {x, y}), b.op1("Add", {z, w})}, {"p", "q"});
  SearchStats st;
  backtracking_search(g, search_rules(comm), [](const Node&) { return 1.0; }, {}, &st);
  EXPECT_EQ(st.expanded, 4u);
  EXPECT_FALSE(st.budget_exhausted);
  EXPECT_GT(st.duplicates, 0u);
}

TEST(Search, IsDeterministic) {
  RuleSet set = associate_rule("proved");
  Graph a = backtracking_search(chain(), search_rules(set), matmul_flops);
  Graph b = backtracking_search(chain(), search_rules(set), matmul_flops);
  EXPECT_TRUE(same_graph(a, b));
}

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(SearchPipeline, BacktrackRunsAfterTheTemplatesAndReports) {
  OptimizeOptions o;
  o.search = "backtrack";
  o.cost_model = "analytic";
  std::string rules = kAssociate;
  rules.replace(rules.find("VERDICT"), 7, "verdict proved");
  o.rule_paths = {write_temp("isomer_search_assoc.rules", rules)};
  OptimizeResult r = optimize_graph(chain(), {}, o);
  EXPECT_EQ(r.report.check.status, CheckResult::Status::Passed) << r.report.check.reason;
  EXPECT_EQ(r.report.rules_applied.at("matmul_associate"), 1u);
  EXPECT_EQ(r.report.after.nodes, 1u);
  EXPECT_EQ(r.report.rules_loaded, 1u);
  EXPECT_NE(r.report.to_json().find("\"search\": \"backtrack\""), std::string::npos);
}

TEST(SearchPipeline, TheCheckCatchesAForgedVerdictAndNamesTheRule) {
  // (x y) z == x z is false (it drops the multiplier y); a rule file claiming it is
  // proved must not get through: the pipeline's check compares the result with the
  // original, and the target is cheaper, so the search takes it.
  const char* bogus = R"(
rule bogus_swap {
  vars %x, %y, %z
  where rank(%x) == 2
  verify-shapes %x: f32[2,2], %y: f32[2,2], %z: f32[2,2]
  source {
    %0 = MatMul(%x, %y)
    %1 = MatMul(%0, %z)
    return %1
  }
  target {
    %0 = MatMul(%x, %z)
    return %0
  }
  verdict proved
}
)";
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({8, 8})});
  Value y = b.constant(weights({8, 8}, 3), "y");
  Value z = b.constant(weights({8, 8}, 4), "z");
  Graph g = b.finish({b.op1("MatMul", {b.op1("MatMul", {x, y}), z})}, {"o"});
  OptimizeOptions o;
  o.search = "backtrack";
  o.cost_model = "analytic";
  o.rule_paths = {write_temp("isomer_search_bogus.rules", bogus)};
  OptimizeResult r = optimize_graph(g, {}, o);
  if (r.report.rules_applied.count("bogus_swap") || r.report.rules_applied.count("bogus_swap-rev")) {
    EXPECT_EQ(r.report.check.status, CheckResult::Status::Failed);
    EXPECT_NE(r.report.culprit.find("bogus_swap"), std::string::npos) << r.report.culprit;
  } else {
    ADD_FAILURE() << "the search did not take the bogus rewrite, so this test checks nothing";
  }
}

TEST(SearchPipeline, UnknownSearchAndMissingRulesAreClearErrors) {
  OptimizeOptions o;
  o.search = "astar";
  EXPECT_THROW(optimize_graph(chain(), {}, o), Error);
  o.search = "backtrack";
  o.cost_model = "analytic";
  o.rule_paths = {"/nonexistent/isomer.rules"};
  try {
    optimize_graph(chain(), {}, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/isomer.rules"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace isomer
