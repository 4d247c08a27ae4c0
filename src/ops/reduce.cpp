// Reductions: ReduceSum (opset 13 form: axes is an optional input), ReduceMean
// (opset 17 form: axes is an attribute), and ReduceMax, ReduceMin, ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp (opset 13
// form, axes an attribute like ReduceMean's; opset 18 moved it to an input, which
// the importer takes when it is a constant). One templated sum kernel gives float,
// integer and field semantics; the mean divides through CountDivider. The others
// fold each group of reduced elements with one function written over double,
// int64_t, Fp and Sym where the operator allows (polynomial: Prod, SumSquare;
// piecewise: Max, Min, L1; the rest use the verifier's uninterpreted Exp, Log
// and Sqrt, the operators' own).
#include <algorithm>
#include <cmath>
#include <limits>

#include "eval/sym.h"
#include "ir/int_arith.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/nn_common.h"

namespace isomer {
using namespace ops;

namespace {

// Sorted, non-negative axes; an empty list means every axis.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, "reduction axis"));
  std::sort(out.begin(), out.end());
  require(std::adjacent_find(out.begin(), out.end()) == out.end(),
          "reduction axes " + to_string(axes) + " repeat an axis");
  if (out.empty())
    for (int64_t a = 0; a < rank; ++a) out.push_back(a);
  return out;
}

bool contains(const std::vector<int64_t>& sorted, int64_t v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    if (!contains(axes, i))
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  return out;
}

// Sums x over `axes` (normalized); the result keeps reduced dims as 1 or drops them.
template <class T>
Array<T> reduce_sum(const Array<T>& x, const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<int64_t> kept = x.dims;
  for (int64_t a : axes) kept[a] = 1;
  Array<T> out(kept);
  std::vector<int64_t> st = strides_of(kept);
  for (int64_t a : axes) st[a] = 0;
  for_each_broadcast<1>(x.dims, std::array<std::vector<int64_t>, 1>{st},
                        [&](int64_t n, const std::array<int64_t, 1>& o) {
                          out.data[o[0]] = add_wrapping(out.data[o[0]], x.data[n]);
                        });
  if (!keepdims) {
    out.dims.clear();
    for (int64_t i = 0; i < x.rank(); ++i)
      if (!contains(axes, i)) out.dims.push_back(x.dims[i]);
  }
  return out;
}

template <class T>
Array<T> reduce_mean(const Array<T>& x, const std::vector<int64_t>& axes, bool keepdims) {
  Array<T> out = reduce_sum(x, axes, keepdims);
  int64_t count = 1;
  for (int64_t a : axes) count *= x.dims[a];
  CountDivider<T> divide;
  for (T& v : out.data) v = divide(v, count);
  return out;
}

void require_reducible(const TensorType& x, const std::string& op) {
  require(is_numeric(x.dtype) && x.dtype != DType::Bool, op + " input must be numeric");
}

// Axes of a field-evaluated axes input: small signed integers mapped back from F_p.
std::vector<int64_t> field_ints(const FieldArray& a) {
  std::vector<int64_t> out;
  for (Fp v : a.data)
    out.push_back(v.value() > Fp::kP / 2 ? -static_cast<int64_t>(Fp::kP - v.value()) : static_cast<int64_t>(v.value()));
  return out;
}

// ---- ReduceSum ---------------------------------------------------------------------

std::vector<TensorType> infer_reduce_sum(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_reducible(x, "ReduceSum");
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  const bool noop = ctx.attrs.get_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const TensorType& a = ctx.in(1);
    require(a.dtype == DType::Int64 && a.rank() == 1, "ReduceSum axes must be a 1-D int64 tensor");
    std::optional<std::vector<int64_t>> values = constant_ints(ctx, 1);
    if (values) {
      axes = *values;
    } else if (a.shape[0] != Dim(0)) {
      // Axes known only when evaluated: the rank is known if keepdims or the count is.
      if (keepdims) return {{x.dtype, Shape(x.shape.size(), Dim::unknown())}};
      require(a.shape[0].is_static(), "ReduceSum with keepdims=0 and axes of unknown length has an unknown rank");
      require(a.shape[0].value <= x.rank(), "ReduceSum has more axes than its input has dims");
      return {{x.dtype, Shape(static_cast<size_t>(x.rank() - a.shape[0].value), Dim::unknown())}};
    }
  }
  if (axes.empty() && noop) return {x};
  return {{x.dtype, reduced_shape(x.shape, normalize_axes(axes, x.rank()), keepdims)}};
}

