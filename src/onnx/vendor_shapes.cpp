#include "onnx/vendor_shapes.h"

#include <algorithm>
#include <map>

#include "runtime/opaque_attr.h"

namespace isomer {

namespace {

using runtime::proto_attr;
using Dim = onnx::TensorShapeProto_Dimension;
using Dims = std::vector<Dim>;

struct In {
  int32_t elem = 0;
  Dims dims;
};

// Input `i` of `n` with a shape, or nullopt (absent, untyped, or of unknown rank).
std::optional<In> input(const onnx::NodeProto& n, int i, const TypeLookup& type_of) {
  if (i >= n.input_size() || n.input(i).empty()) return std::nullopt;
  const onnx::TypeProto* t = type_of(n.input(i));
  if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape() || t->tensor_type().elem_type() == 0)
    return std::nullopt;
  In in;
  in.elem = t->tensor_type().elem_type();
  in.dims.assign(t->tensor_type().shape().dim().begin(), t->tensor_type().shape().dim().end());
  return in;
}

onnx::TypeProto tensor(int32_t elem, const Dims& dims) {
  onnx::TypeProto t;
  auto* tt = t.mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) *shape->add_dim() = d;
  return t;
}

Dim value_dim(int64_t v) {
  Dim d;
  d.set_dim_value(v);
  return d;
}

bool is_value(const Dim& d, int64_t v) { return d.has_dim_value() && d.dim_value() == v; }

// Multidirectional broadcasting of two dims; nullopt where they cannot broadcast.
std::optional<Dim> broadcast_dim(const Dim& a, const Dim& b) {
  if (is_value(a, 1)) return b;
  if (is_value(b, 1)) return a;
  if (a.has_dim_value() && b.has_dim_value()) return a.dim_value() == b.dim_value() ? std::optional<Dim>(a) : std::nullopt;
  if (a.has_dim_value()) return a;
  if (b.has_dim_value()) return b;
  if (a.has_dim_param() && b.has_dim_param() && a.dim_param() == b.dim_param()) return a;
  return Dim{};
}

std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim one = value_dim(1);
    const Dim& x = i + a.size() >= r ? a[i + a.size() - r] : one;
    const Dim& y = i + b.size() >= r ? b[i + b.size() - r] : one;
    std::optional<Dim> d = broadcast_dim(x, y);
    if (!d) return std::nullopt;
    out[i] = *d;
  }
  return out;
}

// numpy.matmul's result dims.
std::optional<Dims> matmul(Dims a, Dims b) {
  if (a.empty() || b.empty()) return std::nullopt;
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), value_dim(1));
  if (b_vector) b.push_back(value_dim(1));
  std::optional<Dims> batch = broadcast(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2));
  if (!batch) return std::nullopt;
  if (!a_vector) batch->push_back(a[a.size() - 2]);
  if (!b_vector) batch->push_back(b.back());
  return batch;
}

int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = proto_attr(n, name);
  return a && a->type() == onnx::AttributeProto::INT ? a->i() : fallback;
}
std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = proto_attr(n, name);
  if (!a || a->type() != onnx::AttributeProto::INTS) return {};
  return {a->ints().begin(), a->ints().end()};
}
std::string string_attr(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = proto_attr(n, name);
  return a && a->type() == onnx::AttributeProto::STRING ? a->s() : "";
}

using Types = std::vector<std::optional<onnx::TypeProto>>;
using Hook = Types (*)(const onnx::NodeProto&, const TypeLookup&);

// Y like input 0 (a pointwise operator on one tensor).
Types like_input0(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of);
  if (!x) return {};
  return {tensor(x->elem, x->dims)};
}

// QLinearAdd, QLinearMul: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp.
Types qlinear_binary(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> a = input(n, 0, type_of), b = input(n, 3, type_of);
  if (!a || !b) return {};
  std::optional<Dims> d = broadcast(a->dims, b->dims);
  if (!d) return {};
  return {tensor(a->elem, *d)};
}

// QLinearGlobalAveragePool: every spatial dim 1 ([N, C, 1, 1], or [N, 1, 1, C] with channels_last).
Types qlinear_global_pool(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of);
  if (!x || x->dims.size() < 3) return {};
  const bool last = int_attr(n, "channels_last", 0) != 0;
  Dims d = x->dims;
  for (size_t i = last ? 1 : 2; i < d.size() - (last ? 1 : 0); ++i) d[i] = value_dim(1);
  return {tensor(x->elem, d)};
}

