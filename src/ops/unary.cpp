// Elementwise operators of one tensor. Each entry states its float semantics as a
// one-line function; polynomial ones (Identity, Neg) also have field semantics.
// Piecewise ones (Relu, LeakyRelu, HardSigmoid, HardSwish) are written once as
// templates over double and Sym with select_gt/select_ge (eval/sym.h), which gives
// their symbolic real semantics; transcendental ones are uninterpreted functions
// there (sym_uninterpreted).
#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>

#include "eval/sym.h"
#include "ir/float_to_int.h"
#include "ir/int_arith.h"
#include "ops/elementwise.h"
#include "ops/emit.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

struct ReluFn { template <class T> static T apply(T x, const Attributes&) { return select_gt(x, T(0), x, T(0)); } };
struct LeakyReluFn {
  template <class T>
  static T apply(T x, const Attributes& a) { return select_ge(x, T(0), x, x * T(a.get_float("alpha", 0.01))); }
};
struct SigmoidFn { static double apply(double x, const Attributes&) { return 1.0 / (1.0 + std::exp(-x)); } };
struct HardSigmoidFn {
  template <class T>
  static T apply(T x, const Attributes& a) {
    return clamp_select(T(a.get_float("alpha", 0.2)) * x + T(a.get_float("beta", 0.5)), T(0), T(1));
  }
};
struct HardSwishFn {
  template <class T>
  static T apply(T x, const Attributes&) { return x * clamp_select(x / T(6) + T(0.5), T(0), T(1)); }
};
struct TanhFn { static double apply(double x, const Attributes&) { return std::tanh(x); } };
struct ErfFn { static double apply(double x, const Attributes&) { return std::erf(x); } };
struct GeluFn {
  static double apply(double x, const Attributes& a) {
    if (a.get_string("approximate", "none") == "tanh")
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  }
};
struct ExpFn { static double apply(double x, const Attributes&) { return std::exp(x); } };
struct LogFn { static double apply(double x, const Attributes&) { return std::log(x); } };
struct SqrtFn { static double apply(double x, const Attributes&) { return std::sqrt(x); } };
struct ReciprocalFn { static double apply(double x, const Attributes&) { return 1.0 / x; } };
struct NegFn {
  static double apply(double x, const Attributes&) { return -x; }
  static int64_t apply(int64_t x, const Attributes&) { return wrap_neg(x); }
};
struct AbsFn {
  static double apply(double x, const Attributes&) { return std::fabs(x); }
  static int64_t apply(int64_t x, const Attributes&) { return wrap_abs(x); }
  static int64_t apply_uint64(int64_t x) { return x; }
  static Sym apply(Sym x, const Attributes&) { return select_gt(x, Sym(), x, -x); }  // reals have no -0
};
struct SinFn { static double apply(double x, const Attributes&) { return std::sin(x); } };
struct CosFn { static double apply(double x, const Attributes&) { return std::cos(x); } };
struct FloorFn { static double apply(double x, const Attributes&) { return std::floor(x); } };
struct CeilFn { static double apply(double x, const Attributes&) { return std::ceil(x); } };
// Halves round to even (the default rounding mode), as ONNX's Round says.
struct RoundFn { static double apply(double x, const Attributes&) { return std::nearbyint(x); } };
struct SignFn {
  template <class T>
  static T apply(T x, const Attributes&) { return select_gt(x, T(0), T(1), select_gt(T(0), x, T(-1), T(0))); }
  static double apply(double x, const Attributes&) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }  // NaN stays NaN
  static int64_t apply(int64_t x, const Attributes&) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
  static int64_t apply_uint64(int64_t x) { return x != 0; }
};
struct IdentityFn { static double apply(double x, const Attributes&) { return x; } };

// Field (T = Fp) and symbolic (T = Sym) semantics of Identity and Neg.
template <class T>
std::vector<Array<T>> exact_identity(const Attributes&, std::span<const Array<T>> in) { return {in[0]}; }
template <class T>
std::vector<Array<T>> exact_neg(const Attributes&, std::span<const Array<T>> in) {
  return {map(in[0], [](T x) { return -x; })};
}

// Identity-like operators pass any tensor through unchanged (bits included).
std::vector<Tensor> eval_pass_through(const EvalContext& ctx) { return {ctx.in(0)}; }

