// Tests of the elementwise entries current exporters use (compare.cpp, activation.cpp,
// unary.cpp's Sin..Sign, binary.cpp's Mod, Sum, Mean): results against values worked
// out by hand, shape and type rules, field semantics where the operator is
// polynomial, and the symbolic semantics against the float semantics.
#include <limits>
#include <optional>

#include "eval/sym.h"
#include "ops_nn_util.h"

namespace isomer {
namespace {
using namespace nn_test;

Tensor i64_tensor(const Dims& d, const std::vector<int64_t>& v) { return Tensor::from_i64(DType::Int64, d, v); }
Tensor bools(const Dims& d, const std::vector<int64_t>& v) { return Tensor::from_i64(DType::Bool, d, v); }

// ---- comparisons and logic ---------------------------------------------------------

TEST(OpsCompare, ComparisonsGiveBoolsAndBroadcast) {
  const Tensor a = f64_tensor({3}, {1, 2, 3}), b = f64_tensor({3}, {2, 2, 2});
  for (auto [op, want] : std::vector<std::pair<std::string, Vec>>{{"Less", {1, 0, 0}},
                                                                  {"LessOrEqual", {1, 1, 0}},
                                                                  {"Greater", {0, 0, 1}},
                                                                  {"GreaterOrEqual", {0, 1, 1}}}) {
    Tensor got = run(op, {a, b});
    EXPECT_EQ(got.dtype(), DType::Bool) << op;
    expect_near(got, {3}, want);
  }
  // [2,1] against [3]: a [2,3] mask, as causal masks are built.
  expect_near(run("Less", {f64_tensor({2, 1}, {1, 3}), f64_tensor({3}, {2, 2, 4})}), {2, 3}, {1, 1, 1, 0, 0, 1});
  // Integers compare exactly, also where doubles could not tell them apart.
  const int64_t big = int64_t{1} << 60;
  expect_near(run("Greater", {i64_tensor({2}, {big + 1, -5}), i64_tensor({2}, {big, -5})}), {2}, {1, 0});
  expect_error([&] { run("Less", {a, i64_tensor({3}, {1, 2, 3})}); }, "type");
}

TEST(OpsCompare, LogicTruthTables) {
  const Tensor p = bools({4}, {0, 0, 1, 1}), q = bools({4}, {0, 1, 0, 1});
  expect_near(run("And", {p, q}), {4}, {0, 0, 0, 1});
  expect_near(run("Or", {p, q}), {4}, {0, 1, 1, 1});
  expect_near(run("Xor", {p, q}), {4}, {0, 1, 1, 0});
  expect_near(run("Not", {p}), {4}, {1, 1, 0, 0});
  expect_near(run("And", {bools({2, 1}, {1, 0}), bools({3}, {1, 0, 1})}), {2, 3}, {1, 0, 1, 0, 0, 0});
  EXPECT_EQ(run("Xor", {p, q}).dtype(), DType::Bool);
  expect_error([&] { run("And", {f64_tensor({1}, {1}), f64_tensor({1}, {1})}); }, "bool");
  // The polynomials agree with the truth tables over the field too.
  expect_field_matches_float(one_op("Xor", {p, q}));
  expect_field_matches_float(one_op("Or", {p, q}));
  expect_field_matches_float(one_op("Not", {p}));
}

TEST(OpsCompare, IsNaNAndIsInf) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor x = f64_tensor({5}, {1, nan, inf, -inf, 0});
  expect_near(run("IsNaN", {x}), {5}, {0, 1, 0, 0, 0});
  expect_near(run("IsInf", {x}), {5}, {0, 0, 1, 1, 0});
  expect_near(run("IsInf", {x}, {{"detect_negative", int64_t{0}}}), {5}, {0, 0, 1, 0, 0});
  expect_near(run("IsInf", {x}, {{"detect_positive", int64_t{0}}}), {5}, {0, 0, 0, 1, 0});
  EXPECT_EQ(run("IsNaN", {x}).dtype(), DType::Bool);
}

// ---- unary math and activations ------------------------------------------------------

TEST(OpsUnaryMore, RoundingAndSign) {
  const Tensor x = f64_tensor({6}, {-2.5, -1.5, -0.4, 0.5, 1.5, 2.7});
  expect_near(run("Floor", {x}), {6}, {-3, -2, -1, 0, 1, 2});
  expect_near(run("Ceil", {x}), {6}, {-2, -1, -0.0, 1, 2, 3});
  expect_near(run("Round", {x}), {6}, {-2, -2, -0.0, 0, 2, 3});  // halves to even
  expect_near(run("Sign", {x}), {6}, {-1, -1, -1, 1, 1, 1});
  expect_near(run("Sign", {i64_tensor({3}, {-7, 0, 9})}), {3}, {-1, 0, 1});
  expect_near(run("Sin", {f64_tensor({2}, {0, M_PI / 2})}), {2}, {0, 1}, 1e-7);
  expect_near(run("Cos", {f64_tensor({2}, {0, M_PI})}), {2}, {1, -1}, 1e-7);
}

TEST(OpsUnaryMore, ExponentialLinearUnits) {
  const Tensor x = f64_tensor({3}, {-1, 0, 2});
  const double e1 = std::exp(-1.0) - 1;
  expect_near(run("Elu", {x}), {3}, {e1, 0, 2}, 1e-7);
  expect_near(run("Elu", {x}, {{"alpha", 0.5}}), {3}, {0.5 * e1, 0, 2}, 1e-7);
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  expect_near(run("Selu", {x}), {3}, {g * a * e1, 0, 2 * g}, 1e-6);
  // Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
  expect_near(run("Celu", {x}, {{"alpha", 2.0}}), {3}, {2 * (std::exp(-0.5) - 1), 0, 2}, 1e-7);
  expect_near(run("ThresholdedRelu", {f64_tensor({4}, {0.5, 1, 1.5, -3})}), {4}, {0, 0, 1.5, 0});
  expect_near(run("Softplus", {f64_tensor({3}, {0, 100, -100})}), {3}, {std::log(2.0), 100, 0}, 1e-7);
  expect_near(run("Mish", {f64_tensor({1}, {1})}), {1}, {std::tanh(std::log1p(std::exp(1.0)))}, 1e-7);
}

TEST(OpsUnaryMore, PReluSlopeBroadcastsToTheInput) {
  // A slope per channel ([C, 1, 1]) against [1, C, H, W], as torch exports it.
  const Tensor x = f64_tensor({1, 2, 1, 2}, {-1, 2, -3, 4}), slope = f64_tensor({2, 1, 1}, {0.5, 0.25});
  expect_near(run("PRelu", {x, slope}), {1, 2, 1, 2}, {-0.5, 2, -0.75, 4});
  expect_error([&] { run("PRelu", {f64_tensor({2}, {1, 2}), f64_tensor({2, 2}, {1, 1, 1, 1})}); }, "broadcast");
}

// ---- Mod, Sum, Mean ------------------------------------------------------------------

TEST(OpsBinaryMore, ModFollowsTheDivisorOrTheDividend) {
  const Tensor a = i64_tensor({4}, {7, -7, 7, -7}), b = i64_tensor({4}, {3, 3, -3, -3});
  expect_near(run("Mod", {a, b}), {4}, {1, 2, -2, -1});  // Python's %: the divisor's sign
  expect_near(run("Mod", {a, b}, {{"fmod", int64_t{1}}}), {4}, {1, -1, 1, -1});  // C's fmod: the dividend's
  const Tensor fa = f64_tensor({2}, {5.5, -5.5}), fb = f64_tensor({2}, {2, 2});
  expect_near(run("Mod", {fa, fb}, {{"fmod", int64_t{1}}}), {2}, {1.5, -1.5});
  expect_near(run("Mod", {fa, fb}), {2}, {1.5, 0.5});  // opset 28: floats with fmod=0 too
  expect_error([&] { run("Mod", {a, i64_tensor({1}, {0})}); }, "by zero");
}

TEST(OpsBinaryMore, SumAndMeanOfSeveralTensors) {
  const Tensor a = f64_tensor({2}, {1, 2}), b = f64_tensor({2, 1}, {10, 20}), c = f64_tensor({}, {100});
  expect_near(run("Sum", {a, b, c}), {2, 2}, {111, 112, 121, 122});
  expect_near(run("Mean", {a, b, c}), {2, 2}, {37, 112.0 / 3, 121.0 / 3, 122.0 / 3});
  expect_near(run("Sum", {a}), {2}, {1, 2});
  expect_field_matches_float(one_op("Sum", {f64_tensor({2}, {3, -4}), f64_tensor({2}, {5, 6})}));
  expect_field_matches_float(one_op("Mean", {f64_tensor({2}, {3, -4}), f64_tensor({2}, {5, 6})}));
}

// ---- symbolic semantics ------------------------------------------------------------------

// The value of a Sym built from constants and selects (no variables).
double constant_value(Sym s) {
  const SymNode& n = sym_node(s);
  auto arg = [&](size_t i) { return constant_value(n.args[i]); };
  switch (n.kind) {
    case SymKind::Const: return static_cast<double>(n.num) / static_cast<double>(n.den);
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
    default: throw Error("not a constant expression");
  }
}

// Symbolic semantics evaluated on constants equal the float semantics.
TEST(OpsElementwiseSym, PiecewiseOperatorsAgreeWithTheFloatEvaluator) {
  const std::vector<double> xs = {-1.5, -0.25, 0, 0.75, 2}, ys = {0.5, -0.25, 1, -3, 2};
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "PRelu", "Sum", "Mean"}) {
    SymArenaScope scope;
    SymArray sx({5}), sy({5});
    for (size_t i = 0; i < 5; ++i) sx.data[i] = Sym(xs[i]), sy.data[i] = Sym(ys[i]);
    const SymArray in[] = {sx, sy};
    std::vector<SymArray> sym = get_op(op).eval_sym({}, std::span<const SymArray>(in, 2));
    Vec want = run(op, {f64_tensor({5}, xs), f64_tensor({5}, ys)}).to_f64();
    for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(constant_value(sym[0].data[i]), want[i]) << op << " at " << i;
  }
  for (auto [op, attrs] : std::vector<std::pair<const char*, Attributes>>{
           {"Sign", {}}, {"ThresholdedRelu", {{"alpha", 0.5}}}, {"IsNaN", {}}}) {
    SymArenaScope scope;
    SymArray sx({5});
    for (size_t i = 0; i < 5; ++i) sx.data[i] = Sym(xs[i]);
    std::vector<SymArray> sym = get_op(op).eval_sym(attrs, std::span<const SymArray>(&sx, 1));
    Vec want = run(op, {f64_tensor({5}, xs)}, attrs).to_f64();
    for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(constant_value(sym[0].data[i]), want[i]) << op << " at " << i;
  }
}


