#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "rules/match.h"
#include "rules/rule.h"

namespace isomer {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fixture(const std::string& name) { return std::string(ISOMER_SOURCE_DIR) + "/rules/fixtures/" + name; }

const RuleSet& good_rules() {
  static const RuleSet set = load_rules(fixture("good.rules"));
  return set;
}

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

Tensor random_f32(std::vector<int64_t> dims, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(seed * 131 + i * 7 + 1));
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// Outputs of `a` and `b` on the same random inputs agree to float tolerance.
void expect_same_outputs(const Graph& a, const Graph& b) {
  std::vector<Tensor> inputs = random_inputs(a, 7);
  std::vector<Tensor> ra = evaluate(a, inputs), rb = evaluate(b, inputs);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    ASSERT_EQ(ra[i].dims(), rb[i].dims());
    std::vector<double> x = ra[i].to_f64(), y = rb[i].to_f64();
    for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], y[k], 1e-4) << "output " << i << " element " << k;
  }
}

// Loading `text` fails with a message containing every one of `parts`.
void expect_load_error(const std::string& text, std::vector<std::string> parts) {
  try {
    parse_rules(text, "t.rules");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::string neg_rule(const std::string& name) {
  return "rule " + name +
         " {\n  vars %x\n  verify-shapes %x: f32[2,3]\n  source {\n    %0 = Neg(%x)\n    return %0\n  }\n"
         "  target {\n    %0 = Neg(%x)\n    return %0\n  }\n}\n";
}

TEST(RuleText, FixturesRoundTripExactly) {
  for (const char* name : {"good.rules", "bad.rules"}) {
    std::string text = read_text(fixture(name));
    ASSERT_FALSE(text.empty()) << name;
    RuleSet set = parse_rules(text, name);
    EXPECT_GE(set.rules.size(), 6u);
    EXPECT_EQ(print_rules(set), text) << name;
  }
}

TEST(RuleText, VerdictsAndCommentsRoundTrip) {
  std::string text =
      "# first\n\n# about r1\nrule r1 {\n  vars %x\n  where rank(%x) >= 1 + 1\n  verify-shapes %x: f32[2,3]\n"
      "  source {\n    %0 = Neg(%x)  # inline comment\n    return %0\n  }\n  target {\n    %0 = Neg(%x)\n"
      "    return %0\n  }\n  verdict tested p<2^-174 trials=3 degree=2 time=0.0012s\n}\n\n" +
      neg_rule("r2").substr(0, neg_rule("r2").size() - 2) + "  verdict unknown \"needs Z3 (no \\\"field\\\")\"\n}\n\n" +
      neg_rule("r3").substr(0, neg_rule("r3").size() - 2) + "  verdict refuted \"at trial 0\" time=1s\n}\n\n" +
      neg_rule("r4").substr(0, neg_rule("r4").size() - 2) + "  verdict proved time=0.5s\n}\n\n# trailer\n";
  RuleSet set = parse_rules(text);
  ASSERT_EQ(set.rules.size(), 4u);
  EXPECT_EQ(set.rules[0].comment, "# first\n\n# about r1\n");
  EXPECT_EQ(set.rules[0].verdict.kind, Verdict::Kind::Tested);
  EXPECT_EQ(set.rules[0].verdict.error_bits, 174);
  EXPECT_TRUE(set.rules[0].usable());
  EXPECT_EQ(set.rules[1].verdict.reason, "needs Z3 (no \"field\")");
  EXPECT_FALSE(set.rules[1].usable());
  EXPECT_FALSE(set.rules[2].usable());
  EXPECT_TRUE(set.rules[3].usable());
  EXPECT_EQ(print_rules(set), text);
}

TEST(RuleText, LoaderRejectsUnboundVariables) {
  expect_load_error(
      "rule r {\n  vars %x\n  verify-shapes %x: f32[2]\n  source {\n    %0 = Neg(%x)\n    return %0\n  }\n"
      "  target {\n    %0 = Add(%x, %q)\n    return %0\n  }\n}\n",
      {"t.rules:9:", "unbound variable %q in target"});
  expect_load_error(
      "rule r {\n  vars %x\n  verify-shapes %x: f32[2]\n  source {\n    %0 = Add(%x, %y)\n    return %0\n  }\n"
      "  target {\n    return %x\n  }\n}\n",
      {"t.rules:5:", "unbound variable %y in source"});
  expect_load_error(
      "rule r {\n  vars %x, %y\n  verify-shapes %x: f32[2], %y: f32[2]\n  source {\n    %0 = Neg(%x)\n"
      "    return %0\n  }\n  target {\n    %0 = Add(%x, %y)\n    return %0\n  }\n}\n",
      {"t.rules:1:", "%y is not used by the source"});
  expect_load_error(
      "rule r {\n  vars %x\n  verify-shapes %x: f32[2]\n  source {\n    %0 = Neg(%x)\n    return %0\n  }\n"
      "  target {\n    %s = const i64[1] {$(dim(%z, 0))}\n    %0 = Neg(%x)\n    return %0\n  }\n}\n",
      {"t.rules:9:", "unbound variable %z"});
}

TEST(RuleText, LoaderRejectsShapeInconsistentSides) {
  // Both sides build, but the types differ.
  expect_load_error(
      "rule r {\n  vars %x\n  verify-shapes %x: f32[2,3]\n  source {\n    %0 = Transpose(%x) {perm=[1, 0]}\n"
      "    return %0\n  }\n  target {\n    %0 = Identity(%x)\n    return %0\n  }\n}\n",
      {"t.rules:1:", "shape-inconsistent sides", "f32[3,2]", "f32[2,3]"});
  // Concat associativity across axes does not even type-check on one side.
  expect_load_error(
      "rule r {\n  vars %a, %b, %c\n  verify-shapes %a: f32[1,2], %b: f32[1,2], %c: f32[2,1]\n  source {\n"
      "    %0 = Concat(%a, %b) {axis=0}\n    %1 = Concat(%0, %c) {axis=1}\n    return %1\n  }\n  target {\n"
      "    %0 = Concat(%b, %c) {axis=1}\n    %1 = Concat(%a, %0) {axis=0}\n    return %1\n  }\n}\n",
      {"t.rules:10:", "target:"});
  // A guard that does not hold at a verify shape makes that instantiation useless.
  expect_load_error(
      "rule r {\n  vars %x\n  where rank(%x) == 3\n  verify-shapes %x: f32[2]\n  source {\n    %0 = Neg(%x)\n"
      "    return %0\n  }\n  target {\n    %0 = Neg(%x)\n    return %0\n  }\n}\n",
      {"guard 'rank(%x) == 3' does not hold at verify-shapes 1"});
}

TEST(RuleText, LoaderRejectsDuplicatesUnknownOpsAndBadSyntax) {
  expect_load_error(neg_rule("same") + "\n" + neg_rule("same"), {"t.rules:14:", "duplicate rule name 'same'"});
  expect_load_error(
      "rule r {\n  vars %x\n  verify-shapes %x: f32[2]\n  source {\n    %0 = Frobnicate(%x)\n    return %0\n  }\n"
      "  target {\n    return %x\n  }\n}\n",
      {"t.rules:5:", "unknown operator 'Frobnicate'"});
  expect_load_error("rule r {\n  vars %x\n  bogus line\n}\n", {"t.rules:3:", "unknown line"});
  expect_load_error("rule r {\n  vars %x\n  where rank(%x) 2\n}\n", {"t.rules:3:", "comparison"});
  expect_load_error(neg_rule("r").substr(0, 40), {"not closed"});
  std::string wrong_var = neg_rule("r");
  wrong_var.replace(wrong_var.find("%x: f32"), 2, "%y");
  expect_load_error(wrong_var, {"t.rules:3:", "%y, which is not a variable"});
}

TEST(RuleMatch, FindsSingleOutputMatchAndApplies) {
  const Rule& rule = *good_rules().find("matmul_distribute_add");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3})), y = b.input("y", f32({3, 4})), z = b.input("z", f32({3, 4}));
  Value out = b.op1("Relu", {b.op1("MatMul", {x, b.op1("Add", {y, z})})});
  Graph g = b.finish({out}, {"out"});
  RuleCounts counts;
  std::vector<Match> ms = find_matches(g, rule, &counts);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].vars(), (std::vector<Value>{x, y, z}));
  EXPECT_EQ(ms[0].nodes.size(), 2u);
  bool applied = false;
  Graph h = apply_rule(g, rule, ms[0], &counts, &applied);
  EXPECT_TRUE(applied);
  EXPECT_EQ(h.op_histogram().at("MatMul"), 2u);
  EXPECT_EQ(counts["matmul_distribute_add"].matches, 1u);
  EXPECT_EQ(counts["matmul_distribute_add"].applications, 1u);
  expect_same_outputs(g, h);
  // The rewritten graph has no match any more.
  EXPECT_TRUE(find_matches(h, rule).empty());
}

