#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "eval/evaluator.h"
#include "eval/sym.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"
#include "rules/binding.h"
#include "rules/rule.h"
#include "verify/verify.h"
#include "verify/z3_verifier.h"

namespace isomer {
namespace {

std::string fixture(const std::string& name) { return std::string(ISOMER_SOURCE_DIR) + "/rules/fixtures/" + name; }

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

// Numeric value of a Sym expression at `vars` (no uninterpreted functions).
double value_of(Sym s, const std::vector<double>& vars) {
  const SymNode& n = sym_node(s);
  auto arg = [&](size_t i) { return value_of(n.args[i], vars); };
  switch (n.kind) {
    case SymKind::Const: return n.text.empty() ? static_cast<double>(n.num) / static_cast<double>(n.den) : std::stod(n.text);
    case SymKind::Var: return vars.at(n.var);
    case SymKind::Add: {
      double sum = 0;
      for (size_t i = 0; i < n.args.size(); ++i) sum += arg(i);
      return sum;
    }
    case SymKind::Mul: return arg(0) * arg(1);
    case SymKind::Neg: return -arg(0);
    case SymKind::Div: return arg(0) / arg(1);
    case SymKind::IteGt: return arg(0) > arg(1) ? arg(2) : arg(3);
    case SymKind::IteGe: return arg(0) >= arg(1) ? arg(2) : arg(3);
    case SymKind::Max:
    case SymKind::Min: {
      double m = arg(0);
      for (size_t i = 1; i < n.args.size(); ++i) m = n.kind == SymKind::Max ? std::max(m, arg(i)) : std::min(m, arg(i));
      return m;
    }
    case SymKind::Apply: break;
  }
  throw Error("uninterpreted function " + n.text);
}

// ---- SymEval: the symbolic element type and evaluate_sym -------------------------

TEST(SymEval, ConstantsAreExactAndFold) {
  SymArenaScope scope;
  const SymNode& c = sym_node(Sym(0.01));
  EXPECT_EQ(c.kind, SymKind::Const);
  EXPECT_EQ(static_cast<double>(c.num) / static_cast<double>(c.den), 0.01);  // the double's exact binary value
  EXPECT_EQ(c.den % 2, 0);
  EXPECT_TRUE((Sym(0.5) + Sym(0.25)).identical(Sym::rational(3, 4)));
  EXPECT_TRUE((Sym(3) / Sym(6)).identical(Sym(0.5)));
  EXPECT_EQ(sym_int(Sym(2) * Sym(-3)), -6);
  EXPECT_FALSE(sym_node(Sym(1e300)).text.empty());  // too large for int64 num/den: exact decimal
  EXPECT_THROW(Sym(std::nan("")), Error);
}

TEST(SymEval, LocalSimplificationAndSharing) {
  SymArenaScope scope;
  Sym x = Sym::var(0), y = Sym::var(1);
  EXPECT_TRUE((x + Sym()).identical(x));
  EXPECT_TRUE((x * Sym(1)).identical(x));
  EXPECT_TRUE((x * Sym()).identical(Sym()));
  EXPECT_TRUE((x - x).identical(Sym()));
  EXPECT_TRUE((-(-x)).identical(x));
  EXPECT_TRUE((x * y).identical(y * x));  // commuted operands share one node
  EXPECT_TRUE((x + y).identical(y + x));
  EXPECT_TRUE(select_gt(x, y, x, x).identical(x));
  EXPECT_TRUE(select_gt(Sym(2), Sym(1), x, y).identical(x));
  EXPECT_TRUE(Sym::apply("Exp", std::vector<Sym>{x}).identical(Sym::apply("Exp", std::vector<Sym>{x})));
  const size_t before = sym_arena_size();
  (void)(x * y);
  EXPECT_EQ(sym_arena_size(), before);  // hash-consed
  sym_arena_reset();
  EXPECT_EQ(sym_arena_size(), 2u);  // the constants 0 and 1
}

TEST(SymEval, SumsOfTheSameTermsAreOneNode) {
  SymArenaScope scope;
  Sym a = Sym::var(0), b = Sym::var(1), c = Sym::var(2);
  EXPECT_TRUE((a + (b + c)).identical((c + a) + b));
  EXPECT_TRUE((a * b + c * a).identical(a * c + b * a));
  EXPECT_TRUE(((a + b) - a).identical(b));               // x and -x cancel
  EXPECT_FALSE((a + a).identical(a));                    // a repeated term stays
  EXPECT_TRUE(((a + Sym(2)) + (b + Sym(3))).identical((b + a) + Sym(5)));  // constants fold
  EXPECT_TRUE(((a + Sym(2)) + Sym(-2)).identical(a));
  Sym s = (a + Sym(0.5)) + (b - c) + (a - b);
  EXPECT_DOUBLE_EQ(value_of(s, {1, 2, 3}), 1 + 0.5 + (2 - 3) + (1 - 2));
}

TEST(SymEval, MaximaOverTheSameElementsAreOneNode) {
  SymArenaScope scope;
  Sym a = Sym::var(0), b = Sym::var(1), c = Sym::var(2);
  auto relu = [](Sym x) { return select_gt(x, Sym(), x, Sym()); };
  auto max = [](Sym x, Sym y) { return select_gt(x, y, x, y); };  // as MaxPool builds it
  auto min = [](Sym x, Sym y) { return select_gt(x, y, y, x); };
  EXPECT_TRUE(relu(max(a, b)).identical(max(relu(a), relu(b))));
  EXPECT_TRUE(max(max(a, b), c).identical(max(c, max(b, a))));
  EXPECT_TRUE(relu(relu(a)).identical(relu(a)));
  EXPECT_TRUE(select_ge(a, b, a, b).identical(max(b, a)));
  EXPECT_TRUE(min(min(a, b), c).identical(min(a, min(c, b))));
  EXPECT_FALSE(min(a, b).identical(max(a, b)));
  EXPECT_FALSE(max(min(a, b), c).identical(min(max(a, c), max(b, c))));  // lattice laws beyond flattening: the solver's
  // Constants fold to the extreme one: max(a, 0, 3) = max(a, 3), min(a, 0, 3) = min(a, 0).
  EXPECT_TRUE(max(relu(a), Sym(3)).identical(max(a, Sym(3))));
  EXPECT_TRUE(min(min(a, Sym()), Sym(3)).identical(min(a, Sym())));
  EXPECT_TRUE(max(Sym(2), Sym(5)).identical(Sym(5)));
  // Values agree with the ite they stand for, at points on both sides of every comparison.
  Sym m = max(relu(a - b), min(c, Sym(0.5)));
  for (std::vector<double> p : {std::vector<double>{1, 2, 3}, {3, 1, -2}, {-1, -1, 0.25}, {2, -5, 9}}) {
    const double want = std::max(std::max(p[0] - p[1], 0.0), std::min(p[2], 0.5));
    EXPECT_DOUBLE_EQ(value_of(m, p), want);
  }
}

TEST(SymEval, EveryOperatorWithFieldSemanticsHasSymbolicSemantics) {
  for (const OpDef* op : all_ops())
    if (op->eval_field) EXPECT_NE(op->eval_sym, nullptr) << op->name << " has eval_field but no eval_sym";
  for (const char* name : {"Relu", "LeakyRelu", "Max", "Min", "Abs", "Clip", "MaxPool", "HardSigmoid", "HardSwish",
                           "Div", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Erf", "Gelu", "Reciprocal"})
    EXPECT_NE(get_op(name).eval_sym, nullptr) << name;
}

// The symbolic semantics come from the float kernels: at random points, the
// expressions evaluate to what the float evaluator computes.
TEST(SymEval, AgreesWithTheFloatEvaluator) {
  std::vector<std::function<Value(GraphBuilder&, Value, Value)>> cases = {
      [](GraphBuilder& b, Value x, Value) { return b.op1("Relu", {x}); },
      [](GraphBuilder& b, Value x, Value) { return b.op1("LeakyRelu", {x}, Attributes{{"alpha", 0.1}}); },
      [](GraphBuilder& b, Value x, Value) { return b.op1("HardSigmoid", {x}); },
      [](GraphBuilder& b, Value x, Value) { return b.op1("HardSwish", {x}); },
      [](GraphBuilder& b, Value x, Value) { return b.op1("Abs", {x}); },
      [](GraphBuilder& b, Value x, Value y) { return b.op1("Max", {x, y}); },
      [](GraphBuilder& b, Value x, Value y) { return b.op1("Min", {x, y}); },
      [](GraphBuilder& b, Value x, Value y) { return b.op1("Div", {x, y}); },
      [](GraphBuilder& b, Value x, Value y) { return b.op1("Gemm", {x, y}, Attributes{{"alpha", 0.5}, {"transB", int64_t{1}}}); },
      [](GraphBuilder& b, Value x, Value) {
        return b.op1("Clip", {x, b.constant(Tensor::scalar_f32(-0.25f)), b.constant(Tensor::scalar_f32(0.5f))});
      },
      [](GraphBuilder& b, Value x, Value) {
        return b.op1("ReduceMean", {x}, Attributes{{"axes", std::vector<int64_t>{1}}});
      },
      [](GraphBuilder& b, Value x, Value) {
        Value r = b.op1("Reshape", {x, b.constant(Tensor::vector_i64({1, 1, 4, 4}))});
        return b.op1("MaxPool", {r}, Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}}});
      },
  };
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-2, 2);
  for (size_t c = 0; c < cases.size(); ++c) {
    GraphBuilder b;
    Value x = b.input("x", f32({4, 4})), y = b.input("y", f32({4, 4}));
    Graph g = b.finish({cases[c](b, x, y)}, {"o"});
    SymArenaScope scope;
    std::vector<SymArray> in{SymArray({4, 4}), SymArray({4, 4})};
    std::vector<double> point;
    for (SymArray& a : in)
      for (Sym& s : a.data) {
        s = Sym::var(static_cast<uint32_t>(point.size()));
        point.push_back(static_cast<float>(u(rng)));
      }
    std::vector<SymArray> sym = evaluate_sym(g, in);
    std::vector<Tensor> num = evaluate(g, {Tensor::from_f64(DType::Float32, {4, 4}, std::span(point).first(16)),
                                           Tensor::from_f64(DType::Float32, {4, 4}, std::span(point).subspan(16))});
    ASSERT_EQ(sym[0].dims, num[0].dims()) << "case " << c;
    std::vector<double> want = num[0].to_f64();
    for (size_t e = 0; e < want.size(); ++e)
      EXPECT_NEAR(value_of(sym[0].data[e], point), want[e], 1e-5 * (1 + std::fabs(want[e]))) << "case " << c;
  }
}

