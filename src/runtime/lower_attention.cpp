// ONNX Attention on the runtime, one native step in three passes:
//   1. S = Q K^T on isomer's batched GEMM (kernels/gemm.h), one product per
//      (batch, query head). Q, K and V are read in place through strides: the 3-D
//      form [B, S, heads * D] as [B, heads, S, D] without a transpose, and a
//      query head of a grouped-query node reads its key/value head's rows (no
//      expanded copy of K or V).
//   2. each row of S: scale, softcap, mask, causal frontier, sliding window and
//      padding, then exp(s - max) (kernels/rows.h), left unnormalized; keys outside
//      the causal or window frontier are never exponentiated, and a row with no key
//      left is zero.
//   3. Y = P V on the batched GEMM, written straight into Y's layout (the 3-D
//      form's [B, S, heads * Dv] rows included), each row then divided by its sum.
// Scores too big for L2 go through the three passes one head (or band) at a time.
// With past_key/past_value the present tensors are written first (past, then the
// new keys) and the products read them. float32 only; the qk_matmul_output
// output, other types and blocked layouts go to the reference kernel.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/rows.h"
#include "kernels/vector_isa.h"
#include "ops/attention.h"
#include "runtime/attention_step.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Value `id` (4-D, or 3-D [B, S, heads * d]) as [B, heads, S, d]; `unit_d`: the
// feature stride must be 1 (a GEMM's A operand), copying the value if it is not.
std::optional<HeadsView> heads_view(Compiler& c, int id, bool rank3, int64_t d, bool unit_d) {
  auto st = c.strides_of(id);
  if (!st || (unit_d && st->back() != 1)) {
    id = c.as_plain(id);
    st = c.strides_of(id);
    if (!st) return std::nullopt;
  }
  HeadsView v;
  v.id = id;
  const std::vector<int64_t>& s = *st;
  if (rank3) {
    v.s[0] = s[0], v.s[1] = d * s[2], v.s[2] = s[1], v.s[3] = s[2];
  } else {
    for (int i = 0; i < 4; ++i) v.s[i] = s[static_cast<size_t>(i)];
  }
  return v;
}

bool used(Compiler& c, const Node& n, size_t k) {
  if (k >= n.num_outputs() || !n.output(k).present()) return false;
  return c.is_output(n.output(k)) || !c.consumers(n.output(k)).empty();
}

// What the row pass needs.
struct RowPlan {
  AttentionDims d;
  AttentionAttrs a;
  float scale = 1;
  bool has_mask = false, bool_mask = false;
  int64_t mask_len = 0, ms[4] = {0, 0, 0, 0};  // the mask's strides over [B, Hq, Sq, its length]
  bool has_nonpad = false;
  // Rows normalized in place (short rows: dividing each row of P V afterwards cost
  // Qwen3's 16-key rows more than it saved), else left for P V's rows to divide.
  bool normalize = false;
  bool empty_row_nan = false;  // see AttentionStep
};

// x[j] *= scale over a row, then the mask: added (float; `any` says whether some
// key is not -inf) or selected (bool: a dropped key is -inf). Unit-stride masks
// (an expanded [.., Sq, T] mask's rows) take loops the compiler vectorizes; these
// are cloned per instruction set, since the lowering itself is built for the
// baseline ISA (a scalar scale and a strided gather per key cost as much as the
// softmax on a 399-key row).
ISOMER_CLONES void scale_row(float* x, int64_t n, float scale) {
  for (int64_t j = 0; j < n; ++j) x[j] *= scale;
}
ISOMER_CLONES bool scale_add_row(float* __restrict x, const float* __restrict m, int64_t n, float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int any = 0;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = x[j] * scale + m[j];
    any |= m[j] != kNegInf;
  }
  return any != 0;
}
// The select as bit operations on the float (a branch per key, as GCC compiles
// `keep ? x : -inf` from bools, ran as long as the softmax).
ISOMER_CLONES bool scale_select_row(float* __restrict x, const bool* __restrict m, int64_t n, float scale) {
  const uint32_t neg_inf = 0xff800000u;
  const unsigned char* keep = reinterpret_cast<const unsigned char*>(m);
  uint32_t any = 0;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t on = 0u - static_cast<uint32_t>(keep[j] != 0);
    const uint32_t v = std::bit_cast<uint32_t>(x[j] * scale);
    x[j] = std::bit_cast<float>((v & on) | (neg_inf & ~on));
    any |= on;
  }
  return any != 0;
}

