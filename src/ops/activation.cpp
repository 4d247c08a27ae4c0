// Activation functions beyond the basic ones of ops/unary.cpp: the exponential
// linear units (Elu, Selu, Celu), Softplus, Mish, Swish, ThresholdedRelu, and PRelu with
// its broadcast slope. Piecewise ones are written once over double and Sym, with
// the exponential as the verifier's uninterpreted Exp (the Exp operator's own), so
// a rule such as Elu(x) = Where(x >= 0, x, Exp(x) - 1) can be proved.
#include <cmath>

#include "ops/elementwise.h"
#include "ops/emit.h"

namespace isomer {
using namespace ops;

namespace {

// ONNX's defaults, to float precision as the operator schemas state them.
constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

struct SoftplusFn {
  // log(1 + exp(x)), without overflow for large x.
  static double apply(double x, const Attributes&) { return x > 30 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
};
struct MishFn {
  static double apply(double x, const Attributes& a) { return x * std::tanh(SoftplusFn::apply(x, a)); }
};
// x sigmoid(alpha x) (opset 24); the verifier sees the Sigmoid operator's own
// uninterpreted function, so Swish(x) = x * Sigmoid(x) at alpha 1 can be proved.
struct SwishFn {
  static double apply(double x, const Attributes& a) { return x / (1.0 + std::exp(-a.get_float("alpha", 1.0) * x)); }
  static Sym apply(Sym x, const Attributes& a) { return x * sym_call("Sigmoid", Sym(a.get_float("alpha", 1.0)) * x); }
};
struct EluFn {
  template <class T>
  static T apply(T x, const Attributes& a) {
    return select_ge(x, T(0), x, T(a.get_float("alpha", 1.0)) * (exp_of(x) - T(1)));
  }
};
struct SeluFn {
  template <class T>
  static T apply(T x, const Attributes& a) {
    const T alpha(a.get_float("alpha", kSeluAlpha)), gamma(a.get_float("gamma", kSeluGamma));
    return gamma * select_gt(x, T(0), x, alpha * (exp_of(x) - T(1)));
  }
};
// max(0, x) + min(0, alpha (exp(x / alpha) - 1)): for alpha > 0 the second term is
// negative exactly where x is.
struct CeluFn {
  template <class T>
  static T apply(T x, const Attributes& a) {
    const double alpha = a.get_float("alpha", 1.0);
    require(alpha != 0, "Celu alpha must not be 0");
    return select_gt(x, T(0), x, T(alpha) * (exp_of(x / T(alpha)) - T(1)));
  }
};
struct ThresholdedReluFn {
  template <class T>
  static T apply(T x, const Attributes& a) { return select_gt(x, T(a.get_float("alpha", 1.0)), x, T(0)); }
};

float attr_f(const Attributes& a, const char* name, double dflt) { return static_cast<float>(a.get_float(name, dflt)); }

int emit_elu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(PwOp::Elu, in[0], 0, 0, attr_f(a, "alpha", 1.0));
}
int emit_selu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(PwOp::Selu, in[0], 0, 0, attr_f(a, "alpha", kSeluAlpha), attr_f(a, "gamma", kSeluGamma));
}
int emit_celu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  const float alpha = attr_f(a, "alpha", 1.0);
  return alpha > 0 ? p.emit(PwOp::Celu, in[0], 0, 0, alpha) : -1;
}
// Alpha 1 is SiLU, which oneDNN fuses into a convolution or a product as eltwise_swish.
int emit_swish(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  const float alpha = attr_f(a, "alpha", 1.0);
  if (alpha == 1.0f) return p.emit(PwOp::Silu, in[0]);
  return p.emit(PwOp::Mul, in[0], p.emit(PwOp::Sigmoid, p.emit(PwOp::Affine, in[0], 0, 0, alpha, 0.0f)));
}
int emit_thresholded_relu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in,
                          std::span<const Tensor* const>) {
  return p.emit(PwOp::ThresholdedRelu, in[0], 0, 0, attr_f(a, "alpha", 1.0));
}

// Canonical attributes: every defaulted float written out.
template <const char* const* Names, const double* Defaults, size_t N>
Attributes float_defaults(const Attributes& attrs, std::span<const TensorType>) {
  Attributes a = attrs;
  for (size_t i = 0; i < N; ++i) set_default(a, Names[i], Defaults[i]);
  return a;
}
constexpr const char* kAlpha[] = {"alpha"};
constexpr double kOne[] = {1.0};
constexpr const char* kSeluNames[] = {"alpha", "gamma"};
constexpr double kSeluDefaults[] = {kSeluAlpha, kSeluGamma};