// QLinearAveragePool: ONNX AveragePool's output extents (no dilations).
Types qlinear_average_pool(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of);
  if (!x || x->dims.size() < 3) return {};
  const bool last = int_attr(n, "channels_last", 0) != 0;
  const size_t spatial = x->dims.size() - 2, first = last ? 1 : 2;
  const std::vector<int64_t> kernel = ints_attr(n, "kernel_shape");
  std::vector<int64_t> strides = ints_attr(n, "strides"), pads = ints_attr(n, "pads");
  if (kernel.size() != spatial) return {};
  if (strides.empty()) strides.assign(spatial, 1);
  if (pads.empty()) pads.assign(2 * spatial, 0);
  if (strides.size() != spatial || pads.size() != 2 * spatial) return {};
  const std::string pad = string_attr(n, "auto_pad");
  const bool ceil = int_attr(n, "ceil_mode", 0) != 0;
  Dims d = x->dims;
  for (size_t i = 0; i < spatial; ++i) {
    const Dim& in = x->dims[first + i];
    if (!in.has_dim_value() || strides[i] < 1 || kernel[i] < 1) {
      d[first + i] = Dim{};
      continue;
    }
    const int64_t e = in.dim_value(), s = strides[i], k = kernel[i];
    int64_t out;
    if (pad == "SAME_UPPER" || pad == "SAME_LOWER") {
      out = (e + s - 1) / s;
    } else if (pad == "VALID") {
      out = (e - k) / s + 1;
    } else {
      const int64_t span = e + pads[i] + pads[i + spatial] - k;
      if (span < 0) return {};
      out = (ceil ? (span + s - 1) / s : span / s) + 1;
      if (ceil && (out - 1) * s >= e + pads[i]) --out;  // the last window starts in the padding
    }
    if (out < 1) return {};
    d[first + i] = value_dim(out);
  }
  return {tensor(x->elem, d)};
}

// QLinearConcat: Y_scale, Y_zp, then (X, X_scale, X_zp) per input; along `axis`.
Types qlinear_concat(const onnx::NodeProto& n, const TypeLookup& type_of) {
  if (n.input_size() < 5 || (n.input_size() - 2) % 3 != 0) return {};
  std::optional<In> first = input(n, 2, type_of);
  if (!first) return {};
  const int64_t rank = static_cast<int64_t>(first->dims.size());
  int64_t axis = int_attr(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return {};
  Dims d = first->dims;
  bool known = d[axis].has_dim_value();
  int64_t total = known ? d[axis].dim_value() : 0;
  for (int i = 5; i < n.input_size(); i += 3) {
    std::optional<In> x = input(n, i, type_of);
    if (!x || static_cast<int64_t>(x->dims.size()) != rank) return {};
    known = known && x->dims[axis].has_dim_value();
    total += known ? x->dims[axis].dim_value() : 0;
  }
  d[axis] = known ? value_dim(total) : Dim{};
  return {tensor(first->elem, d)};
}

// QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp; Y [M, N], quantized
// as y_zp where given, else float.
Types qgemm(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> a = input(n, 0, type_of), b = input(n, 3, type_of);
  if (!a || !b || a->dims.size() != 2 || b->dims.size() != 2) return {};
  const Dim m = a->dims[int_attr(n, "transA", 0) ? 1 : 0], nn = b->dims[int_attr(n, "transB", 0) ? 0 : 1];
  int32_t elem = onnx::TensorProto::FLOAT;
  if (n.input_size() > 8 && !n.input(8).empty()) {
    const onnx::TypeProto* zp = type_of(n.input(8));
    if (!zp || !zp->has_tensor_type()) return {};
    elem = zp->tensor_type().elem_type();
  }
  return {tensor(elem, {m, nn})};
}

// MatMulIntegerToFloat (A, B, ...), DynamicQuantizeMatMul (A float, B, ...): float
// A x B.
Types matmul_to_float(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> a = input(n, 0, type_of), b = input(n, 1, type_of);
  if (!a || !b) return {};
  std::optional<Dims> d = matmul(a->dims, b->dims);
  if (!d) return {};
  return {tensor(onnx::TensorProto::FLOAT, *d)};
}

// SkipLayerNormalization: the normalized sum and the sum itself like the input; the
// mean and inverse deviation left open.
Types skip_layer_norm(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of);
  if (!x) return {};
  Types out(static_cast<size_t>(std::max(1, n.output_size())));
  out[0] = tensor(x->elem, x->dims);
  if (out.size() > 3) out[3] = out[0];
  return out;
}

