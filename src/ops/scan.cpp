// Operators along one axis that do not reduce to a value of the same kind:
// ArgMax and ArgMin (the index of the extreme value, int64) and CumSum (running
// sums). CumSum is linear, so it has field and symbolic semantics from one
// templated kernel; the arg-operators return indices and have float semantics only.
#include <cmath>

#include "eval/sym.h"
#include "ir/int_arith.h"
#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

// ---- ArgMax, ArgMin ----------------------------------------------------------------

std::vector<TensorType> infer_arg(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(is_numeric(x.dtype) && x.dtype != DType::Bool, "input must be numeric");
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", 0), x.rank());
  // ONNX defines no index of nothing (ONNX Runtime fails when it runs): refused, not kept opaque.
  require_valid(!x.shape[axis].is_static() || x.shape[axis].value > 0, "the axis is empty: it has no extreme value");
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis) out.push_back(x.shape[i]);
    else if (ctx.attrs.get_int("keepdims", 1) != 0) out.push_back(Dim(1));
  return {{DType::Int64, out}};
}

// a beats b: larger (Max) or smaller, a NaN above every number (NumPy's rule,
// which the runtime's kernel follows too).
bool beats(double a, double b, bool max) {
  if (std::isnan(a)) return !std::isnan(b);
  return !std::isnan(b) && (max ? a > b : a < b);
}

template <bool Max>
std::vector<Tensor> eval_arg(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", 0), x.rank());
  const bool last = ctx.attrs.get_int("select_last_index", 0) != 0;
  const Around s = around(x.dims(), axis);
  require(s.n > 0, "the axis is empty: it has no extreme value");
  std::vector<int64_t> out(static_cast<size_t>(s.outer * s.inner));
  // Integers compare exactly, as keys (a uint64 as unsigned; past 2^53 doubles tie).
  auto pick = [&](const auto& v, auto beats_fn) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < s.n; ++k) {
          const auto c = v[(o * s.n + k) * s.inner + i], b = v[(o * s.n + best) * s.inner + i];
          if (last ? !beats_fn(b, c) : beats_fn(c, b)) best = k;
        }
        out[o * s.inner + i] = best;
      }
  };
  if (is_float(x.dtype())) pick(x.to_f64(), [](double a, double b) { return beats(a, b, Max); });
  else pick(ordered_i64(x).data, [](int64_t a, int64_t b) { return Max ? a > b : a < b; });
  std::vector<int64_t> dims = x.dims();
  dims[axis] = 1;
  if (ctx.attrs.get_int("keepdims", 1) == 0) dims.erase(dims.begin() + axis);
  return {Tensor::from_i64(DType::Int64, dims, out)};
}

// select_last_index came with opset 12.
void export_arg(OnnxForm& form, int64_t opset) {
  if (opset >= 12) return;
  require(form.attrs.get_int("select_last_index", 0) == 0,
          "select_last_index=1 cannot be written at opset " + std::to_string(opset));
  form.attrs.erase("select_last_index");
}

Attributes canonical_arg(const Attributes& attrs, std::span<const TensorType> inputs) {
  Attributes a = attrs;
  canonical_axis(a, "axis", 0, input_rank(inputs, 0));
  set_default(a, "keepdims", int64_t{1});
  set_default(a, "select_last_index", int64_t{0});
  return a;
}

template <bool Max>
OpDef arg_op(std::string_view name) {
  OpDef d;
  d.name = name;
  d.attributes = {{"axis", "int"}, {"keepdims", "int"}, {"select_last_index", "int"}};
  d.infer = infer_arg;
  d.eval = eval_arg<Max>;
  d.onnx_export = export_arg;
  d.canonical_attrs = canonical_arg;
  d.lower = Lowering::ArgExtreme;
  return d;
}

// ---- CumSum ------------------------------------------------------------------------

std::vector<TensorType> infer_cumsum(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(is_numeric(x.dtype) && x.dtype != DType::Bool, "input must be numeric");
  const TensorType& axis = ctx.in(1);
  require((axis.dtype == DType::Int64 || axis.dtype == DType::Int32) &&
              (axis.rank() == 0 || (axis.rank() == 1 && axis.shape[0] == Dim(1))),
          "axis must be an int32 or int64 scalar");
  if (auto a = constant_ints(ctx, 1)) normalize_axis((*a)[0], x.rank(), "CumSum axis");
  return {x};
}

int64_t cumsum_axis_of(const std::vector<int64_t>& a, int64_t rank) {
  require(a.size() == 1, "CumSum axis must have one element");
  return normalize_axis(a[0], rank, "CumSum axis");
}

// Integer operands arrive in the field as residues: small signed values map back.
std::vector<int64_t> axis_values(const FieldArray& a) {
  std::vector<int64_t> out;
  for (Fp v : a.data)
    out.push_back(v.value() > Fp::kP / 2 ? -static_cast<int64_t>(Fp::kP - v.value()) : static_cast<int64_t>(v.value()));
  return out;
}
std::vector<int64_t> axis_values(const SymArray& a) { return sym_ints(a); }

template <class T>
Array<T> cumsum(const Array<T>& x, int64_t axis, bool exclusive, bool reverse) {
  const Around s = around(x.dims, axis);
  Array<T> y(x.dims);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      T acc = T();
      for (int64_t step = 0; step < s.n; ++step) {
        const int64_t k = reverse ? s.n - 1 - step : step;
        const int64_t at = (o * s.n + k) * s.inner + i;
        if (exclusive) {
          y.data[at] = acc;
          acc = add_wrapping(acc, x.data[at]);
        } else {
          acc = add_wrapping(acc, x.data[at]);
          y.data[at] = acc;
        }
      }
    }
  return y;
}

std::vector<Tensor> eval_cumsum(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = cumsum_axis_of(ints_of(ctx.in(1)), x.rank());
  const bool exclusive = ctx.attrs.get_int("exclusive", 0) != 0, reverse = ctx.attrs.get_int("reverse", 0) != 0;
  if (is_float(x.dtype())) return {tensor(x.dtype(), cumsum(f64(x), axis, exclusive, reverse))};
  return {tensor(x.dtype(), cumsum(i64(x), axis, exclusive, reverse))};
}

template <class T>
std::vector<Array<T>> exact_cumsum(const Attributes& attrs, std::span<const Array<T>> in) {
  const int64_t axis = cumsum_axis_of(axis_values(in[1]), in[0].rank());
  return {cumsum(in[0], axis, attrs.get_int("exclusive", 0) != 0, attrs.get_int("reverse", 0) != 0)};
}

}  // namespace

OpDef def_ArgMax() { return arg_op<true>("ArgMax"); }
OpDef def_ArgMin() { return arg_op<false>("ArgMin"); }

OpDef def_CumSum() {
  OpDef d;
  d.name = "CumSum";
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 11;
  d.attributes = {{"exclusive", "int"}, {"reverse", "int"}};
  d.props.linear_in = {0};
  d.infer = infer_cumsum;
  d.eval = eval_cumsum;
  d.eval_field = exact_cumsum<Fp>;
  d.eval_sym = exact_cumsum<Sym>;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "exclusive", int64_t{0});
    set_default(a, "reverse", int64_t{0});
    return a;
  };
  d.lower = Lowering::CumSum;
  return d;
}

}  // namespace isomer