// A row with no key left: zeros, or NaNs where the step computes a decomposed
// Softmax (its row of -inf); the factor its product with V is multiplied by.
float empty_row(const RowPlan& r, float* x) {
  const int64_t T = r.d.total;
  if (r.empty_row_nan) {
    std::fill(x, x + T, std::numeric_limits<float>::quiet_NaN());
    return r.normalize ? 1.0f : std::numeric_limits<float>::quiet_NaN();
  }
  std::memset(x, 0, static_cast<size_t>(T) * sizeof(float));
  return 0;
}

// Scale, softcap, bias and softmax of one row of T scores for query i of batch b.
// `mask` points at the row's mask (nullptr: none), `valid` is the number of
// non-padding keys. Unless r.normalize, the row is left unnormalized: the result
// is what its product with V is to be multiplied by (0 for a row with no key).
float attention_row(const RowPlan& r, kernels::VectorIsa isa, float* x, int64_t i, int64_t offset, int64_t valid,
                    const char* mask) {
  const int64_t T = r.d.total;
  // Keys allowed by the causal frontier, the window and the padding: [lo, hi).
  int64_t lo = 0, hi = std::min(valid, T);
  if (r.a.causal) hi = std::min(hi, i + offset + 1);
  if (r.a.right_window >= 0) hi = std::min(hi, i + offset + r.a.right_window + 1);
  if (r.a.left_window >= 0) lo = std::max(lo, i + offset - r.a.left_window);
  if (r.has_mask) hi = std::min(hi, r.mask_len);  // keys past a short mask's end are masked
  if (lo >= hi) return empty_row(r, x);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float scale = r.scale;
  const int64_t ms = r.ms[3];
  // The scale goes with the mask in one pass, unless a softcap comes between them.
  // Rows shorter than two vectors stay inline: a call per 16 keys (Qwen3's rows)
  // cost more than the scalar loop.
  const bool softcap = r.a.softcap > 0, vector = hi - lo >= 32;
  bool any = true;
  if (mask && ms == 1 && !softcap && vector) {
    any = r.bool_mask ? scale_select_row(x + lo, reinterpret_cast<const bool*>(mask) + lo, hi - lo, scale)
                      : scale_add_row(x + lo, reinterpret_cast<const float*>(mask) + lo, hi - lo, scale);
  } else {
    if (vector) {
      scale_row(x + lo, hi - lo, scale);
    } else {
      for (int64_t j = lo; j < hi; ++j) x[j] *= scale;
    }
    if (softcap) {
      const float cap = static_cast<float>(r.a.softcap), inv = 1.0f / cap;
      for (int64_t j = lo; j < hi; ++j) x[j] = cap * std::tanh(x[j] * inv);
    }
    if (mask && ms == 1 && vector) {
      any = r.bool_mask ? scale_select_row(x + lo, reinterpret_cast<const bool*>(mask) + lo, hi - lo, 1.0f)
                        : scale_add_row(x + lo, reinterpret_cast<const float*>(mask) + lo, hi - lo, 1.0f);
    } else if (mask) {
      any = false;
      if (r.bool_mask) {
        const bool* m = reinterpret_cast<const bool*>(mask);
        for (int64_t j = lo; j < hi; ++j) {
          const bool keep = m[j * ms];
          x[j] = keep ? x[j] : kNegInf;
          any = any || keep;
        }
      } else {
        const float* m = reinterpret_cast<const float*>(mask);
        for (int64_t j = lo; j < hi; ++j) {
          x[j] += m[j * ms];
          any = any || m[j * ms] != kNegInf;
        }
      }
    }
  }
  if (!any) return empty_row(r, x);
  float inv_sum = 1.0f;
  if (r.normalize) kernels::softmax_row(isa, x + lo, x + lo, hi - lo, false);
  else inv_sum = 1.0f / kernels::softmax_exp_row(isa, x + lo, x + lo, hi - lo);
  if (lo > 0) std::memset(x, 0, static_cast<size_t>(lo) * sizeof(float));
  if (hi < T) std::memset(x + hi, 0, static_cast<size_t>(T - hi) * sizeof(float));
  return inv_sum;
}