TEST(SymEval, OperatorsWithoutSymbolicSemanticsAreNamed) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  // LogSoftmax has none (Softmax has one: Exp uninterpreted, a sum and a quotient).
  Graph g = b.finish({b.op1("LogSoftmax", {x})}, {"o"});
  SymArenaScope scope;
  SymArray in({2, 3});
  try {
    evaluate_sym(g, {in});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LogSoftmax"), std::string::npos) << e.what();
  }
}

// ---- Z3Verify ------------------------------------------------------------------------

TEST(Z3Verify, GoodFixturesAreProved) {
  RuleSet set = load_rules(fixture("good.rules"));
  ASSERT_GE(set.rules.size(), 13u);
  for (const Rule& rule : set.rules) {
    Z3VerifyResult r = z3_verify(rule);
    EXPECT_EQ(r.verdict.kind, Verdict::Kind::Proved) << rule.name << ": " << print_verdict(r.verdict);
    EXPECT_LT(r.verdict.time_s, 5.0) << rule.name;
    std::printf("  %-36s %s (solver on %zu instantiations)\n", rule.name.c_str(), print_verdict(r.verdict).c_str(),
                r.solver_calls);
  }
}

TEST(Z3Verify, BadFixturesAreRefutedWithConfirmedCounterexamples) {
  RuleSet set = load_rules(fixture("bad.rules"));
  ASSERT_GE(set.rules.size(), 8u);
  for (const Rule& rule : set.rules) {
    Z3VerifyResult r = z3_verify(rule);
    ASSERT_EQ(r.verdict.kind, Verdict::Kind::Refuted) << rule.name << ": " << print_verdict(r.verdict);
    EXPECT_EQ(r.counterexample.size(), rule.vars.size()) << rule.name;
    EXPECT_TRUE(r.float_confirmed) << rule.name << ": " << r.verdict.reason;
    EXPECT_NE(r.verdict.reason.find("%" + rule.vars[0].name + "=["), std::string::npos) << r.verdict.reason;
    EXPECT_NE(r.verdict.reason.find("float evaluator confirms"), std::string::npos) << r.verdict.reason;
    // The counterexample really separates the sides under the float semantics.
    RuleInstance inst = instantiate(rule, r.instantiation);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < inst.source.inputs().size(); ++i) {
      const TensorType& t = inst.source.inputs()[i]->output_types()[0];
      inputs.push_back(Tensor::from_f64(t.dtype, static_dims(t.shape), r.counterexample[i]));
    }
    std::vector<Tensor> a = evaluate(inst.source, inputs), b = evaluate(inst.target, inputs);
    bool differs = false;
    for (size_t o = 0; o < a.size(); ++o) {
      std::vector<double> x = a[o].to_f64(), y = b[o].to_f64();
      for (size_t e = 0; e < x.size(); ++e) differs |= std::fabs(x[e] - y[e]) > 1e-3 * (1 + std::fabs(x[e]));
    }
    EXPECT_TRUE(differs) << rule.name;
    std::printf("  %-36s %s\n", rule.name.c_str(), print_verdict(r.verdict).c_str());
  }
}