std::vector<int64_t> reduce_sum_axes(const Attributes& attrs, const std::vector<int64_t>& given, int64_t rank,
                                     bool* identity) {
  *identity = given.empty() && attrs.get_int("noop_with_empty_axes", 0) != 0;
  return normalize_axes(given, rank);
}

std::vector<Tensor> eval_reduce_sum(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  bool identity = false;
  std::vector<int64_t> axes =
      reduce_sum_axes(ctx.attrs, ctx.has_input(1) ? ints_of(ctx.in(1)) : std::vector<int64_t>{}, x.rank(), &identity);
  if (identity) return {x};
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  if (is_float(x.dtype())) return {tensor(x.dtype(), reduce_sum(f64(x), axes, keepdims))};
  return {tensor(x.dtype(), reduce_sum(i64(x), axes, keepdims))};
}

std::vector<int64_t> exact_ints(const FieldArray& a) { return field_ints(a); }
std::vector<int64_t> exact_ints(const SymArray& a) { return sym_ints(a); }

template <class T>
std::vector<Array<T>> exact_reduce_sum(const Attributes& attrs, std::span<const Array<T>> in) {
  const bool has_axes = in.size() > 1 && (!in[1].dims.empty() || !in[1].data.empty());
  bool identity = false;
  std::vector<int64_t> axes =
      reduce_sum_axes(attrs, has_axes ? exact_ints(in[1]) : std::vector<int64_t>{}, in[0].rank(), &identity);
  if (identity) return {in[0]};
  return {reduce_sum(in[0], axes, attrs.get_int("keepdims", 1) != 0)};
}

// Opset < 13 carried axes as an attribute.
std::string import_reduce_sum(OnnxForm& form, int64_t opset, GraphBuilder& b) {
  if (opset >= 13 || !form.attrs.has("axes")) return "";
  form.inputs.resize(1);
  form.inputs.push_back(b.constant(Tensor::vector_i64(form.attrs.get_ints("axes"))));
  form.attrs.erase("axes");
  return "";
}

void export_reduce_sum(OnnxForm& form, int64_t opset) {
  if (opset >= 13) return;
  std::vector<int64_t> axes;
  if (form.inputs.size() > 1 && form.inputs[1].present()) {
    const Tensor* c = form.inputs[1].constant();
    require(c != nullptr, "ReduceSum with non-constant axes cannot be written at opset " + std::to_string(opset));
    axes = ints_of(*c);
  }
  require(!axes.empty() || form.attrs.get_int("noop_with_empty_axes", 0) == 0,
          "ReduceSum with noop_with_empty_axes cannot be written at opset " + std::to_string(opset));
  if (!axes.empty()) form.attrs.set("axes", axes);
  form.attrs.erase("noop_with_empty_axes");
  form.inputs.resize(1);
}

// ---- ReduceMean --------------------------------------------------------------------

std::vector<TensorType> infer_reduce_mean(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_reducible(x, "ReduceMean");
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  std::vector<int64_t> axes = normalize_axes(ctx.attrs.get_ints("axes", {}), x.rank());
  return {{x.dtype, reduced_shape(x.shape, axes, keepdims)}};
}

std::vector<Tensor> eval_reduce_mean(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> axes = normalize_axes(ctx.attrs.get_ints("axes", {}), x.rank());
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  if (is_float(x.dtype())) return {tensor(x.dtype(), reduce_mean(f64(x), axes, keepdims))};
  if (x.dtype() == DType::UInt64) {  // the wrapped sum divides as unsigned
    const std::vector<int64_t> bits = x.to_i64();
    const Array<uint64_t> mean = reduce_mean(Array<uint64_t>(x.dims(), {bits.begin(), bits.end()}), axes, keepdims);
    return {Tensor::from_i64(x.dtype(), mean.dims, std::vector<int64_t>(mean.data.begin(), mean.data.end()))};
  }
  return {tensor(x.dtype(), reduce_mean(i64(x), axes, keepdims))};
}