int emit_leaky_relu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(PwOp::LeakyRelu, in[0], 0, 0, static_cast<float>(a.get_float("alpha", 0.01)));
}
int emit_hard_sigmoid(kernels::PwProgram& p, const Attributes& a, std::span<const int> in,
                      std::span<const Tensor* const>) {
  return p.emit(PwOp::HardSigmoid, in[0], 0, 0, static_cast<float>(a.get_float("alpha", 0.2)),
                static_cast<float>(a.get_float("beta", 0.5)));
}
int emit_gelu(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(a.get_string("approximate", "none") == "tanh" ? PwOp::GeluTanh : PwOp::GeluErf, in[0]);
}

}  // namespace

OpDef def_Relu() {
  OpDef d = unary<ReluFn>("Relu");
  d.props.idempotent = true;
  d.eval_sym = sym_unary<ReluFn>;
  d.emit_pointwise = emit_unary<PwOp::Relu>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_LeakyRelu() {
  OpDef d = unary<LeakyReluFn>("LeakyRelu");
  d.attributes = {{"alpha", "float"}};
  d.eval_sym = sym_unary<LeakyReluFn>;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "alpha", 0.01);
    return a;
  };
  d.emit_pointwise = emit_leaky_relu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Sigmoid() {
  OpDef d = transcendental<SigmoidFn, "Sigmoid">("Sigmoid");
  d.emit_pointwise = emit_unary<PwOp::Sigmoid>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_HardSigmoid() {
  OpDef d = unary<HardSigmoidFn>("HardSigmoid");
  d.attributes = {{"alpha", "float"}, {"beta", "float"}};
  d.eval_sym = sym_unary<HardSigmoidFn>;
  d.emit_pointwise = emit_hard_sigmoid;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_HardSwish() {
  OpDef d = unary<HardSwishFn>("HardSwish");
  d.eval_sym = sym_unary<HardSwishFn>;
  d.emit_pointwise = emit_unary<PwOp::HardSwish>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Tanh() {
  OpDef d = transcendental<TanhFn, "Tanh">("Tanh");
  d.emit_pointwise = emit_unary<PwOp::Tanh>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Erf() {
  OpDef d = transcendental<ErfFn, "Erf">("Erf");
  d.emit_pointwise = emit_unary<PwOp::Erf>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Gelu() {
  OpDef d = transcendental<GeluFn, "Gelu">("Gelu");
  d.min_opset = 20;
  d.attributes = {{"approximate", "string"}};
  d.emit_pointwise = emit_gelu;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Exp() {
  OpDef d = transcendental<ExpFn, "Exp">("Exp");
  d.emit_pointwise = emit_unary<PwOp::Exp>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Log() {
  OpDef d = transcendental<LogFn, "Log">("Log");
  d.emit_pointwise = emit_unary<PwOp::Log>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Sqrt() {
  OpDef d = transcendental<SqrtFn, "Sqrt">("Sqrt");
  d.emit_pointwise = emit_unary<PwOp::Sqrt>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Reciprocal() {
  OpDef d = transcendental<ReciprocalFn, "Reciprocal">("Reciprocal");
  d.emit_pointwise = emit_unary<PwOp::Reciprocal>;
  d.lower = Lowering::Pointwise;
  return d;
}

// Sin and Cos compute rotary embedding tables at run time.
OpDef def_Sin() {
  OpDef d = transcendental<SinFn, "Sin">("Sin");
  d.min_opset = 7;
  d.emit_pointwise = emit_unary<PwOp::Sin>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Cos() {
  OpDef d = transcendental<CosFn, "Cos">("Cos");
  d.min_opset = 7;
  d.emit_pointwise = emit_unary<PwOp::Cos>;
  d.lower = Lowering::Pointwise;
  return d;
}

// Floor, Ceil and Round are piecewise constant with infinitely many pieces: the
// verifier sees uninterpreted functions. Opsets before 6 had consumed_inputs.
OpDef def_Floor() {
  OpDef d = transcendental<FloorFn, "Floor">("Floor");
  d.min_opset = 6;
  d.props.idempotent = true;
  d.emit_pointwise = emit_unary<PwOp::Floor>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Ceil() {
  OpDef d = transcendental<CeilFn, "Ceil">("Ceil");
  d.min_opset = 6;
  d.props.idempotent = true;
  d.emit_pointwise = emit_unary<PwOp::Ceil>;
  d.lower = Lowering::Pointwise;
  return d;
}
OpDef def_Round() {
  OpDef d = transcendental<RoundFn, "Round">("Round");
  d.min_opset = 11;
  d.props.idempotent = true;
  d.emit_pointwise = emit_unary<PwOp::Round>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Sign() {
  OpDef d = unary<SignFn>("Sign", /*float_only=*/false);
  d.min_opset = 9;
  d.props.idempotent = true;
  d.eval_sym = sym_unary<SignFn>;
  d.emit_pointwise = emit_unary<PwOp::Sign>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Neg() {
  OpDef d = unary<NegFn>("Neg", /*float_only=*/false);
  d.props.linear_in = {0};
  d.eval_field = exact_neg<Fp>;
  d.eval_sym = exact_neg<Sym>;
  d.emit_pointwise = emit_unary<PwOp::Neg>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Abs() {
  OpDef d = unary<AbsFn>("Abs", /*float_only=*/false);
  d.props.idempotent = true;
  d.eval_sym = sym_unary<AbsFn>;
  d.emit_pointwise = emit_unary<PwOp::Abs>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Identity() {
  OpDef d = unary<IdentityFn>("Identity", /*float_only=*/false);
  d.eval = eval_pass_through;
  d.eval_field = exact_identity<Fp>;
  d.eval_sym = exact_identity<Sym>;
  d.props.linear_in = {0};
  d.props.shape_only = true;
  d.props.idempotent = true;
  d.lower = Lowering::Identity;
  return d;
}

// Clip(x, min?, max?): canonical form has min and max as optional scalar inputs
// (opset 11); older opsets carried them as attributes.
namespace {
std::vector<TensorType> infer_clip(const InferContext& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i)
    if (ctx.has_input(i))
      require(ctx.in(i).shape.empty() || num_elements(ctx.in(i).shape) == std::optional<int64_t>(1),
              "Clip bound must be a scalar");
  return {ctx.in(0)};
}

std::vector<Tensor> eval_clip(const EvalContext& ctx) {
  if (!is_float(ctx.in(0).dtype())) {  // exactly, past 2^53 too
    const DType t = ctx.in(0).dtype();  // on keys: a uint64 orders as unsigned
    Array<int64_t> a = ordered_i64(ctx.in(0));
    const int64_t lo = ctx.has_input(1) ? order_key(t, ctx.in(1).i64_at(0)) : std::numeric_limits<int64_t>::min();
    const int64_t hi = ctx.has_input(2) ? order_key(t, ctx.in(2).i64_at(0)) : std::numeric_limits<int64_t>::max();
    for (int64_t& v : a.data) v = std::min(std::max(v, lo), hi);
    return {tensor_of_keys(t, std::move(a))};
  }
  Array<double> a = f64(ctx.in(0));
  double lo = ctx.has_input(1) ? ctx.in(1).f64_at(0) : -INFINITY;
  double hi = ctx.has_input(2) ? ctx.in(2).f64_at(0) : INFINITY;
  for (double& v : a.data) v = std::isnan(v) ? v : std::min(std::max(v, lo), hi);
  return {tensor(ctx.in(0).dtype(), a)};
}

// An absent bound (an omitted input reaches here as an empty array) does not clamp.
std::vector<SymArray> sym_clip(const Attributes&, std::span<const SymArray> in) {
  auto bound = [&](size_t i) { return i < in.size() && !in[i].data.empty() ? &in[i].data[0] : nullptr; };
  const Sym *lo = bound(1), *hi = bound(2);
  return {map(in[0], [&](Sym v) {
    if (lo) v = select_gt(*lo, v, *lo, v);  // std::max(v, lo)
    if (hi) v = select_gt(v, *hi, *hi, v);  // std::min(v, hi)
    return v;
  })};
}

// Constant bounds become the instruction's immediates (floats); others, and integer
// bounds a float does not hold (2^24 + 1), are operands.
int emit_clip(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const> c) {
  auto immediate = [&](size_t i) -> std::optional<double> {
    std::optional<double> v = scalar_constant(c, i);
    if (!v || is_float(c[i]->dtype())) return v;
    const int64_t exact = c[i]->i64_at(0);
    if (float_to_int<int64_t>(static_cast<float>(exact)) != exact) return std::nullopt;
    return v;
  };
  auto lo = immediate(1), hi = immediate(2);
  const bool has_lo = in.size() > 1 && in[1] >= 0, has_hi = in.size() > 2 && in[2] >= 0;
  if ((!has_lo || lo) && (!has_hi || hi))
    return p.emit(PwOp::Clip, in[0], 0, 0, has_lo ? static_cast<float>(*lo) : -INFINITY,
                  has_hi ? static_cast<float>(*hi) : INFINITY);
  int r = in[0];
  if (has_lo) r = p.emit(PwOp::Max, r, in[1]);
  if (has_hi) r = p.emit(PwOp::Min, r, in[2]);
  return r == in[0] ? p.emit(PwOp::Copy, r) : r;
}

std::string import_clip(OnnxForm& form, int64_t opset, GraphBuilder& b);
void export_clip(OnnxForm& form, int64_t opset);
}  // namespace

OpDef def_Clip() {
  OpDef d;
  d.name = "Clip";
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.min_opset = 11;
  d.props.elementwise = true;
  d.props.idempotent = true;
  d.infer = infer_clip;
  d.eval = eval_clip;
  d.eval_sym = sym_clip;
  d.onnx_import = import_clip;
  d.onnx_export = export_clip;
  d.emit_pointwise = emit_clip;
  d.lower = Lowering::Pointwise;
  return d;
}

// Dropout in inference: the identity; the optional mask output is all true.
namespace {
std::vector<TensorType> infer_dropout(const InferContext& ctx) {
  std::vector<TensorType> out{ctx.in(0)};
  if (ctx.num_outputs == 2) out.push_back({DType::Bool, ctx.in(0).shape});
  return out;
}

std::vector<Tensor> eval_dropout(const EvalContext& ctx) {
  std::vector<Tensor> out{ctx.in(0)};
  if (ctx.num_outputs == 2) {
    std::vector<int64_t> ones(ctx.in(0).numel(), 1);
    out.push_back(Tensor::from_i64(DType::Bool, ctx.in(0).dims(), ones));
  }
  return out;
}

std::string import_dropout(OnnxForm& form, int64_t opset, GraphBuilder&);
}  // namespace

OpDef def_Dropout() {
  OpDef d;
  d.name = "Dropout";
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.min_opset = 12;
  d.props.shape_only = true;
  d.infer = infer_dropout;
  d.eval = eval_dropout;
  // Field and symbolic: output 0 only (the identity); the mask has no such semantics,
  // so a rule may drop a Dropout but not read its mask.
  d.eval_field = exact_identity<Fp>;
  d.eval_sym = exact_identity<Sym>;
  d.onnx_import = import_dropout;
  d.lower = Lowering::Identity;
  return d;
}

// Cast(x) to the element type in attribute `to`.
namespace {
std::vector<TensorType> infer_cast(const InferContext& ctx) {
  DType to = static_cast<DType>(ctx.attrs.get_int("to"));
  require(is_numeric(to), "Cast to unsupported type " + std::to_string(static_cast<int>(to)));
  require(is_numeric(ctx.in(0).dtype), "Cast from unsupported type");
  return {{to, ctx.in(0).shape}};
}

// Conversions happen where a fused kernel loads and stores; inside it, a cast to
// bool must still make every non-zero value 1.
int emit_cast(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  if (static_cast<DType>(a.get_int("to")) == DType::Bool) return p.emit(PwOp::Not, p.emit(PwOp::Not, in[0]));
  return p.emit(PwOp::Copy, in[0]);
}

std::vector<Tensor> eval_cast(const EvalContext& ctx) {
  DType to = static_cast<DType>(ctx.attrs.get_int("to"));
  const Tensor& x = ctx.in(0);
  // To a float through to_f64, which reads a uint64 as unsigned (its int64 bits do not).
  if (is_float(to) || (is_float(x.dtype()) && to == DType::Bool))
    return {Tensor::from_f64(to, x.dims(), x.to_f64(), FloatToInt::Saturate)};
  if (is_float(x.dtype())) {
    // ONNX leaves NaN and values outside the target's range undefined: as ONNX Runtime
    // on x86 (ir/float_to_int.h), which the runtime's kernels follow too, so that a
    // fold, the check and a run agree.
    auto convert = [&]<class I>(I) {
      std::vector<int64_t> v(static_cast<size_t>(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) v[i] = static_cast<int64_t>(cast_float_to<I>(x.f64_at(i)));
      return std::vector<Tensor>{Tensor::from_i64(to, x.dims(), v)};
    };
    switch (to) {
      case DType::UInt64: return convert(uint64_t{});
      case DType::UInt32: return convert(uint32_t{});
      case DType::Int64: return convert(int64_t{});
      default: return convert(int32_t{});  // int32 and narrower: wrapped by from_i64
    }
  }
  return {Tensor::from_i64(to, x.dims(), x.to_i64())};
}

// CastLike (opset 15 on) is a Cast to the element type of its second input, which it
// reads for nothing else: imported as that Cast (its saturate and round_mode are
// Cast's too) and written back as Cast, which every opset with CastLike has.
// torch.onnx.export(dynamo=True, optimize=False) writes one for each scalar constant.
std::string import_cast(OnnxForm& form, int64_t, GraphBuilder&) {
  if (form.op_type != "CastLike") return "";
  if (form.inputs.size() != 2 || !form.inputs[1].present()) return "CastLike needs the input whose type it takes";
  form.attrs.set("to", static_cast<int64_t>(form.inputs[1].type().dtype));
  form.inputs.resize(1);
  form.op_type = "Cast";
  return "";
}
}  // namespace

OpDef def_Cast() {
  OpDef d;
  d.name = "Cast";
  d.attributes = {{"to", "int"}};
  d.props.elementwise = true;
  d.infer = infer_cast;
  d.eval = eval_cast;
  // Over the reals a cast to a floating-point type is the identity (the verifier does
  // not model rounding); a cast to an integer type rounds, which it does not state.
  d.eval_sym = [](const Attributes& attrs, std::span<const SymArray> in) -> std::vector<SymArray> {
    require(is_float(static_cast<DType>(attrs.get_int("to"))), "Cast to an integer type has no symbolic semantics");
    return {in[0]};
  };
  d.emit_pointwise = emit_cast;
  d.onnx_import = import_cast;
  d.lower = Lowering::Pointwise;
  return d;
}

// ---- ONNX version adapters -------------------------------------------------------

namespace {

std::string import_clip(OnnxForm& form, int64_t opset, GraphBuilder& b) {
  if (opset >= 11) return "";
  // Opset 6: min/max attributes -> scalar inputs of the input's type. A bound beyond the
  // type's range bounds nothing: saturated (the float defaults on an integer input).
  DType t = form.inputs[0].type().dtype;
  double lo = form.attrs.get_float("min", -3.4028234663852886e38);
  double hi = form.attrs.get_float("max", 3.4028234663852886e38);
  form.inputs.push_back(b.constant(Tensor::from_f64(t, {}, std::vector<double>{lo}, FloatToInt::Saturate)));
  form.inputs.push_back(b.constant(Tensor::from_f64(t, {}, std::vector<double>{hi}, FloatToInt::Saturate)));
  form.attrs.erase("min");
  form.attrs.erase("max");
  return "";
}

void export_clip(OnnxForm& form, int64_t opset) {
  if (opset >= 11) return;
  const char* names[] = {"", "min", "max"};
  for (size_t i = 1; i < form.inputs.size(); ++i) {
    if (!form.inputs[i].present()) continue;
    const Tensor* c = form.inputs[i].constant();
    require(c != nullptr, "Clip with a non-constant bound cannot be written at opset " + std::to_string(opset));
    form.attrs.set(names[i], c->f64_at(0));
  }
  form.inputs.resize(1);
}

std::string import_dropout(OnnxForm& form, int64_t opset, GraphBuilder&) {
  // Opset < 12 carried ratio/is_test as attributes; in inference all are the identity.
  if (opset < 12) {
    if (form.attrs.get_int("is_test", 1) == 0 && opset < 7) return "Dropout in training mode";
    form.attrs = {};
  }
  if (form.inputs.size() >= 3 && form.inputs[2].present()) {
    const Tensor* training = form.inputs[2].constant();
    if (!training) return "Dropout training_mode is not a constant";
    if (training->i64_at(0) != 0) {
      // Training mode drops each element with probability `ratio` (default 0.5). A
      // constant ratio of 0 drops none: the identity with an all-true mask, which is
      // what torch.onnx.export writes for F.dropout(p=0.0, training=True) (e.g.
      // torchvision's Swin attention). The flag then changes nothing and is dropped.
      const Tensor* ratio = form.inputs[1].present() ? form.inputs[1].constant() : nullptr;
      if (!ratio || ratio->numel() != 1 || ratio->f64_at(0) != 0.0) return "Dropout in training mode";
      form.inputs.resize(2);
    }
  }
  form.attrs.erase("seed");
  return "";
}

}  // namespace

}  // namespace isomer
