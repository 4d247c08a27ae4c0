// com.microsoft Attention, which ONNX Runtime's transformer optimizer and onnxscript's
// ort_fusions write for each self-attention of a BERT-style encoder: Q, K and V are
// input [B, S, hidden] times the packed weights [hidden, 3 * hidden] plus the bias,
// split into num_heads heads; mask_index, where given, is a raw key mask [B, S] (0:
// masked) or the key lengths [B], a masked key's score getting mask_filter_value
// (-10000 by default) added, as ONNX Runtime does; attention_bias, where given
// instead, is added to the scores. The projection runs on the packed
// GEMM (weights packed once), the attention on the runtime's one attention step
// (attention_step.h). Delegated to ONNX Runtime otherwise: a past state, a mask
// and a bias both, Q, K and V of different sizes, rotary, unidirectional (ONNX Runtime's causal
// keys get the filter value too, not -inf), other mask forms, the present output.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <memory>

#include "kernels/gemm.h"
#include "runtime/attention_step.h"
#include "runtime/compiler.h"
#include "runtime/lowering.h"
#include "runtime/native.h"
#include "runtime/opaque_attr.h"

namespace isomer::runtime {

namespace {

bool present(const Node& n, size_t k) { return k < n.inputs().size() && n.inputs()[k].present(); }

}  // namespace

bool ms_attention_applies(const Node& n) {
  if (n.kind() != NodeKind::Opaque || n.opaque()->domain != "com.microsoft" || n.op_type() != "Attention") return false;
  if (!present(n, 0) || !present(n, 1) || n.inputs()[0].type().dtype != DType::Float32) return false;
  if (present(n, 4) || present(n, 6) || (present(n, 3) && present(n, 5))) return false;  // past; mask and bias
  if (present(n, 5) && n.inputs()[5].type().dtype != DType::Float32) return false;
  onnx::NodeProto p;
  if (!p.ParseFromString(n.opaque()->node_proto)) return false;
  const onnx::AttributeProto* heads = proto_attr(p, "num_heads");
  if (!heads || heads->i() <= 0) return false;
  for (const char* off : {"unidirectional", "do_rotary", "past_present_share_buffer"}) {
    const onnx::AttributeProto* a = proto_attr(p, off);
    if (a && a->i() != 0) return false;
  }
  // qkv_hidden_sizes: Q, K and V of one size only (what the fusions write).
  const onnx::AttributeProto* sizes = proto_attr(p, "qkv_hidden_sizes");
  return !sizes || sizes->ints_size() == 0 ||
         (sizes->ints_size() == 3 && sizes->ints(0) == sizes->ints(1) && sizes->ints(1) == sizes->ints(2));
}

bool lower_ms_attention(Compiler& c, const Node& n) {
  if (!ms_attention_applies(n)) return false;
  for (uint32_t k = 1; k < n.num_outputs(); ++k)
    if (!c.consumers(n.output(k)).empty() || c.is_output(n.output(k))) return false;
  onnx::NodeProto p;
  p.ParseFromString(n.opaque()->node_proto);
  const int64_t H = proto_attr(p, "num_heads")->i();
  const onnx::AttributeProto* scale_attr = proto_attr(p, "scale");
  const onnx::AttributeProto* filter_attr = proto_attr(p, "mask_filter_value");
  const float filter = filter_attr ? filter_attr->f() : -10000.0f;

  const int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  const Tensor* w = c.known(n.inputs()[1]);
  const Tensor* bias = present(n, 2) ? c.known(n.inputs()[2]) : nullptr;
  if (xd.size() != 3 || !w || w->dtype() != DType::Float32 || (present(n, 2) && !bias)) return false;
  const int64_t B = xd[0], S = xd[1], K = xd[2];
  if (w->dims().size() != 2 || w->dims()[0] != K) return false;
  const int64_t N = w->dims()[1] / 3;  // hidden size of Q, K and V each
  if (N * 3 != w->dims()[1] || N % H != 0 || B == 0 || S == 0 || N == 0) return false;
  if (bias && (bias->dtype() != DType::Float32 || bias->numel() != 3 * N)) return false;
  const int64_t D = N / H;

  // The mask as scores to add, [B, 1, 1, S]: 0 for a key kept, the filter value else.
  int mask = -1, mask_in = -1;
  bool lengths = false;
  if (present(n, 3)) {
    mask_in = c.as_plain(c.id(n.inputs()[3]));
    const std::vector<int64_t> md = c.val(mask_in).dims;
    if (c.val(mask_in).dtype != DType::Int32) return false;
    lengths = md == std::vector<int64_t>{B};
    if (!lengths && md != std::vector<int64_t>{B, S}) return false;
  }

  // Q, K and V [B, S, N] each: three products with the packed column blocks of W.
  const std::vector<double> wv = w->to_f64(), bv = bias ? bias->to_f64() : std::vector<double>();
  const std::vector<float> wf(wv.begin(), wv.end()), bf(bv.begin(), bv.end());
  auto packed = std::make_shared<std::vector<kernels::PackedB>>();
  auto biases = std::make_shared<std::vector<std::vector<float>>>();
  for (int64_t part = 0; part < 3; ++part) {
    packed->push_back(kernels::pack_b(wf.data() + part * N, K, N, 3 * N));
    biases->push_back(bias ? kernels::panel_bias(bf.data() + part * N, N) : std::vector<float>());
  }
  const std::vector<int64_t> qd{B, S, N};
  int qkv[3];
  for (int part = 0; part < 3; ++part)
    qkv[part] = c.new_value(DType::Float32, qd, plain_md(qd, dt::f32), n.name() + ".qkv" + std::to_string(part));
  const int team = c.threads();
  add_native_step(c,
                  step_info(n, "matmul", "attention qkv " + to_string(std::vector<int64_t>{B * S, K, 3 * N}),
                            2.0 * static_cast<double>(B * S * K * 3 * N)),
                  {x}, {qkv[0], qkv[1], qkv[2]}, [=](const std::vector<char*>& ptr) {
                    const float* a = reinterpret_cast<const float*>(ptr[0]);
                    for (size_t part = 0; part < 3; ++part)
                      kernels::gemm_packed(a, K, B * S, (*packed)[part], reinterpret_cast<float*>(ptr[1 + part]), N,
                                           nullptr, team, (*biases)[part].empty() ? nullptr : (*biases)[part].data());
                  });
  if (mask_in >= 0) {
    const std::vector<int64_t> md{B, 1, 1, S};
    mask = c.new_value(DType::Float32, md, plain_md(md, dt::f32), n.name() + ".mask");
    add_native_step(c, step_info(n, "pointwise", "attention key mask " + to_string(md), 0), {mask_in}, {mask},
                    [=](const std::vector<char*>& ptr) {
                      const int32_t* m = reinterpret_cast<const int32_t*>(ptr[0]);
                      float* out = reinterpret_cast<float*>(ptr[1]);
                      for (int64_t b = 0; b < B; ++b)
                        for (int64_t j = 0; j < S; ++j)
                          out[b * S + j] = (lengths ? j < m[b] : m[b * S + j] != 0) ? 0.0f : filter;
                    });
  }

  AttentionStep st;
  AttentionDims& d = st.d;
  d.rank3 = true;
  d.batch = B, d.q_heads = d.kv_heads = H;
  d.q_len = d.kv_len = d.total = S;
  d.head = d.v_head = D;
  st.a.q_heads = st.a.kv_heads = H;
  const double scale = scale_attr && scale_attr->f() != 0 ? scale_attr->f() : 1.0 / std::sqrt(static_cast<double>(D));
  st.scale = static_cast<float>(scale);
  for (int part = 0; part < 3; ++part) {
    HeadsView& v = part == 0 ? st.q : part == 1 ? st.keys : st.values;
    v = HeadsView{qkv[part], {S * N, D, N, 1}};
  }
  st.seq_major_y = true;
  if (mask >= 0) set_attention_mask(c, st, mask);
  if (present(n, 5)) {  // attention_bias, broadcast to [B, heads, S, S]: added as a float mask
    const std::vector<int64_t> bd = c.dims(n.inputs()[5]);
    if (bd.size() != 4 || (bd[0] != 1 && bd[0] != B) || (bd[1] != 1 && bd[1] != H) || bd[2] != S || bd[3] != S)
      return false;
    set_attention_mask(c, st, c.id(n.inputs()[5]));
  }
  c.bind(n.output(0), add_attention_step(c, st, step_info(n, "attention", "")));
  return true;
}

}  // namespace isomer::runtime