TEST(Z3Verify, TimeoutGivesUnknown) {
  RuleSet set = load_rules(fixture("bad.rules"));
  Z3VerifyOptions none;
  none.timeout_s = 0;
  Z3VerifyResult r = z3_verify(*set.find("trap_max_is_first_operand"), none);
  EXPECT_EQ(r.verdict.kind, Verdict::Kind::Unknown);
  EXPECT_NE(r.verdict.reason.find("timed out"), std::string::npos) << r.verdict.reason;
  // A rule that needs no solver is still proved.
  RuleSet good = load_rules(fixture("good.rules"));
  EXPECT_EQ(z3_verify(*good.find("relu_concat_commute"), none).verdict.kind, Verdict::Kind::Proved);
}

const char* kUninterpretedRules = R"(
# True for the real exp, but not for every function: Z3's model picks some f.
rule exp_of_sum {
  vars %x, %y
  verify-shapes %x: f32[2], %y: f32[2]
  source {
    %0 = Add(%x, %y)
    %1 = Exp(%0)
    return %1
  }
  target {
    %0 = Exp(%x)
    %1 = Exp(%y)
    %2 = Mul(%0, %1)
    return %2
  }
}

# False for the real exp too: the float evaluator confirms the model's point.
rule exp_even {
  vars %x
  verify-shapes %x: f32[2]
  source {
    %0 = Exp(%x)
    return %0
  }
  target {
    %0 = Neg(%x)
    %1 = Exp(%0)
    return %1
  }
}
)";

