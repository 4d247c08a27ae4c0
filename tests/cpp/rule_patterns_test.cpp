// Pattern trees: attribute variables, attribute sets, computed attributes and
// constants, fold functions, reversal on the tree, and the checks made when a rule
// is loaded. The template rules (rules/templates.rules) are all verified.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "rules/match.h"
#include "rules/rule.h"
#include "verify/verify.h"

namespace isomer {
namespace {

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

Tensor random_f32(std::vector<int64_t> dims, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(seed * 131 + i * 7 + 1));
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

void expect_same_outputs(const Graph& a, const Graph& b) {
  std::vector<Tensor> inputs = random_inputs(a, 7);
  std::vector<Tensor> ra = evaluate(a, inputs), rb = evaluate(b, inputs);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    ASSERT_EQ(ra[i].dims(), rb[i].dims());
    std::vector<double> x = ra[i].to_f64(), y = rb[i].to_f64();
    for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], y[k], 1e-4 * (1 + std::fabs(x[k]))) << i << "," << k;
  }
}

void expect_load_error(const std::string& text, const std::vector<std::string>& parts) {
  try {
    parse_rules(text, "t.rules");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

const Rule& template_rule(const std::string& name) {
  const Rule* r = template_rules().find(name);
  EXPECT_NE(r, nullptr) << name;
  return *r;
}

TEST(RulePatterns, TemplateRulesAreAllProvedAgain) {
  VerifyOptions o;
  o.timeout_s = 20;
  for (const Rule& r : template_rules().rules) {
    EXPECT_TRUE(r.usable()) << r.name << " has no usable verdict recorded";
    Verdict v = verify_rule(r, o);
    EXPECT_EQ(v.kind, Verdict::Kind::Proved) << r.name << ": " << print_verdict(v);
  }
}

TEST(RulePatterns, AttributeVariablesBindAndComputedAttributesAreBuilt) {
  const Rule& rule = template_rule("eliminate-transpose-pair/compose");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Value t1 = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value t2 = b.op1("Transpose", {t1}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Graph g = b.finish({t2}, {"y"});
  std::optional<Match> m = match_at(rule, t2);
  ASSERT_TRUE(m);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*m->binding.attrs[1]), (std::vector<int64_t>{1, 0, 2}));
  bool applied = false;
  Graph h = apply_rule(g, rule, *m, nullptr, &applied);
  ASSERT_TRUE(applied);
  EXPECT_EQ(h.num_ops(), 1u);
  EXPECT_EQ(h.outputs()[0].node->attrs().get_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
  expect_same_outputs(g, h);
  // The identity-composition variant's guard rejects this pair.
  EXPECT_FALSE(match_at(template_rule("eliminate-transpose-pair"), t2));
}

TEST(RulePatterns, AttributeSetsCarryEveryOtherAttribute) {
  RuleSet hand = load_rules(std::string(ISOMER_SOURCE_DIR) + "/rules/handwritten.rules");
  const Rule* rule = hand.find("conv_bias_shared_input_merge");
  ASSERT_NE(rule, nullptr);
  for (bool same_window : {true, false}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, 3, 8, 8}));
    Attributes a1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}};
    Attributes a2 = same_window ? a1 : Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    Value c1 = b.op1("Conv", {x, b.constant(random_f32({4, 3, 3, 3}, 1)), b.constant(random_f32({4}, 2))}, a1);
    Value c2 = b.op1("Conv", {x, b.constant(random_f32({5, 3, 3, 3}, 3)), b.constant(random_f32({5}, 4))}, a2);
    Graph g = b.finish({b.op1("Relu", {c1}), b.op1("Relu", {c2})}, {"a", "b"});
    std::vector<Match> ms = find_matches(g, *rule);
    if (!same_window) {
      EXPECT_TRUE(ms.empty());  // the shared %a must be one set of attributes
      continue;
    }
    ASSERT_EQ(ms.size(), 2u);  // either conv may come first
    bool applied = false;
    Graph h = apply_rule(g, *rule, ms[0], nullptr, &applied);
    ASSERT_TRUE(applied);
    EXPECT_EQ(h.op_histogram(), (std::map<std::string, size_t>{{"Concat", 2}, {"Conv", 1}, {"Relu", 2}, {"Split", 1}}));
    for (const NodePtr& n : h.topo_order())
      if (n->op_type() == "Conv") EXPECT_EQ(n->attrs().get_ints("strides"), (std::vector<int64_t>{2, 2}));
    expect_same_outputs(g, h);
  }
}

