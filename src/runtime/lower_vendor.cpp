// Vendor operators the runtime runs itself: ONNX Runtime's com.microsoft QLinearAdd,
// QLinearMul, QLinearGlobalAveragePool, QGemm, QLinearConcat, QLinearSigmoid,
// QLinearLeakyRelu and QLinearAveragePool, which its quantizer writes in the
// QOperator format (the residual adds of a quantized ResNet or MobileNet, the gates
// of squeeze-excitation, DenseNet's concatenations, EfficientNet's SiLU, the pools
// and the classifier), and SkipLayerNormalization, SkipSimplifiedLayerNormalization,
// SimplifiedLayerNormalization (in the ONNX domain), Gelu, FastGelu, BiasGelu and
// QuickGelu, which its transformer optimizer (and onnxscript's ort_fusions) writes for
// each residual add and LayerNorm or RMSNorm and each feed-forward activation. Delegated, each was a
// round trip to ONNX Runtime's helper process: in a quantized MobileNetV2 the 10
// adds took 70% of the run. The arithmetic is ONNX Runtime's (kernels/quant.h), in
// float32. Forms these kernels do not take (run-time scales, per-axis parameters,
// other broadcasts) are still delegated. quantize_dynamic's DynamicQuantizeLSTM
// runs on the native recurrence (lower_quant_lstm.cpp).
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "kernels/pointwise.h"
#include "kernels/quant.h"
#include "kernels/rows.h"
#include "runtime/compiler.h"
#include "runtime/lower_quant.h"
#include "runtime/lowering.h"
#include "runtime/native.h"
#include "ops/nn_common.h"
#include "runtime/opaque_attr.h"

