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
  bool finite_fill = false;    // see AttentionStep
  // The mask is one row of keys per (batch, head) that every query shares (a
  // padding mask [B, 1, 1, T]), at unit stride: Q K^T's accumulators start from it
  // (kernels::PanelGemm::bias), and the row pass reads no mask.
  bool key_bias = false;
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
                    const char* mask, int64_t zero_end) {
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
    if (scale == 1.0f) {
    } else if (vector) {
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
  if (hi < zero_end) std::memset(x + hi, 0, static_cast<size_t>(zero_end - hi) * sizeof(float));
  return inv_sum;
}

// The largest |x| of n floats x[0], x[step], ...: NaN and infinities are +inf. (On
// the bits of |x|, which order as the numbers and vectorize: a double sum of squares
// per key and per query row cost a third of the step.)
ISOMER_CLONES float max_abs(const float* x, int64_t n, int64_t step) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<uint32_t>(x[i * step]) & 0x7fffffffu);
  return m >= 0x7f800000u ? std::numeric_limits<float>::infinity() : std::bit_cast<float>(m);
}

// A key mask row (T values: added floats, or bools kept where true) as the bias row
// Q K^T starts from, zero-padded to whole panels; whether some key is not -inf.
ISOMER_CLONES bool key_bias_of(const float* m, int64_t T, float* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int any = 0;
  for (int64_t j = 0; j < T; ++j) {
    out[j] = m[j];
    any |= m[j] != kNegInf;
  }
  return any != 0;
}
bool key_bias_of(const bool* m, int64_t T, float* out) {
  bool any = false;
  for (int64_t j = 0; j < T; ++j) {
    out[j] = m[j] ? 0.0f : -std::numeric_limits<float>::infinity();
    any = any || m[j];
  }
  return any;
}

// Whether the keys past a causal row's frontier [hi, ...), which a finite-fill mask
// gives the fill F <= -1e38 (AttentionStep::finite_fill), weigh exactly 0 in the
// row's softmax: some key before the frontier carries a mask above -1e37, and every
// score is below 1e37 in magnitude (D max |q| times the head's |scale| max |k|), so
// the row's max is at least -1.1e37 and every key past the frontier at most
// F + 1e37: exp of their difference underflows to 0, and the max is the one before it.
bool fill_is_zero(const RowPlan& r, const float* q, int64_t D, double key_max, const char* mask, int64_t hi) {
  if (!(static_cast<double>(D) * max_abs(q, D, 1) * key_max < 1e37)) return false;
  const float* m = reinterpret_cast<const float*>(mask);
  for (int64_t j = 0; j < std::min(hi, r.mask_len); ++j)
    if (m[j * r.ms[3]] >= -1e37f) return true;
  return false;
}

