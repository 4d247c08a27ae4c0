// Operators that select or place elements by value or index, as current exporters
// write them: TopK (torch.topk: beam search, MoE routers), ScatterElements
// (Tensor.scatter_/scatter_reduce) and OneHot (F.one_hot). Float semantics only: they
// compare, or their output shape depends on an operand's value (k, depth), which
// must be a constant for the shape to be known when the graph is planned; a node
// whose k or depth is computed at run time stays opaque.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "eval/static_value.h"
#include "ir/invalid_node.h"
#include "kernels/copy.h"  // scatter_reduce_named
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

int64_t checked_axis(int64_t axis, int64_t rank, const std::string& what) {
  require_valid(axis >= -rank && axis < std::max<int64_t>(rank, 1),
                what + " axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// One integer out of a constant operand of one element (any numeric type: OneHot's
// depth may be a float), or nullopt when it is not a constant.
std::optional<int64_t> constant_scalar(const Tensor* t, const std::string& what) {
  if (!t) return std::nullopt;
  require(num_elements(t->dims()) == 1, what + " must have one element, got " + to_string(t->dims()));
  const double v = t->to_f64()[0];
  // A negative value (down to -inf or INT64_MIN) breaks the operand's definition (OneHot's
  // depth): refused, not kept opaque.
  require_valid(!(v < 0), what + " " + (is_integer(t->dtype()) ? std::to_string(t->i64_at(0)) : std::to_string(v)) +
                              " is negative");
  require(std::isfinite(v) && std::fabs(v) < 9e18, what + " is not a finite integer in range");
  return static_cast<int64_t>(v);
}

// ---- TopK --------------------------------------------------------------------------

// isomer's form is opset 11's with k as an attribute (as opset 1 had it): its value
// fixes the output's shape.
std::vector<TensorType> infer_top_k(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(is_numeric(x.dtype) && x.dtype != DType::Bool, "TopK input must be numeric");
  const int64_t axis = checked_axis(ctx.attrs.get_int("axis", -1), x.rank(), "TopK");
  require(x.rank() >= 1, "TopK input must have rank >= 1");
  const int64_t k = ctx.attrs.get_int("k");
  require_valid(k >= 0, "TopK k " + std::to_string(k) + " is negative");
  const Dim& n = x.shape[axis];
  require_valid(!n.is_static() || k <= n.value, "TopK k " + std::to_string(k) + " exceeds the axis extent " +
                                                    std::to_string(n.value) + " of " + to_string(x.shape));
  for (const char* flag : {"largest", "sorted"}) {
    const int64_t v = ctx.attrs.get_int(flag, 1);
    require_valid(v == 0 || v == 1, std::string("TopK ") + flag + " must be 0 or 1, got " + std::to_string(v));
  }
  Shape out = x.shape;
  out[axis] = Dim(k);
  // The indices may be left unnamed (a model that wants the values only).
  if (ctx.num_outputs == 1) return {{x.dtype, out}};
  return {{x.dtype, out}, {DType::Int64, out}};
}

// a comes before b: larger (or smaller), NaN above every number, ties in index order
// (ONNX Runtime's order). The result is sorted whatever `sorted` says: ONNX leaves the
// order of an unsorted result open.
std::vector<Tensor> eval_top_k(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank());
  const int64_t k = ctx.attrs.get_int("k");
  const bool smallest = ctx.attrs.get_int("largest", 1) == 0;
  const Around s = around(x.dims(), axis);
  require(k >= 0 && k <= s.n, "TopK k " + std::to_string(k) + " exceeds the axis extent " + std::to_string(s.n));
  std::vector<int64_t> dims = x.dims();
  dims[axis] = k;
  std::vector<int64_t> indices(static_cast<size_t>(s.outer * k * s.inner));
  std::vector<int64_t> order(static_cast<size_t>(s.n));
  auto select = [&](const auto& v, auto nan) {
    std::remove_cvref_t<decltype(v)> values(indices.size());
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        auto at = [&](int64_t j) { return v[(o * s.n + j) * s.inner + i]; };
        auto before = [&](int64_t a, int64_t b) {
          const auto x = at(a), y = at(b);
          if (nan(x) != nan(y)) return nan(smallest ? y : x);
          if (!nan(x) && x != y) return smallest ? x < y : x > y;
          return a < b;
        };
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          values[(o * k + j) * s.inner + i] = at(order[j]);
          indices[(o * k + j) * s.inner + i] = order[j];
        }
      }
    return values;
  };
  // Integers select exactly, as keys (a uint64 as unsigned; past 2^53 doubles tie).
  Tensor values = is_float(x.dtype())
                      ? Tensor::from_f64(x.dtype(), dims, select(x.to_f64(), [](double e) { return std::isnan(e); }))
                      : tensor_of_keys(x.dtype(), {dims, select(ordered_i64(x).data, [](int64_t) { return false; })});
  std::vector<Tensor> out{std::move(values), Tensor::from_i64(DType::Int64, dims, indices)};
  out.resize(std::min<size_t>(ctx.num_outputs, 2));
  return out;
}

