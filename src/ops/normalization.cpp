// Normalizations: BatchNormalization (inference), LayerNormalization and Softmax.
// They divide by data-dependent values (square roots, sums of exponentials), so
// they have float semantics only, computed in double.
#include <algorithm>
#include <cmath>

#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

// Extents before, along and after `axis`: a tensor seen as [outer, n, inner].
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
    (i < axis ? s.outer : i == axis ? s.n : s.inner) *= dims[i];
  return s;
}

// ---- BatchNormalization ------------------------------------------------------------

std::vector<TensorType> infer_batch_norm(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_float(x, "BatchNormalization input");
  require(ctx.num_outputs <= 1, "BatchNormalization in training mode (running statistics outputs) is not supported");
  require(ctx.attrs.get_int("training_mode", 0) == 0, "BatchNormalization in training mode is not supported");
  require(x.rank() >= 2, "BatchNormalization input must be [N, C, ...], got " + to_string(x.shape));
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const TensorType& p = ctx.in(i);
    require_float(p, std::string("BatchNormalization ") + names[i]);
    require(p.rank() == 1 && (!p.shape[0].is_static() || !x.shape[1].is_static() || p.shape[0] == x.shape[1]),
            std::string("BatchNormalization ") + names[i] + " " + to_string(p.shape) + " does not match the " +
                to_string(Shape{x.shape[1]}) + " channels of input " + to_string(x.shape));
  }
  return {x};
}

// y = (x - mean) / sqrt(var + epsilon) * scale + B, per channel (axis 1).
std::vector<Tensor> eval_batch_norm(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  Array<double> y = f64(x);
  const std::vector<double> scale = ctx.in(1).to_f64(), bias = ctx.in(2).to_f64(), mean = ctx.in(3).to_f64(),
                            var = ctx.in(4).to_f64();
  const double epsilon = ctx.attrs.get_float("epsilon", 1e-5);
  const AxisSplit s = split_at(x.dims(), 1);
  require(static_cast<int64_t>(scale.size()) == s.n && bias.size() == scale.size() && mean.size() == scale.size() &&
              var.size() == scale.size(),
          "BatchNormalization parameters do not match the channels");
  for (int64_t c = 0; c < s.n; ++c) {
    const double factor = scale[c] / std::sqrt(var[c] + epsilon);
    for (int64_t o = 0; o < s.outer; ++o) {
      double* row = y.data.data() + (o * s.n + c) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) row[i] = (row[i] - mean[c]) * factor + bias[c];
    }
  }
  return {tensor(x.dtype(), y)};
}

std::string import_batch_norm(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (form.num_outputs > 1) return "BatchNormalization in training mode (running statistics outputs)";
  if (form.attrs.get_int("training_mode", 0) != 0) return "BatchNormalization in training mode";
  if (opset < 9 && form.attrs.get_int("spatial", 1) != 1)
    return "BatchNormalization with spatial=0 (per-activation statistics)";
  // Opsets < 7 had is_test; with one output the node computes inference either way.
  for (const char* legacy : {"spatial", "is_test", "consumed_inputs", "training_mode"}) form.attrs.erase(legacy);
  if (form.inputs.size() != 5) return "BatchNormalization needs 5 inputs";
  return "";
}

void export_batch_norm(OnnxForm& form, int64_t opset) {
  if (opset < 7) form.attrs.set("is_test", int64_t{1});
}

// ---- LayerNormalization ------------------------------------------------------------

std::vector<TensorType> infer_layer_norm(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_float(x, "LayerNormalization input");
  require(ctx.num_outputs <= 1, "LayerNormalization's Mean and InvStdDev outputs are not supported");
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank());
  const Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorType& p = ctx.in(i);
    const char* what = i == 1 ? "Scale" : "B";
    require(p.dtype == x.dtype, std::string("LayerNormalization ") + what + " has a different type than the input");
    bool fits = p.shape.size() <= normalized.size();
    for (size_t k = 0; fits && k < p.shape.size(); ++k) {
      const Dim &got = p.shape[k], &want = normalized[k + normalized.size() - p.shape.size()];
      fits = got == Dim(1) || !got.is_static() || !want.is_static() || got == want;
    }
    require(fits, std::string("LayerNormalization ") + what + " " + to_string(p.shape) +
                      " does not broadcast to the normalized shape " + to_string(normalized));
  }
  return {x};
}

// Expands a parameter to one value per element of the normalized block.
std::vector<double> expand_to(const Tensor& p, const std::vector<int64_t>& block) {
  std::vector<double> src = p.to_f64(), out(static_cast<size_t>(num_elements(block)));
  require(broadcast_dims(p.dims(), block) == block,
          "LayerNormalization parameter " + to_string(p.dims()) + " does not broadcast to " + to_string(block));
  std::array<std::vector<int64_t>, 1> st{broadcast_strides(p.dims(), block)};
  for_each_broadcast<1>(block, st, [&](int64_t n, const std::array<int64_t, 1>& o) { out[n] = src[o[0]]; });
  return out;
}

