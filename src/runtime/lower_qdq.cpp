// QDQ groups as one integer primitive. A statically quantized model (ONNX Runtime's
// QDQ format) states each layer as float arithmetic between DequantizeLinear and
// QuantizeLinear:
//
//   q_y = Q(act(Conv(DQ(q_x), DQ(q_w), DQ(q_b))))       (act: Relu or none)
//
// Run as written, the float Conv's rounding decides some quantization steps. ONNX
// Runtime (all optimizations on) runs the group as QLinearConv: integer products
// summed exactly in int32, then acc * (s_x s_w / s_y) rounded once. This lowering
// does the same on oneDNN, so isomer's integer path and ONNX Runtime's agree.
// Conditions: the activation's scale and zero point are constant scalars, the
// weights are a constant int8 tensor with zero point 0 (per tensor, or per output
// channel), the bias is a constant int32 (integer_bias), and Q's scale and zero
// point are constant scalars.
#include "runtime/lower_quant.h"
#include <cmath>

#include "runtime/lowering.h"

namespace isomer::runtime {

namespace {

// The node of `op` that computes v, through Identity nodes (exporters put them
// between shared weights and their readers).
const Node* producer(Value v, const char* op) {
  while (v.present() && v.node->kind() == NodeKind::Op && v.node->op_type() == "Identity") v = v.node->inputs()[0];
  return v.present() && v.node->kind() == NodeKind::Op && v.node->op_type() == op ? v.node.get() : nullptr;
}

// A DequantizeLinear of a constant int8/int32 tensor: its data and parameters.
struct ConstDQ {
  const Tensor* data = nullptr;
  QuantParams p;
  int64_t axis = 1;
};
std::optional<ConstDQ> constant_dq(Compiler& c, const Value& v, DType want) {
  const Node* dq = producer(v, "DequantizeLinear");
  if (!dq) return std::nullopt;
  ConstDQ r;
  r.data = c.peek_known(dq->inputs()[0]);
  if (!r.data || r.data->dtype() != want) return std::nullopt;
  auto p = constant_quant_params(c, *dq, 1, 2);
  if (!p) return std::nullopt;
  for (int32_t z : p->zp)
    if (z != 0) return std::nullopt;
  r.p = *p;
  r.axis = dq->attrs().get_int("axis", 1);
  if (r.axis < 0) r.axis += r.data->rank();
  return r;
}

// The group's ends: the quantized input and its parameters, the Relu and the
// QuantizeLinear after `out`.
struct Ends {
  int x = -1;
  float x_scale = 1;
  int32_t x_zp = 0;
  const Node* relu = nullptr;
  const Node* q = nullptr;
  float y_scale = 1;
  int32_t y_zp = 0;
  DType y_type = DType::UInt8;
  std::vector<int64_t> extra_pads;
};
// `pad`, where set, is a requantized zero Pad before the input's DequantizeLinear
// (lower_qdq_pad_into_convs): the group reads its integer source.
std::optional<Ends> group_ends(Compiler& c, const Value& in, const Value& out, const FoldedPad* pad = nullptr) {
  Ends e;
  const Node* dqx = producer(in, "DequantizeLinear");
  if (!dqx) return std::nullopt;
  auto xp = constant_quant_params(c, *dqx, 1, 2);
  const DType xt = dqx->inputs()[0].type().dtype;
  if (!xp || xp->scale.size() != 1 || (xt != DType::UInt8 && xt != DType::Int8)) return std::nullopt;
  Value cur = out;
  const Node* next = c.sole_consumer(cur);
  if (next && next->op_type() == "Relu" && c.takeable(*next)) {
    e.relu = next;
    cur = next->output(0);
    next = c.sole_consumer(cur);
  }
  if (!next || next->op_type() != "QuantizeLinear" || !c.takeable(*next) || next->inputs()[0] != cur) return std::nullopt;
  auto yp = constant_quant_params(c, *next, 1, 2);
  e.y_type = next->output_types()[0].dtype;
  if (!yp || yp->scale.size() != 1 || (e.y_type != DType::UInt8 && e.y_type != DType::Int8)) return std::nullopt;
  e.q = next;
  e.x_scale = xp->scale[0];
  e.x_zp = xp->zp[0];
  e.y_scale = yp->scale[0];
  e.y_zp = yp->zp[0];
  e.x = c.id(pad ? pad->src : dqx->inputs()[0]);
  if (pad) e.extra_pads = pad->extra;
  return e;
}

// The bias as int32 at the accumulator's scale s_x s_w[m]: the bias DQ's own
// integers where its scale is exactly that (what the quantizer writes for a bias of
// its own), else its value b q_b re-expressed at that scale, rounded (exporters
// share one bias tensor between convolutions of different input scales): off by
// at most half an accumulator unit, far below one step of the output.
std::optional<std::vector<int32_t>> integer_bias(Compiler& c, const Value& b, float x_scale,
                                                 const std::vector<float>& w_scale, int64_t channels) {
  auto dq = constant_dq(c, b, DType::Int32);
  if (!dq || dq->data->numel() != channels) return std::nullopt;
  if (dq->p.scale.size() != 1 && static_cast<int64_t>(dq->p.scale.size()) != channels) return std::nullopt;
  const std::vector<int64_t> q = dq->data->to_i64();
  std::vector<int32_t> bias;
  for (int64_t m = 0; m < channels; ++m) {
    const float acc_scale = x_scale * w_scale[w_scale.size() == 1 ? 0 : static_cast<size_t>(m)];
    const float own = dq->p.scale[dq->p.scale.size() == 1 ? 0 : static_cast<size_t>(m)];
    const auto i = static_cast<size_t>(m);
    if (own == acc_scale) {
      bias.push_back(static_cast<int32_t>(q[i]));
      continue;
    }
    const double v = std::nearbyint(static_cast<double>(static_cast<float>(q[i]) * own) / acc_scale);
    if (!(std::fabs(v) < 2147483647.0) || acc_scale <= 0) return std::nullopt;
    bias.push_back(static_cast<int32_t>(v));
  }
  return bias;
}

std::vector<float> requant_scales(const Ends& e, const std::vector<float>& w_scale) {
  std::vector<float> s;
  for (float ws : w_scale) s.push_back(e.x_scale * ws / e.y_scale);
  return s;
}

void finish(Compiler& c, const Ends& e, int y) {
  c.bind(e.q->output(0), y);
  if (e.relu) c.mark_done(*e.relu);
  c.mark_done(*e.q);
}

bool qdq_conv(Compiler& c, const Node& n, const FoldedPad* pad = nullptr) {
  auto w = constant_dq(c, n.inputs()[1], DType::Int8);
  if (!w || (w->p.scale.size() > 1 && w->axis != 0)) return false;
  const int64_t oc = w->data->dims()[0];
  if (w->p.scale.size() != 1 && static_cast<int64_t>(w->p.scale.size()) != oc) return false;
  auto e = group_ends(c, n.inputs()[0], n.output(0), pad);
  if (!e) return false;
  IntConv s;
  s.extra_pads = e->extra_pads;
  if (n.inputs().size() > 2 && n.inputs()[2].present()) {
    auto b = integer_bias(c, n.inputs()[2], e->x_scale, w->p.scale, oc);
    if (!b) return false;
    s.bias = *b;
  }
  s.x = e->x;
  s.x_zp = e->x_zp;
  s.w = *w->data;
  s.scales = requant_scales(*e, w->p.scale);
  s.y_type = e->y_type;
  s.y_zp = e->y_zp;
  s.relu = e->relu != nullptr;
  const int y = add_integer_conv(c, n, s);
  if (y < 0) return false;
  finish(c, *e, y);
  return true;
}

// Gemm (alpha = beta = 1, A not transposed) or MatMul with constant 2-D weights.
bool qdq_matmul(Compiler& c, const Node& n) {
  const bool gemm = n.op_type() == "Gemm";
  if (gemm && (n.attrs().get_float("alpha", 1.0) != 1.0 || n.attrs().get_float("beta", 1.0) != 1.0 ||
               n.attrs().get_int("transA", 0) != 0))
    return false;
  const bool trans_b = gemm && n.attrs().get_int("transB", 0) != 0;
  auto w = constant_dq(c, n.inputs()[1], DType::Int8);
  if (!w || w->data->rank() != 2) return false;
  const int64_t K = w->data->dims()[trans_b ? 1 : 0], N = w->data->dims()[trans_b ? 0 : 1];
  // Per-output-channel weights are per column of [K, N]: axis 1, or 0 when transposed.
  if (w->p.scale.size() > 1 && (static_cast<int64_t>(w->p.scale.size()) != N || w->axis != (trans_b ? 0 : 1)))
    return false;
  auto e = group_ends(c, n.inputs()[0], n.output(0));
  if (!e) return false;
  const std::vector<int64_t> xd = c.val(e->x).dims;
  if (xd.size() < 2 || xd.back() != K || (gemm && xd.size() != 2)) return false;
  IntMatMul s;
  if (n.inputs().size() > 2 && n.inputs()[2].present()) {
    if (!gemm) return false;
    auto b = integer_bias(c, n.inputs()[2], e->x_scale, w->p.scale, N);
    if (!b) return false;
    s.bias = *b;
  }
  const Tensor wt = trans_b ? transposed_bytes(*w->data) : *w->data;
  int a = c.as_plain(e->x);
  s.a = c.alias(a, {num_elements(xd) / K, K}, md_t(), c.val(a).name);
  c.val(s.a).step_local = true;
  s.a_zp = e->x_zp;
  s.b = wt;
  s.scales = requant_scales(*e, w->p.scale);
  s.y_type = e->y_type;
  s.y_zp = e->y_zp;
  s.relu = e->relu != nullptr;
  const int y = add_integer_matmul(c, n, s);
  if (y < 0) return false;
  std::vector<int64_t> od = xd;
  od.back() = N;
  finish(c, *e, c.alias(y, od, md_t(), c.val(y).name));
  return true;
}

}  // namespace

bool lower_qdq_pad_into_convs(Compiler& c, const Node& pad) {
  if (!c.opts().fuse || pad.inputs()[0].type().dtype != DType::Float32) return false;
  const Node* dq = producer(pad.inputs()[0], "DequantizeLinear");
  const Node* q = c.sole_consumer(pad.output(0));
  if (!dq || !q || q->op_type() != "QuantizeLinear" || q->inputs()[0] != pad.output(0) || !c.takeable(*q)) return false;
  const Node* dq2 = c.sole_consumer(q->output(0));
  if (!dq2 || dq2->op_type() != "DequantizeLinear" || !c.takeable(*dq2)) return false;
  // Q(Pad(DQ(x), 0)) is x padded with the zero point exactly where all three share
  // one scale and zero point and Q writes x's type: Q(DQ(x)) = x and Q(0) = zp.
  const DType t = dq->inputs()[0].type().dtype;
  if ((t != DType::UInt8 && t != DType::Int8) || q->output_types()[0].dtype != t) return false;
  const auto p = scalar_quant_params(c, *dq);
  if (!p || scalar_quant_params(c, *q) != p || scalar_quant_params(c, *dq2) != p) return false;
  std::optional<FoldedPad> f = zero_spatial_pad(c, pad);
  const Value out = dq2->output(0);
  if (!f || c.is_output(out) || c.consumers(out).empty()) return false;
  for (const auto& [m, index] : c.consumers(out))
    if (index != 0 || m->op_type() != "Conv" || !c.takeable(*m)) return false;
  f->src = dq->inputs()[0];
  bool all = true;
  for (const auto& [m, index] : c.consumers(out)) {
    if (c.lowered(*m)) continue;  // a node reading it twice
    bool ok = false;
    c.set_pending(*m, true);
    try {
      ok = all_float32(*m) && qdq_conv(c, *m, &*f);
    } catch (const dnnl::error&) {
      ok = false;
    }
    c.set_pending(*m, false);
    if (ok) c.mark_done(*m);
    all = all && ok;
  }
  if (!all) return false;
  c.mark_done(*q);
  c.mark_done(*dq2);
  return true;
}

bool lower_qdq_group(Compiler& c, const Node& n) {
  if (!c.opts().fuse || !all_float32(n)) return false;
  try {
    if (n.op_type() == "Conv") return qdq_conv(c, n);
    if (n.op_type() == "Gemm" || n.op_type() == "MatMul") return qdq_matmul(c, n);
  } catch (const dnnl::error&) {
    return false;  // no oneDNN primitive for this instance: the float group runs
  }
  return false;
}

}  // namespace isomer::runtime