namespace isomer::runtime {

namespace {

constexpr const char* kVendor = "com.microsoft";

bool is_vendor(const Node& n, const char* op) {
  return n.kind() == NodeKind::Opaque && n.opaque()->domain == kVendor && n.op_type() == op;
}

bool quantized(DType t) { return t == DType::UInt8 || t == DType::Int8; }
kernels::QType qtype(DType t) { return t == DType::UInt8 ? kernels::QType::U8 : kernels::QType::S8; }

// The opaque node's attribute `name` of `type`, or nullopt.
std::optional<onnx::AttributeProto> typed_attr(const Node& n, const std::string& name,
                                               onnx::AttributeProto::AttributeType type) {
  onnx::NodeProto p;
  if (!p.ParseFromString(n.opaque()->node_proto)) return std::nullopt;
  const onnx::AttributeProto* a = proto_attr(p, name);
  if (!a || a->type() != type) return std::nullopt;
  return *a;
}
int64_t proto_int(const Node& n, const std::string& name, int64_t fallback) {
  const auto a = typed_attr(n, name, onnx::AttributeProto::INT);
  return a ? a->i() : fallback;
}
float proto_float(const Node& n, const std::string& name, float fallback) {
  const auto a = typed_attr(n, name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : fallback;
}

// QGemm with a quantized output: A [M, K] (not transposed), B constant [K, N] or
// [N, K] (transB), per-tensor zero points, an int32 bias at scale sa sb, alpha 1:
// one integer matmul that requantizes as QLinearMatMul does.
bool lower_qgemm(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  if (in.size() < 9 || !in[7].present() || proto_int(n, "transA", 0) != 0 || proto_float(n, "alpha", 1.0f) != 1.0f)
    return false;
  const Tensor* b = c.known(in[3]);
  const auto pa = constant_quant_params(c, n, 1, 2), pb = constant_quant_params(c, n, 4, 5),
             py = constant_quant_params(c, n, 7, 8);
  if (!b || b->rank() != 2 || !quantized(b->dtype()) || !pa || !pb || !py || pa->scale.size() != 1 ||
      py->scale.size() != 1 || !(py->scale[0] > 0))
    return false;
  const Tensor w = proto_int(n, "transB", 0) ? transposed_bytes(*b) : *b;
  const int64_t K = w.dims()[0], N = w.dims()[1];
  if (pb->scale.size() != 1 && static_cast<int64_t>(pb->scale.size()) != N) return false;
  if (pb->zp.size() != 1 && static_cast<int64_t>(pb->zp.size()) != N) return false;
  IntMatMul s;
  if (in[6].present()) {
    const Tensor* bias = c.known(in[6]);
    if (!bias || bias->dtype() != DType::Int32 || bias->numel() != N) return false;
    for (int64_t v : bias->to_i64()) s.bias.push_back(static_cast<int32_t>(v));
  }
  const int a = c.as_plain(c.id(in[0]));
  const std::vector<int64_t> ad = c.val(a).dims;
  if (ad.size() != 2 || ad[1] != K) return false;
  s.a = a;
  s.a_zp = pa->zp[0];
  for (float bs : pb->scale) s.scales.push_back(pa->scale[0] * bs / py->scale[0]);
  s.y_type = n.output_types()[0].dtype;
  s.y_zp = py->zp[0];
  std::vector<int32_t> zps = pb->zp;
  const bool one_zp = std::all_of(zps.begin(), zps.end(), [&](int32_t z) { return z == zps[0]; });
  if (one_zp) {  // oneDNN's matmul takes one weight zero point
    s.b = w;
    s.b_zp = zps[0];
    const int y = add_integer_matmul(c, n, s);
    if (y < 0) return false;
    c.bind(n.output(0), y);
    return true;
  }
  // Per-column zero points (per-channel quantization of u8 weights): int32 products
  // with one more column of ones, its row sums of a - za, then the correction.
  const Tensor ws8 = as_s8(w, zps);
  const std::string_view src = ws8.bytes();
  std::string bytes;
  bytes.reserve(static_cast<size_t>(K * (N + 1)));
  for (int64_t k = 0; k < K; ++k) {
    bytes.append(src.substr(static_cast<size_t>(k * N), static_cast<size_t>(N)));
    bytes.push_back(static_cast<char>(1));
  }
  IntMatMul products = s;
  products.b = Tensor(DType::Int8, {K, N + 1}, std::move(bytes));
  products.b_zp = 0;
  products.bias.clear();
  products.scales.clear();
  products.y_type = DType::Int32;
  products.y_zp = 0;
  const int acc = add_integer_matmul(c, n, products);
  if (acc < 0) return false;
  ZeroPointSums z;
  z.acc = acc;
  z.stride = N + 1;
  z.sum_offset = N;
  const std::vector<int64_t> od = {ad[0], N};
  const DType yt = s.y_type;
  c.bind(n.output(0), add_zero_point_correction(c, n, z, od, plain_md(od, yt == DType::UInt8 ? dt::u8 : dt::s8), zps, s.bias, s.scales, yt,
                                                s.y_zp));
  return true;
}

// ONNX Runtime's SimplifiedLayerNormalization, registered in the ONNX domain
// (schema_check.cpp), kept opaque by the importer.
bool is_onnx_domain_contrib(const Node& n, const char* op) {
  return n.kind() == NodeKind::Opaque && (n.opaque()->domain.empty() || n.opaque()->domain == "ai.onnx") &&
         n.op_type() == op;
}

// SkipLayerNormalization: LayerNorm(input + skip + bias) * gamma + beta over the
// last axis, and the sum itself as output 3 where asked. Skip of the input's
// shape; the mean and inverse-deviation outputs are left to ONNX Runtime.
// SkipSimplifiedLayerNormalization (input, skip, gamma, bias): the same with
// RMSNorm, no mean and no beta.
bool lower_skip_layernorm(Compiler& c, const Node& n) {
  const bool rms = is_vendor(n, "SkipSimplifiedLayerNormalization");
  const auto& in = n.inputs();
  for (uint32_t k = 1; k < 3 && k < n.num_outputs(); ++k)
    if (!c.consumers(n.output(k)).empty() || c.is_output(n.output(k))) return false;
  const int x = c.as_plain(c.id(in[0])), skip = c.as_plain(c.id(in[1]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty() || c.val(skip).dims != xd || c.val(x).dtype != DType::Float32 || c.val(skip).dtype != DType::Float32)
    return false;
  const int64_t cols = xd.back(), rows = num_elements(xd) / std::max<int64_t>(cols, 1);
  auto gamma = row_param(c, n, 2, cols), beta = rms ? std::optional<std::vector<float>>(std::vector<float>()) : row_param(c, n, 3, cols),
       bias = row_param(c, n, rms ? 3 : 4, cols);
  if (!gamma || gamma->empty() || !beta || !bias || cols == 0) return false;
  const float eps = proto_float(n, "epsilon", 1e-12f);
  const bool want_sum = n.num_outputs() > 3 && (!c.consumers(n.output(3)).empty() || c.is_output(n.output(3)));
  const int sum = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name() + ".sum");
  const int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name());
  auto g = std::make_shared<std::vector<float>>(std::move(*gamma));
  auto be = std::make_shared<std::vector<float>>(std::move(*beta));
  auto bi = std::make_shared<std::vector<float>>(std::move(*bias));
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "layernorm", std::string(rms ? "skip-rmsnorm " : "skip-layernorm ") + std::to_string(rows) + "x" + std::to_string(cols),
                            10.0 * static_cast<double>(rows * cols)),
                  {x, skip}, {sum, y}, [=](const std::vector<char*>& p) {
                    const float* a = reinterpret_cast<const float*>(p[0]);
                    const float* b = reinterpret_cast<const float*>(p[1]);
                    float* s = reinterpret_cast<float*>(p[2]);
                    for (int64_t r = 0; r < rows; ++r)
                      for (int64_t k = 0; k < cols; ++k) {
                        const int64_t i = r * cols + k;
                        s[i] = a[i] + b[i] + (bi->empty() ? 0.0f : (*bi)[static_cast<size_t>(k)]);
                      }
                    kernels::normalize_rows(s, reinterpret_cast<float*>(p[3]), rows, cols, g->data(),
                                            be->empty() ? nullptr : be->data(), eps, rms, team);
                  });
  c.bind(n.output(0), y);
  if (want_sum) c.bind(n.output(3), sum);
  return true;
}