// Opset 10 moved k to an input; 11 added largest and sorted.
std::string import_top_k(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (opset < 10) return "";
  if (form.inputs.size() < 2 || !form.inputs[1].present()) return "TopK without its k input";
  const std::optional<Tensor> k = static_value(form.inputs[1]);
  if (!k) return "TopK k input is not a constant (the output's shape would be known only when it runs)";
  if (k->dtype() != DType::Int64 || num_elements(k->dims()) != 1) return "TopK k input is not one int64";
  form.attrs.set("k", k->i64_at(0));
  form.inputs.resize(1);
  return "";
}

void export_top_k(OnnxForm& form, int64_t opset) {
  if (opset < 11) {
    require(form.attrs.get_int("largest", 1) == 1 && form.attrs.get_int("sorted", 1) == 1,
            "TopK with largest=0 or sorted=0 cannot be written at opset " + std::to_string(opset));
    form.attrs.erase("largest");
    form.attrs.erase("sorted");
  }
  if (opset < 10) return;
  form.inputs.push_back(Value{Node::make_constant(Tensor::vector_i64({form.attrs.get_int("k")})), 0});
  form.attrs.erase("k");
}

// ---- ScatterElements ---------------------------------------------------------------

std::vector<TensorType> infer_scatter_elements(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
  require(idx.dtype == DType::Int64 || idx.dtype == DType::Int32, "ScatterElements indices must be int64 or int32");
  require(upd.dtype == x.dtype, "ScatterElements updates have another type than the data");
  require(x.rank() >= 1, "ScatterElements data must have rank >= 1");
  require(idx.rank() == x.rank() && upd.rank() == x.rank(),
          "ScatterElements data " + to_string(x.shape) + ", indices " + to_string(idx.shape) + " and updates " +
              to_string(upd.shape) + " differ in rank");
  const int64_t axis = checked_axis(ctx.attrs.get_int("axis", 0), x.rank(), "ScatterElements");
  const std::string r = ctx.attrs.get_string("reduction", "none");
  // Not InvalidNode: ONNX Runtime runs an unknown reduction (as none); the node stays opaque.
  require(kernels::scatter_reduce_named(r).has_value(), "ScatterElements reduction '" + r + "' is unknown");
  for (int64_t d = 0; d < x.rank(); ++d) {
    const Dim &a = idx.shape[d], &b = upd.shape[d], &e = x.shape[d];
    require(!a.is_static() || !b.is_static() || a.value == b.value,
            "ScatterElements indices " + to_string(idx.shape) + " and updates " + to_string(upd.shape) + " differ");
    require(d == axis || !a.is_static() || !e.is_static() || a.value <= e.value,
            "ScatterElements indices " + to_string(idx.shape) + " exceed the data " + to_string(x.shape));
  }
  require_constant_indices(ctx, 1, [&](size_t) { return static_extent(x.shape[axis]); }, "ScatterElements");
  return {x};
}

template <class T>
T scatter_combine(const std::string& r, T old, T v) {
  if (r == "add") return add_wrapping(old, v);
  if (r == "mul") return mul_wrapping(old, v);
  if (r == "max") return std::max(old, v);
  if (r == "min") return std::min(old, v);
  return v;
}

