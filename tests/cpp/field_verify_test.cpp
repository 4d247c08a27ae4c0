#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/graph.h"
#include "rules/rule.h"
#include "verify/field_verifier.h"

namespace isomer {
namespace {

std::string fixture(const std::string& name) { return std::string(ISOMER_SOURCE_DIR) + "/rules/fixtures/" + name; }

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

// The non-polynomial fixtures (Relu, Max, MaxPool, Exp): the field tester defers to Z3.
bool needs_z3(const Rule& rule) {
  for (const std::string& line : rule.source_lines)
    for (const char* op : {"Relu(", "Max(", "MaxPool(", "Exp("})
      if (line.find(op) != std::string::npos) return true;
  return false;
}

TEST(FieldVerify, GoodFixturesAreTestedOrNeedZ3) {
  RuleSet set = load_rules(fixture("good.rules"));
  size_t tested = 0, unknown = 0;
  for (const Rule& rule : set.rules) {
    FieldVerifyResult r = field_verify(rule);
    if (needs_z3(rule)) {
      EXPECT_EQ(r.verdict.kind, Verdict::Kind::Unknown) << rule.name;
      EXPECT_EQ(r.verdict.reason.rfind("needs Z3 (no field semantics for ", 0), 0u) << r.verdict.reason;
      ++unknown;
      continue;
    }
    EXPECT_EQ(r.verdict.kind, Verdict::Kind::Tested) << rule.name << ": " << r.verdict.reason;
    EXPECT_GE(r.verdict.error_bits, 120) << rule.name;
    EXPECT_GE(r.verdict.trials, 2) << rule.name;
    EXPECT_GE(r.verdict.time_s, 0) << rule.name;
    ++tested;
  }
  EXPECT_GE(tested, 7u);
  EXPECT_GE(unknown, 5u);
  EXPECT_EQ(field_verify(*set.find("relu_concat_commute")).verdict.reason, "needs Z3 (no field semantics for Relu)");
}

TEST(FieldVerify, BadFixturesAreRefutedWithCounterexamples) {
  RuleSet set = load_rules(fixture("bad.rules"));
  ASSERT_GE(set.rules.size(), 5u);
  for (const Rule& rule : set.rules) {
    FieldVerifyResult r = field_verify(rule);
    if (needs_z3(rule)) {  // the relu and max traps: only Z3 refutes them
      EXPECT_EQ(r.verdict.kind, Verdict::Kind::Unknown) << rule.name;
      continue;
    }
    EXPECT_EQ(r.verdict.kind, Verdict::Kind::Refuted) << rule.name << ": " << print_verdict(r.verdict);
    EXPECT_EQ(r.counterexample.size(), rule.vars.size()) << rule.name;
    EXPECT_NE(r.verdict.reason.find("source"), std::string::npos) << r.verdict.reason;
    // Deterministic: the same seed finds the same counterexample.
    EXPECT_EQ(field_verify(rule).verdict.reason, r.verdict.reason);
  }
}

TEST(FieldVerify, DegreeBounds) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 2})), y = b.input("y", f32({2, 2})), z = b.input("z", f32({2, 2}));
  Value c = b.constant(Tensor::from_f64(DType::Float32, {2, 2}, std::vector<double>{1, 2, 3, 4}));
  Value xy = b.op1("MatMul", {x, y});
  EXPECT_EQ(degree_bound(b.finish({xy}, {"o"})), 2);
  EXPECT_EQ(degree_bound(b.finish({b.op1("Add", {xy, z})}, {"o"})), 2);
  EXPECT_EQ(degree_bound(b.finish({b.op1("MatMul", {xy, z})}, {"o"})), 3);
  EXPECT_EQ(degree_bound(b.finish({b.op1("Mul", {x, c})}, {"o"})), 1);
  EXPECT_EQ(degree_bound(b.finish({c}, {"o"})), 0);
  EXPECT_THROW(degree_bound(b.finish({b.op1("Relu", {x})}, {"o"})), Error);
}

TEST(FieldVerify, VerdictsRecordedInTheRuleFileRoundTrip) {
  RuleSet set = load_rules(fixture("bad.rules"));
  RuleSet good = load_rules(fixture("good.rules"));
  for (Rule& r : good.rules) set.rules.push_back(std::move(r));
  field_verify_all(set);
  std::string text = print_rules(set);
  RuleSet again = parse_rules(text, "verified.rules");
  ASSERT_EQ(again.rules.size(), set.rules.size());
  for (size_t i = 0; i < set.rules.size(); ++i) {
    EXPECT_EQ(again.rules[i].verdict.kind, set.rules[i].verdict.kind);
    EXPECT_EQ(again.rules[i].usable(), set.rules[i].verdict.kind == Verdict::Kind::Tested) << set.rules[i].name;
  }
  EXPECT_EQ(print_rules(again), text);
}

TEST(FieldVerify, FewTrialsStateAWeakerBound) {
  RuleSet set = load_rules(fixture("good.rules"));
  FieldVerifyOptions weak;
  weak.target_bits = 30;
  weak.min_trials = 1;
  FieldVerifyResult r = field_verify(*set.find("matmul_associate"), weak);
  ASSERT_EQ(r.verdict.kind, Verdict::Kind::Tested);
  EXPECT_EQ(r.verdict.trials, 1);
  EXPECT_EQ(r.verdict.degree, 3);
  EXPECT_EQ(r.verdict.error_bits, 59);  // floor(61 - log2 3)
  EXPECT_FALSE(parse_rules(print_rule([&] {
                             Rule copy = *set.find("matmul_associate");
                             copy.verdict = r.verdict;
                             return copy;
                           }()))
                   .rules[0]
                   .usable());  // 2^-59 is not below 2^-60
}

}  // namespace
}  // namespace isomer