// One product of Q K^T and of P V (one head, or a merged group of heads, or one
// band of a causal block) with the rows of scores between them: `heads` runs of
// `rows` score rows, Sq apart, from row `row0` of [B * Hq * Sq, T].
struct Item {
  kernels::BatchedGemm qk, pv;
  int64_t row0 = 0, heads = 1, rows = 0;
};

// Copies [B, heads, n, d] (through strides, `from`) into rows [start, start + n) of
// the dense [B, heads, total, d] buffer `to`.
void copy_heads(const float* from, const int64_t s[4], float* to, int64_t B, int64_t H, int64_t n, int64_t d,
                int64_t total, int64_t start) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < n; ++t) {
        const float* src = from + b * s[0] + h * s[1] + t * s[2];
        float* dst = to + ((b * H + h) * total + start + t) * d;
        if (s[3] == 1) {
          std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(float));
        } else {
          for (int64_t e = 0; e < d; ++e) dst[e] = src[e * s[3]];
        }
      }
}

}  // namespace

void set_attention_mask(Compiler& c, AttentionStep& s, int mask) {
  auto st = c.strides_of(mask);
  if (!st) {
    mask = c.as_plain(mask);
    st = c.strides_of(mask);
  }
  s.mask = mask;
}

int add_attention_step(Compiler& c, const AttentionStep& s, StepInfo info) {
  RowPlan r;
  r.a = s.a;
  r.d = s.d;
  r.scale = s.scale;
  r.empty_row_nan = s.empty_row_nan;
  const AttentionDims& d = r.d;
  const AttentionAttrs& a = r.a;
  r.normalize = d.total < 64;
  const int64_t B = d.batch, Hq = d.q_heads, Hk = d.kv_heads, Sq = d.q_len, T = d.total, D = d.head, Dv = d.v_head,
                group = d.group();
  const HeadsView* q = &s.q;
  const HeadsView keys = s.keys, values = s.values;
  const bool seq_major = s.seq_major_y;
  std::vector<int> reads, writes;
  // Q K^T: product (b, h) reads query head h and key head h / group. The query heads
  // of a group share their keys: where their rows lie one stride apart (4-D Q, or
  // one query), one product takes the whole group as group * Sq rows, so K and V
  // are packed once per key head, not once per query head. A long causal block is
  // cut into bands of kBand queries, each multiplied with the keys up to its
  // frontier only (about half the work of the whole square).
  constexpr int64_t kBand = 64;
  const bool banded = a.causal && s.nonpad < 0 && Sq >= 2 * kBand;
  const bool merge = !banded && group > 1 && (Sq == 1 || q->s[1] == Sq * q->s[2]) && (!seq_major || Sq == 1);
  const int64_t per = merge ? group : 1;
  std::vector<std::pair<kernels::BatchedGemm, kernels::BatchedGemm>> products;
  std::vector<Item> items;
  for (int64_t i0 = 0; i0 < Sq; i0 += banded ? kBand : Sq) {
    const int64_t rows = banded ? std::min(kBand, Sq - i0) : Sq;
    const int64_t keys_seen = banded ? std::min(T, i0 + rows + d.past) : T;
    kernels::BatchedGemm g1;
    g1.batch = B * Hq / per, g1.M = per * rows, g1.K = D, g1.N = keys_seen;
    g1.a_row = merge && Sq == 1 ? q->s[1] : q->s[2], g1.b_k = keys.s[3], g1.b_n = keys.s[2];
    g1.c_row = T;
    // P V, written into Y's layout: [B, Hq, Sq, Dv] or [B, Sq, Hq * Dv].
    kernels::BatchedGemm g2;
    g2.batch = B * Hq / per, g2.M = per * rows, g2.K = keys_seen, g2.N = Dv;
    g2.a_row = T, g2.b_k = values.s[2], g2.b_n = values.s[3];
    g2.c_row = seq_major && !merge ? Hq * Dv : Dv;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; h += per) {
        g1.a_off.push_back(b * q->s[0] + h * q->s[1] + i0 * q->s[2]);
        g1.b_off.push_back(b * keys.s[0] + (h / group) * keys.s[1]);
        g1.c_off.push_back(((b * Hq + h) * Sq + i0) * T);
        g2.a_off.push_back(((b * Hq + h) * Sq + i0) * T);
        g2.b_off.push_back(b * values.s[0] + (h / group) * values.s[1]);
        g2.c_off.push_back((seq_major ? b * Sq * Hq * Dv + h * Dv : (b * Hq + h) * Sq * Dv) + i0 * g2.c_row);
      }
    for (size_t bi = 0; bi < g1.a_off.size(); ++bi) {
      auto one = [bi](const kernels::BatchedGemm& g) {
        kernels::BatchedGemm o = g;
        o.batch = 1;
        o.a_off = {g.a_off[bi]}, o.b_off = {g.b_off[bi]}, o.c_off = {g.c_off[bi]};
        return o;
      };
      const int64_t b = static_cast<int64_t>(bi) / (Hq / per), h = static_cast<int64_t>(bi) % (Hq / per) * per;
      items.push_back(Item{one(g1), one(g2), (b * Hq + h) * Sq + i0, per, rows});
    }
    products.emplace_back(std::move(g1), std::move(g2));
  }

  const int mask = s.mask, nonpad = s.nonpad;
  if (mask >= 0) {
    const std::vector<int64_t> st = *c.strides_of(mask);
    const std::vector<int64_t>& md = c.val(mask).dims;
    r.has_mask = true;
    r.bool_mask = c.val(mask).dtype == DType::Bool;
    r.mask_len = md.back();
    for (size_t i = 0; i < md.size(); ++i) {
      const size_t axis = 4 - md.size() + i;
      r.ms[axis] = md[i] == 1 && axis != 3 ? 0 : st[i];
    }
  }
  r.has_nonpad = nonpad >= 0;
  const std::vector<int64_t> sdims{B, Hq, Sq, T};
  const int scores = c.new_value(DType::Float32, sdims, plain_md(sdims, dt::f32), info.label + ".scores");
  const std::vector<int64_t> ydims = seq_major ? std::vector<int64_t>{B, Sq, Hq * Dv} : std::vector<int64_t>{B, Hq, Sq, Dv};
  const int y = c.new_value(DType::Float32, ydims, plain_md(ydims, dt::f32), info.label);

  reads = {q->id, keys.id, values.id};
  if (mask >= 0) reads.push_back(mask);
  if (nonpad >= 0) reads.push_back(nonpad);
  writes = {scores, y};
  const size_t mask_at = mask >= 0 ? 3 : 0, nonpad_at = nonpad >= 0 ? 3 + (mask >= 0) : 0;
  const size_t scores_at = reads.size(), y_at = reads.size() + 1;

  std::string sig = "attention " + std::to_string(B) + "x" + std::to_string(Hq) + "/" + std::to_string(Hk) + " q" +
                    std::to_string(Sq) + " kv" + std::to_string(T) + " d" + std::to_string(D) + "," +
                    std::to_string(Dv) + (d.rank3 ? " 3d" : "") + (seq_major && !d.rank3 ? " seq-major" : "") + (merge ? " grouped" : "") + (banded ? " banded" : "") + (a.causal ? " causal" : "") +
                    (r.has_mask ? (r.bool_mask ? " bool-mask" : " mask") : "") + (a.softcap > 0 ? " softcap" : "") +
                    (r.has_nonpad ? " nonpad" : "") + (a.left_window >= 0 || a.right_window >= 0 ? " window" : "");
  const double flops = 2.0 * static_cast<double>(B * Hq * Sq * T) * static_cast<double>(D + Dv);
  // Work for a team (4e6 of it pays for one more thread, as gemm_batched counts):
  // the products, and about 20 flops' worth per score for the row pass (scale,
  // mask, exp, normalization).
  const double work = flops + 20.0 * static_cast<double>(B * Hq * Sq * T);
  // Scores that fit in L2 all together gain nothing from going unit by unit, and
  // small units pay for each product's call (qwen3's 4 heads of 16 x 16: 12% slower).
  const bool spills = static_cast<double>(B * Hq * Sq * T) * sizeof(float) > 256.0 * 1024;
  auto plan = std::make_shared<const RowPlan>(r);
  auto shapes = std::make_shared<const std::vector<std::pair<kernels::BatchedGemm, kernels::BatchedGemm>>>(std::move(products));
  auto units = std::make_shared<const std::vector<Item>>(std::move(items));
  info.signature = sig;
  info.flops = flops;
  add_native_step(c, std::move(info), reads, writes,
                  [plan, shapes, units, work, spills, mask_at, nonpad_at, scores_at, y_at, seq_major](const std::vector<char*>& p) {
                    const RowPlan& r = *plan;
                    const AttentionDims& d = r.d;
                    const float* q = reinterpret_cast<const float*>(p[0]);
                    const float* kk = reinterpret_cast<const float*>(p[1]);
                    const float* vv = reinterpret_cast<const float*>(p[2]);
                    float* s = reinterpret_cast<float*>(p[scores_at]);
                    float* y = reinterpret_cast<float*>(p[y_at]);
                    const char* mask = r.has_mask ? p[mask_at] : nullptr;
                    const size_t melem = r.bool_mask ? 1 : sizeof(float);
                    const int64_t* nonpad = r.has_nonpad ? reinterpret_cast<const int64_t*>(p[nonpad_at]) : nullptr;
                    const kernels::VectorIsa isa = kernels::best_vector_isa();
                    auto row_pass = [&](int64_t row, float* inv_sum) {
                      const int64_t i = row % d.q_len, bh = row / d.q_len, h = bh % d.q_heads, b = bh / d.q_heads;
                      const int64_t valid = nonpad ? nonpad[b] : d.total;
                      const int64_t offset = d.past > 0 ? d.past : nonpad ? valid - d.q_len : 0;
                      const char* m =
                          mask ? mask + static_cast<size_t>(b * r.ms[0] + h * r.ms[1] + i * r.ms[2]) * melem : nullptr;
                      *inv_sum = attention_row(r, isa, s + row * d.total, i, offset, valid, m);
                    };
                    const int64_t n_units = static_cast<int64_t>(units->size());
                    // (team_for_work reads the environment: not for a step too small for two)
                    const int want = work < 8e6 ? 1 : kernels::team_for_work(omp_get_max_threads(), work / 4e6);
                    if (spills && n_units >= want) {
                      // Each unit's three passes in turn, so that its scores (one head's
                      // Sq x T) are still in L2 when the row pass and P V read them:
                      // in three passes over all heads, a 4-head 399-token layer's 2.5 MB
                      // of scores went through L3 twice more.
                      // P is left unnormalized and each row of P V divided instead: Dv
                      // products a row, not T (a pass over the scores fewer).
                      kernels::parallel_teams(want, [&](int t, int nt) {
                        std::vector<float> inv;
                        // Round robin: the units go band by band, and a causal block's
                        // later bands are longer (a prefill of 512 in halves ran 1.3x
                        // slower on two threads than the three passes).
                        for (int64_t u = t; u < n_units; u += nt) {
                          const Item& it = (*units)[static_cast<size_t>(u)];
                          kernels::gemm_batched(q, kk, s, it.qk, nullptr, 1);
                          inv.resize(static_cast<size_t>(it.heads * it.rows));
                          for (int64_t hh = 0; hh < it.heads; ++hh)
                            for (int64_t row = 0; row < it.rows; ++row)
                              row_pass(it.row0 + hh * d.q_len + row, &inv[static_cast<size_t>(hh * it.rows + row)]);
                          kernels::gemm_batched(s, vv, y, it.pv, nullptr, 1);
                          for (int64_t m = 0; m < it.pv.M && !r.normalize; ++m) {
                            float* yr = y + it.pv.c_off[0] + m * it.pv.c_row;
                            const float f = inv[static_cast<size_t>(m)];
                            for (int64_t e = 0; e < it.pv.N; ++e) yr[e] *= f;
                          }
                        }
                      });
                      return;
                    }
                    // Fewer units than threads (one head, a long sequence), or scores that
                    // fit in L2: the products as they are, the rows split among the team,
                    // P unnormalized here too.
                    for (const auto& g : *shapes) kernels::gemm_batched(q, kk, s, g.first);
                    const int64_t rows = d.batch * d.q_heads * d.q_len;
                    thread_local std::vector<float> inv;
                    inv.resize(static_cast<size_t>(rows));
                    float* inv_sum = inv.data();
                    // The same team as the products: a small ViT's 4 x 66 x 66 scores took
                    // 35 us on one thread and 45 us on two, waiting for the second to wake.
                    const int team = static_cast<int>(std::min<int64_t>(want, rows));
                    kernels::parallel_teams(team, [&](int t, int nt) {
                      for (int64_t row = rows * t / nt; row < rows * (t + 1) / nt; ++row) row_pass(row, inv_sum + row);
                    });
                    for (const auto& g : *shapes) kernels::gemm_batched(s, vv, y, g.second);
                    const int64_t Hq = d.q_heads, Sq = d.q_len, Dv = d.v_head;
                    if (r.normalize) return;
                    const int64_t i_step = seq_major ? Hq * Dv : Dv, h_step = seq_major ? Dv : Sq * Dv;
                    for (int64_t b = 0; b < d.batch; ++b)
                      for (int64_t h = 0; h < Hq; ++h) {
                        const float* f = inv_sum + (b * Hq + h) * Sq;
                        float* yh = y + b * Hq * Sq * Dv + h * h_step;
                        for (int64_t i = 0; i < Sq; ++i)
                          for (int64_t e = 0; e < Dv; ++e) yh[i * i_step + e] *= f[i];
                      }
                  });
  return y;
}

