// Elementwise operators of several tensors, with numpy-style broadcasting.
// Float tensors compute in double and round to their type; integer tensors compute
// exactly in int64 (they carry shapes and indices), a uint64 as its bits, which Div
// and Mod divide and Max and Min order as unsigned (ops/kernels.h's keys). Add, Sub and Mul have field
// semantics from the same templated kernel; with Div, Max and Min they also have
// symbolic real semantics (eval/sym.h) from it.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "eval/sym.h"
#include "ir/float_to_int.h"
#include "ir/int_arith.h"
#include "ops/emit.h"
#include "ops/kernels.h"
#include "ops/nn_common.h"

namespace isomer {
using namespace ops;

namespace {

// F::apply works on double and int64_t (and on Fp where the op is polynomial).
template <class F>
std::vector<Tensor> eval_binary(const EvalContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (is_float(a.dtype()))
    return {tensor(a.dtype(), broadcast_map(f64(a), f64(b), [](double x, double y) { return F::apply(x, y); }))};
  if constexpr (requires(int64_t x) { F::apply_uint64(x, x); })
    if (a.dtype() == DType::UInt64)
      return {tensor(a.dtype(), broadcast_map(i64(a), i64(b), [](int64_t x, int64_t y) { return F::apply_uint64(x, y); }))};
  return {tensor(a.dtype(), broadcast_map(i64(a), i64(b), [](int64_t x, int64_t y) { return F::apply(x, y); }))};
}

// Field (T = Fp) and symbolic (T = Sym) semantics.
template <class F, class T>
std::vector<Array<T>> exact_binary(const Attributes&, std::span<const Array<T>> in) {
  return {broadcast_map(in[0], in[1], [](T x, T y) { return F::apply(x, y); })};
}

template <class F>
OpDef binary(std::string_view name) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 7;  // multidirectional broadcasting
  d.props.elementwise = true;
  d.infer = broadcast_inputs;
  d.eval = eval_binary<F>;
  return d;
}

// Integers wrap (ir/int_arith.h); the other types have no overflow.
struct AddFn { template <class T> static T apply(T x, T y) { return add_wrapping(x, y); } };
struct SubFn { template <class T> static T apply(T x, T y) { return sub_wrapping(x, y); } };
struct MulFn { template <class T> static T apply(T x, T y) { return mul_wrapping(x, y); } };
// An integer divisor of 0 is an error here (a fold of it is left to the runtime,
// whose kernel gives 0); INT64_MIN / -1 wraps.
struct DivFn {
  static double apply(double x, double y) { return x / y; }
  static Sym apply(Sym x, Sym y) { return x / y; }  // real division
  static int64_t apply(int64_t x, int64_t y) {
    std::optional<int64_t> q = int_div(x, y);
    require(q.has_value(), "integer division by zero");
    return *q;
  }
  static int64_t apply_uint64(int64_t x, int64_t y) {
    std::optional<int64_t> q = uint_div(x, y);
    require(q.has_value(), "integer division by zero");
    return *q;
  }
};
struct PowFn {
  static double apply(double x, double y) { return std::pow(x, y); }
  static int64_t apply(int64_t x, int64_t y) { return checked_float_to_int<int64_t>(std::pow(x, y), "integer Pow"); }
};
// std::max(x, y) is (x < y ? y : x); reals have no NaN.
struct MaxFn {
  template <class T> static T apply(T x, T y) { return std::isnan(static_cast<double>(x)) ? x : std::max(x, y); }
  static Sym apply(Sym x, Sym y) { return select_gt(y, x, y, x); }
};
struct MinFn {
  template <class T> static T apply(T x, T y) { return std::isnan(static_cast<double>(x)) ? x : std::min(x, y); }
  static Sym apply(Sym x, Sym y) { return select_gt(x, y, y, x); }
};

// Pow's exponent may have another type than its base (opset 12+).
std::vector<TensorType> infer_pow(const InferContext& ctx) {
  require(is_numeric(ctx.in(1).dtype), "Pow exponent must be numeric");
  return {{ctx.in(0).dtype, broadcast_shapes(ctx.in(0).shape, ctx.in(1).shape)}};
}

std::vector<Tensor> eval_pow(const EvalContext& ctx) {
  const Tensor& a = ctx.in(0);
  Array<double> r = broadcast_map(f64(a), f64(ctx.in(1)), [](double x, double y) { return std::pow(x, y); });
  if (a.dtype() == DType::Int32 || a.dtype() == DType::Int64) {
    // ONNX Runtime's integer Pow converts pow in double to the type: a result past it is
    // the type's minimum on x86 (ir/float_to_int.h); a fold gives the same, not the wrap.
    std::vector<int64_t> v(r.data.size());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = a.dtype() == DType::Int64 ? cast_float_to_int64(r.data[i]) : cast_float_to_int32(r.data[i]);
    return {Tensor::from_i64(a.dtype(), r.dims, v)};
  }
  return {tensor(a.dtype(), r)};
}

// Max and Min are variadic: fold the binary function over all inputs.
template <class F>
std::vector<Tensor> eval_variadic(const EvalContext& ctx) {
  const DType t = ctx.in(0).dtype();
  if (is_float(t)) {
    Array<double> acc = f64(ctx.in(0));
    for (size_t i = 1; i < ctx.inputs.size(); ++i)
      acc = broadcast_map(acc, f64(ctx.in(i)), [](double x, double y) { return F::apply(x, y); });
    return {tensor(t, acc)};
  }
  // Sum adds bits; Max and Min compare (ops/kernels.h's keys, uint64 as unsigned).
  constexpr bool order = std::is_same_v<F, MaxFn> || std::is_same_v<F, MinFn>;
  auto load = [&](const Tensor& x) { return order ? ordered_i64(x) : i64(x); };
  Array<int64_t> acc = load(ctx.in(0));
  for (size_t i = 1; i < ctx.inputs.size(); ++i)
    acc = broadcast_map(acc, load(ctx.in(i)), [](int64_t x, int64_t y) { return F::apply(x, y); });
  return {order ? tensor_of_keys(t, std::move(acc)) : tensor(t, acc)};
}

template <class F>
std::vector<SymArray> sym_variadic(const Attributes&, std::span<const SymArray> in) {
  SymArray acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) acc = broadcast_map(acc, in[i], [](Sym x, Sym y) { return F::apply(x, y); });
  return {acc};
}

