// Pooling over the spatial axes of [N, C, spatial...] tensors: MaxPool and
// AveragePool with sliding windows (geometry in nn_common.h), GlobalAveragePool.
// Averages divide through CountDivider, so AveragePool and GlobalAveragePool have
// field semantics from the same kernels (multiplication by the inverse count).
#include <algorithm>
#include <cmath>
#include <limits>

#include "eval/sym.h"
#include "ops/kernels.h"
#include "ops/nn_common.h"

namespace isomer {
using namespace ops;

namespace {

// Pools every [spatial...] plane of x: for each output position, `reduce` gets the
// plane and the offsets of the window's cells that lie inside the input (padding
// cells are left out), and returns the output value.
template <class T, class Reduce>
Array<T> pool(const Array<T>& x, const std::vector<WindowAxis>& axes, Reduce reduce) {
  const size_t r = axes.size();
  const int64_t planes = x.dims[0] * x.dims[1];
  std::vector<int64_t> out_dims{x.dims[0], x.dims[1]}, in_dims;
  for (const WindowAxis& a : axes) {
    out_dims.push_back(a.out);
    in_dims.push_back(a.in);
  }
  const std::vector<int64_t> in_strides = strides_of(in_dims);
  const int64_t plane_in = num_elements(in_dims);
  // Per axis and output index: the range [lo, hi) of kernel cells inside the input.
  std::vector<std::vector<int64_t>> lo(r), hi(r);
  for (size_t d = 0; d < r; ++d) {
    const WindowAxis& a = axes[d];
    for (int64_t o = 0; o < a.out; ++o) {
      const int64_t start = o * a.stride - a.pad_begin;
      int64_t l = 0, h = a.kernel;
      while (l < h && start + l * a.dilation < 0) ++l;
      while (h > l && start + (h - 1) * a.dilation >= a.in) --h;
      lo[d].push_back(l);
      hi[d].push_back(h);
    }
  }
  Array<T> y(out_dims);
  const int64_t positions = num_elements(out_dims) / std::max<int64_t>(planes, 1);
  std::vector<int64_t> pos(r, 0), cell(r), offsets;
  for (int64_t q = 0; q < positions; ++q) {
    offsets.clear();
    bool empty = false;
    for (size_t d = 0; d < r; ++d) {
      cell[d] = lo[d][pos[d]];
      empty = empty || cell[d] >= hi[d][pos[d]];
    }
    while (!empty) {
      int64_t offset = 0;
      for (size_t d = 0; d < r; ++d)
        offset += (pos[d] * axes[d].stride - axes[d].pad_begin + cell[d] * axes[d].dilation) * in_strides[d];
      offsets.push_back(offset);
      int64_t d = static_cast<int64_t>(r) - 1;
      for (; d >= 0; --d) {
        if (++cell[d] < hi[d][pos[d]]) break;
        cell[d] = lo[d][pos[d]];
      }
      empty = d < 0;
    }
    for (int64_t p = 0; p < planes; ++p) y.data[p * positions + q] = reduce(x.data.data() + p * plane_in, offsets);
    for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      if (++pos[d] < axes[d].out) break;
      pos[d] = 0;
    }
  }
  return y;
}

template <class T>
Array<T> max_pool(const Array<T>& x, const std::vector<WindowAxis>& axes) {
  return pool(x, axes, [](const T* plane, const std::vector<int64_t>& cells) {
    T best =
        std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    for (int64_t c : cells)
      if (plane[c] > best || std::isnan(static_cast<double>(plane[c]))) best = plane[c];
    return best;
  });
}

// count_include_pad counts every cell of the window, padding included (as ONNX's
// reference and onnxruntime do, also for cells past the end in ceil mode).
template <class T>
Array<T> average_pool(const Array<T>& x, const std::vector<WindowAxis>& axes, bool count_include_pad) {
  int64_t cells_per_window = 1;
  for (const WindowAxis& a : axes) cells_per_window *= a.kernel;
  CountDivider<T> divide;
  return pool(x, axes, [&](const T* plane, const std::vector<int64_t>& cells) {
    T sum = T();
    for (int64_t c : cells) sum += plane[c];
    return divide(sum, count_include_pad ? cells_per_window : static_cast<int64_t>(cells.size()));
  });
}

std::vector<int64_t> spatial_dims(const std::vector<int64_t>& dims) { return {dims.begin() + 2, dims.end()}; }

std::vector<WindowAxis> pool_window(const Attributes& attrs, const std::vector<int64_t>& x_dims) {
  require(x_dims.size() >= 3, "pooling input must be [N, C, spatial...]");
  return plan_window(read_window(attrs, attrs.get_ints("kernel_shape")), spatial_dims(x_dims));
}

// Over the reals: the largest cell of each window, as selects (no NaN, no empty window).
std::vector<SymArray> sym_max_pool(const Attributes& attrs, std::span<const SymArray> in) {
  return {pool(in[0], pool_window(attrs, in[0].dims), [](const Sym* plane, const std::vector<int64_t>& cells) {
    require(!cells.empty(), "MaxPool window covers only padding");
    Sym best = plane[cells[0]];
    for (int64_t c : cells) best = select_gt(plane[c], best, plane[c], best);
    return best;
  })};
}

std::vector<TensorType> infer_pool(const InferContext& ctx, bool is_max) {
  const TensorType& x = ctx.in(0);
  if (is_max)
    require(is_float(x.dtype) || x.dtype == DType::Int8 || x.dtype == DType::UInt8,
            "MaxPool input must be a float, int8 or uint8 tensor");
  else
    require_float(x, "AveragePool input");
  require(x.rank() >= 3, "pooling input must be [N, C, spatial...], got " + to_string(x.shape));
  require(ctx.num_outputs <= 1, "MaxPool's Indices output is not supported");
  std::vector<int64_t> kernel = ctx.attrs.get_ints("kernel_shape");
  require(static_cast<int64_t>(kernel.size()) == x.rank() - 2,
          "kernel_shape has " + std::to_string(kernel.size()) + " values for input " + to_string(x.shape));
  const int64_t storage_order = ctx.attrs.get_int("storage_order", 0);
  require(storage_order == 0 || storage_order == 1, "storage_order must be 0 or 1");
  Window w = read_window(ctx.attrs, kernel);
  Shape out{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < w.rank(); ++i) out.push_back(window_output_dim(w, i, x.shape[i + 2]));
  return {{x.dtype, out}};
}

std::vector<TensorType> infer_max_pool(const InferContext& ctx) { return infer_pool(ctx, true); }
std::vector<TensorType> infer_average_pool(const InferContext& ctx) { return infer_pool(ctx, false); }

std::vector<Tensor> eval_max_pool(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<WindowAxis> axes = pool_window(ctx.attrs, x.dims());
  if (is_float(x.dtype())) return {tensor(x.dtype(), max_pool(f64(x), axes))};
  return {tensor(x.dtype(), max_pool(i64(x), axes))};
}

std::vector<Tensor> eval_average_pool(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const bool include_pad = ctx.attrs.get_int("count_include_pad", 0) != 0;
  return {tensor(x.dtype(), average_pool(f64(x), pool_window(ctx.attrs, x.dims()), include_pad))};
}

template <class T>
std::vector<Array<T>> exact_average_pool(const Attributes& attrs, std::span<const Array<T>> in) {
  const bool include_pad = attrs.get_int("count_include_pad", 0) != 0;
  return {average_pool(in[0], pool_window(attrs, in[0].dims), include_pad)};
}

std::string import_pool(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (form.num_outputs > 1) return "MaxPool's Indices output is not supported";
  if (!form.attrs.has("auto_pad") || !form.attrs.has("kernel_shape") || form.inputs.empty()) return "";
  const TensorType& x = form.inputs[0].type();
  std::vector<int64_t> kernel = form.attrs.get_ints("kernel_shape");
  if (x.rank() < 3 || static_cast<int64_t>(kernel.size()) != x.rank() - 2) return "";  // the shape rule reports it
  resolve_auto_pad(form.attrs, read_window(form.attrs, kernel), Shape(x.shape.begin() + 2, x.shape.end()));
  return "";
}

// Older opsets lack some attributes; a value other than the default cannot be
// written there.
void require_default(const OnnxForm& form, const std::string& name, int64_t since, int64_t opset) {
  if (opset >= since || !form.attrs.has(name)) return;
  bool is_default = false;
  if (name == "dilations") {
    std::vector<int64_t> v = form.attrs.get_ints(name);
    is_default = std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  } else {
    is_default = form.attrs.get_int(name) == 0;
  }
  require(is_default, "attribute " + name + " cannot be written at opset " + std::to_string(opset));
}

void export_max_pool(OnnxForm& form, int64_t opset) {
  require_default(form, "ceil_mode", 10, opset);
  require_default(form, "dilations", 10, opset);
  if (opset < 8) form.attrs.erase("storage_order");  // only affects the Indices output
  if (opset < 10) {
    form.attrs.erase("ceil_mode");
    form.attrs.erase("dilations");
  }
}

void export_average_pool(OnnxForm& form, int64_t opset) {
  require_default(form, "ceil_mode", 10, opset);
  require_default(form, "dilations", 19, opset);
  require_default(form, "count_include_pad", 7, opset);
  if (opset < 7) form.attrs.erase("count_include_pad");
  if (opset < 10) form.attrs.erase("ceil_mode");
  if (opset < 19) form.attrs.erase("dilations");
}

// ---- GlobalAveragePool -------------------------------------------------------------

template <class T>
Array<T> global_average_pool(const Array<T>& x) {
  require(x.rank() >= 3, "GlobalAveragePool input must be [N, C, spatial...]");
  std::vector<int64_t> out_dims(x.dims.size(), 1);
  out_dims[0] = x.dims[0];
  out_dims[1] = x.dims[1];
  const int64_t planes = x.dims[0] * x.dims[1], plane = num_elements(spatial_dims(x.dims));
  Array<T> y(out_dims);
  CountDivider<T> divide;
  for (int64_t p = 0; p < planes; ++p) {
    T sum = T();
    for (int64_t i = 0; i < plane; ++i) sum += x.data[p * plane + i];
    y.data[p] = divide(sum, plane);
  }
  return y;
}

std::vector<TensorType> infer_global_average_pool(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_float(x, "GlobalAveragePool input");
  require(x.rank() >= 3, "GlobalAveragePool input must be [N, C, spatial...], got " + to_string(x.shape));
  Shape out(x.shape.size(), Dim(1));
  out[0] = x.shape[0];
  out[1] = x.shape[1];
  return {{x.dtype, out}};
}

std::vector<Tensor> eval_global_average_pool(const EvalContext& ctx) {
  return {tensor(ctx.in(0).dtype(), global_average_pool(f64(ctx.in(0))))};
}

template <class T>
std::vector<Array<T>> exact_global_average_pool(const Attributes&, std::span<const Array<T>> in) {
  return {global_average_pool(in[0])};
}

}  // namespace