TEST(RuleMatch, GuardsRejectMatches) {
  const Rule& rule = *good_rules().find("matmul_distribute_add");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3})), y = b.input("y", f32({3, 4})), z = b.input("z", f32({4}));
  Graph g = b.finish({b.op1("MatMul", {x, b.op1("Add", {y, z})})}, {"out"});
  EXPECT_TRUE(find_matches(g, rule).empty());  // rank(%z) == 2 fails: z broadcasts
}

TEST(RuleMatch, AppliesAtSymbolicShapes) {
  const Rule& rule = *good_rules().find("matmul_distribute_add");
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, Shape{Dim::sym("N"), Dim(3)}});
  Value y = b.input("y", f32({3, 4})), z = b.input("z", f32({3, 4}));
  Graph g = b.finish({b.op1("MatMul", {x, b.op1("Add", {y, z})})}, {"out"});
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 1u);
  bool applied = false;
  std::string why;
  Graph h = apply_rule(g, rule, ms[0], nullptr, &applied, &why);
  ASSERT_TRUE(applied) << why;
  EXPECT_EQ(h.outputs()[0].type(), g.outputs()[0].type());
  expect_same_outputs(g, h);
}

TEST(RuleMatch, MultiOutputMatchBindsSharedInputAndConstWeights) {
  const Rule& rule = *good_rules().find("matmul_shared_lhs_merge");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value w1 = b.constant(random_f32({3, 4}, 1)), w2 = b.constant(random_f32({3, 5}, 2));
  Value m1 = b.op1("MatMul", {x, w1}), m2 = b.op1("MatMul", {x, w2});
  Graph g = b.finish({b.op1("Relu", {m1}), m2}, {"a", "b"});
  RuleCounts counts;
  std::vector<Match> ms = find_matches(g, rule, &counts);
  ASSERT_EQ(ms.size(), 2u);  // (w1, w2) and (w2, w1)
  EXPECT_EQ(ms[0].vars()[0], x);
  EXPECT_NE(ms[0].vars()[1], ms[0].vars()[2]);
  for (const Match& m : ms) {
    bool applied = false;
    std::string why;
    Graph h = apply_rule(g, rule, m, &counts, &applied, &why);
    ASSERT_TRUE(applied) << why;
    EXPECT_EQ(h.op_histogram().at("MatMul"), 1u);
    EXPECT_EQ(h.op_histogram().at("Split"), 1u);
    EXPECT_EQ(h.op_histogram().at("Concat"), 1u);
    expect_same_outputs(g, h);
    EXPECT_NO_THROW(parse_graph(print_graph(h)));
  }
  EXPECT_EQ(counts["matmul_shared_lhs_merge"].matches, 2u);
  EXPECT_EQ(counts["matmul_shared_lhs_merge"].applications, 2u);
}