// y = (x - mean) / sqrt(variance + epsilon) * Scale + B over the axes from `axis` on.
std::vector<Tensor> eval_layer_norm(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank());
  const double epsilon = ctx.attrs.get_float("epsilon", 1e-5);
  const std::vector<int64_t> block(x.dims().begin() + axis, x.dims().end());
  const int64_t inner = num_elements(block), outer = x.numel() / std::max<int64_t>(inner, 1);
  const std::vector<double> scale = expand_to(ctx.in(1), block);
  const std::vector<double> bias = ctx.has_input(2) ? expand_to(ctx.in(2), block) : std::vector<double>(inner, 0.0);
  Array<double> y = f64(x);
  for (int64_t o = 0; o < outer; ++o) {
    double* row = y.data.data() + o * inner;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += row[i];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(inner);
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    for (int64_t i = 0; i < inner; ++i) row[i] = (row[i] - mean) * inv_std * scale[i] + bias[i];
  }
  return {tensor(x.dtype(), y)};
}

std::string import_layer_norm(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (form.num_outputs > 1) return "LayerNormalization's Mean and InvStdDev outputs are not supported";
  return "";
}

// ---- Softmax -----------------------------------------------------------------------

std::vector<TensorType> infer_softmax(const InferContext& ctx) {
  require_float(ctx.in(0), "Softmax input");
  normalize_axis(ctx.attrs.get_int("axis", -1), ctx.in(0).rank(), "Softmax axis");
  return {ctx.in(0)};
}

// exp(x - max) / sum(exp(x - max)) along `axis` (opset 13): subtracting the max
// keeps exp from overflowing and does not change the result.
std::vector<Tensor> eval_softmax(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank(), "Softmax axis");
  const AxisSplit s = split_at(x.dims(), axis);
  Array<double> y = f64(x);
  std::vector<double> top(s.inner), sum(s.inner);
  for (int64_t o = 0; o < s.outer; ++o) {
    double* block = y.data.data() + o * s.n * s.inner;
    std::fill(top.begin(), top.end(), -INFINITY);
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < s.n; ++k)
      for (int64_t i = 0; i < s.inner; ++i) top[i] = std::max(top[i], block[k * s.inner + i]);
    for (int64_t k = 0; k < s.n; ++k)
      for (int64_t i = 0; i < s.inner; ++i)
        sum[i] += block[k * s.inner + i] = std::exp(block[k * s.inner + i] - top[i]);
    for (int64_t k = 0; k < s.n; ++k)
      for (int64_t i = 0; i < s.inner; ++i) block[k * s.inner + i] /= sum[i];
  }
  return {tensor(x.dtype(), y)};
}

// Before opset 13, Softmax flattened the input to 2-D at `axis` (default 1) and
// normalized each row. That equals the per-axis form when every dim after `axis`
// is 1, in particular when axis is the last one.
bool flattening_is_per_axis(const Shape& shape, int64_t axis) {
  return std::all_of(shape.begin() + axis + 1, shape.end(), [](const Dim& d) { return d == Dim(1); });
}

std::string import_softmax(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (opset >= 13) return "";
  const Shape& shape = form.inputs[0].type().shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t raw = form.attrs.get_int("axis", 1);
  if (raw < -rank || raw >= std::max<int64_t>(rank, 1)) return "Softmax axis is out of range";
  const int64_t axis = raw < 0 ? raw + rank : raw;
  if (!flattening_is_per_axis(shape, axis))
    return "Softmax at opset " + std::to_string(opset) + " normalizes over all axes from " + std::to_string(axis) +
           " on, which isomer does not express";
  form.attrs.set("axis", axis);
  return "";
}

void export_softmax(OnnxForm& form, int64_t opset) {
  if (opset >= 13) return;
  const Shape& shape = form.inputs[0].type().shape;
  const int64_t axis = normalize_axis(form.attrs.get_int("axis", -1), static_cast<int64_t>(shape.size()));
  require(flattening_is_per_axis(shape, axis), "Softmax over axis " + std::to_string(axis) + " of " + to_string(shape) +
                                                   " cannot be written at opset " + std::to_string(opset) +
                                                   " (it would flatten the axes after it)");
  form.attrs.set("axis", axis);
}

}  // namespace

OpDef def_BatchNormalization() {
  OpDef d;
  d.name = "BatchNormalization";
  d.min_inputs = d.max_inputs = 5;
  d.min_opset = 15;
  d.attributes = {{"epsilon", "float"}, {"momentum", "float"}, {"training_mode", "int"}};
  d.infer = infer_batch_norm;
  d.eval = eval_batch_norm;
  d.onnx_import = import_batch_norm;
  d.onnx_export = export_batch_norm;
  d.lower = Lowering::BatchNorm;
  return d;
}

OpDef def_LayerNormalization() {
  OpDef d;
  d.name = "LayerNormalization";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.min_opset = 17;
  d.attributes = {{"axis", "int"}, {"epsilon", "float"}, {"stash_type", "int"}};
  d.infer = infer_layer_norm;
  d.eval = eval_layer_norm;
  d.onnx_import = import_layer_norm;
  d.lower = Lowering::LayerNorm;
  return d;
}

OpDef def_Softmax() {
  OpDef d;
  d.name = "Softmax";
  d.min_opset = 13;
  d.attributes = {{"axis", "int"}};
  d.infer = infer_softmax;
  d.eval = eval_softmax;
  d.onnx_import = import_softmax;
  d.onnx_export = export_softmax;
  d.canonical_attrs = canonical_axis_of_input0<-1>;
  d.lower = Lowering::Softmax;
  return d;
}

}  // namespace isomer