// SimplifiedLayerNormalization (X, scale): X / sqrt(mean(X^2) + epsilon) * scale over
// the axes from `axis` on, ONNX's RMSNormalization; the inverse-deviation output is
// left to ONNX Runtime.
bool lower_simplified_layernorm(Compiler& c, const Node& n) {
  for (uint32_t k = 1; k < n.num_outputs(); ++k)
    if (!c.consumers(n.output(k)).empty() || c.is_output(n.output(k))) return false;
  const int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty() || c.val(x).dtype != DType::Float32) return false;
  const int64_t rank = static_cast<int64_t>(xd.size()), axis = proto_int(n, "axis", -1);
  if (axis < -rank || axis >= rank) return false;
  const auto from = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  const int64_t rows = num_elements(xd, 0, from), cols = num_elements(xd, from, xd.size());
  auto scale = row_param(c, n, 1, cols);
  if (!scale || scale->empty() || cols == 0) return false;
  const float eps = proto_float(n, "epsilon", 1e-5f);
  const int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name());
  auto g = std::make_shared<std::vector<float>>(std::move(*scale));
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "layernorm", "rmsnorm " + std::to_string(rows) + "x" + std::to_string(cols),
                            8.0 * static_cast<double>(rows * cols)),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    kernels::normalize_rows(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]), rows,
                                            cols, g->data(), nullptr, eps, /*rms=*/true, team);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool is_gelu(const Node& n) {
  return is_vendor(n, "Gelu") || is_vendor(n, "FastGelu") || is_vendor(n, "BiasGelu") || is_vendor(n, "QuickGelu");
}