TEST(RuleMatch, MultiOutputNeedsConsistentBindings) {
  const Rule& rule = *good_rules().find("matmul_shared_lhs_merge");
  {  // different left operands: %x cannot bind both
    GraphBuilder b;
    Value x1 = b.input("x1", f32({2, 3})), x2 = b.input("x2", f32({2, 3}));
    Value w1 = b.constant(random_f32({3, 4}, 1)), w2 = b.constant(random_f32({3, 5}, 2));
    Graph g = b.finish({b.op1("MatMul", {x1, w1}), b.op1("MatMul", {x2, w2})}, {"a", "b"});
    EXPECT_TRUE(find_matches(g, rule).empty());
  }
  {  // weights that are graph inputs are not constants
    GraphBuilder b;
    Value x = b.input("x", f32({2, 3})), w1 = b.input("w1", f32({3, 4})), w2 = b.input("w2", f32({3, 5}));
    Graph g = b.finish({b.op1("MatMul", {x, w1}), b.op1("MatMul", {x, w2})}, {"a", "b"});
    EXPECT_TRUE(find_matches(g, rule).empty());
  }
}

TEST(RuleMatch, AttributesMustMatchExactly) {
  const Rule& rule = *good_rules().find("concat_flatten_same_axis");
  {
    GraphBuilder b;
    Value a = b.input("a", f32({2, 2})), c = b.input("c", f32({2, 4}));
    Value inner = b.op1("Concat", {a, a}, {{"axis", int64_t{1}}});
    Graph g = b.finish({b.op1("Concat", {inner, c}, {{"axis", int64_t{0}}})}, {"o"});
    EXPECT_TRUE(find_matches(g, rule).empty());
  }
  GraphBuilder b;
  Value a = b.input("a", f32({2, 2})), c = b.input("c", f32({2, 2}));
  Value inner = b.op1("Concat", {a, a}, {{"axis", int64_t{0}}});
  Graph g = b.finish({b.op1("Concat", {inner, c}, {{"axis", int64_t{0}}})}, {"o"});
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].vars()[0], ms[0].vars()[1]);  // %a and %b may bind the same value
  bool applied = false;
  Graph h = apply_rule(g, rule, ms[0], nullptr, &applied);
  ASSERT_TRUE(applied);
  EXPECT_EQ(h.num_ops(), 1u);
  expect_same_outputs(g, h);
}