// Dropout in training mode is random unless its ratio is a constant 0 (what
// torch.onnx.export writes for F.dropout(p=0.0, training=True), e.g. in
// torchvision's Swin): that one is the identity and imports as native.
TEST(OpsUnaryMore, DropoutImportsTrainingModeOnlyWithAZeroRatio) {
  GraphBuilder b;
  const OpDef& dropout = get_op("Dropout");
  auto form_with = [&](std::optional<double> ratio, std::optional<bool> training) {
    OnnxForm f;
    f.num_outputs = 2;
    f.inputs.push_back(b.input("x" + std::to_string(b.inputs().size()), {DType::Float32, make_shape({4})}));
    f.inputs.push_back(ratio ? b.constant(Tensor::from_f64(DType::Float32, {}, std::vector<double>{*ratio})) : Value{});
    if (training) f.inputs.push_back(b.constant(Tensor::from_f64(DType::Bool, {}, std::vector<double>{*training ? 1.0 : 0.0})));
    return f;
  };
  OnnxForm zero = form_with(0.0, true);
  EXPECT_EQ(dropout.onnx_import(zero, 13, b), "");
  EXPECT_EQ(zero.inputs.size(), 2u);  // the flag changes nothing and is dropped
  OnnxForm half = form_with(0.5, true);
  EXPECT_EQ(dropout.onnx_import(half, 13, b), "Dropout in training mode");
  OnnxForm default_ratio = form_with(std::nullopt, true);
  EXPECT_EQ(dropout.onnx_import(default_ratio, 13, b), "Dropout in training mode");
  OnnxForm inference = form_with(0.5, false);
  EXPECT_EQ(dropout.onnx_import(inference, 13, b), "");
  GraphBuilder g;
  Value x = g.input("x", {DType::Float32, make_shape({4})});
  Value r = g.input("r", {DType::Float32, make_shape({})});
  OnnxForm unknown_ratio;
  unknown_ratio.num_outputs = 1;
  unknown_ratio.inputs = {x, r, g.constant(Tensor::from_f64(DType::Bool, {}, std::vector<double>{1.0}))};
  EXPECT_EQ(dropout.onnx_import(unknown_ratio, 13, g), "Dropout in training mode");
}

}  // namespace
}  // namespace isomer