// One unit of the step: `rows` queries from query `i0` of `heads` query heads
// (a merged group: their rows one after the other) of batch b, all reading key
// head hk. Units of one (b, hk) come one after the other, so that a thread packs
// that head's K^T and V once for all of them.
struct Item {
  int64_t b = 0, hk = 0, h = 0, i0 = 0, heads = 1, rows = 0;
  int64_t a_off = 0, a_row = 0, y_off = 0, y_row = 0;
  int64_t keys = 0;      // keys the unit multiplies
  int64_t frontier = -1;  // causal: row m reads keys [0, m + frontier + 1)
  double work = 0;
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
  if (decode_attention_applies(s)) return add_decode_attention_step(c, s, std::move(info));
  RowPlan r;
  r.a = s.a;
  r.d = s.d;
  r.empty_row_nan = s.empty_row_nan;
  r.finite_fill = s.finite_fill && s.a.causal && s.mask >= 0 && c.val(s.mask).dtype == DType::Float32;
  const AttentionDims& d = r.d;
  const AttentionAttrs& a = r.a;
  r.normalize = d.total < 64;
  // The scale multiplies K^T as it is packed: the rows then have one pass fewer.
  r.scale = 1;
  const float scale = s.scale;
  const int64_t B = d.batch, Hq = d.q_heads, Hk = d.kv_heads, Sq = d.q_len, T = d.total, D = d.head, Dv = d.v_head,
                group = d.group();
  const HeadsView q = s.q, keys = s.keys, values = s.values;
  const bool seq_major = s.seq_major_y;
  // Units of at most kBand queries (their scores, 64 x T, stay in L1 or L2 between
  // the products and the row pass), equal multiples of the tile's rows. A causal
  // unit multiplies each tile only up to its rows' frontier (kernels::gemm_panels),
  // about half the square. The query heads of a group read one packing of their
  // key head; where their rows lie one stride apart (4-D Q, or one query) and the
  // block is short, one unit takes the whole group as group * Sq rows (decode: the
  // group's rows in one tile, not one row a tile).
  constexpr int64_t kBand = 64;
  const int64_t bands = Sq >= 2 * kBand ? (Sq + kBand - 1) / kBand : 1;
  const int64_t band = bands == 1 ? Sq : ((Sq + bands - 1) / bands + kernels::kMaxTileRows - 1) / kernels::kMaxTileRows * kernels::kMaxTileRows;
  // (One query row, as in decode, reaches every key: no frontier cuts it, and the
  // group's heads stay one tile.)
  const bool causal = a.causal && s.nonpad < 0 && Sq > 1;
  const bool merge = bands == 1 && !causal && group > 1 && (Sq == 1 || q.s[1] == Sq * q.s[2]) && (!seq_major || Sq == 1);
  const int64_t per = merge ? group : 1;
  std::vector<Item> items;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; h += per)
      for (int64_t i0 = 0; i0 < Sq; i0 += band) {
        Item it;
        it.b = b, it.h = h, it.hk = h / group, it.i0 = i0, it.heads = per, it.rows = std::min(band, Sq - i0);
        it.a_off = b * q.s[0] + h * q.s[1] + i0 * q.s[2];
        it.a_row = merge && Sq == 1 ? q.s[1] : q.s[2];
        it.y_row = seq_major && !merge ? Hq * Dv : Dv;
        it.y_off = (seq_major ? b * Sq * Hq * Dv + h * Dv : (b * Hq + h) * Sq * Dv) + i0 * it.y_row;
        it.frontier = causal ? i0 + d.past : -1;
        it.keys = causal ? std::min(T, i0 + it.rows + d.past) : T;
        const double reach = causal ? std::min<double>(static_cast<double>(T), static_cast<double>(i0 + d.past) + it.rows / 2.0)
                                    : static_cast<double>(T);
        it.work = static_cast<double>(per * it.rows) * reach * static_cast<double>(D + Dv + 10);
        items.push_back(it);
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
  r.key_bias = r.has_mask && r.ms[2] == 0 && r.ms[3] == 1 && r.mask_len == T && (r.ms[1] == 0 || !merge) &&
               !a.causal && a.softcap <= 0 && a.left_window < 0 && a.right_window < 0 && !r.has_nonpad;
  const std::vector<int64_t> ydims = seq_major ? std::vector<int64_t>{B, Sq, Hq * Dv} : std::vector<int64_t>{B, Hq, Sq, Dv};
  const int y = c.new_value(DType::Float32, ydims, plain_md(ydims, dt::f32), info.label);

  std::vector<int> reads = {q.id, keys.id, values.id};
  if (mask >= 0) reads.push_back(mask);
  if (nonpad >= 0) reads.push_back(nonpad);
  const size_t mask_at = mask >= 0 ? 3 : 0, nonpad_at = nonpad >= 0 ? 3 + (mask >= 0) : 0;
  const size_t y_at = reads.size();

  std::string sig = "attention " + std::to_string(B) + "x" + std::to_string(Hq) + "/" + std::to_string(Hk) + " q" +
                    std::to_string(Sq) + " kv" + std::to_string(T) + " d" + std::to_string(D) + "," +
                    std::to_string(Dv) + (d.rank3 ? " 3d" : "") + (seq_major && !d.rank3 ? " seq-major" : "") +
                    (merge ? " grouped" : "") + (bands > 1 ? " banded" : "") + (a.causal ? " causal" : "") +
                    (r.has_mask ? (r.bool_mask ? " bool-mask" : " mask") : "") + (a.softcap > 0 ? " softcap" : "") +
                    (r.has_nonpad ? " nonpad" : "") + (a.left_window >= 0 || a.right_window >= 0 ? " window" : "");
  double total_work = 0;
  for (const Item& it : items) total_work += it.work;
  const double flops = 2.0 * static_cast<double>(B * Hq * Sq * T) * static_cast<double>(D + Dv);
  // Work for a team (4e6 of it pays for one more thread, as gemm_batched counts).
  const double work = total_work;
  auto plan = std::make_shared<const RowPlan>(r);
  auto units = std::make_shared<const std::vector<Item>>(std::move(items));
  info.signature = sig;
  info.flops = flops;
  const int64_t max_rows = per * std::min(band, Sq);
  add_native_step(c, std::move(info), reads, {y},
                  [plan, units, work, scale, keys, values, max_rows, mask_at, nonpad_at, y_at](const std::vector<char*>& p) {
                    const RowPlan& r = *plan;
                    const AttentionDims& d = r.d;
                    const int64_t T = d.total, D = d.head, Dv = d.v_head;
                    const float* q = reinterpret_cast<const float*>(p[0]);
                    const float* kk = reinterpret_cast<const float*>(p[1]);
                    const float* vv = reinterpret_cast<const float*>(p[2]);
                    float* y = reinterpret_cast<float*>(p[y_at]);
                    const char* mask = r.has_mask ? p[mask_at] : nullptr;
                    const size_t melem = r.bool_mask ? 1 : sizeof(float);
                    const int64_t* nonpad = r.has_nonpad ? reinterpret_cast<const int64_t*>(p[nonpad_at]) : nullptr;
                    const kernels::VectorIsa isa = kernels::best_vector_isa();
                    const std::vector<Item>& items = *units;
                    const int64_t n_units = static_cast<int64_t>(items.size());
                    // (team_for_work reads the environment: not for a step too small for two)
                    const int want = static_cast<int>(std::min<int64_t>(
                        n_units, work < 8e6 ? 1 : kernels::team_for_work(omp_get_max_threads(), work / 4e6)));
                    kernels::parallel_teams(want, [&](int t, int nt) {
                      // The units of equal shares of the work, in order: a thread packs each
                      // key head it meets once.
                      int64_t u0 = 0, u1 = 0;
                      double seen = 0;
                      for (int64_t u = 0; u < n_units; ++u) {
                        const double mid = seen + items[static_cast<size_t>(u)].work / 2;
                        if (mid < work * t / nt) u0 = u + 1;
                        if (mid < work * (t + 1) / nt) u1 = u + 1;
                        seen += items[static_cast<size_t>(u)].work;
                      }
                      thread_local std::vector<float> kpan, vpan, sc, qbuf, inv, kbias;
                      kpan.resize(static_cast<size_t>(kernels::panels_size(isa, D, T)));
                      kbias.assign(static_cast<size_t>(kernels::panels_size(isa, 1, T)), 0.0f);
                      int64_t bias_b = -1, bias_h = -1;
                      bool bias_any = false;  // a key of the bias row is not -inf
                      vpan.resize(static_cast<size_t>(kernels::panels_size(isa, T, Dv)));
                      sc.resize(static_cast<size_t>(max_rows * T));
                      inv.resize(static_cast<size_t>(max_rows));
                      int64_t packed_b = -1, packed_h = -1;
                      double key_max = 0;  // |scale| max |k| of the packed head (finite_fill)
                      std::vector<int64_t> exact;  // rows of a unit computed over every key
                      for (int64_t u = u0; u < u1; ++u) {
                        const Item& it = items[static_cast<size_t>(u)];
                        if (it.b != packed_b || it.hk != packed_h) {
                          const float* kh = kk + it.b * keys.s[0] + it.hk * keys.s[1];
                          kernels::pack_panels(isa, kh, keys.s[3], keys.s[2], D, T, scale, kpan.data());
                          kernels::pack_panels(isa, vv + it.b * values.s[0] + it.hk * values.s[1], values.s[2], values.s[3],
                                               T, Dv, 1.0f, vpan.data());
                          packed_b = it.b, packed_h = it.hk;
                          key_max = 0;
                          for (int64_t j = 0; r.finite_fill && j < T; ++j)
                            key_max = std::max(key_max, static_cast<double>(max_abs(kh + j * keys.s[2], D, keys.s[3])));
                          key_max *= std::abs(static_cast<double>(scale));
                        }
                        const int64_t M = it.heads * it.rows;
                        const float* a = q + it.a_off;
                        int64_t a_row = it.a_row;
                        // Rows far apart (a head's rows of [tokens, heads x 64], 4 KiB apart)
                        // fall into few L1 sets: copied together first, as gemm_batched does.
                        if (a_row > D && a_row >= 512) {
                          qbuf.resize(static_cast<size_t>(M * D));
                          for (int64_t m = 0; m < M; ++m)
                            std::memcpy(qbuf.data() + m * D, a + m * a_row, static_cast<size_t>(D) * sizeof(float));
                          a = qbuf.data();
                          a_row = D;
                        }
                        kernels::PanelGemm g1;
                        g1.M = M, g1.K = D, g1.N = it.keys, g1.a_row = a_row, g1.c_row = T, g1.frontier = it.frontier;
                        g1.packed_k = D, g1.packed_n = T;
                        const int64_t bias_head = r.ms[1] == 0 ? 0 : it.h;
                        if (r.key_bias && (it.b != bias_b || bias_head != bias_h)) {
                          const char* row = mask + static_cast<size_t>(it.b * r.ms[0] + bias_head * r.ms[1]) * melem;
                          bias_any = r.bool_mask ? key_bias_of(reinterpret_cast<const bool*>(row), T, kbias.data())
                                                 : key_bias_of(reinterpret_cast<const float*>(row), T, kbias.data());
                          bias_b = it.b, bias_h = bias_head;
                        }
                        if (r.key_bias) g1.bias = kbias.data();
                        kernels::gemm_panels(isa, a, kpan.data(), sc.data(), g1);
                        for (int64_t hh = 0; hh < it.heads; ++hh)
                          for (int64_t m = 0; m < it.rows; ++m) {
                            const int64_t i = it.i0 + m, h = it.h + hh, b = it.b;
                            const int64_t valid = nonpad ? nonpad[b] : T;
                            const int64_t offset = d.past > 0 ? d.past : nonpad ? valid - d.q_len : 0;
                            const char* mrow = mask && !r.key_bias
                                                   ? mask + static_cast<size_t>(b * r.ms[0] + h * r.ms[1] + i * r.ms[2]) * melem
                                                   : nullptr;
                            float* x = sc.data() + (hh * it.rows + m) * T;
                            if (r.key_bias && !bias_any) {
                              inv[static_cast<size_t>(hh * it.rows + m)] = empty_row(r, x);
                              continue;
                            }
                            // P V reads a causal row up to its tile's last row's frontier.
                            const int64_t zero_end =
                                it.frontier >= 0 ? std::min(it.keys, m + it.frontier + 1 + kernels::kMaxTileRows) : it.keys;
                            inv[static_cast<size_t>(hh * it.rows + m)] = attention_row(r, isa, x, i, offset, valid, mrow, zero_end);
                            if (r.finite_fill && it.frontier >= 0 && !fill_is_zero(r, a + m * a_row, D, key_max, mrow, m + it.frontier + 1))
                              exact.push_back(m);
                          }
                        kernels::PanelGemm g2;
                        g2.M = M, g2.K = it.keys, g2.N = Dv, g2.a_row = T, g2.c_row = it.y_row;
                        g2.packed_k = T, g2.packed_n = Dv;
                        g2.frontier = it.frontier, g2.frontier_on_k = true;
                        g2.row_scale = r.normalize ? nullptr : inv.data();
                        kernels::gemm_panels(isa, sc.data(), vpan.data(), y + it.y_off, g2);
                        // Rows the frontier cannot cut: every key, as the decomposed graph.
                        for (const int64_t m : exact) {
                          const int64_t i = it.i0 + m;
                          float* row = sc.data();  // (the unit's scores are spent)
                          kernels::PanelGemm e1;
                          e1.M = 1, e1.K = D, e1.N = T, e1.a_row = a_row, e1.c_row = T, e1.packed_k = D, e1.packed_n = T;
                          kernels::gemm_panels(isa, a + m * a_row, kpan.data(), row, e1);
                          RowPlan whole = r;
                          whole.a.causal = false;
                          const char* mrow = mask + static_cast<size_t>(it.b * r.ms[0] + it.h * r.ms[1] + i * r.ms[2]) * melem;
                          const float f = attention_row(whole, isa, row, i, 0, T, mrow, T);
                          kernels::PanelGemm e2;
                          e2.M = 1, e2.K = T, e2.N = Dv, e2.a_row = T, e2.c_row = it.y_row, e2.packed_k = T, e2.packed_n = Dv;
                          e2.row_scale = r.normalize ? nullptr : &f;
                          kernels::gemm_panels(isa, row, vpan.data(), y + it.y_off + m * it.y_row, e2);
                        }
                        exact.clear();
                      }
                    });
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