// Exporters write defaults out (strides=[1,1], dilations, kernel_shape, negative
// axes); rules are written without them. Matching compares canonical attributes.
TEST(RuleMatch, AttributesMatchUpToDefaults) {
  RuleSet set = parse_rules(R"(
rule conv_add_weights {
  vars %x, %w1, %w2
  where rank(%x) == 4
  verify-shapes %x: f32[1,2,5,5], %w1: f32[3,2,3,3], %w2: f32[3,2,3,3]
  source {
    %0 = Conv(%x, %w1) {pads=[1,1,1,1]}
    %1 = Conv(%x, %w2) {pads=[1,1,1,1]}
    %2 = Add(%0, %1)
    return %2
  }
  target {
    %0 = Add(%w1, %w2)
    %1 = Conv(%x, %0) {pads=[1,1,1,1]}
    return %1
  }
}
)");
  const Rule& rule = set.rules[0];
  // The first Conv as written by hand, the second with what `exported` says.
  auto graph_with = [](Attributes second, bool first_like_second = false) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, 4, 6, 6}));
    Value w1 = b.input("w1", f32({2, 4, 3, 3})), w2 = b.input("w2", f32({2, 4, 3, 3}));
    Attributes first = first_like_second ? second : Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    Value c1 = b.op1("Conv", {x, w1}, first), c2 = b.op1("Conv", {x, w2}, second);
    return b.finish({b.op1("Add", {c1, c2})}, {"o"});
  };
  Attributes exported{{"dilations", std::vector<int64_t>{1, 1}}, {"group", int64_t{1}},
                      {"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                      {"strides", std::vector<int64_t>{1, 1}}};
  Graph g = graph_with(exported);
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 1u);
  bool applied = false;
  Graph h = apply_rule(g, rule, ms[0], nullptr, &applied);
  ASSERT_TRUE(applied);
  expect_same_outputs(g, h);
  // A different stride or padding is a different function: no match.
  Attributes strided = exported;
  strided.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_TRUE(find_matches(graph_with(strided, true), rule).empty());
  Attributes unpadded = exported;
  unpadded.erase("pads");
  EXPECT_TRUE(find_matches(graph_with(unpadded, true), rule).empty());
  EXPECT_EQ(find_matches(graph_with(exported, true), rule).size(), 1u);
}

TEST(RuleMatch, TargetThatDoesNotBuildLeavesGraphUnchanged) {
  // No guard on the rank: the target's Transpose only builds for rank-2 inputs.
  RuleSet set = parse_rules(
      "rule neg_through_transpose {\n  vars %x\n  verify-shapes %x: f32[2,3]\n  source {\n    %0 = Neg(%x)\n"
      "    return %0\n  }\n  target {\n    %t = Transpose(%x) {perm=[1, 0]}\n    %n = Neg(%t)\n"
      "    %0 = Transpose(%n) {perm=[1, 0]}\n    return %0\n  }\n}\n");
  const Rule& rule = set.rules[0];
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Graph g = b.finish({b.op1("Neg", {x})}, {"o"});
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 1u);
  RuleCounts counts;
  bool applied = true;
  std::string why;
  Graph h = apply_rule(g, rule, ms[0], &counts, &applied, &why);
  EXPECT_FALSE(applied);
  EXPECT_NE(why.find("target does not build"), std::string::npos) << why;
  EXPECT_TRUE(same_graph(g, h));
  EXPECT_EQ(counts["neg_through_transpose"].applications, 0u);
  // At rank 2 it applies.
  GraphBuilder b2;
  Value x2 = b2.input("x", f32({2, 3}));
  Graph g2 = b2.finish({b2.op1("Neg", {x2})}, {"o"});
  Graph h2 = apply_rule(g2, rule, find_matches(g2, rule).at(0), &counts, &applied);
  EXPECT_TRUE(applied);
  expect_same_outputs(g2, h2);
}