bool lower_attention(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  auto input = [&](size_t k) { return k < in.size() && in[k].present(); };
  for (size_t k : {kAttnQ, kAttnK, kAttnV, kAttnPastKey, kAttnPastValue})
    if (input(k) && c.dtype(in[k]) != DType::Float32) return false;
  if (input(kAttnMask) && c.dtype(in[kAttnMask]) != DType::Float32 && c.dtype(in[kAttnMask]) != DType::Bool)
    return false;
  if (used(c, n, 3)) return false;  // qk_matmul_output: the reference kernel computes it
  const AttentionAttrs a = attention_attrs(n.attrs());

  const std::vector<int64_t> qd = c.dims(in[kAttnQ]), kd = c.dims(in[kAttnK]), vd = c.dims(in[kAttnV]);
  AttentionStep st;
  st.a = a;
  AttentionDims& d = st.d;
  d.rank3 = qd.size() == 3;
  d.batch = qd[0];
  if (d.rank3) {
    d.q_heads = a.q_heads, d.kv_heads = a.kv_heads;
    d.q_len = qd[1], d.kv_len = kd[1];
    d.head = qd[2] / a.q_heads, d.v_head = vd[2] / a.kv_heads;
  } else {
    d.q_heads = qd[1], d.kv_heads = kd[1];
    d.q_len = qd[2], d.kv_len = kd[2];
    d.head = qd[3], d.v_head = vd[3];
  }
  d.past = input(kAttnPastKey) ? c.dims(in[kAttnPastKey])[2] : 0;
  d.total = d.past + d.kv_len;
  if (d.batch == 0 || d.q_heads == 0 || d.q_len == 0 || d.total == 0 || d.head == 0 || d.v_head == 0) return false;
  st.scale = static_cast<float>(a.has_scale ? a.scale : 1.0 / std::sqrt(static_cast<double>(d.head)));
  const int64_t B = d.batch, Hk = d.kv_heads, T = d.total, D = d.head, Dv = d.v_head;

  auto q = heads_view(c, c.id(in[kAttnQ]), d.rank3, D, true);
  auto k = heads_view(c, c.id(in[kAttnK]), d.rank3, D, false);
  auto v = heads_view(c, c.id(in[kAttnV]), d.rank3, Dv, false);
  if (!q || !k || !v) return false;

  // The keys and values the products read: the inputs themselves, or the present
  // tensors written from past and new.
  HeadsView keys = *k, values = *v;
  int present_k = -1, present_v = -1;
  if (d.past > 0) {
    auto pk = heads_view(c, c.id(in[kAttnPastKey]), false, D, false);
    auto pv = heads_view(c, c.id(in[kAttnPastValue]), false, Dv, false);
    if (!pk || !pv) return false;
    const std::vector<int64_t> kdims{B, Hk, T, D}, vdims{B, Hk, T, Dv};
    present_k = c.new_value(DType::Float32, kdims, plain_md(kdims, dt::f32), n.name() + ".present_key");
    present_v = c.new_value(DType::Float32, vdims, plain_md(vdims, dt::f32), n.name() + ".present_value");
    const int64_t P = d.past, S = d.kv_len;
    const HeadsView kk = *k, vv = *v, ppk = *pk, ppv = *pv;
    add_native_step(c,
                    step_info(n, "concat", "attention present " + to_string(kdims) + " " + to_string(vdims),
                              0),
                    {ppk.id, kk.id, ppv.id, vv.id}, {present_k, present_v},
                    [=](const std::vector<char*>& p) {
                      auto f = [](char* x) { return reinterpret_cast<float*>(x); };
                      copy_heads(f(p[0]), ppk.s, f(p[4]), B, Hk, P, D, T, 0);
                      copy_heads(f(p[1]), kk.s, f(p[4]), B, Hk, S, D, T, P);
                      copy_heads(f(p[2]), ppv.s, f(p[5]), B, Hk, P, Dv, T, 0);
                      copy_heads(f(p[3]), vv.s, f(p[5]), B, Hk, S, Dv, T, P);
                    });
    keys = HeadsView{present_k, {Hk * T * D, T * D, D, 1}};
    values = HeadsView{present_v, {Hk * T * Dv, T * Dv, Dv, 1}};
  }

  st.q = *q;
  st.keys = keys;
  st.values = values;
  st.seq_major_y = d.rank3;
  if (input(kAttnMask)) set_attention_mask(c, st, c.id(in[kAttnMask]));
  if (input(kAttnNonpad)) st.nonpad = c.as_plain(c.id(in[kAttnNonpad]));
  const int y = add_attention_step(c, st, step_info(n, "attention", ""));
  c.bind(n.output(0), y);
  // present_key and present_value: the concatenation, or (no past) K and V as [B, heads, S, d].
  for (size_t o : {size_t{1}, size_t{2}}) {
    if (!used(c, n, o)) continue;
    const int written = o == 1 ? present_k : present_v;
    if (written >= 0) {
      c.bind(n.output(o), written);
      continue;
    }
    const HeadsView& src = o == 1 ? *k : *v;
    const std::vector<int64_t> dims{B, Hk, d.kv_len, o == 1 ? D : Dv};
    const int view = c.view(src.id, dims, {src.s[0], src.s[1], src.s[2], src.s[3]}, 0, n.name() + ".present");
    c.bind(n.output(o), d.rank3 ? c.copy_strided(view, n.name() + ".present") : view);
  }
  return true;
}

}  // namespace isomer::runtime