TEST(Z3Verify, CounterexampleThatNeedsAnUninterpretedFunctionIsUnknown) {
  RuleSet set = parse_rules(kUninterpretedRules, "uninterpreted.rules");
  Z3VerifyResult sum = z3_verify(*set.find("exp_of_sum"));
  EXPECT_EQ(sum.verdict.kind, Verdict::Kind::Unknown) << print_verdict(sum.verdict);
  EXPECT_NE(sum.verdict.reason.find("counterexample depends on uninterpreted Exp"), std::string::npos)
      << sum.verdict.reason;
  Z3VerifyResult even = z3_verify(*set.find("exp_even"));
  EXPECT_EQ(even.verdict.kind, Verdict::Kind::Refuted) << print_verdict(even.verdict);
  EXPECT_TRUE(even.float_confirmed);
  // The combined verifier reports both reasons: Exp has no field semantics either.
  Verdict v = verify_rule(*set.find("exp_of_sum"));
  EXPECT_EQ(v.kind, Verdict::Kind::Unknown);
  EXPECT_NE(v.reason.find("z3: "), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("field: needs Z3"), std::string::npos) << v.reason;
}

// Elements equal up to renaming the inputs are one problem: an elementwise rule over
// 2048 elements costs what one element costs.
TEST(Z3Verify, ElementwiseRulesAtLargeShapesStayFast) {
  RuleSet set = parse_rules(R"(
rule relu_difference_large {
  vars %x, %y
  verify-shapes %x: f32[64,32], %y: f32[32]
  source {
    %0 = Max(%x, %y)
    %1 = Relu(%0)
    %2 = Neg(%0)
    %3 = Relu(%2)
    %4 = Sub(%1, %3)
    return %4
  }
  target {
    %0 = Max(%y, %x)
    return %0
  }
}
)",
                            "large.rules");
  Z3VerifyResult r = z3_verify(set.rules[0]);
  EXPECT_EQ(r.verdict.kind, Verdict::Kind::Proved) << print_verdict(r.verdict);
  EXPECT_LT(r.verdict.time_s, 3.0);
}

