// Quantization on isomer's runtime. QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear run isomer's kernels (kernels/quant.h, the same arithmetic as
// the operators' reference semantics); the integer contractions run oneDNN's int8
// primitives, which accumulate in int32 exactly and take the zero points and the
// requantization scales as attributes (lower_quant_contract.cpp).
#include "runtime/lower_quant.h"

#include <algorithm>

#include <omp.h>

#include "kernels/quant.h"
#include "runtime/native.h"

namespace isomer::runtime {

std::optional<kernels::QType> quant_type(DType t) {
  switch (t) {
    case DType::UInt8: return kernels::QType::U8;
    case DType::Int8: return kernels::QType::S8;
    case DType::UInt16: return kernels::QType::U16;
    case DType::Int16: return kernels::QType::S16;
    case DType::Int32: return kernels::QType::S32;
    default: return std::nullopt;
  }
}

int quant_team(Compiler& c) { return c.opts().threads > 0 ? c.opts().threads : omp_get_max_threads(); }

std::optional<QuantParams> constant_quant_params(Compiler& c, const Node& n, size_t scale, size_t zp) {
  const Tensor* s = c.known(n.inputs()[scale]);
  if (!s) return std::nullopt;
  const bool has_zp = zp < n.inputs().size() && n.inputs()[zp].present();
  const Tensor* z = has_zp ? c.known(n.inputs()[zp]) : nullptr;
  if (has_zp && !z) return std::nullopt;
  QuantParams p;
  for (double v : s->to_f64()) p.scale.push_back(static_cast<float>(v));
  if (z)
    for (int64_t v : z->to_i64()) p.zp.push_back(static_cast<int32_t>(v));
  else
    p.zp.assign(p.scale.size(), 0);
  if (p.zp.size() != p.scale.size()) return std::nullopt;
  return p;
}

std::optional<std::pair<float, int32_t>> scalar_quant_params(Compiler& c, const Node& n) {
  auto p = constant_quant_params(c, n, 1, 2);
  if (!p || p->scale.size() != 1) return std::nullopt;
  return std::make_pair(p->scale[0], p->zp[0]);
}

int plain_output(Compiler& c, DType t, const std::vector<int64_t>& dims, const std::string& name) {
  auto type = dnnl_type(t);
  return c.new_value(t, dims, type ? plain_md(dims, *type) : md_t(), name);
}

// A per-tensor (de)quantization keeps x's layout where x's elements fill its memory
// with no gaps (the kernel runs over them in memory order): not a strided view,
// such as a Slice of the last axis (the query, key and value parts of a fused
// projection), whose elements lie between the parts it leaves out. A view with no
// oneDNN layout (of integers: a Transpose that lower_qdq_views moved) fills it
// where its strides are dense ones permuted.
bool fills_its_memory(const RtValue& x, const std::optional<std::vector<int64_t>>& strides) {
  if (x.dims.empty()) return false;
  if (!x.md.data.ndims) {
    if (!strides || strides->size() != x.dims.size()) return false;
    std::vector<std::pair<int64_t, int64_t>> runs;  // (stride, extent)
    for (size_t i = 0; i < x.dims.size(); ++i)
      if (x.dims[i] != 1) runs.emplace_back((*strides)[i], x.dims[i]);
    std::sort(runs.begin(), runs.end());
    int64_t expect = 1;
    for (const auto& [stride, extent] : runs) {
      if (stride != expect) return false;
      expect *= extent;
    }
    return true;
  }
  const size_t dense = static_cast<size_t>(num_elements(x.dims)) * dtype_size(x.dtype);
  return x.bytes == dense && x.md.get_size() == dense;
}

namespace {

// x's dims around the quantization axis (ops/quant.cpp states the same rule).
std::optional<kernels::QShape> quant_shape(const std::vector<int64_t>& dims, size_t channels, int64_t axis) {
  kernels::QShape s;
  if (channels == 1) {
    s.inner = num_elements(dims);
    return s;
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < -rank || axis >= rank) return std::nullopt;
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  if (dims[a] != static_cast<int64_t>(channels)) return std::nullopt;
  s.outer = num_elements(dims, 0, a);
  s.channels = dims[a];
  s.inner = num_elements(dims, a + 1, dims.size());
  return s;
}

std::string params_text(const QuantParams& p) {
  return p.scale.size() == 1 ? " per-tensor" : " per-axis" + std::to_string(p.scale.size());
}

// True if every reader of v is a DequantizeLinear read only as the input of
// convolutions: QDQ groups (lower_qdq.cpp) read v channels-last, and a float
// convolution its DequantizeLinear's result in the layout v has.
bool read_by_qdq_convs_only(Compiler& c, const Value& v) {
  if (!c.opts().fuse || c.is_output(v) || c.consumers(v).empty()) return false;
  for (const auto& [dq, index] : c.consumers(v)) {
    if (index != 0 || dq->op_type() != "DequantizeLinear" || c.is_output(dq->output(0)) ||
        c.consumers(dq->output(0)).empty())
      return false;
    for (const auto& [conv, at] : c.consumers(dq->output(0)))
      if (at != 0 || conv->op_type() != "Conv") return false;
  }
  return true;
}

bool lower_quantize(Compiler& c, const Node& n) {
  const Value& xv = n.inputs()[0];
  const DType out_t = n.output_types()[0].dtype;
  auto qt = quant_type(out_t);
  if (c.dtype(xv) != DType::Float32 || !qt || *qt == kernels::QType::S32) return false;
  auto p = constant_quant_params(c, n, 1, 2);
  if (!p) return false;
  int x = c.id(xv);
  const RtValue& xr = c.val(x);
  auto strides = c.strides_of(x);
  const bool bytes = out_t == DType::UInt8 || out_t == DType::Int8;
  const bool keep_layout = p->scale.size() == 1 && strides && fills_its_memory(xr, strides) && bytes;
  if (!keep_layout) x = c.as_plain(x);
  const std::vector<int64_t> dims = c.val(x).dims;
  auto s = quant_shape(dims, p->scale.size(), n.attrs().get_int("axis", 1));
  if (!s) return false;
  const dt q_dt = out_t == DType::UInt8 ? dt::u8 : dt::s8;
  // A row-major value that only QDQ convolutions read is written channels-last, as
  // they read it (oneDNN's s8 reorder of a [1, 64, 64, 64] tensor took 0.117 ms, 6%
  // of a quantized VAE decoder, after a quantization of 0.021).
  std::vector<int64_t> row_major(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) row_major[i - 1] = row_major[i] * dims[i];
  const int64_t channels = dims.size() > 1 ? dims[1] : 1, inner = num_elements(dims, 2, dims.size());
  const bool to_last = bytes && p->scale.size() == 1 && dims.size() >= 3 && dims.size() <= 5 && channels % 16 == 0 &&
                       inner % 16 == 0 && (!keep_layout || *strides == row_major) &&
                       read_by_qdq_convs_only(c, n.output(0));
  const int y = to_last       ? c.new_value(out_t, dims, md_t(to_dims(dims), q_dt, channels_last(dims.size())), n.name())
                : keep_layout ? c.new_value(out_t, dims, md_t(to_dims(dims), q_dt, to_dims(*strides)), n.name())
                              : plain_output(c, out_t, dims, n.name());
  const int team = quant_team(c);
  const int64_t outer = dims[0];
  const int32_t zp = p->zp.empty() ? 0 : p->zp[0];
  add_native_step(c,
                  step_info(n, "quantize",
                            "quantize f32->" + std::string(dtype_name(out_t)) + to_string(dims) + params_text(*p) +
                                (to_last ? " channels-last" : ""),
                            static_cast<double>(num_elements(dims))),
                  {x}, {y}, [p = *p, s = *s, t = *qt, team, to_last, outer, channels, inner, zp](const std::vector<char*>& ptr) {
                    const float* xp = reinterpret_cast<const float*>(ptr[0]);
                    if (to_last)  // (channels and inner multiples of 16, as the kernel takes them)
                      kernels::quantize_to_channels_last(xp, ptr[1], t, outer, channels, inner, p.scale[0], zp, team);
                    else
                      kernels::quantize(xp, ptr[1], t, s, p.scale.data(), p.zp.data(), team);
                  });
  c.bind(n.output(0), y);
  return true;
}

// A DequantizeLinear read only by contractions that each run as one integer
// primitive with their QDQ group, or by requantized zero Pads that such
// convolutions take (lower_qdq.cpp): those are lowered now, and the
// float value, which nothing then reads, is never computed. False if some
// consumer still needs it (the groups that could be taken are taken).
bool only_feeds_qdq_groups(Compiler& c, const Node& n) {
  const Value out = n.output(0);
  if (!c.opts().fuse || c.is_output(out) || c.consumers(out).empty()) return false;
  for (const auto& [m, index] : c.consumers(out)) {
    const std::string& op = m->op_type();
    if (index != 0 || m->kind() != NodeKind::Op || !c.takeable(*m) ||
        (op != "Conv" && op != "Gemm" && op != "MatMul" && op != "Pad"))
      return false;
  }
  bool all = true;
  for (const auto& [m, index] : c.consumers(out)) {
    if (c.lowered(*m)) continue;  // a node reading it twice
    if (m->op_type() == "Pad" ? lower_qdq_pad_into_convs(c, *m) : lower_qdq_group(c, *m))
      c.mark_done(*m);
    else
      all = false;
  }
  return all;
}

bool lower_dequantize(Compiler& c, const Node& n) {
  const Value& xv = n.inputs()[0];
  auto qt = quant_type(c.dtype(xv));
  if (!qt || n.output_types()[0].dtype != DType::Float32) return false;
  auto p = constant_quant_params(c, n, 1, 2);
  if (!p) return false;
  if (lower_qdq_views(c, n) || lower_qdq_affine(c, n) || only_feeds_qdq_groups(c, n)) return true;
  int x = c.id(xv);
  // Per tensor, the step maps element to element in any dense layout (the NHWC of
  // an integer convolution's result): the float value keeps that layout.
  const RtValue& xr = c.val(x);
  auto strides = c.strides_of(x);
  const bool keep_layout = p->scale.size() == 1 && strides && fills_its_memory(xr, strides);
  if (!keep_layout) x = c.as_plain(x);
  const std::vector<int64_t> dims = c.val(x).dims;
  auto s = quant_shape(dims, p->scale.size(), n.attrs().get_int("axis", 1));
  if (!s) return false;
  const int y = keep_layout ? c.new_value(DType::Float32, dims, md_t(to_dims(dims), dt::f32, to_dims(*strides)), n.name())
                            : plain_output(c, DType::Float32, dims, n.name());
  const int team = quant_team(c);
  add_native_step(c,
                  step_info(n, "dequantize",
                            "dequantize " + std::string(dtype_name(c.dtype(xv))) + "->f32" + to_string(dims) +
                                params_text(*p),
                            static_cast<double>(num_elements(dims))),
                  {x}, {y}, [p = *p, s = *s, t = *qt, team](const std::vector<char*>& ptr) {
                    kernels::dequantize(ptr[0], t, reinterpret_cast<float*>(ptr[1]), s, p.scale.data(), p.zp.data(),
                                        team);
                  });
  c.bind(n.output(0), y);
  return true;
}

// The Muls of DynamicQuantizeLinear's run-time scale by a constant float32 (what
// quantize_dynamic writes before each MatMulInteger: the activation scale times the
// weights' scale, one or one per column), each a value the quantization step
// writes beside the scale, as ONNX Runtime's Mul rounds it.
struct ScaleProduct {
  const Node* mul;
  std::vector<float> factor;
  std::vector<int64_t> dims;
};
std::vector<ScaleProduct> scale_products(Compiler& c, const Node& n) {
  std::vector<ScaleProduct> out;
  if (!c.opts().fuse || n.num_outputs() < 2 || !n.output(1).present()) return out;
  for (const auto& [m, index] : c.consumers(n.output(1))) {
    if (m->op_type() != "Mul" || m->kind() != NodeKind::Op || c.lowered(*m) || c.is_pending(*m) ||
        c.is_output(m->output(0)) || m->output_types()[0].dtype != DType::Float32)
      continue;
    const Value& other = m->inputs()[1 - index];
    const Tensor* t = other == n.output(1) ? nullptr : c.peek_known(other);
    if (!t || t->dtype() != DType::Float32) continue;
    ScaleProduct p{m, {}, t->dims()};  // a scalar times t: t's dims
    for (double v : t->to_f64()) p.factor.push_back(static_cast<float>(v));
    out.push_back(std::move(p));
  }
  return out;
}

// A zero point that an integer contraction reads as oneDNN's s32 (lower_quant_contract.cpp).
bool read_as_s32(Compiler& c, const Value& zp) {
  for (const auto& [m, index] : c.consumers(zp))
    if (index == 2 && (m->op_type() == "MatMulInteger" || m->op_type() == "ConvInteger")) return true;
  return false;
}

bool lower_dynamic_quantize(Compiler& c, const Node& n) {
  const Value& xv = n.inputs()[0];
  if (c.dtype(xv) != DType::Float32) return false;
  // One scale and zero point for the whole tensor: the step maps element to element
  // in any dense layout, and y keeps x's (the channels-last result of an integer
  // convolution, which the next one reads as it is: no reorder on either side).
  int x = c.id(xv);
  const auto strides = c.strides_of(x);
  const bool keep_layout = strides && fills_its_memory(c.val(x), strides);
  if (!keep_layout) x = c.as_plain(x);
  const std::vector<int64_t> dims = c.val(x).dims;
  const int y = keep_layout ? c.new_value(DType::UInt8, dims, md_t(to_dims(dims), dt::u8, to_dims(*strides)), n.name())
                            : plain_output(c, DType::UInt8, dims, n.name());
  const int scale = plain_output(c, DType::Float32, {}, n.name() + ".scale");
  const int zp = plain_output(c, DType::UInt8, {}, n.name() + ".zero_point");
  std::vector<int> outs = {y, scale, zp};
  // The step also writes the zero point as s32 and the scale's products, so that
  // each contraction reading them is one step.
  const bool widen = n.num_outputs() > 2 && n.output(2).present() && read_as_s32(c, n.output(2));
  if (widen) {
    outs.push_back(c.new_value(DType::Int32, {1}, plain_md({1}, dt::s32), n.name() + ".zero_point.s32"));
    c.set_widened(zp, outs.back());
  }
  const std::vector<ScaleProduct> products = scale_products(c, n);
  std::vector<std::vector<float>> factors;
  for (const ScaleProduct& p : products) {
    outs.push_back(plain_output(c, DType::Float32, p.dims, p.mul->name()));
    factors.push_back(p.factor);
  }
  const int64_t count = num_elements(dims);
  const int team = quant_team(c);
  std::string text = "dynamic-quantize f32->u8" + to_string(dims) + (widen ? " zero-point-s32" : "");
  if (!products.empty()) text += " scale-products " + std::to_string(products.size());
  add_native_step(c, step_info(n, "dynamic-quantize", text, 2.0 * count), {x}, outs,
                  [count, team, widen, factors](const std::vector<char*>& ptr) {
                    const float* xp = reinterpret_cast<const float*>(ptr[0]);
                    const kernels::DynamicParams d = kernels::dynamic_params(xp, count, team);
                    const int32_t z = d.zero_point;
                    kernels::QShape s;
                    s.inner = count;
                    kernels::quantize(xp, ptr[1], kernels::QType::U8, s, &d.scale, &z, team);
                    *reinterpret_cast<float*>(ptr[2]) = d.scale;
                    *reinterpret_cast<uint8_t*>(ptr[3]) = d.zero_point;
                    size_t at = 4;
                    if (widen) *reinterpret_cast<int32_t*>(ptr[at++]) = z;
                    for (const std::vector<float>& f : factors) {
                      float* o = reinterpret_cast<float*>(ptr[at++]);
                      for (size_t i = 0; i < f.size(); ++i) o[i] = d.scale * f[i];
                    }
                  });
  c.bind(n.output(0), y);
  if (n.num_outputs() > 1) c.bind(n.output(1), scale);
  if (n.num_outputs() > 2) c.bind(n.output(2), zp);
  for (size_t i = 0; i < products.size(); ++i) {
    c.bind(products[i].mul->output(0), outs[outs.size() - products.size() + i]);
    c.mark_done(*products[i].mul);
  }
  return true;
}

}  // namespace

bool lower_quant(Compiler& c, const Node& n) {
  const std::string& op = n.op_type();
  if (op == "QuantizeLinear") return lower_quantize(c, n);
  if (op == "DequantizeLinear") return lower_dequantize(c, n);
  if (op == "DynamicQuantizeLinear") return lower_dynamic_quantize(c, n);
  if (op == "MatMulInteger") return lower_matmul_integer(c, n);
  if (op == "QLinearMatMul") return lower_qlinear_matmul(c, n);
  if (op == "ConvInteger" || op == "QLinearConv") return lower_integer_conv(c, n);
  return false;
}

}  // namespace isomer::runtime