template <class T>
std::vector<Array<T>> exact_reduce_mean(const Attributes& attrs, std::span<const Array<T>> in) {
  std::vector<int64_t> axes = normalize_axes(attrs.get_ints("axes", {}), in[0].rank());
  return {reduce_mean(in[0], axes, attrs.get_int("keepdims", 1) != 0)};
}

// Opset 18 moved axes to an optional input and added noop_with_empty_axes.
std::string import_reduce_mean(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (opset < 18) return "";
  std::vector<int64_t> axes;
  if (form.inputs.size() > 1 && form.inputs[1].present()) {
    const Tensor* c = form.inputs[1].constant();
    if (!c) return "ReduceMean axes input is not a constant";
    if (!is_integer(c->dtype())) return "ReduceMean axes input is not an integer tensor";
    axes = c->to_i64();
  }
  if (axes.empty() && form.attrs.get_int("noop_with_empty_axes", 0) != 0)
    return "ReduceMean with no axes and noop_with_empty_axes=1 (an identity)";
  form.attrs.erase("noop_with_empty_axes");
  if (!axes.empty()) form.attrs.set("axes", axes);
  form.inputs.resize(1);
  return "";
}

void export_reduce_mean(OnnxForm& form, int64_t opset) {
  if (opset < 18 || !form.attrs.has("axes")) return;
  form.inputs.resize(1);
  form.inputs.push_back(Value{Node::make_constant(Tensor::vector_i64(form.attrs.get_ints("axes"))), 0});
  form.attrs.erase("axes");
}

// ---- reductions that fold each group of elements ---------------------------------