TEST(RuleMatch, VariableThatDependsOnAReplacedValueIsNotApplied) {
  RuleSet set = parse_rules(
      "rule neg_pair_merge {\n  vars %x, %y\n  verify-shapes %x: f32[2], %y: f32[2]\n  source {\n"
      "    %0 = Neg(%x)\n    %1 = Neg(%y)\n    return %0, %1\n  }\n  target {\n    %c = Concat(%x, %y) {axis=0}\n"
      "    %n = Neg(%c)\n    %s = const i64[2] {$(dim(%x, 0)), $(dim(%y, 0))}\n    %0, %1 = Split(%n, %s) {axis=0}\n"
      "    return %0, %1\n  }\n}\n");
  const Rule& rule = set.rules[0];
  GraphBuilder b;
  Value x = b.input("x", f32({2}));
  Value a = b.op1("Neg", {x});
  Value c = b.op1("Neg", {b.op1("Relu", {a})});
  Graph g = b.finish({a, c}, {"a", "c"});
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 2u);
  for (const Match& m : ms) {
    bool applied = true;
    std::string why;
    Graph h = apply_rule(g, rule, m, nullptr, &applied, &why);
    EXPECT_FALSE(applied);
    EXPECT_NE(why.find("depends on a value the rewrite replaces"), std::string::npos) << why;
    EXPECT_TRUE(same_graph(g, h));
  }
  // Independent operands merge.
  GraphBuilder b2;
  Value p = b2.input("p", f32({2})), q = b2.input("q", f32({3}));
  Graph g2 = b2.finish({b2.op1("Neg", {p}), b2.op1("Neg", {q})}, {"a", "b"});
  std::vector<Match> ms2 = find_matches(g2, rule);
  ASSERT_EQ(ms2.size(), 2u);
  bool applied = false;
  Graph h2 = apply_rule(g2, rule, ms2[0], nullptr, &applied);
  ASSERT_TRUE(applied);
  expect_same_outputs(g2, h2);
}

TEST(RuleMatch, GroupedConvolutionMerge) {
  const Rule& rule = *good_rules().find("conv_pair_to_grouped");
  GraphBuilder b;
  Value x1 = b.input("x1", f32({1, 2, 5, 5})), x2 = b.input("x2", f32({1, 2, 5, 5}));
  Value w1 = b.constant(random_f32({3, 2, 3, 3}, 3)), w2 = b.constant(random_f32({3, 2, 3, 3}, 4));
  Graph g = b.finish({b.op1("Conv", {x1, w1}), b.op1("Conv", {x2, w2})}, {"a", "b"});
  std::vector<Match> ms = find_matches(g, rule);
  ASSERT_EQ(ms.size(), 2u);
  bool applied = false;
  std::string why;
  Graph h = apply_rule(g, rule, ms[0], nullptr, &applied, &why);
  ASSERT_TRUE(applied) << why;
  EXPECT_EQ(h.op_histogram().at("Conv"), 1u);
  expect_same_outputs(g, h);
  // Unequal output channels: the guard rejects the merge.
  GraphBuilder b2;
  Value y1 = b2.input("x1", f32({1, 2, 5, 5})), y2 = b2.input("x2", f32({1, 2, 5, 5}));
  Value v1 = b2.constant(random_f32({2, 2, 3, 3}, 3)), v2 = b2.constant(random_f32({4, 2, 3, 3}, 4));
  Graph g2 = b2.finish({b2.op1("Conv", {y1, v1}), b2.op1("Conv", {y2, v2})}, {"a", "b"});
  EXPECT_TRUE(find_matches(g2, rule).empty());
}

}  // namespace
}  // namespace isomer