// Gelu (erf form), BiasGelu (of x + bias), FastGelu (tanh form, optional bias) and
// QuickGelu (x sigmoid(alpha x)) on float32, the bias a vector over the last axis:
// one pointwise program (the runtime's own GeluErf and GeluTanh).
bool lower_gelu(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  const bool has_bias = in.size() > 1 && in[1].present() && !is_vendor(n, "Gelu") && !is_vendor(n, "QuickGelu");
  const int x = c.as_plain(c.id(in[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty() || c.val(x).dtype != DType::Float32) return false;
  int bias = -1;
  if (has_bias) {
    bias = c.as_plain(c.id(in[1]));
    if (c.val(bias).dtype != DType::Float32 || c.val(bias).dims != std::vector<int64_t>{xd.back()}) return false;
  }
  kernels::PwProgram prog;
  prog.num_inputs = prog.num_regs = has_bias ? 2 : 1;
  int r = has_bias ? prog.emit(kernels::PwOp::Add, 0, 1) : 0;
  if (is_vendor(n, "FastGelu")) {
    r = prog.emit(kernels::PwOp::GeluTanh, r);
  } else if (is_vendor(n, "QuickGelu")) {
    const int t = prog.emit(kernels::PwOp::Affine, r, 0, 0, proto_float(n, "alpha", 1.702f), 0);
    r = prog.emit(kernels::PwOp::Mul, r, prog.emit(kernels::PwOp::Sigmoid, t));
  } else {
    r = prog.emit(kernels::PwOp::GeluErf, r);
  }
  prog.results = {r};
  const int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name());
  std::vector<int64_t> bias_strides(xd.size(), 0);
  bias_strides.back() = 1;
  const std::vector<int64_t> strides = kernels::contiguous_strides(xd);
  std::vector<int> reads = {x};
  if (has_bias) reads.push_back(bias);
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "pointwise", n.op_type() + " " + prog.text() + " dims" + to_string(xd),
                            static_cast<double>(num_elements(xd) * static_cast<int64_t>(prog.code.size()))),
                  reads, {y}, [=](const std::vector<char*>& p) {
                    std::vector<kernels::StridedRef> ins = {{p[0], DType::Float32, strides, 0}};
                    if (has_bias) ins.push_back({p[1], DType::Float32, bias_strides, 0});
                    const kernels::StridedRef out{p[has_bias ? 2 : 1], DType::Float32, strides, 0};
                    kernels::run_pointwise(prog, ins, std::span<const kernels::StridedRef>(&out, 1), xd, team);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_qlinear_global_pool(Compiler& c, const Node& n) {
  const auto px = constant_quant_params(c, n, 1, 2), py = constant_quant_params(c, n, 3, 4);
  if (!px || !py || px->scale.size() != 1 || py->scale.size() != 1 || !(py->scale[0] > 0)) return false;
  const int64_t channels_last = proto_int(n, "channels_last", 0);
  if (channels_last != 0 && channels_last != 1) return false;
  const int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.size() < 3) return false;
  const int64_t channels = channels_last ? xd.back() : xd[1];
  const int64_t size = num_elements(xd) / (xd[0] * channels);
  if (size == 0 || channels == 0) return false;
  std::vector<int64_t> od(xd.size(), 1);
  od[0] = xd[0];
  od[channels_last ? xd.size() - 1 : 1] = channels;
  const DType t = c.val(x).dtype;
  const int y = plain_output(c, t, od, n.name());
  const float scale = px->scale[0] / (py->scale[0] * static_cast<float>(size));
  const int32_t zx = px->zp[0], zy = py->zp[0];
  const int64_t images = xd[0];
  const int team = c.threads();
  const kernels::QType qt = qtype(t);
  add_native_step(c,
                  step_info(n, "pool", "qlinear-global-average " + std::string(dtype_name(t)) + to_string(xd),
                            static_cast<double>(num_elements(xd))),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    kernels::qlinear_mean(p[0], p[1], qt, images, channels, size, channels_last == 1, scale, zx, zy,
                                          team);
                  });
  c.bind(n.output(0), y);
  return true;
}

// ONNX Runtime's lookup tables: every u8 or s8 value x of (sx, zx), at its byte,
// mapped to quantize(f(dequantize(x)), sy, zy) with kernels/quant.h's arithmetic.
using Table = std::array<uint8_t, 256>;
std::shared_ptr<const Table> lookup_table(DType t, float sx, int32_t zx, float sy, int32_t zy,
                                          const std::function<float(float)>& f) {
  Table raw;
  std::iota(raw.begin(), raw.end(), uint8_t{0});
  std::array<float, 256> v;
  kernels::QShape shape;
  shape.inner = 256;
  kernels::dequantize(raw.data(), qtype(t), v.data(), shape, &sx, &zx);
  for (float& x : v) x = f(x);
  auto table = std::make_shared<Table>();
  kernels::quantize(v.data(), table->data(), qtype(t), shape, &sy, &zy);
  return table;
}

// Value id as it is where it is channels-last (an integer convolution's output) or
// row-major, else made row-major; *last says which.
int dense_quantized(Compiler& c, int id, bool* last) {
  const RtValue& v = c.val(id);
  const size_t r = v.dims.size();
  *last = r >= 3 && r <= 5 && v.md.data.ndims && v.md == md_t(to_dims(v.dims), dnnl_int(v.dtype), channels_last(r));
  return *last ? id : c.as_plain(id);
}

// The QLinearMul that is sigmoid node s's only reader and multiplies it by s's own
// input (SiLU), or nullptr; *at: the input it reads s at (0 or 3).
const Node* silu_mul(Compiler& c, const Node& s, size_t* at_out) {
  if (c.is_output(s.output(0))) return nullptr;
  const auto& readers = c.consumers(s.output(0));
  if (readers.size() != 1) return nullptr;
  const auto [m, at] = readers[0];
  if (!is_vendor(*m, "QLinearMul") || m->num_outputs() != 1 || m->inputs().size() < 8 || (at != 0 && at != 3))
    return nullptr;
  const Value& other = m->inputs()[at == 0 ? 3 : 0];
  *at_out = at;
  return other == s.inputs()[0] && m->output_types()[0].dtype == s.output_types()[0].dtype ? m : nullptr;
}