// ---- PRelu -------------------------------------------------------------------------

// The slope broadcasts to X one way (opset 7): the output has X's shape.
std::vector<TensorType> infer_prelu(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &slope = ctx.in(1);
  require(is_numeric(x.dtype) && x.dtype != DType::Bool, "PRelu input must be numeric");
  require(slope.dtype == x.dtype, "PRelu slope has type " + std::string(dtype_name(slope.dtype)) + ", the input " +
                                      std::string(dtype_name(x.dtype)));
  const Shape both = broadcast_shapes(x.shape, slope.shape);
  require(both.size() == x.shape.size(), "PRelu slope " + to_string(slope.shape) +
                                             " does not broadcast to the input " + to_string(x.shape));
  for (size_t i = 0; i < both.size(); ++i)
    require(!x.shape[i].is_static() || !both[i].is_static() || both[i] == x.shape[i],
            "PRelu slope " + to_string(slope.shape) + " does not broadcast to the input " + to_string(x.shape));
  return {x};
}

struct PReluFn {
  template <class T>
  static T apply(T x, T slope) { return select_gt(T(0), x, slope * x, x); }
  static double apply(double x, double slope) { return x < 0 ? slope * x : x; }
};

std::vector<Tensor> eval_prelu(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  return {tensor(x.dtype(), broadcast_map(f64(x), f64(ctx.in(1)), [](double v, double s) { return PReluFn::apply(v, s); }))};
}

std::vector<SymArray> sym_prelu(const Attributes&, std::span<const SymArray> in) {
  return {broadcast_map(in[0], in[1], [](Sym v, Sym s) { return PReluFn::apply(v, s); })};
}

}  // namespace

OpDef def_Softplus() {
  OpDef d = transcendental<SoftplusFn, "Softplus">("Softplus");
  d.emit_pointwise = emit_unary<PwOp::Softplus>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Mish() {
  OpDef d = transcendental<MishFn, "Mish">("Mish");
  d.min_opset = 18;
  d.emit_pointwise = emit_unary<PwOp::Mish>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Swish() {
  OpDef d = unary<SwishFn>("Swish");
  d.min_opset = 24;
  d.attributes = {{"alpha", "float"}};
  d.eval_sym = sym_unary<SwishFn>;
  d.canonical_attrs = float_defaults<kAlpha, kOne, 1>;
  d.emit_pointwise = emit_swish;
  d.lower = Lowering::Pointwise;
  return d;
}

// Opsets before 6 had consumed_inputs.
OpDef def_Elu() {
  OpDef d = unary<EluFn>("Elu");
  d.min_opset = 6;
  d.attributes = {{"alpha", "float"}};
  d.eval_sym = sym_unary<EluFn>;
  d.canonical_attrs = float_defaults<kAlpha, kOne, 1>;
  d.emit_pointwise = emit_elu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Selu() {
  OpDef d = unary<SeluFn>("Selu");
  d.min_opset = 6;
  d.attributes = {{"alpha", "float"}, {"gamma", "float"}};
  d.eval_sym = sym_unary<SeluFn>;
  d.canonical_attrs = float_defaults<kSeluNames, kSeluDefaults, 2>;
  d.emit_pointwise = emit_selu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Celu() {
  OpDef d = unary<CeluFn>("Celu");
  d.min_opset = 12;
  d.attributes = {{"alpha", "float"}};
  d.eval_sym = sym_unary<CeluFn>;
  d.canonical_attrs = float_defaults<kAlpha, kOne, 1>;
  d.emit_pointwise = emit_celu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_ThresholdedRelu() {
  OpDef d = unary<ThresholdedReluFn>("ThresholdedRelu");
  d.min_opset = 10;
  d.attributes = {{"alpha", "float"}};
  d.eval_sym = sym_unary<ThresholdedReluFn>;
  d.canonical_attrs = float_defaults<kAlpha, kOne, 1>;
  d.emit_pointwise = emit_thresholded_relu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_PRelu() {
  OpDef d;
  d.name = "PRelu";
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 7;
  d.props.elementwise = true;
  d.infer = infer_prelu;
  d.eval = eval_prelu;
  d.eval_sym = sym_prelu;
  d.emit_pointwise = emit_binary<PwOp::PRelu>;
  d.lower = Lowering::Pointwise;
  return d;
}

}  // namespace isomer
