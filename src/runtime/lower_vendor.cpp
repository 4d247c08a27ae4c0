// Vendor operators the runtime runs itself: ONNX Runtime's com.microsoft QLinearAdd,
// QLinearMul, QLinearGlobalAveragePool and QGemm, which its quantizer writes in the
// QOperator format (the residual adds of a quantized ResNet or MobileNet, the gates
// of squeeze-excitation, the pool and the classifier), and SkipLayerNormalization,
// Gelu, FastGelu, BiasGelu and QuickGelu, which its transformer optimizer writes for
// each residual add and LayerNorm and each feed-forward activation. Delegated, each was a
// round trip to ONNX Runtime's helper process: in a quantized MobileNetV2 the 10
// adds took 70% of the run. The arithmetic is ONNX Runtime's (kernels/quant.h), in
// float32. Forms these kernels do not take (run-time scales, per-axis parameters,
// other broadcasts) are still delegated.
#include <onnx/onnx_pb.h>

#include "kernels/pointwise.h"
#include "kernels/quant.h"
#include "kernels/rows.h"
#include "runtime/compiler.h"
#include "runtime/lower_quant.h"
#include "runtime/lowering.h"
#include "runtime/native.h"
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

// SkipLayerNormalization: LayerNorm(input + skip + bias) * gamma + beta over the
// last axis, and the sum itself as output 3 where asked. Skip of the input's
// shape; the mean and inverse-deviation outputs are left to ONNX Runtime.
bool lower_skip_layernorm(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  for (uint32_t k = 1; k < 3 && k < n.num_outputs(); ++k)
    if (!c.consumers(n.output(k)).empty() || c.is_output(n.output(k))) return false;
  const int x = c.as_plain(c.id(in[0])), skip = c.as_plain(c.id(in[1]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty() || c.val(skip).dims != xd || c.val(x).dtype != DType::Float32 || c.val(skip).dtype != DType::Float32)
    return false;
  const int64_t cols = xd.back(), rows = num_elements(xd) / std::max<int64_t>(cols, 1);
  auto gamma = row_param(c, n, 2, cols), beta = row_param(c, n, 3, cols), bias = row_param(c, n, 4, cols);
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
                  step_info(n, "layernorm", "skip-layernorm " + std::to_string(rows) + "x" + std::to_string(cols),
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
                                            be->empty() ? nullptr : be->data(), eps, /*rms=*/false, team);
                  });
  c.bind(n.output(0), y);
  if (want_sum) c.bind(n.output(3), sum);
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
  if (is_vendor(n, "SkipLayerNormalization"))
    return t == DType::Float32 && n.inputs().size() >= 3 && n.num_outputs() >= 1 &&
           n.output_types()[0].dtype == DType::Float32;
  if (n.num_outputs() != 1) return false;
  if (is_gelu(n)) return t == DType::Float32 && n.output_types()[0].dtype == DType::Float32;
  if (!quantized(t) || n.output_types()[0].dtype != t) return false;
  if (is_vendor(n, "QLinearGlobalAveragePool")) return n.inputs().size() >= 4;
  if (is_vendor(n, "QGemm")) return n.inputs().size() >= 9 && n.inputs()[3].present() && n.inputs()[3].constant();
  return (is_vendor(n, "QLinearAdd") || is_vendor(n, "QLinearMul")) && n.inputs().size() >= 7 &&
         n.inputs()[3].present() && n.inputs()[3].type().dtype == t;
}

bool lower_vendor(Compiler& c, const Node& n) {
  if (!vendor_runs_natively(n)) return false;
  if (is_vendor(n, "QLinearGlobalAveragePool")) return lower_qlinear_global_pool(c, n);
  if (is_vendor(n, "QGemm")) return lower_qgemm(c, n);
  if (is_vendor(n, "SkipLayerNormalization")) return lower_skip_layernorm(c, n);
  if (is_gelu(n)) return lower_gelu(c, n);
  const auto pa = constant_quant_params(c, n, 1, 2), pb = constant_quant_params(c, n, 4, 5),
             pc = constant_quant_params(c, n, 6, 7);
  if (!pa || !pb || !pc || pa->scale.size() != 1 || pb->scale.size() != 1 || pc->scale.size() != 1) return false;
  if (!(pc->scale[0] > 0)) return false;
  const int a = c.as_plain(c.id(n.inputs()[0])), b = c.as_plain(c.id(n.inputs()[3]));
  const std::vector<int64_t> ad = c.val(a).dims, bd = c.val(b).dims;
  std::vector<int64_t> od;
  try {
    od = broadcast_dims(ad, bd);
  } catch (const Error&) {
    return false;  // ONNX Runtime says what is wrong
  }
  const auto ab = broadcast_of(ad, od), bb = broadcast_of(bd, od);
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
  const int y = plain_output(c, t, od, n.name());
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "pointwise",
                            std::string(q.mul ? "qlinear-mul " : "qlinear-add ") + std::string(dtype_name(t)) +
                                to_string(od),
                            static_cast<double>(count)),
                  {a, b}, {y}, [=](const std::vector<char*>& p) {
                    kernels::qlinear_binary(p[0], p[1], p[2], qt, count, a_b, b_b, q, team);
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