// SiLU's table: for each x, QLinearMul's arithmetic on x and sigmoid's table at x.
std::shared_ptr<const Table> silu_table(Compiler& c, const Node& mul, bool sigmoid_first, const Table& sigmoid,
                                        DType t) {
  const auto pa = constant_quant_params(c, mul, 1, 2), pb = constant_quant_params(c, mul, 4, 5),
             pc = constant_quant_params(c, mul, 6, 7);
  if (!pa || !pb || !pc || pa->scale.size() != 1 || pb->scale.size() != 1 || pc->scale.size() != 1 ||
      !(pc->scale[0] > 0))
    return nullptr;
  kernels::QLinearBinary q;
  q.mul = true;
  q.ra = pa->scale[0] * pb->scale[0] / pc->scale[0];
  q.za = pa->zp[0];
  q.zb = pb->zp[0];
  q.zc = pc->zp[0];
  Table x;
  std::iota(x.begin(), x.end(), uint8_t{0});
  auto table = std::make_shared<Table>();
  const kernels::Broadcast each{1, 256};
  kernels::qlinear_binary(sigmoid_first ? sigmoid.data() : x.data(), sigmoid_first ? x.data() : sigmoid.data(),
                          table->data(), qtype(t), 256, each, each, q, 1);
  return table;
}

// QLinearSigmoid and QLinearLeakyRelu (alpha): a lookup table per node, the input's
// layout kept where it is channels-last.
bool lower_qlinear_lookup(Compiler& c, const Node& n) {
  const auto px = constant_quant_params(c, n, 1, 2), py = constant_quant_params(c, n, 3, 4);
  if (!px || !py || px->scale.size() != 1 || py->scale.size() != 1 || !(py->scale[0] > 0)) return false;
  bool last = false;
  const int x = dense_quantized(c, c.id(n.inputs()[0]), &last);
  const std::vector<int64_t> xd = c.val(x).dims;
  const DType t = c.val(x).dtype;
  const bool sigmoid = n.op_type() == "QLinearSigmoid";
  const float alpha = proto_float(n, "alpha", 0.01f);
  std::shared_ptr<const Table> table = lookup_table(t, px->scale[0], px->zp[0], py->scale[0], py->zp[0], [&](float v) {
    return sigmoid ? 1.0f / (1.0f + std::exp(-v)) : v >= 0 ? v : v * alpha;
  });
  // SiLU as ONNX Runtime's quantizer writes it, QLinearMul(x, QLinearSigmoid(x)):
  // both are functions of x alone, so one table does both, rounding twice as they do.
  size_t sigmoid_at = 0;
  const Node* mul = sigmoid ? silu_mul(c, n, &sigmoid_at) : nullptr;
  if (mul) table = silu_table(c, *mul, sigmoid_at == 0, *table, t);
  if (!table) return false;
  const Node& last_node = mul ? *mul : n;
  const int y = last ? c.new_value(t, xd, c.val(x).md, last_node.name()) : plain_output(c, t, xd, last_node.name());
  const int64_t count = num_elements(xd);
  const int team = c.threads();
  StepInfo info = step_info(n, "pointwise",
                            std::string(mul ? "qlinear-silu " : "qlinear-lookup ") + std::string(dtype_name(t)) + to_string(xd),
                            static_cast<double>(count));
  if (mul) {
    info.ops.push_back(mul->op_type());
    info.nodes.push_back(node_key(*mul));
  }
  add_native_step(c, info, {x}, {y},
                  [=](const std::vector<char*>& p) { kernels::lookup(table->data(), p[0], p[1], count, team); });
  c.bind(last_node.output(0), y);
  if (mul) c.mark_done(*mul);
  return true;
}