std::vector<TensorType> infer_equal(const InferContext& ctx) {
  std::vector<TensorType> out = broadcast_inputs(ctx);
  out[0].dtype = DType::Bool;
  return out;
}

std::vector<Tensor> eval_equal(const EvalContext& ctx) {
  const Tensor& a = ctx.in(0);
  if (is_float(a.dtype()))
    return {tensor(DType::Bool, broadcast_map(f64(a), f64(ctx.in(1)),
                                              [](double x, double y) -> int64_t { return x == y; }))};
  return {tensor(DType::Bool, broadcast_map(i64(a), i64(ctx.in(1)),
                                            [](int64_t x, int64_t y) -> int64_t { return x == y; }))};
}

// Where(cond, x, y)
std::vector<TensorType> infer_where(const InferContext& ctx) {
  require(ctx.in(0).dtype == DType::Bool, "Where condition must be bool");
  require(ctx.in(1).dtype == ctx.in(2).dtype, "Where branches must have the same type");
  Shape s = broadcast_shapes(broadcast_shapes(ctx.in(0).shape, ctx.in(1).shape), ctx.in(2).shape);
  return {{ctx.in(1).dtype, s}};
}

std::vector<Tensor> eval_where(const EvalContext& ctx) {
  const Tensor &c = ctx.in(0), &x = ctx.in(1), &y = ctx.in(2);
  std::vector<int64_t> dims = broadcast_dims(broadcast_dims(c.dims(), x.dims()), y.dims());
  std::array<std::vector<int64_t>, 3> st{broadcast_strides(c.dims(), dims), broadcast_strides(x.dims(), dims),
                                         broadcast_strides(y.dims(), dims)};
  std::vector<int64_t> cond = c.to_i64();
  if (is_float(x.dtype())) {
    Array<double> out(dims);
    std::vector<double> xv = x.to_f64(), yv = y.to_f64();
    for_each_broadcast<3>(dims, st, [&](int64_t n, const std::array<int64_t, 3>& o) {
      out.data[n] = cond[o[0]] ? xv[o[1]] : yv[o[2]];
    });
    return {tensor(x.dtype(), out)};
  }
  Array<int64_t> out(dims);
  std::vector<int64_t> xv = x.to_i64(), yv = y.to_i64();
  for_each_broadcast<3>(dims, st, [&](int64_t n, const std::array<int64_t, 3>& o) {
    out.data[n] = cond[o[0]] ? xv[o[1]] : yv[o[2]];
  });
  return {tensor(x.dtype(), out)};
}