// Copies the data, then for each position p of the indices combines updates[p]
// into the element at p with its coordinate along the axis replaced by index[p].
template <class T>
Array<T> scatter_elements(Array<T> y, const std::vector<int64_t>& index, const std::vector<int64_t>& index_dims,
                          const Array<T>& upd, int64_t axis, const std::string& r) {
  const std::vector<int64_t> ys = strides_of(y.dims), own = strides_of(index_dims);
  const int64_t extent = y.dims[axis];
  for (size_t p = 0; p < index.size(); ++p) {
    int64_t rem = static_cast<int64_t>(p), off = 0;
    for (int64_t d = 0; d < y.rank(); ++d) {
      int64_t c = own[d] ? rem / own[d] : 0;
      rem -= c * own[d];
      if (d == axis) {
        c = index[p];
        require(c >= -extent && c < extent, "ScatterElements index " + std::to_string(c) +
                                                " is out of range for an axis of extent " + std::to_string(extent));
        if (c < 0) c += extent;
      }
      off += c * ys[d];
    }
    y.data[off] = scatter_combine(r, y.data[off], upd.data[p]);
  }
  return y;
}

std::vector<Tensor> eval_scatter_elements(const EvalContext& ctx) {
  const Tensor &x = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", 0), x.rank());
  const std::string r = ctx.attrs.get_string("reduction", "none");
  require(idx.dims() == upd.dims(), "ScatterElements indices and updates differ in shape");
  for (int64_t d = 0; d < x.rank(); ++d)
    require(d == axis || idx.dims()[d] <= x.dims()[d], "ScatterElements indices " + to_string(idx.dims()) +
                                                            " exceed the data " + to_string(x.dims()));
  if (is_float(x.dtype()))
    return {tensor(x.dtype(), scatter_elements(f64(x), ints_of(idx), idx.dims(), f64(upd), axis, r))};
  if (r == "max" || r == "min")  // on keys: a uint64 orders as unsigned
    return {tensor_of_keys(x.dtype(), scatter_elements(ordered_i64(x), ints_of(idx), idx.dims(), ordered_i64(upd), axis, r))};
  return {tensor(x.dtype(), scatter_elements(i64(x), ints_of(idx), idx.dims(), i64(upd), axis, r))};
}

// Scatter (opset 9, deprecated at 11) is ScatterElements-11 under its older name: the
// same data, indices and updates, an axis, and no reduction. ScatterElements itself
// begins at opset 11.
std::string import_scatter_elements(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (form.op_type == "Scatter") {
    if (form.attrs.has("reduction")) return "Scatter has no attribute 'reduction'";
    return "";
  }
  if (opset < 11) return "ScatterElements does not exist before opset 11 (its older name is Scatter)";
  return "";
}

// Opset 16 added the reductions add and mul, 18 max and min. Before opset 11 the
// operator is written as Scatter, which has no reduction.
void export_scatter_elements(OnnxForm& form, int64_t opset) {
  const std::string r = form.attrs.get_string("reduction", "none");
  if (opset < 11) {
    require(opset >= 9, "neither ScatterElements nor Scatter exists before opset 9");
    require(r == "none", "Scatter (ScatterElements before opset 11) has no reduction '" + r + "'");
    form.attrs.erase("reduction");
    form.op_type = "Scatter";
    return;
  }
  const bool fits = opset >= 18 || r == "none" || (opset >= 16 && (r == "add" || r == "mul"));
  require(fits, "ScatterElements reduction '" + r + "' cannot be written at opset " + std::to_string(opset));
  if (opset < 16) form.attrs.erase("reduction");
}

// ---- OneHot ------------------------------------------------------------------------