OpDef def_MaxPool() {
  OpDef d;
  d.name = "MaxPool";
  d.min_opset = 12;
  d.attributes = {{"auto_pad", "string"}, {"ceil_mode", "int"},     {"dilations", "ints"}, {"kernel_shape", "ints"},
                  {"pads", "ints"},       {"storage_order", "int"}, {"strides", "ints"}};
  d.infer = infer_max_pool;
  d.eval = eval_max_pool;
  d.eval_sym = sym_max_pool;
  d.onnx_import = import_pool;
  d.onnx_export = export_max_pool;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = canonical_window_attrs(attrs, in, false);
    set_default(a, "storage_order", int64_t{0});
    return a;
  };
  d.lower = Lowering::Pool;
  return d;
}

OpDef def_AveragePool() {
  OpDef d;
  d.name = "AveragePool";
  d.min_opset = 11;
  d.attributes = {{"auto_pad", "string"},   {"ceil_mode", "int"}, {"count_include_pad", "int"}, {"dilations", "ints"},
                  {"kernel_shape", "ints"}, {"pads", "ints"},     {"strides", "ints"}};
  d.props.linear_in = {0};
  d.infer = infer_average_pool;
  d.eval = eval_average_pool;
  d.eval_field = exact_average_pool<Fp>;
  d.eval_sym = exact_average_pool<Sym>;
  d.onnx_import = import_pool;
  d.onnx_export = export_average_pool;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = canonical_window_attrs(attrs, in, false);
    set_default(a, "count_include_pad", int64_t{0});
    return a;
  };
  d.lower = Lowering::Pool;
  return d;
}

OpDef def_GlobalAveragePool() {
  OpDef d;
  d.name = "GlobalAveragePool";
  d.props.linear_in = {0};
  d.props.idempotent = true;
  d.infer = infer_global_average_pool;
  d.eval = eval_global_average_pool;
  d.eval_field = exact_global_average_pool<Fp>;
  d.eval_sym = exact_global_average_pool<Sym>;
  d.lower = Lowering::Pool;
  return d;
}

}  // namespace isomer