// Mod: fmod=1 is C's fmod (the sign of the dividend); fmod=0 Python's % (the sign
// of the divisor), for integers and, since opset 28, floats. An integer divisor of
// 0 is an error here (ONNX leaves it undefined; the runtime's kernel gives 0).
double mod_floor(double x, double y) {
  const double r = std::fmod(x, y);
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

std::vector<Tensor> eval_mod(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  const bool fmod = ctx.attrs.get_int("fmod", 0) != 0;
  if (is_float(a.dtype()))
    return {tensor(a.dtype(), broadcast_map(f64(a), f64(b), [&](double x, double y) {
                     return fmod ? std::fmod(x, y) : mod_floor(x, y);
                   }))};
  const bool uint64 = a.dtype() == DType::UInt64;
  return {tensor(a.dtype(), broadcast_map(i64(a), i64(b), [&](int64_t x, int64_t y) {
                   std::optional<int64_t> r = uint64 ? uint_mod(x, y) : int_mod(x, y, fmod);
                   require(r.has_value(), "integer modulo by zero");
                   return *r;
                 }))};
}

int emit_mod(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(a.get_int("fmod", 0) != 0 ? PwOp::FMod : PwOp::Mod, in[0], in[1]);
}

// Sum and Mean of any number of tensors, broadcast together.
std::vector<Tensor> eval_mean(const EvalContext& ctx) {
  std::vector<Tensor> sum = eval_variadic<AddFn>(ctx);
  Array<double> s = f64(sum[0]);
  for (double& v : s.data) v /= static_cast<double>(ctx.inputs.size());
  return {tensor(sum[0].dtype(), s)};
}

template <class T>
std::vector<Array<T>> exact_sum(const Attributes&, std::span<const Array<T>> in) {
  Array<T> acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) acc = broadcast_map(acc, in[i], [](T x, T y) { return add_wrapping(x, y); });
  return {acc};
}

template <class T>
std::vector<Array<T>> exact_mean(const Attributes& attrs, std::span<const Array<T>> in) {
  Array<T> acc = exact_sum<T>(attrs, in)[0];
  CountDivider<T> divide;
  for (T& v : acc.data) v = divide(v, static_cast<int64_t>(in.size()));
  return {acc};
}

int emit_mean(kernels::PwProgram& p, const Attributes& a, std::span<const int> in, std::span<const Tensor* const> c) {
  const int sum = emit_fold<PwOp::Add>(p, a, in, c);
  return p.emit(PwOp::Affine, sum, 0, 0, 1.0f / static_cast<float>(in.size()), 0.0f);
}

// A constant exponent picks a cheaper instruction (x^2 is x*x, x^0.5 a square root).
// pow and the square root differ at -0 and -inf (pow(-0, 0.5) = +0, pow(-inf, 0.5) =
// +inf; sqrt gives -0 and NaN): x^0.5 and x^-0.5 have instructions of their own that
// follow pow (one instruction; the square root with the two points chosen apart as
// five took 2.3x its time).
int emit_pow(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const> c) {
  if (auto e = scalar_constant(c, 1)) {
    if (*e == 1) return p.emit(PwOp::Copy, in[0]);
    if (*e == 2) return p.emit(PwOp::Square, in[0]);
    if (*e == 3) return p.emit(PwOp::Mul, p.emit(PwOp::Square, in[0]), in[0]);
    if (*e == -1) return p.emit(PwOp::Reciprocal, in[0]);
    if (*e == 0.5) return p.emit(PwOp::PowHalf, in[0]);
    if (*e == -0.5) return p.emit(PwOp::PowMinusHalf, in[0]);
    return p.emit(PwOp::PowConst, in[0], 0, 0, static_cast<float>(*e));
  }
  return p.emit(PwOp::Pow, in[0], in[1]);
}

// A Sum, Max, Min or Mean of more operands than one kernel of the runtime reads (a
// pointwise program holds 48 registers: operands and partial results) is imported as a
// tree of such nodes of at most 16 operands each; ONNX leaves the order of the operation
// open. A Mean's parts are Sums scaled by (parts / operands): their Mean is the whole's.
std::string import_wide_fold(OnnxForm& form, int64_t, GraphBuilder& b) {
  constexpr size_t kWidth = 16;
  const bool mean = form.op_type == "Mean";
  while (form.inputs.size() > kWidth) {
    const size_t count = form.inputs.size(), parts = (count + kWidth - 1) / kWidth;
    std::vector<Value> partial;
    for (size_t i = 0; i < count; i += kWidth) {
      std::vector<Value> part(form.inputs.begin() + static_cast<std::ptrdiff_t>(i),
                              form.inputs.begin() + static_cast<std::ptrdiff_t>(std::min(i + kWidth, count)));
      Value v = part.size() == 1 ? part[0] : b.op1(mean ? "Sum" : form.op_type, std::move(part));
      if (mean) {
        const double scale = static_cast<double>(parts) / static_cast<double>(count);
        v = b.op1("Mul", {v, b.constant(Tensor::from_f64(v.type().dtype, {}, std::vector<double>{scale}))});
      }
      partial.push_back(v);
    }
    form.inputs = std::move(partial);
  }
  return "";
}