// out has the indices' shape with depth inserted at axis (of rank + 1).
std::vector<TensorType> infer_one_hot(const InferContext& ctx) {
  const TensorType &idx = ctx.in(0), &depth = ctx.in(1), &values = ctx.in(2);
  require(is_numeric(idx.dtype) && idx.dtype != DType::Bool, "OneHot indices must be numeric");
  require(is_numeric(depth.dtype) && depth.dtype != DType::Bool && (depth.rank() == 0 || depth.rank() == 1),
          "OneHot depth must be a numeric scalar or one-element tensor");
  require(values.rank() == 1 && (!values.shape[0].is_static() || values.shape[0].value == 2),
          "OneHot values must hold two elements (off, on), got " + to_string(values.shape));
  const int64_t rank = idx.rank() + 1;
  const int64_t axis = checked_axis(ctx.attrs.get_int("axis", -1), rank, "OneHot");
  Shape out = idx.shape;
  Dim d;
  if (auto n = constant_scalar(ctx.constant(1), "OneHot depth")) {
    // (A negative depth is refused by constant_scalar; 0 is legal, but isomer does not
    // compute it: kept opaque.)
    require(*n >= 1, "OneHot depth " + std::to_string(*n) + " is not positive");
    d = Dim(*n);
  }
  out.insert(out.begin() + axis, d);
  return {{values.dtype, out}};
}

std::vector<Tensor> eval_one_hot(const EvalContext& ctx) {
  const Tensor &idx = ctx.in(0), &values = ctx.in(2);
  const int64_t depth = *constant_scalar(&ctx.in(1), "OneHot depth");
  require(depth >= 1, "OneHot depth " + std::to_string(depth) + " is not positive");
  require(num_elements(values.dims()) == 2, "OneHot values must hold two elements");
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), idx.rank() + 1);
  std::vector<int64_t> dims = idx.dims();
  dims.insert(dims.begin() + axis, depth);
  const Around s = around(dims, axis);
  const std::vector<double> v = idx.to_f64(), off_on = values.to_f64();
  std::vector<double> out(static_cast<size_t>(num_elements(dims)), off_on[0]);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const double f = v[o * s.inner + i];
      if (!std::isfinite(f) || std::fabs(f) >= 9e18) continue;  // out of range: all off
      int64_t at = static_cast<int64_t>(f);
      if (at < 0) at += depth;
      if (at >= 0 && at < depth) out[(o * depth + at) * s.inner + i] = off_on[1];
    }
  return {Tensor::from_f64(values.dtype(), dims, out)};
}

// depth fixes the output's shape: computed at run time, the node stays opaque.
std::string import_one_hot(OnnxForm& form, int64_t, GraphBuilder&) {
  if (form.inputs.size() < 3 || !form.inputs[1].present() || !form.inputs[1].constant())
    return "OneHot depth input is not a constant (the output's shape would be known only when it runs)";
  return "";
}

}  // namespace

OpDef def_TopK() {
  OpDef d;
  d.name = "TopK";
  d.attributes = {{"k", "int"}, {"axis", "int"}, {"largest", "int"}, {"sorted", "int"}};
  d.infer = infer_top_k;
  d.eval = eval_top_k;
  d.onnx_import = import_top_k;
  d.onnx_export = export_top_k;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> inputs) {
    Attributes a = attrs;
    canonical_axis(a, "axis", -1, input_rank(inputs, 0));
    set_default(a, "largest", int64_t{1});
    set_default(a, "sorted", int64_t{1});
    return a;
  };
  d.lower = Lowering::TopK;
  return d;
}

OpDef def_ScatterElements() {
  OpDef d;
  d.name = "ScatterElements";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 11;
  d.attributes = {{"axis", "int"}, {"reduction", "string"}};
  d.infer = infer_scatter_elements;
  d.eval = eval_scatter_elements;
  d.onnx_import = import_scatter_elements;
  d.onnx_export = export_scatter_elements;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> inputs) {
    Attributes a = attrs;
    canonical_axis(a, "axis", 0, input_rank(inputs, 0));
    set_default(a, "reduction", std::string("none"));
    return a;
  };
  d.lower = Lowering::ScatterElements;
  return d;
}

OpDef def_OneHot() {
  OpDef d;
  d.name = "OneHot";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 9;
  d.attributes = {{"axis", "int"}};
  d.infer = infer_one_hot;
  d.eval = eval_one_hot;
  d.onnx_import = import_one_hot;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> inputs) {
    Attributes a = attrs;
    const int64_t rank = input_rank(inputs, 0);
    canonical_axis(a, "axis", -1, rank < 0 ? -1 : rank + 1);
    return a;
  };
  d.lower = Lowering::OneHot;
  return d;
}

}  // namespace isomer