enum class Fold { Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

// The elements of x that each output element reduces (outputs in row-major order).
template <class T>
std::vector<std::vector<T>> reduced_groups(const Array<T>& x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept = x.dims;
  for (int64_t a : axes) kept[a] = 1;
  std::vector<std::vector<T>> groups(static_cast<size_t>(num_elements(kept)));
  std::vector<int64_t> st = strides_of(kept);
  for (int64_t a : axes) st[a] = 0;
  for_each_broadcast<1>(x.dims, std::array<std::vector<int64_t>, 1>{st},
                        [&](int64_t n, const std::array<int64_t, 1>& o) { groups[o[0]].push_back(x.data[n]); });
  return groups;
}

double log_of(double x) { return std::log(x); }
Sym log_of(Sym x) { return sym_call("Log", x); }
double sqrt_of(double x) { return std::sqrt(x); }
Sym sqrt_of(Sym x) { return sym_call("Sqrt", x); }
double max_of(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double min_of(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
int64_t max_of(int64_t a, int64_t b) { return std::max(a, b); }
int64_t min_of(int64_t a, int64_t b) { return std::min(a, b); }
Sym max_of(Sym a, Sym b) { return select_gt(b, a, b, a); }
Sym min_of(Sym a, Sym b) { return select_gt(a, b, b, a); }
template <class T>
T abs_of(T x) { return select_gt(T(0), x, -x, x); }
inline double abs_of(double x) { return std::fabs(x); }
inline int64_t abs_of(int64_t x) { return wrap_abs(x); }

// The reduction of one group. Polynomial folds work for every T; the others for
// the types that have their functions (max_of, log_of, ...).
template <class T>
T fold_polynomial(Fold f, const std::vector<T>& g) {
  T acc = f == Fold::Prod ? T(1) : T(0);
  for (const T& v : g) acc = f == Fold::Prod ? mul_wrapping(acc, v) : add_wrapping(acc, mul_wrapping(v, v));
  return acc;
}

template <class T>
T fold_group(Fold f, const std::vector<T>& g) {
  if (f == Fold::Prod || f == Fold::SumSquare) return fold_polynomial(f, g);
  if constexpr (std::is_same_v<T, Fp>) {
    throw Error("this reduction has no field semantics");
  } else {
    if (f == Fold::Max || f == Fold::Min) {
      if (g.empty()) {
        if constexpr (std::is_same_v<T, double>) return f == Fold::Max ? -INFINITY : INFINITY;
        else if constexpr (std::is_same_v<T, int64_t>)
          return f == Fold::Max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
        else throw Error("a reduction over no elements has no symbolic value");
      }
      T acc = g[0];
      for (size_t i = 1; i < g.size(); ++i) acc = f == Fold::Max ? max_of(acc, g[i]) : min_of(acc, g[i]);
      return acc;
    }
    if (f == Fold::L1) {
      T acc(0);
      for (const T& v : g) acc = acc + abs_of(v);
      return acc;
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      throw Error("this reduction computes in floating point");
    } else {
      if (f == Fold::L2) return sqrt_of(fold_polynomial(Fold::SumSquare, g));
      T acc(0);
      if (f == Fold::LogSum) {
        for (const T& v : g) acc = acc + v;
        return log_of(acc);
      }
      if constexpr (std::is_same_v<T, double>) {
        // LogSumExp as max + log(sum(exp(x - max))): exact for large values too.
        const double m = fold_group(Fold::Max, g);
        if (std::isinf(m) || std::isnan(m)) return m;
        for (double v : g) acc += std::exp(v - m);
        return m + std::log(acc);
      } else {
        for (const T& v : g) acc = acc + exp_of(v);
        return log_of(acc);
      }
    }
  }
}

template <class T>
Array<T> fold_reduce(Fold f, const Array<T>& x, const std::vector<int64_t>& axes, bool keepdims) {
  Array<T> out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!contains(axes, i)) out.dims.push_back(x.dims[i]);
    else if (keepdims) out.dims.push_back(1);
  for (const std::vector<T>& g : reduced_groups(x, axes)) out.data.push_back(fold_group(f, g));
  return out;
}

std::vector<int64_t> attr_axes(const Attributes& attrs, int64_t rank) {
  return normalize_axes(attrs.get_ints("axes", {}), rank);
}

template <Fold F>
std::vector<TensorType> infer_fold(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_reducible(x, "reduction");
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  return {{x.dtype, reduced_shape(x.shape, attr_axes(ctx.attrs, x.rank()), keepdims)}};
}

// Integers fold exactly where the fold stays in the integers; L2 and the
// logarithms compute in double and round back.
template <Fold F>
std::vector<Tensor> eval_fold(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const std::vector<int64_t> axes = attr_axes(ctx.attrs, x.rank());
  const bool keepdims = ctx.attrs.get_int("keepdims", 1) != 0;
  constexpr bool exact_int = F == Fold::Max || F == Fold::Min || F == Fold::Prod || F == Fold::SumSquare || F == Fold::L1;
  if (is_float(x.dtype()) || !exact_int) return {tensor(x.dtype(), fold_reduce(F, f64(x), axes, keepdims))};
  if constexpr (F == Fold::Max || F == Fold::Min)  // on keys: a uint64 orders as unsigned
    return {tensor_of_keys(x.dtype(), fold_reduce(F, ordered_i64(x), axes, keepdims))};
  if constexpr (F == Fold::L1)  // a uint64's bits have no sign to take off
    if (x.dtype() == DType::UInt64) return {tensor(x.dtype(), reduce_sum(i64(x), axes, keepdims))};
  return {tensor(x.dtype(), fold_reduce(F, i64(x), axes, keepdims))};
}

template <Fold F, class T>
std::vector<Array<T>> exact_fold(const Attributes& attrs, std::span<const Array<T>> in) {
  return {fold_reduce(F, in[0], attr_axes(attrs, in[0].rank()), attrs.get_int("keepdims", 1) != 0)};
}

// Opset 18 moved axes to an optional input and added noop_with_empty_axes (with no
// axes, reduce nothing: an identity, which isomer leaves to ONNX Runtime).
std::string import_reduce_axes(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (opset < 18) return "";
  std::vector<int64_t> axes;
  if (form.inputs.size() > 1 && form.inputs[1].present()) {
    const Tensor* c = form.inputs[1].constant();
    if (!c) return "reduction axes input is not a constant";
    if (!is_integer(c->dtype())) return "reduction axes input is not an integer tensor";
    axes = c->to_i64();
  }
  if (axes.empty() && form.attrs.get_int("noop_with_empty_axes", 0) != 0)
    return "reduction with no axes and noop_with_empty_axes=1 (an identity)";
  form.attrs.erase("noop_with_empty_axes");
  if (!axes.empty()) form.attrs.set("axes", axes);
  form.inputs.resize(1);
  return "";
}

void export_reduce_axes(OnnxForm& form, int64_t opset) {
  if (opset < 18 || !form.attrs.has("axes")) return;
  form.inputs.resize(1);
  form.inputs.push_back(Value{Node::make_constant(Tensor::vector_i64(form.attrs.get_ints("axes"))), 0});
  form.attrs.erase("axes");
}

Attributes canonical_fold(const Attributes& attrs, std::span<const TensorType> inputs) {
  Attributes a = attrs;
  set_default(a, "keepdims", int64_t{1});
  const int64_t rank = input_rank(inputs, 0);
  if (rank >= 0 && a.has("axes")) {
    std::vector<int64_t> axes = a.get_ints("axes");
    for (int64_t& v : axes)
      if (v < 0 && v >= -rank) v += rank;
    std::sort(axes.begin(), axes.end());
    a.set("axes", axes);
  }
  return a;
}

template <Fold F>
OpDef fold_reduction(std::string_view name) {
  OpDef d;
  d.name = name;
  d.min_opset = 13;
  d.attributes = {{"axes", "ints"}, {"keepdims", "int"}};
  d.infer = infer_fold<F>;
  d.eval = eval_fold<F>;
  if constexpr (F == Fold::Prod || F == Fold::SumSquare) d.eval_field = exact_fold<F, Fp>;
  d.eval_sym = exact_fold<F, Sym>;
  d.onnx_import = import_reduce_axes;
  d.onnx_export = export_reduce_axes;
  d.canonical_attrs = canonical_fold;
  d.lower = Lowering::Reduce;
  return d;
}

}  // namespace

OpDef def_ReduceSum() {
  OpDef d;
  d.name = "ReduceSum";
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.min_opset = 13;
  d.attributes = {{"keepdims", "int"}, {"noop_with_empty_axes", "int"}};
  d.props.linear_in = {0};
  d.infer = infer_reduce_sum;
  d.eval = eval_reduce_sum;
  d.eval_field = exact_reduce_sum<Fp>;
  d.eval_sym = exact_reduce_sum<Sym>;
  d.onnx_import = import_reduce_sum;
  d.onnx_export = export_reduce_sum;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "keepdims", int64_t{1});
    set_default(a, "noop_with_empty_axes", int64_t{0});
    return a;
  };
  d.lower = Lowering::Reduce;
  return d;
}

