// Normalizations: BatchNormalization (inference), LayerNormalization,
// RMSNormalization, GroupNormalization, InstanceNormalization, Softmax and
// LogSoftmax. They divide by data-dependent values (square roots, sums of
// exponentials), so they have no field semantics; they are computed in double, and
// BatchNormalization, LayerNormalization and Softmax have symbolic forms for Z3 with
// the square root and the exponential uninterpreted.
#include <algorithm>
#include <cmath>

#include "eval/sym.h"
#include "ops/elementwise.h"
#include "ir/invalid_node.h"
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

// The same at T = Sym for the Z3 verifier: the square root is the Sqrt operator's
// uninterpreted function, so rules that fold the per-channel factor
// scale / sqrt(var + epsilon) into other weights are proved for every parameter value.
std::vector<SymArray> sym_batch_norm(const Attributes& attrs, std::span<const SymArray> in) {
  const SymArray& x = in[0];
  const Sym epsilon(attrs.get_float("epsilon", 1e-5));
  const AxisSplit s = split_at(x.dims, 1);
  require(in[1].numel() == s.n && in[2].numel() == s.n && in[3].numel() == s.n && in[4].numel() == s.n,
          "BatchNormalization parameters do not match the channels");
  SymArray y = x;
  for (int64_t c = 0; c < s.n; ++c) {
    Sym shifted = in[4].data[c] + epsilon;
    const Sym factor = in[1].data[c] / Sym::apply("Sqrt", std::span<const Sym>(&shifted, 1));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        Sym& e = y.data[(o * s.n + c) * s.inner + i];
        e = (e - in[3].data[c]) * factor + in[2].data[c];
      }
  }
  return {y};
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
  require_float(x, "input");
  require(ctx.num_outputs <= 1, "the Mean and InvStdDev outputs are not supported");
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank());
  const Shape normalized(x.shape.begin() + axis, x.shape.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorType& p = ctx.in(i);
    const char* what = i == 1 ? "Scale" : "B";
    require(p.dtype == x.dtype, std::string(what) + " has a different type than the input");
    bool fits = p.shape.size() <= normalized.size();
    for (size_t k = 0; fits && k < p.shape.size(); ++k) {
      const Dim &got = p.shape[k], &want = normalized[k + normalized.size() - p.shape.size()];
      fits = got == Dim(1) || !got.is_static() || !want.is_static() || got == want;
    }
    require(fits, std::string(what) + " " + to_string(p.shape) +
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

// y = (x - mean) / sqrt(variance + epsilon) * Scale + B over the axes from `axis` on;
// RMSNormalization: y = x / sqrt(mean(x^2) + epsilon) * Scale (no mean, no B).
template <bool Rms>
std::vector<Tensor> eval_layer_norm(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx.attrs.get_int("axis", -1), x.rank());
  const double epsilon = ctx.attrs.get_float("epsilon", 1e-5);
  const std::vector<int64_t> block(x.dims().begin() + axis, x.dims().end());
  const int64_t inner = num_elements(block), outer = x.numel() / std::max<int64_t>(inner, 1);
  const std::vector<double> scale = expand_to(ctx.in(1), block);
  const std::vector<double> bias =
      !Rms && ctx.has_input(2) ? expand_to(ctx.in(2), block) : std::vector<double>(static_cast<size_t>(inner), 0.0);
  Array<double> y = f64(x);
  for (int64_t o = 0; o < outer; ++o) {
    double* row = y.data.data() + o * inner;
    double mean = 0, var = 0;
    if (!Rms) {
      for (int64_t i = 0; i < inner; ++i) mean += row[i];
      mean /= static_cast<double>(inner);
    }
    for (int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(inner);
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    for (int64_t i = 0; i < inner; ++i) row[i] = (row[i] - mean) * inv_std * scale[i] + bias[i];
  }
  return {tensor(x.dtype(), y)};
}

// The same at T = Sym for the Z3 verifier (LayerNormalization only): the square root
// is the Sqrt operator's uninterpreted function, as in sym_batch_norm, so rules that
// move work across a normalization (a row selection above it) are proved.
std::vector<SymArray> sym_layer_norm(const Attributes& attrs, std::span<const SymArray> in) {
  const SymArray& x = in[0];
  const int64_t axis = normalize_axis(attrs.get_int("axis", -1), x.rank());
  const Sym epsilon(attrs.get_float("epsilon", 1e-5));
  const std::vector<int64_t> block(x.dims.begin() + axis, x.dims.end());
  const int64_t inner = num_elements(block), outer = x.numel() / std::max<int64_t>(inner, 1);
  auto expand = [&](const SymArray& p) {
    require(broadcast_dims(p.dims, block) == block,
            "LayerNormalization parameter " + to_string(p.dims) + " does not broadcast to " + to_string(block));
    SymArray out(block);
    std::array<std::vector<int64_t>, 1> st{broadcast_strides(p.dims, block)};
    for_each_broadcast<1>(block, st, [&](int64_t n, const std::array<int64_t, 1>& o) { out.data[n] = p.data[o[0]]; });
    return out;
  };
  const SymArray scale = expand(in[1]);
  const SymArray bias = in.size() > 2 && in[2].numel() > 0 ? expand(in[2]) : SymArray(block, Sym(0.0));
  const Sym count(static_cast<double>(inner));
  SymArray y = x;
  for (int64_t o = 0; o < outer; ++o) {
    Sym* row = y.data.data() + o * inner;
    Sym mean(0.0), var(0.0);
    for (int64_t i = 0; i < inner; ++i) mean += row[i];
    mean /= count;
    for (int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
    Sym shifted = var / count + epsilon;
    const Sym root = Sym::apply("Sqrt", std::span<const Sym>(&shifted, 1));
    for (int64_t i = 0; i < inner; ++i) row[i] = (row[i] - mean) / root * scale.data[i] + bias.data[i];
  }
  return {y};
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
// LogSoftmax: x - max - log(sum(exp(x - max))), never the log of a rounded quotient.
template <bool Log>
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
      for (int64_t i = 0; i < s.inner; ++i) {
        double& v = block[k * s.inner + i];
        const double shifted = v - top[i], e = std::exp(shifted);
        sum[i] += e;
        v = Log ? shifted : e;
      }
    for (int64_t k = 0; k < s.n; ++k)
      for (int64_t i = 0; i < s.inner; ++i) {
        double& v = block[k * s.inner + i];
        v = Log ? v - std::log(sum[i]) : v / sum[i];
      }
  }
  return {tensor(x.dtype(), y)};
}

// Softmax at T = Sym for the Z3 verifier: exp(x) / sum(exp(x)) along `axis`, with
// the Exp operator's uninterpreted function (the max subtracted in float is an exact
// identity over the reals).
std::vector<SymArray> sym_softmax(const Attributes& attrs, std::span<const SymArray> in) {
  const SymArray& x = in[0];
  const int64_t axis = normalize_axis(attrs.get_int("axis", -1), x.rank(), "Softmax axis");
  const AxisSplit s = split_at(x.dims, axis);
  SymArray y = x;
  for (int64_t o = 0; o < s.outer; ++o) {
    Sym* block = y.data.data() + o * s.n * s.inner;
    for (int64_t i = 0; i < s.inner; ++i) {
      Sym sum(0.0);
      for (int64_t k = 0; k < s.n; ++k) {
        Sym& v = block[k * s.inner + i];
        v = exp_of(v);
        sum += v;
      }
      for (int64_t k = 0; k < s.n; ++k) block[k * s.inner + i] /= sum;
    }
  }
  return {y};
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
  if (raw < -rank || raw >= std::max<int64_t>(rank, 1)) return "axis is out of range";
  const int64_t axis = raw < 0 ? raw + rank : raw;
  if (!flattening_is_per_axis(shape, axis))
    return "at opset " + std::to_string(opset) + " the operator normalizes over all axes from " +
           std::to_string(axis) + " on, which isomer does not express";
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

// ---- GroupNormalization, InstanceNormalization ---------------------------------------

// X is [N, C, spatial...]; each instance's channels form `groups` groups of C / groups
// channels, normalized together; scale and bias have one value per channel.
std::vector<TensorType> infer_group_norm(const InferContext& ctx, int64_t groups, const char* op) {
  const TensorType& x = ctx.in(0);
  require_float(x, std::string(op) + " input");
  require(x.rank() >= 2, std::string(op) + " input must be [N, C, ...], got " + to_string(x.shape));
  const Dim c = x.shape[1];
  if (groups > 0)
    require(!c.is_static() || (c.value % groups == 0),
            std::string(op) + ": " + std::to_string(groups) + " groups do not divide " + std::to_string(c.value) + " channels");
  const char* names[] = {"", "scale", "bias"};
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& p = ctx.in(i);
    require(p.dtype == x.dtype, std::string(op) + " " + names[i] + " has a different type than the input");
    require(p.rank() == 1 && (!p.shape[0].is_static() || !c.is_static() || p.shape[0] == c),
            std::string(op) + " " + names[i] + " " + to_string(p.shape) + " does not match the " +
                to_string(Shape{c}) + " channels of input " + to_string(x.shape));
  }
  return {x};
}

std::vector<Tensor> eval_group_norm(const EvalContext& ctx, int64_t groups) {
  const Tensor& x = ctx.in(0);
  const int64_t n = x.dims()[0], c = x.dims()[1], spatial = x.numel() / std::max<int64_t>(n * c, 1);
  require(groups > 0 && c % groups == 0, "groups must divide the channels");
  const std::vector<double> scale = ctx.in(1).to_f64(), bias = ctx.in(2).to_f64();
  const double epsilon = ctx.attrs.get_float("epsilon", 1e-5);
  const int64_t per_group = c / groups * spatial;
  Array<double> y = f64(x);
  for (int64_t b = 0; b < n * groups; ++b) {
    double* row = y.data.data() + b * per_group;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < per_group; ++i) mean += row[i];
    mean /= static_cast<double>(std::max<int64_t>(per_group, 1));
    for (int64_t i = 0; i < per_group; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(std::max<int64_t>(per_group, 1));
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    for (int64_t i = 0; i < per_group; ++i) {
      const int64_t ch = (b % groups) * (c / groups) + i / spatial;
      row[i] = (row[i] - mean) * inv_std * scale[ch] + bias[ch];
    }
  }
  return {tensor(x.dtype(), y)};
}

// Opsets 18 to 20 gave scale and bias one value per group; opset 21 one per
// channel. Constant per-group values are repeated over each group's channels.
std::string import_group_norm(OnnxForm& form, int64_t opset, GraphBuilder& b) {
  if (opset >= 21) return "";
  if (opset < 18) return "GroupNormalization predates opset 18";
  if (form.inputs.size() != 3) return "GroupNormalization needs 3 inputs";
  const int64_t groups = form.attrs.get_int("num_groups", 0);
  const Shape& xs = form.inputs[0].type().shape;
  if (groups <= 0 || xs.size() < 2 || !xs[1].is_static() || xs[1].value % groups != 0)
    return "GroupNormalization's channels are unknown or not divisible into num_groups";
  const int64_t per = xs[1].value / groups;
  for (size_t i = 1; i < 3; ++i) {
    const Tensor* t = form.inputs[i].constant();
    if (!t || !is_float(t->dtype()) || t->numel() != groups)
      return "GroupNormalization (opset " + std::to_string(opset) + ") scale or bias is not a constant of num_groups values";
    std::vector<double> v = t->to_f64(), per_channel;
    for (double g : v) per_channel.insert(per_channel.end(), static_cast<size_t>(per), g);
    form.inputs[i] = b.constant(Tensor::from_f64(t->dtype(), {xs[1].value}, per_channel));
  }
  return "";
}

Attributes canonical_epsilon(const Attributes& attrs, std::span<const TensorType>) {
  Attributes a = attrs;
  set_default(a, "epsilon", 1e-5);
  return a;
}

void export_group_norm(OnnxForm& form, int64_t opset) {
  if (opset >= 21) return;
  require(opset >= 18, "GroupNormalization predates opset 18");
  const int64_t groups = form.attrs.get_int("num_groups", 0);
  for (size_t i = 1; i < 3; ++i) {
    const Tensor* t = form.inputs[i].constant();
    require(t != nullptr && groups > 0 && t->numel() % groups == 0,
            "GroupNormalization with per-channel parameters that are not constants cannot be written before opset 21");
    const std::vector<double> v = t->to_f64();
    const int64_t per = t->numel() / groups;
    std::vector<double> per_group;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t k = 1; k < per; ++k)
        require(v[g * per + k] == v[g * per], "GroupNormalization with per-channel scale or bias that differ within a group "
                                              "cannot be written before opset 21");
      per_group.push_back(v[g * per]);
    }
    form.inputs[i] = Value{Node::make_constant(Tensor::from_f64(t->dtype(), {groups}, per_group)), 0};
  }
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
  d.eval_sym = sym_batch_norm;
  d.onnx_import = import_batch_norm;
  d.onnx_export = export_batch_norm;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "epsilon", 1e-5);
    set_default(a, "momentum", 0.9);
    set_default(a, "training_mode", int64_t{0});
    return a;
  };
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
  d.eval = eval_layer_norm<false>;
  d.eval_sym = sym_layer_norm;
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
  d.eval = eval_softmax<false>;
  d.eval_sym = sym_softmax;
  d.onnx_import = import_softmax;
  d.onnx_export = export_softmax;
  d.canonical_attrs = canonical_axis_of_input0<-1>;
  d.lower = Lowering::Softmax;
  return d;
}