TEST(Z3Verify, CombinedVerifierPrefersZ3AndFallsBackToTheFieldTester) {
  RuleSet good = load_rules(fixture("good.rules"));
  EXPECT_EQ(verify_rule(*good.find("matmul_associate")).kind, Verdict::Kind::Proved);
  EXPECT_EQ(verify_rule(*good.find("relu_idempotent")).kind, Verdict::Kind::Proved);
  VerifyOptions field_only;
  field_only.use_z3 = false;
  Verdict tested = verify_rule(*good.find("matmul_associate"), field_only);
  EXPECT_EQ(tested.kind, Verdict::Kind::Tested);
  EXPECT_GE(tested.error_bits, 120);
  Verdict relu = verify_rule(*good.find("relu_idempotent"), field_only);
  EXPECT_EQ(relu.kind, Verdict::Kind::Unknown);
  EXPECT_EQ(relu.reason, "needs Z3 (no field semantics for Relu)");
  // Z3 out of time: polynomial rules are still tested.
  VerifyOptions no_time;
  no_time.timeout_s = 0;
  RuleSet bad = load_rules(fixture("bad.rules"));
  EXPECT_EQ(verify_rule(*bad.find("trap_matmul_commute"), no_time).kind, Verdict::Kind::Refuted);
  Verdict max_first = verify_rule(*bad.find("trap_max_is_first_operand"), no_time);
  EXPECT_EQ(max_first.kind, Verdict::Kind::Unknown);
  EXPECT_NE(max_first.reason.find("z3: at verify-shapes 1: z3 timed out"), std::string::npos) << max_first.reason;
}

TEST(Z3Verify, VerifyAllIsTheSameForAnyNumberOfJobs) {
  auto load = [] {
    RuleSet set = load_rules(fixture("good.rules"));
    for (Rule& r : load_rules(fixture("bad.rules")).rules) set.rules.push_back(std::move(r));
    return set;
  };
  RuleSet one = load(), two = load();
  verify_all(one, {}, 1);
  verify_all(two, {}, 2);
  ASSERT_EQ(one.rules.size(), two.rules.size());
  for (size_t i = 0; i < one.rules.size(); ++i) {
    EXPECT_EQ(one.rules[i].verdict.kind, two.rules[i].verdict.kind) << one.rules[i].name;
    EXPECT_EQ(one.rules[i].verdict.reason, two.rules[i].verdict.reason) << one.rules[i].name;
    EXPECT_EQ(one.rules[i].usable(), one.rules[i].verdict.kind == Verdict::Kind::Proved) << one.rules[i].name;
  }
  // Verdicts survive printing and parsing.
  RuleSet again = parse_rules(print_rules(one), "verified.rules");
  for (size_t i = 0; i < one.rules.size(); ++i) EXPECT_EQ(again.rules[i].verdict.kind, one.rules[i].verdict.kind);
}

TEST(Z3Verify, CliReportJson) {
  const std::string dir = ::testing::TempDir();
  const std::string rules = dir + "/z3_cli.rules", report = dir + "/z3_cli.json", out = dir + "/z3_cli.out";
  {
    std::ifstream good(fixture("good.rules")), bad(fixture("bad.rules"));
    std::ofstream f(rules);
    f << good.rdbuf() << "\n" << bad.rdbuf();
  }
  const std::string cmd = std::string(ISOMER_BINARY) + " rules verify " + rules + " --jobs 2 --timeout 20 -o " + out +
                          " --report-json " + report + " > /dev/null";
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << "refuted rules exit 1, got " << rc;
  std::ifstream f(report);
  ASSERT_TRUE(f.good());
  nlohmann::json j = nlohmann::json::parse(f);
  const size_t good_n = load_rules(fixture("good.rules")).rules.size(), bad_n = load_rules(fixture("bad.rules")).rules.size();
  EXPECT_EQ(j["total"], good_n + bad_n);
  EXPECT_EQ(j["proved"], good_n);
  EXPECT_EQ(j["refuted"], bad_n);
  EXPECT_EQ(j["tested"], 0);
  EXPECT_EQ(j["unknown"], 0);
  EXPECT_TRUE(j["seconds"].is_number());
  ASSERT_EQ(j["rules"].size(), good_n + bad_n);
  for (const auto& r : j["rules"]) {
    for (const char* key : {"name", "verdict", "usable", "seconds", "reason"}) EXPECT_TRUE(r.contains(key)) << key;
    EXPECT_EQ(r["usable"], r["verdict"] == "proved") << r["name"];
  }
  // The written rule file records the verdicts.
  RuleSet written = load_rules(out);
  EXPECT_EQ(written.rules.size(), good_n + bad_n);
  EXPECT_EQ(written.find("relu_idempotent")->verdict.kind, Verdict::Kind::Proved);
  // --no-z3: the field tester alone leaves non-polynomial rules unknown.
  const std::string field_cmd = std::string(ISOMER_BINARY) + " rules verify " + fixture("good.rules") +
                                " --no-z3 --report-json " + report + " > /dev/null";
  EXPECT_EQ(std::system(field_cmd.c_str()), 0);
  std::ifstream g(report);
  nlohmann::json k = nlohmann::json::parse(g);
  EXPECT_EQ(k["proved"], 0);
  EXPECT_GE(k["unknown"], 5);
}

}  // namespace
}  // namespace isomer