TEST(RulePatterns, FoldRulesAreProvedAndWrongFoldsRefuted) {
  const std::string rule = R"(
rule bn_fold {
  vars %x, %w: const, %s: const, %beta: const, %m: const, %v: const, %eps: attr
  verify-shapes %x: f32[1,2,2,2], %w: f32[2,2,1,1], %s: f32[2], %beta: f32[2], %m: f32[2], %v: f32[2], %eps = 0.5
  source {
    %0 = Conv(%x, %w)
    %1 = BatchNormalization(%0, %s, %beta, %m, %v) {epsilon=%eps}
    return %1
  }
  target {
    %w2 = fold scale_rows(%w, bn_factor(%s, %v, %eps))
    %b2 = fold SHIFT
    %1 = Conv(%x, %w2, %b2)
    return %1
  }
}
)";
  auto with_shift = [&](const std::string& shift) {
    std::string text = rule;
    text.replace(text.find("SHIFT"), 5, shift);
    return parse_rules(text).rules[0];
  };
  EXPECT_EQ(verify_rule(with_shift("sub(%beta, mul(%m, bn_factor(%s, %v, %eps)))")).kind, Verdict::Kind::Proved);
  Verdict wrong = verify_rule(with_shift("sub(%beta, %m)"));
  EXPECT_EQ(wrong.kind, Verdict::Kind::Refuted) << print_verdict(wrong);
}

TEST(RulePatterns, ReversalWorksOnTheTree) {
  RuleSet hand = load_rules(std::string(ISOMER_SOURCE_DIR) + "/rules/handwritten.rules");
  std::string why;
  std::optional<Rule> rev = reversed_rule(*hand.find("conv_bias_shared_input_merge"), &why);
  ASSERT_TRUE(rev) << why;
  EXPECT_EQ(rev->name, "conv_bias_shared_input_merge-rev");
  EXPECT_EQ(rev->source.num_ops(), 4u);  // two Concats, the Conv, the Split
  // It splits a merged convolution whose split sizes are the kernels' output channels.
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 6, 6}));
  Value w1 = b.constant(random_f32({2, 3, 1, 1}, 5)), w2 = b.constant(random_f32({4, 3, 1, 1}, 6));
  Value b1 = b.constant(random_f32({2}, 7)), b2 = b.constant(random_f32({4}, 8));
  Value c = b.op1("Conv", {x, b.op1("Concat", {w1, w2}, {{"axis", int64_t{0}}}), b.op1("Concat", {b1, b2}, {{"axis", int64_t{0}}})});
  std::vector<Value> parts = b.op("Split", {c, b.constant(Tensor::vector_i64({2, 4}))}, {{"axis", int64_t{1}}}, 2);
  Graph g = b.finish(parts, {"p", "q"});
  std::vector<Match> ms = find_matches(g, *rev);
  ASSERT_EQ(ms.size(), 1u);
  bool applied = false;
  Graph h = apply_rule(g, *rev, ms[0], nullptr, &applied);
  ASSERT_TRUE(applied);
  EXPECT_EQ(h.op_histogram(), (std::map<std::string, size_t>{{"Conv", 2}}));
  expect_same_outputs(g, h);
  // A rule whose target drops a variable cannot be read right to left.
  EXPECT_FALSE(reversed_rule(template_rule("eliminate-identity"), &why));
  EXPECT_NE(why.find("not computed by an operator"), std::string::npos) << why;
  EXPECT_FALSE(reversed_rule(template_rule("fuse-conv-batchnorm"), &why));
  EXPECT_NE(why.find("is not used by the source"), std::string::npos) << why;
}

TEST(RulePatterns, LoaderRejectsBadUsesOfTheNewForms) {
  const std::string head = "rule r {\n  vars %x, %p: attr\n  verify-shapes %x: f32[2,3], %p = [1, 0]\n  source {\n";
  expect_load_error(head + "    %0 = Transpose(%x) {perm=%p}\n    return %0\n  }\n  target {\n"
                           "    %0 = Transpose(%x) {perm=$(frobnicate(%p))}\n    return %0\n  }\n}\n",
                    {"t.rules:9:", "unknown function 'frobnicate'"});
  expect_load_error(head + "    %0 = Add(%x, %p)\n    return %0\n  }\n  target {\n    return %x\n  }\n}\n",
                    {"t.rules:5:", "%p is an attribute variable"});
  expect_load_error(head + "    %0 = Neg(%x)\n    return %0\n  }\n  target {\n"
                           "    %0 = Transpose(%x) {perm=%p}\n    return %0\n  }\n}\n",
                    {"%p is not used by the source"});
  expect_load_error(head + "    %k = fold neg(%x)\n    %0 = Transpose(%k) {perm=%p}\n    return %0\n  }\n"
                           "  target {\n    return %x\n  }\n}\n",
                    {"t.rules:5:", "a source cannot compute constants with fold"});
  expect_load_error("rule r {\n  vars %x, %p: attr\n  verify-shapes %x: f32[2,3]\n  source {\n"
                    "    %0 = Transpose(%x) {perm=%p}\n    return %0\n  }\n  target {\n    return %x\n  }\n}\n",
                    {"t.rules:3:", "no value for %p"});
  expect_load_error("rule r {\n  vars %x, %p: attr\n  verify-shapes %x: f32[2,3], %p = [0, 1, 2]\n  source {\n"
                    "    %0 = Transpose(%x) {perm=%p}\n    return %0\n  }\n  target {\n    return %x\n  }\n}\n",
                    {"t.rules:5:", "Transpose"});
}

}  // namespace
}  // namespace isomer