OpDef def_LogSoftmax() {
  OpDef d = def_Softmax();
  d.name = "LogSoftmax";
  d.eval = eval_softmax<true>;
  d.eval_sym = nullptr;  // Softmax's symbolic form is not LogSoftmax's
  return d;
}

OpDef def_RMSNormalization() {
  OpDef d;
  d.name = "RMSNormalization";
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 23;
  d.attributes = {{"axis", "int"}, {"epsilon", "float"}, {"stash_type", "int"}};
  d.infer = infer_layer_norm;
  d.eval = eval_layer_norm<true>;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> inputs) {
    Attributes a = canonical_axis_of_input0<-1>(attrs, inputs);
    set_default(a, "epsilon", 1e-5);
    return a;
  };
  d.lower = Lowering::LayerNorm;
  return d;
}

OpDef def_GroupNormalization() {
  OpDef d;
  d.name = "GroupNormalization";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 21;
  d.attributes = {{"epsilon", "float"}, {"num_groups", "int"}, {"stash_type", "int"}};
  d.infer = [](const InferContext& ctx) {
    const int64_t groups = ctx.attrs.get_int("num_groups", 0);
    require(groups > 0, "GroupNormalization needs num_groups > 0");
    return infer_group_norm(ctx, groups, "GroupNormalization");
  };
  d.eval = [](const EvalContext& ctx) { return eval_group_norm(ctx, ctx.attrs.get_int("num_groups", 0)); };
  d.onnx_import = import_group_norm;
  d.onnx_export = export_group_norm;
  d.canonical_attrs = canonical_epsilon;
  d.lower = Lowering::GroupNorm;
  return d;
}