// QLinearConcat(y_scale, y_zp, (x, x_scale, x_zp)...): each input requantized to the
// output's parameters through a lookup table (copied where they are its own), rows
// of the output made of the inputs' rows in turn. Channels-last inputs joined on the
// channel axis stay so (rows are positions); others are row-major.
bool lower_qlinear_concat(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  const auto py = constant_quant_params(c, n, 0, 1);
  if (!py || py->scale.size() != 1 || !(py->scale[0] > 0) || in.size() < 5 || (in.size() - 2) % 3 != 0) return false;
  const DType t = n.output_types()[0].dtype;
  std::vector<int> xs;
  std::vector<std::shared_ptr<const Table>> tables;
  bool all_last = true;
  for (size_t i = 2; i < in.size(); i += 3) {
    if (!in[i].present() || in[i].type().dtype != t) return false;
    const auto px = constant_quant_params(c, n, i + 1, i + 2);
    if (!px || px->scale.size() != 1) return false;
    const bool same = px->scale[0] == py->scale[0] && px->zp[0] == py->zp[0];
    tables.push_back(same ? nullptr
                          : lookup_table(t, px->scale[0], px->zp[0], py->scale[0], py->zp[0], [](float v) { return v; }));
    bool last = false;
    xs.push_back(dense_quantized(c, c.id(in[i]), &last));
    all_last = all_last && last;
  }
  const size_t rank = c.val(xs[0]).dims.size();
  int64_t axis = proto_int(n, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
  const bool last = all_last && axis == 1;
  if (!last)
    for (int& x : xs) x = c.as_plain(x);
  std::vector<int64_t> od = c.val(xs[0]).dims;
  od[static_cast<size_t>(axis)] = 0;
  std::vector<int64_t> widths;
  // Rows: the positions (channels-last), or the dims before the axis.
  const int64_t rows = last ? od[0] * num_elements(std::vector<int64_t>(od.begin() + 2, od.end()))
                            : num_elements(std::vector<int64_t>(od.begin(), od.begin() + axis));
  for (int x : xs) {
    const std::vector<int64_t>& d = c.val(x).dims;
    if (d.size() != rank) return false;
    for (size_t k = 0; k < rank; ++k)
      if (k != static_cast<size_t>(axis) && d[k] != od[k]) return false;
    od[static_cast<size_t>(axis)] += d[static_cast<size_t>(axis)];
    widths.push_back(last ? d[1] : num_elements(std::vector<int64_t>(d.begin() + axis, d.end())));
  }
  const int y = last ? c.new_value(t, od, md_t(to_dims(od), dnnl_int(t), channels_last(rank)), n.name())
                     : plain_output(c, t, od, n.name());
  const int team = c.threads();
  add_native_step(c, step_info(n, "concat", "qlinear-concat " + std::string(dtype_name(t)) + to_string(od),
                               static_cast<double>(num_elements(od))),
                  xs, {y}, [=](const std::vector<char*>& p) {
                    std::vector<kernels::ConcatPart> parts(widths.size());
                    for (size_t i = 0; i < parts.size(); ++i)
                      parts[i] = {p[i], widths[i], tables[i] ? tables[i]->data() : nullptr};
                    kernels::concat_rows(parts.data(), parts.size(), rows, p[parts.size()], team);
                  });
  c.bind(n.output(0), y);
  return true;
}

// The opaque node's ints attribute `name`, or `fallback`.
std::vector<int64_t> proto_ints(const Node& n, const std::string& name, std::vector<int64_t> fallback = {}) {
  const auto a = typed_attr(n, name, onnx::AttributeProto::INTS);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

// QLinearAveragePool (kernels::qlinear_average_pool): its window read as
// AveragePool's, over NCHW or (channels_last 1) NHWC input; an NCHW input an integer
// convolution wrote channels-last is read where it lies.
bool lower_qlinear_average_pool(Compiler& c, const Node& n) {
  const auto px = constant_quant_params(c, n, 1, 2), py = constant_quant_params(c, n, 3, 4);
  if (!px || !py || px->scale.size() != 1 || py->scale.size() != 1 || !(py->scale[0] > 0)) return false;
  const int64_t nhwc = proto_int(n, "channels_last", 0), include = proto_int(n, "count_include_pad", 0);
  if ((nhwc != 0 && nhwc != 1) || (include != 0 && include != 1)) return false;
  bool last = false;
  const int x = dense_quantized(c, c.id(n.inputs()[0]), &last);
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.size() < 3 || xd.size() > 5 || (nhwc && last)) return false;
  const size_t spatial_begin = nhwc ? 1 : 2;
  const std::vector<int64_t> spatial(xd.begin() + static_cast<std::ptrdiff_t>(spatial_begin),
                                     xd.begin() + static_cast<std::ptrdiff_t>(spatial_begin + xd.size() - 2));
  Attributes attrs;
  for (const char* name : {"strides", "pads"})
    if (auto v = proto_ints(n, name); !v.empty()) attrs.set(name, v);
  if (auto a = typed_attr(n, "auto_pad", onnx::AttributeProto::STRING)) attrs.set("auto_pad", a->s());
  attrs.set("ceil_mode", proto_int(n, "ceil_mode", 0));
  kernels::QLinearPool p;
  std::vector<int64_t> od = xd;
  try {
    const ops::Window w = ops::read_window(attrs, proto_ints(n, "kernel_shape"));
    if (w.rank() != spatial.size()) return false;
    const std::vector<ops::WindowAxis> axes = ops::plan_window(w, spatial);
    const size_t skip = 3 - axes.size();
    for (size_t i = 0; i < axes.size(); ++i) {
      const ops::WindowAxis& a = axes[i];
      if (a.dilation != 1) return false;
      p.axes[skip + i] = {a.in, a.out, a.kernel, a.stride, a.pad_begin};
      od[spatial_begin + i] = a.out;
    }
  } catch (const Error&) {
    return false;  // ONNX Runtime says what is wrong
  }
  p.batch = xd[0];
  p.channels = nhwc ? xd.back() : xd[1];
  p.channels_last = nhwc || last;
  p.include_pad = include == 1;
  p.sx = px->scale[0];
  p.zx = px->zp[0];
  p.sy = py->scale[0];
  p.zy = py->zp[0];
  const DType t = c.val(x).dtype;
  const int y = last ? c.new_value(t, od, md_t(to_dims(od), dnnl_int(t), channels_last(od.size())), n.name())
                     : plain_output(c, t, od, n.name());
  const kernels::QType qt = qtype(t);
  const int team = c.threads();
  add_native_step(c, step_info(n, "pool", "qlinear-average " + std::string(dtype_name(t)) + to_string(xd),
                               static_cast<double>(num_elements(od))),
                  {x}, {y}, [=](const std::vector<char*>& ptr) { kernels::qlinear_average_pool(ptr[0], ptr[1], qt, p, team); });
  c.bind(n.output(0), y);
  return true;
}

// How an operand of `dims` broadcasts to `out`: output element i reads its element
// (i / run) % period; nullopt where it broadcasts otherwise. Its dims must be the
// output's between leading and trailing 1s (a scalar, a per-channel gate, a tensor
// repeated over the batch).
std::optional<kernels::Broadcast> broadcast_of(std::vector<int64_t> dims, const std::vector<int64_t>& out) {
  while (dims.size() < out.size()) dims.insert(dims.begin(), 1);
  size_t lo = 0, hi = out.size();
  kernels::Broadcast b;
  while (hi > 0 && dims[hi - 1] == 1) b.run *= out[--hi];
  while (lo < hi && dims[lo] == 1) ++lo;
  for (size_t i = lo; i < hi; ++i) {
    if (dims[i] != out[i]) return std::nullopt;
    b.period *= dims[i];
  }
  return b;
}

}  // namespace

