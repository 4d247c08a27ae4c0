// Comparisons and logic, with bool outputs: Less, LessOrEqual, Greater,
// GreaterOrEqual (numpy-style broadcasting), Not, And, Or, Xor, and the float
// tests IsNaN and IsInf. Exporters build attention masks from them.
//
// Semantics: comparisons evaluate in double for floats and in int64 for integers
// (exact; a uint64 as unsigned). Symbolically a comparison is a select between 1 and 0; the logic
// operators are the polynomials that agree with them on {0, 1} (Not x = 1 - x,
// And = x y, Or = x + y - x y, Xor = x + y - 2 x y), which also gives them field
// semantics. Reals have no NaN or infinity, so IsNaN and IsInf are 0 there.
// (Equal lives in ops/binary.cpp.)
#include <cmath>

#include "eval/sym.h"
#include "ops/emit.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

// Inputs of one numeric type broadcast together; the output is bool.
std::vector<TensorType> infer_compare(const InferContext& ctx) {
  require(is_numeric(ctx.in(0).dtype), "comparison inputs must be numeric");
  std::vector<TensorType> out = broadcast_inputs(ctx);
  out[0].dtype = DType::Bool;
  return out;
}

template <class F>
std::vector<Tensor> eval_compare(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (is_float(a.dtype()))
    return {tensor(DType::Bool, broadcast_map(f64(a), f64(b), [](double x, double y) -> int64_t { return F::apply(x, y); }))};
  return {tensor(DType::Bool, broadcast_map(ordered_i64(a), ordered_i64(b),
                                            [](int64_t x, int64_t y) -> int64_t { return F::apply(x, y); }))};
}

struct LessFn {
  template <class T> static bool apply(T x, T y) { return x < y; }
  static Sym sym(Sym x, Sym y) { return select_gt(y, x, Sym(1), Sym(0)); }
};
struct LessOrEqualFn {
  template <class T> static bool apply(T x, T y) { return x <= y; }
  static Sym sym(Sym x, Sym y) { return select_ge(y, x, Sym(1), Sym(0)); }
};
struct GreaterFn {
  template <class T> static bool apply(T x, T y) { return x > y; }
  static Sym sym(Sym x, Sym y) { return select_gt(x, y, Sym(1), Sym(0)); }
};
struct GreaterOrEqualFn {
  template <class T> static bool apply(T x, T y) { return x >= y; }
  static Sym sym(Sym x, Sym y) { return select_ge(x, y, Sym(1), Sym(0)); }
};

template <class F>
std::vector<SymArray> sym_compare(const Attributes&, std::span<const SymArray> in) {
  return {broadcast_map(in[0], in[1], [](Sym x, Sym y) { return F::sym(x, y); })};
}

template <class F, PwOp Op>
OpDef comparison(std::string_view name, int min_opset) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = min_opset;
  d.props.elementwise = true;
  d.infer = infer_compare;
  d.eval = eval_compare<F>;
  d.eval_sym = sym_compare<F>;
  d.emit_pointwise = emit_binary<Op>;
  d.lower = Lowering::Pointwise;
  return d;
}

// ---- logic -------------------------------------------------------------------------

void require_bool(const TensorType& t, const char* what) {
  require(t.dtype == DType::Bool, std::string(what) + " must be a bool tensor, got " + std::string(dtype_name(t.dtype)));
}

std::vector<TensorType> infer_logic(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) require_bool(ctx.in(i), "input");
  return broadcast_inputs(ctx);
}

// Polynomials that agree with the truth tables on {0, 1}; T is int64_t, Fp or Sym.
struct NotFn {
  static constexpr int arity = 1;
  template <class T> static T apply(T x) { return T(1) - x; }
};
struct AndFn {
  static constexpr int arity = 2;
  template <class T> static T apply(T x, T y) { return x * y; }
};
struct OrFn {
  static constexpr int arity = 2;
  template <class T> static T apply(T x, T y) { return x + y - x * y; }
};
struct XorFn {
  static constexpr int arity = 2;
  template <class T> static T apply(T x, T y) { return x + y - T(2) * x * y; }
};

template <class F>
std::vector<Tensor> eval_logic(const EvalContext& ctx) {
  if constexpr (F::arity == 1)
    return {tensor(DType::Bool, map(i64(ctx.in(0)), [](int64_t x) { return F::apply(x); }))};
  else
    return {tensor(DType::Bool, broadcast_map(i64(ctx.in(0)), i64(ctx.in(1)), [](int64_t x, int64_t y) { return F::apply(x, y); }))};
}