// GroupNormalization with a group per channel. Opsets before 6 had consumed_inputs.
OpDef def_InstanceNormalization() {
  OpDef d;
  d.name = "InstanceNormalization";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 6;
  d.attributes = {{"epsilon", "float"}};
  d.infer = [](const InferContext& ctx) { return infer_group_norm(ctx, 0, "InstanceNormalization"); };
  d.eval = [](const EvalContext& ctx) { return eval_group_norm(ctx, ctx.in(0).dims()[1]); };
  d.canonical_attrs = canonical_epsilon;
  d.lower = Lowering::GroupNorm;
  return d;
}

// LRN (AlexNet, GoogLeNet, the ONNX model zoo's older CNNs): each element divided
// by (bias + alpha / size * the sum of squares over `size` neighbouring channels)
// ^ beta, the window from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2),
// clipped to the channels there are. The power makes it float-only.
OpDef def_LRN() {
  OpDef d;
  d.name = "LRN";
  d.min_inputs = d.max_inputs = 1;
  d.attributes = {{"alpha", "float"}, {"beta", "float"}, {"bias", "float"}, {"size", "int"}};
  d.infer = [](const InferContext& ctx) {
    const TensorType& x = ctx.in(0);
    require_float(x, "LRN input");
    require_valid(x.rank() >= 3, "LRN input must be [N, C, D1, ...], got " + to_string(x.shape));
    require_valid(ctx.attrs.has("size") && ctx.attrs.get_int("size") > 0, "LRN needs a positive size");
    for (const char* a : {"alpha", "beta"})  // a NaN bias computes NaN, as ONNX Runtime does
      require_valid(std::isfinite(ctx.attrs.get_float(a, 1.0)), std::string("LRN ") + a + " must be finite");
    return std::vector<TensorType>{x};
  };
  d.eval = [](const EvalContext& ctx) {
    const Tensor& x = ctx.in(0);
    const int64_t n = x.dims()[0], c = x.dims()[1], spatial = x.numel() / std::max<int64_t>(n * c, 1);
    const int64_t size = ctx.attrs.get_int("size");
    const double alpha = ctx.attrs.get_float("alpha", 1e-4), beta = ctx.attrs.get_float("beta", 0.75),
                 bias = ctx.attrs.get_float("bias", 1.0);
    const int64_t below = (size - 1) / 2, above = size - 1 - below;
    Array<double> in = f64(x), y = in;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < spatial; ++s) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - below); k <= std::min(c - 1, ch + above); ++k) {
            const double v = in.data[static_cast<size_t>((b * c + k) * spatial + s)];
            sq += v * v;
          }
          const size_t at = static_cast<size_t>((b * c + ch) * spatial + s);
          y.data[at] = in.data[at] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
        }
    return std::vector<Tensor>{tensor(x.dtype(), y)};
  };
  d.lower = Lowering::Lrn;
  return d;
}

}  // namespace isomer