bool vendor_runs_natively(const Node& n) {
  if (n.kind() != NodeKind::Opaque || n.inputs().empty() || !n.inputs()[0].present()) return false;
  const DType t = n.inputs()[0].type().dtype;
  if (is_vendor(n, "SkipLayerNormalization") || is_vendor(n, "SkipSimplifiedLayerNormalization"))
    return t == DType::Float32 && n.inputs().size() >= 3 && n.num_outputs() >= 1 &&
           n.output_types()[0].dtype == DType::Float32;
  if (is_vendor(n, "Attention")) return ms_attention_applies(n);
  if (is_onnx_domain_contrib(n, "SimplifiedLayerNormalization"))
    return t == DType::Float32 && n.inputs().size() >= 2 && n.num_outputs() >= 1 &&
           n.output_types()[0].dtype == DType::Float32;
  if (is_vendor(n, "DynamicQuantizeLSTM"))
    return t == DType::Float32 && n.inputs().size() >= 12 && n.inputs()[1].constant() != nullptr &&
           n.inputs()[2].constant() != nullptr;
  if (n.num_outputs() != 1) return false;
  if (is_gelu(n)) return t == DType::Float32 && n.output_types()[0].dtype == DType::Float32;
  if (is_vendor(n, "QLinearConcat")) return quantized(n.output_types()[0].dtype);
  if (!quantized(t) || n.output_types()[0].dtype != t) return false;
  if (is_vendor(n, "QLinearGlobalAveragePool") || is_vendor(n, "QLinearAveragePool")) return n.inputs().size() >= 4;
  if (is_vendor(n, "QLinearSigmoid") || is_vendor(n, "QLinearLeakyRelu")) return n.inputs().size() >= 4;
  if (is_vendor(n, "QGemm")) return n.inputs().size() >= 9 && n.inputs()[3].present() && n.inputs()[3].constant();
  return (is_vendor(n, "QLinearAdd") || is_vendor(n, "QLinearMul")) && n.inputs().size() >= 7 &&
         n.inputs()[3].present() && n.inputs()[3].type().dtype == t;
}