OpDef def_ReduceMean() {
  OpDef d;
  d.name = "ReduceMean";
  d.min_opset = 13;
  d.attributes = {{"axes", "ints"}, {"keepdims", "int"}};
  d.props.linear_in = {0};
  d.infer = infer_reduce_mean;
  d.eval = eval_reduce_mean;
  d.eval_field = exact_reduce_mean<Fp>;
  d.eval_sym = exact_reduce_mean<Sym>;
  d.onnx_import = import_reduce_mean;
  d.onnx_export = export_reduce_mean;
  d.lower = Lowering::Reduce;
  return d;
}

OpDef def_ReduceMax() {
  OpDef d = fold_reduction<Fold::Max>("ReduceMax");
  d.props.idempotent = true;
  return d;
}
OpDef def_ReduceMin() {
  OpDef d = fold_reduction<Fold::Min>("ReduceMin");
  d.props.idempotent = true;
  return d;
}
OpDef def_ReduceProd() { return fold_reduction<Fold::Prod>("ReduceProd"); }
OpDef def_ReduceSumSquare() { return fold_reduction<Fold::SumSquare>("ReduceSumSquare"); }
OpDef def_ReduceL1() { return fold_reduction<Fold::L1>("ReduceL1"); }
OpDef def_ReduceL2() { return fold_reduction<Fold::L2>("ReduceL2"); }
OpDef def_ReduceLogSum() { return fold_reduction<Fold::LogSum>("ReduceLogSum"); }
OpDef def_ReduceLogSumExp() { return fold_reduction<Fold::LogSumExp>("ReduceLogSumExp"); }

}  // namespace isomer