template <class F, class T>
std::vector<Array<T>> exact_logic(const Attributes&, std::span<const Array<T>> in) {
  if constexpr (F::arity == 1)
    return {map(in[0], [](T x) { return F::apply(x); })};
  else
    return {broadcast_map(in[0], in[1], [](T x, T y) { return F::apply(x, y); })};
}

template <class F, PwOp Op>
OpDef logic(std::string_view name, int arity) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = arity;
  d.min_opset = arity == 2 ? 7 : 1;  // opsets before 7 had the broadcast attribute
  d.props.elementwise = true;
  d.props.commutative = d.props.associative = arity == 2;
  d.infer = infer_logic;
  d.eval = eval_logic<F>;
  d.eval_field = exact_logic<F, Fp>;
  d.eval_sym = exact_logic<F, Sym>;
  d.emit_pointwise = arity == 2 ? emit_binary<Op> : emit_unary<Op>;
  d.lower = Lowering::Pointwise;
  return d;
}

// ---- IsNaN, IsInf ------------------------------------------------------------------

std::vector<TensorType> infer_float_test(const InferContext& ctx) {
  require_float(ctx.in(0), "input");
  return {{DType::Bool, ctx.in(0).shape}};
}

std::vector<Tensor> eval_isnan(const EvalContext& ctx) {
  return {tensor(DType::Bool, map(f64(ctx.in(0)), [](double x) -> int64_t { return std::isnan(x); }))};
}

std::vector<Tensor> eval_isinf(const EvalContext& ctx) {
  const bool pos = ctx.attrs.get_int("detect_positive", 1) != 0, neg = ctx.attrs.get_int("detect_negative", 1) != 0;
  return {tensor(DType::Bool, map(f64(ctx.in(0)), [&](double x) -> int64_t {
                   return std::isinf(x) && (x > 0 ? pos : neg);
                 }))};
}

std::vector<SymArray> sym_never(const Attributes&, std::span<const SymArray> in) {
  return {map(in[0], [](Sym) { return Sym(0); })};
}

int emit_isinf(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(PwOp::IsInf, in[0], 0, 0, a.get_int("detect_positive", 1) != 0 ? 1.0f : 0.0f,
                a.get_int("detect_negative", 1) != 0 ? 1.0f : 0.0f);
}

}  // namespace

OpDef def_Less() { return comparison<LessFn, PwOp::Less>("Less", 7); }
OpDef def_LessOrEqual() { return comparison<LessOrEqualFn, PwOp::LessEqual>("LessOrEqual", 12); }
OpDef def_Greater() { return comparison<GreaterFn, PwOp::Greater>("Greater", 7); }
OpDef def_GreaterOrEqual() { return comparison<GreaterOrEqualFn, PwOp::GreaterEqual>("GreaterOrEqual", 12); }

OpDef def_Not() { return logic<NotFn, PwOp::Not>("Not", 1); }
OpDef def_And() {
  OpDef d = logic<AndFn, PwOp::And>("And", 2);
  d.props.idempotent = true;
  return d;
}
OpDef def_Or() {
  OpDef d = logic<OrFn, PwOp::Or>("Or", 2);
  d.props.idempotent = true;
  return d;
}
OpDef def_Xor() { return logic<XorFn, PwOp::Xor>("Xor", 2); }

OpDef def_IsNaN() {
  OpDef d;
  d.name = "IsNaN";
  d.min_opset = 9;
  d.props.elementwise = true;
  d.infer = infer_float_test;
  d.eval = eval_isnan;
  d.eval_sym = sym_never;
  d.emit_pointwise = emit_unary<PwOp::IsNaN>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_IsInf() {
  OpDef d;
  d.name = "IsInf";
  d.min_opset = 10;
  d.attributes = {{"detect_negative", "int"}, {"detect_positive", "int"}};
  d.props.elementwise = true;
  d.infer = infer_float_test;
  d.eval = eval_isinf;
  d.eval_sym = sym_never;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "detect_negative", int64_t{1});
    set_default(a, "detect_positive", int64_t{1});
    return a;
  };
  d.emit_pointwise = emit_isinf;
  d.lower = Lowering::Pointwise;
  return d;
}

}  // namespace isomer