bool lower_vendor(Compiler& c, const Node& n) {
  if (!vendor_runs_natively(n)) return false;
  if (is_vendor(n, "QLinearGlobalAveragePool")) return lower_qlinear_global_pool(c, n);
  if (is_vendor(n, "QGemm")) return lower_qgemm(c, n);
  if (is_vendor(n, "QLinearConcat")) return lower_qlinear_concat(c, n);
  if (is_vendor(n, "QLinearAveragePool")) return lower_qlinear_average_pool(c, n);
  if (is_vendor(n, "QLinearSigmoid") || is_vendor(n, "QLinearLeakyRelu")) return lower_qlinear_lookup(c, n);
  if (is_vendor(n, "SkipLayerNormalization") || is_vendor(n, "SkipSimplifiedLayerNormalization"))
    return lower_skip_layernorm(c, n);
  if (is_onnx_domain_contrib(n, "SimplifiedLayerNormalization")) return lower_simplified_layernorm(c, n);
  if (is_vendor(n, "Attention")) return lower_ms_attention(c, n);
  if (is_vendor(n, "DynamicQuantizeLSTM")) return lower_dynamic_quantize_lstm(c, n);
  if (is_gelu(n)) return lower_gelu(c, n);
  const auto pa = constant_quant_params(c, n, 1, 2), pb = constant_quant_params(c, n, 4, 5),
             pc = constant_quant_params(c, n, 6, 7);
  if (!pa || !pb || !pc || pa->scale.size() != 1 || pb->scale.size() != 1 || pc->scale.size() != 1) return false;
  if (!(pc->scale[0] > 0)) return false;
  int a = c.id(n.inputs()[0]), b = c.id(n.inputs()[3]);
  const std::vector<int64_t> ad = c.val(a).dims, bd = c.val(b).dims;
  std::vector<int64_t> od;
  try {
    od = broadcast_dims(ad, bd);
  } catch (const Error&) {
    return false;  // ONNX Runtime says what is wrong
  }
  // A channels-last operand of the output's dims (the residual adds and gates of a
  // quantized CNN read integer convolutions' outputs) is read where it lies, the
  // other operand with it where it is the same in memory (channels-last too, or one
  // whose spatial extents are 1: a per-channel gate); row-major otherwise.
  auto full = [&](std::vector<int64_t> d) {  // the operand's dims at the output's rank
    d.insert(d.begin(), od.size() - std::min(d.size(), od.size()), 1);
    return d;
  };
  auto spatial_ones = [&](const std::vector<int64_t>& d) {
    const std::vector<int64_t> f = full(d);
    return f.size() >= 3 && std::all_of(f.begin() + 2, f.end(), [](int64_t e) { return e == 1; });
  };
  bool a_last = false, b_last = false;
  const int a_dense = dense_quantized(c, a, &a_last), b_dense = dense_quantized(c, b, &b_last);
  const bool last = (a_last && ad == od && (b_last || spatial_ones(bd))) || (b_last && bd == od && spatial_ones(ad));
  a = last && a_last ? a_dense : c.as_plain(a_dense);
  b = last && b_last ? b_dense : c.as_plain(b_dense);
  // In channels-last order the channel axis moves last.
  auto physical = [&](const std::vector<int64_t>& dims) {
    std::vector<int64_t> d = full(dims);
    if (!last) return d;
    const int64_t ch = d[1];
    d.erase(d.begin() + 1);
    d.push_back(ch);
    return d;
  };
  const std::vector<int64_t> pd = physical(od);
  const auto ab = broadcast_of(physical(ad), pd), bb = broadcast_of(physical(bd), pd);
  const int64_t count = num_elements(od);
  if (!ab || !bb || count == 0) return false;
  const kernels::Broadcast a_b = *ab, b_b = *bb;
  kernels::QLinearBinary q;
  q.mul = n.op_type() == "QLinearMul";
  q.ra = q.mul ? pa->scale[0] * pb->scale[0] / pc->scale[0] : pa->scale[0] / pc->scale[0];
  q.rb = pb->scale[0] / pc->scale[0];
  q.za = pa->zp[0];
  q.zb = pb->zp[0];
  q.zc = pc->zp[0];
  const DType t = c.val(a).dtype;
  const kernels::QType qt = qtype(t);
  const int y = last ? c.new_value(t, od, md_t(to_dims(od), dnnl_int(t), channels_last(od.size())), n.name())
                     : plain_output(c, t, od, n.name());
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "pointwise",
                            std::string(q.mul ? "qlinear-mul " : "qlinear-add ") + std::string(dtype_name(t)) +
                                to_string(od) + (last ? " channels-last" : ""),
                            static_cast<double>(count)),
                  {a, b}, {y}, [=](const std::vector<char*>& p) {
                    kernels::qlinear_binary(p[0], p[1], p[2], qt, count, a_b, b_b, q, team);
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