// Attention: input [B, S, hidden] and weights [hidden, 3 * N] give output [B, S, N]
// (N: V's size in qkv_hidden_sizes where given); present left open.
Types ms_attention(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of), w = input(n, 1, type_of);
  const onnx::AttributeProto* sizes = proto_attr(n, "qkv_hidden_sizes");
  if (!x || !w || x->dims.size() != 3 || w->dims.size() != 2) return {};
  if (sizes && sizes->ints_size() == 3) return {tensor(x->elem, {x->dims[0], x->dims[1], value_dim(sizes->ints(2))})};
  if (!w->dims[1].has_dim_value() || w->dims[1].dim_value() % 3 != 0) return {};
  return {tensor(x->elem, {x->dims[0], x->dims[1], value_dim(w->dims[1].dim_value() / 3)})};
}

// DynamicQuantizeLSTM: X [seq, batch, input], R [directions, hidden, 4*hidden];
// Y [seq, directions, batch, hidden], Y_h and Y_c [directions, batch, hidden], float.
Types dynamic_quantize_lstm(const onnx::NodeProto& n, const TypeLookup& type_of) {
  std::optional<In> x = input(n, 0, type_of), r = input(n, 2, type_of);
  if (!x || x->dims.size() != 3) return {};
  const int64_t dirs = string_attr(n, "direction") == "bidirectional" ? 2 : 1;
  Dim hidden = r && r->dims.size() == 3 ? r->dims[1] : Dim{};
  if (const int64_t h = int_attr(n, "hidden_size", 0); h > 0) hidden = value_dim(h);
  const Dim d = value_dim(dirs);
  Types out(static_cast<size_t>(std::min(3, n.output_size())));
  for (size_t k = 0; k < out.size(); ++k)
    out[k] = k == 0 ? tensor(onnx::TensorProto::FLOAT, {x->dims[0], d, x->dims[1], hidden})
                    : tensor(onnx::TensorProto::FLOAT, {d, x->dims[1], hidden});
  return out;
}

const std::map<std::string, Hook>& hooks() {
  static const std::map<std::string, Hook> table = {
      {"QLinearAdd", qlinear_binary},          {"QLinearMul", qlinear_binary},
      {"QLinearSigmoid", like_input0},         {"QLinearLeakyRelu", like_input0},
      {"QLinearSoftmax", like_input0},         {"QLinearGlobalAveragePool", qlinear_global_pool},
      {"QLinearAveragePool", qlinear_average_pool}, {"QLinearConcat", qlinear_concat},
      {"QGemm", qgemm},                        {"MatMulIntegerToFloat", matmul_to_float},
      {"DynamicQuantizeMatMul", matmul_to_float}, {"Gelu", like_input0},
      {"FastGelu", like_input0},               {"BiasGelu", like_input0},
      {"QuickGelu", like_input0},              {"SkipLayerNormalization", skip_layer_norm},
      {"DynamicQuantizeLSTM", dynamic_quantize_lstm}, {"SkipSimplifiedLayerNormalization", skip_layer_norm},
      {"Attention", ms_attention},
  };
  return table;
}

// ONNX Runtime's SimplifiedLayerNormalization, which it registers in the ONNX domain
// (schema_check.cpp): Y like X; the inverse deviation left open.
bool onnx_domain_contrib(const onnx::NodeProto& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "SimplifiedLayerNormalization";
}

}  // namespace

bool has_vendor_shape_hook(const onnx::NodeProto& n) {
  return (n.domain() == "com.microsoft" && hooks().count(n.op_type())) || onnx_domain_contrib(n);
}

std::vector<std::optional<onnx::TypeProto>> vendor_output_types(const onnx::NodeProto& n, const TypeLookup& type_of) {
  if (!has_vendor_shape_hook(n)) return {};
  Types out = onnx_domain_contrib(n) ? like_input0(n, type_of) : hooks().at(n.op_type())(n, type_of);
  if (!out.empty()) out.resize(static_cast<size_t>(n.output_size()));
  return out;
}

}  // namespace isomer