int emit_where(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(PwOp::Where, in[0], in[1], in[2]);
}

}  // namespace

OpDef def_Add() {
  OpDef d = binary<AddFn>("Add");
  d.props.commutative = d.props.associative = true;
  d.eval_field = exact_binary<AddFn, Fp>;
  d.eval_sym = exact_binary<AddFn, Sym>;
  d.emit_pointwise = emit_binary<PwOp::Add>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Sub() {
  OpDef d = binary<SubFn>("Sub");
  d.eval_field = exact_binary<SubFn, Fp>;
  d.eval_sym = exact_binary<SubFn, Sym>;
  d.emit_pointwise = emit_binary<PwOp::Sub>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Mul() {
  OpDef d = binary<MulFn>("Mul");
  d.props.commutative = d.props.associative = true;
  d.props.linear_in = {0, 1};
  d.eval_field = exact_binary<MulFn, Fp>;
  d.eval_sym = exact_binary<MulFn, Sym>;
  d.emit_pointwise = emit_binary<PwOp::Mul>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Div() {
  OpDef d = binary<DivFn>("Div");
  d.props.linear_in = {0};
  d.eval_sym = exact_binary<DivFn, Sym>;
  d.emit_pointwise = emit_binary<PwOp::Div>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Pow() {
  OpDef d = binary<PowFn>("Pow");
  d.infer = infer_pow;
  d.eval = eval_pow;
  d.emit_pointwise = emit_pow;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Max() {
  OpDef d = binary<MaxFn>("Max");
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.min_opset = 8;
  d.props.commutative = d.props.associative = d.props.idempotent = true;
  d.eval = eval_variadic<MaxFn>;
  d.onnx_import = import_wide_fold;
  d.eval_sym = sym_variadic<MaxFn>;
  d.emit_pointwise = emit_fold<PwOp::Max>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Min() {
  OpDef d = binary<MinFn>("Min");
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.min_opset = 8;
  d.props.commutative = d.props.associative = d.props.idempotent = true;
  d.eval = eval_variadic<MinFn>;
  d.onnx_import = import_wide_fold;
  d.eval_sym = sym_variadic<MinFn>;
  d.emit_pointwise = emit_fold<PwOp::Min>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Equal() {
  OpDef d = binary<AddFn>("Equal");
  d.props.commutative = true;
  d.infer = infer_equal;
  d.eval = eval_equal;
  d.emit_pointwise = emit_binary<PwOp::Equal>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Where() {
  OpDef d;
  d.name = "Where";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 9;
  d.props.elementwise = true;
  d.infer = infer_where;
  d.eval = eval_where;
  d.emit_pointwise = emit_where;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Mod() {
  OpDef d = binary<AddFn>("Mod");
  d.min_opset = 10;
  d.attributes = {{"fmod", "int"}};
  d.eval = eval_mod;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "fmod", int64_t{0});
    return a;
  };
  d.emit_pointwise = emit_mod;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Sum() {
  OpDef d = binary<AddFn>("Sum");
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.min_opset = 8;
  d.props.commutative = d.props.associative = true;
  d.eval = eval_variadic<AddFn>;
  d.onnx_import = import_wide_fold;
  d.eval_field = exact_sum<Fp>;
  d.eval_sym = exact_sum<Sym>;
  d.emit_pointwise = emit_fold<PwOp::Add>;
  d.lower = Lowering::Pointwise;
  return d;
}

OpDef def_Mean() {
  OpDef d = binary<AddFn>("Mean");
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.min_opset = 8;
  d.props.commutative = true;
  d.infer = [](const InferContext& ctx) {
    require_float(ctx.in(0), "Mean input");
    return broadcast_inputs(ctx);
  };
  d.eval = eval_mean;
  d.onnx_import = import_wide_fold;
  d.eval_field = exact_mean<Fp>;
  d.eval_sym = exact_mean<Sym>;
  d.emit_pointwise = emit_mean;
  d.lower = Lowering::Pointwise;
  return d;
}

}  // namespace isomer
