// The attention step for a few query rows per key head (decode: one new token
// against a KV cache), on kernels/attention_decode.h: K and V rows are read where
// they lie (no K^T packed for one row), each key head's rows (the query heads of
// its group, times the queries) take one read of its keys, and where a head's
// keys would leave a thread idle they split into ranges whose partial softmaxes
// merge (flash-decoding).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/attention_decode.h"
#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "runtime/attention_step.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Measured: processor time at 1 thread (Zen 5 with AVX-512, load 14-18 on 2
// shared cores, medians of 100-300 runs), against the separate steps (isomer's
// products on oneDNN or its panels, and its softmax). Inside LLaMA-style decode
// steps (2 layers, 8/2 heads of 64: 4 rows per key head; the attention steps of the
// model, interleaved rounds): 512 keys 0.033 -> 0.025 ms, 1024 0.065 -> 0.052,
// 2048 0.109 -> 0.090, 4096 0.27 -> 0.21 (through scaled_dot_product_attention's
// export 0.067 -> 0.052 and 0.27 -> 0.24; batch 2 against 1024 0.046 -> 0.040).
// Multi-head (one row per key head), attention alone: 512 keys 0.033 -> 0.025,
// 4096 0.34 -> 0.24 (K and V read once, where the products packed K^T and V
// first); inside a decode step 1024 0.071 -> 0.052, 4096 0.49 -> 0.33. On its own
// (Q, K and V the graph's inputs) 4 rows against 4096 keys were slower, 0.082 ->
// 0.094, and 8 rows (16 heads on 2) against 512 keys 0.015 -> 0.020: a row's dot
// products cost the same whatever the rows (a fold of 16 keys' partial sums per
// row), where the products' tiles share K^T among their rows.
constexpr int64_t kMinDecodeKeys = 64;
// Keys a range of one head takes at least when a head's keys split across threads.
constexpr int64_t kMinRange = 256;

// One row of the step: query i of query head h, batch b.
struct DecodeRow {
  int64_t q_off = 0, y_off = 0, mask_off = -1;  // elements; mask_off -1: no mask
  int64_t lo = 0, hi = 0;                       // the keys it reads
};

struct DecodePlan {
  AttentionDims d;
  float scale = 1, softcap = 0;
  int64_t q_d = 1;  // Q's stride along D
  HeadsView keys, values;
  int64_t mask_step = 1;
  bool bool_mask = false, empty_row_nan = false;
  std::vector<DecodeRow> rows;  // [B][Hk][group * Sq]
  std::vector<int64_t> nonpad_rows;  // rows whose hi depends on nonpad (none: empty)
};

}  // namespace

bool decode_attention_applies(const AttentionStep& s) {
  const AttentionDims& d = s.d;
  const int64_t rows = d.group() * d.q_len;
  // (A causal frontier under padding moves with each batch's valid keys: the panel step's.)
  if (s.nonpad >= 0 && s.a.causal) return false;
  return rows <= kMaxDecodeRows && d.total >= kMinDecodeKeys && s.keys.s[3] == 1 && s.values.s[3] == 1;
}

int add_decode_attention_step(Compiler& c, const AttentionStep& s, StepInfo info) {
  auto plan = std::make_shared<DecodePlan>();
  DecodePlan& pl = *plan;
  pl.d = s.d;
  const AttentionDims& d = s.d;
  const AttentionAttrs& a = s.a;
  const int64_t B = d.batch, Hq = d.q_heads, Hk = d.kv_heads, Sq = d.q_len, T = d.total, D = d.head, Dv = d.v_head,
                group = d.group();
  pl.scale = s.scale;
  pl.softcap = static_cast<float>(a.softcap);
  pl.keys = s.keys, pl.values = s.values;
  pl.q_d = s.q.s[3];
  pl.empty_row_nan = s.empty_row_nan;
  const bool seq_major = s.seq_major_y;
  // (A finite fill's causal mask is added over every key, as the decomposed graph
  // weighs it: no frontier.)
  const bool causal = a.causal && !s.finite_fill;
  int64_t ms[4] = {0, 0, 0, 0}, mask_len = T;
  if (s.mask >= 0) {
    const std::vector<int64_t> st = *c.strides_of(s.mask);
    const std::vector<int64_t>& md = c.val(s.mask).dims;
    pl.bool_mask = c.val(s.mask).dtype == DType::Bool;
    mask_len = md.back();
    for (size_t i = 0; i < md.size(); ++i) {
      const size_t axis = 4 - md.size() + i;
      ms[axis] = md[i] == 1 && axis != 3 ? 0 : st[i];
    }
    pl.mask_step = ms[3];
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t i = 0; i < Sq; ++i) {
          const int64_t h = hk * group + hh;
          DecodeRow r;
          r.q_off = b * s.q.s[0] + h * s.q.s[1] + i * s.q.s[2];
          r.y_off = seq_major ? ((b * Sq + i) * Hq + h) * Dv : ((b * Hq + h) * Sq + i) * Dv;
          if (s.mask >= 0) r.mask_off = b * ms[0] + h * ms[1] + i * ms[2];
          // Keys allowed by the causal frontier and the windows (the padding is read at run time).
          const int64_t offset = d.past;
          r.hi = std::min(T, mask_len);
          if (causal) r.hi = std::min(r.hi, i + offset + 1);
          if (a.right_window >= 0) r.hi = std::min(r.hi, i + offset + a.right_window + 1);
          if (a.left_window >= 0) r.lo = std::max<int64_t>(0, i + offset - a.left_window);
          pl.rows.push_back(r);
        }

  const std::vector<int64_t> ydims = seq_major ? std::vector<int64_t>{B, Sq, Hq * Dv} : std::vector<int64_t>{B, Hq, Sq, Dv};
  const int y = c.new_value(DType::Float32, ydims, plain_md(ydims, dt::f32), info.label);
  std::vector<int> reads = {s.q.id, s.keys.id, s.values.id};
  const size_t mask_at = reads.size();
  if (s.mask >= 0) reads.push_back(s.mask);
  const size_t nonpad_at = reads.size();
  if (s.nonpad >= 0) reads.push_back(s.nonpad);
  const size_t y_at = reads.size();
  const bool nonpad = s.nonpad >= 0;

  info.signature = "attention-decode " + std::to_string(B) + "x" + std::to_string(Hq) + "/" + std::to_string(Hk) +
                   " q" + std::to_string(Sq) + " kv" + std::to_string(T) + " d" + std::to_string(D) + "," +
                   std::to_string(Dv) + (seq_major ? " seq-major" : "") + (causal ? " causal" : "") +
                   (s.mask >= 0 ? (pl.bool_mask ? " bool-mask" : " mask") : "") + (a.softcap > 0 ? " softcap" : "") +
                   (nonpad ? " nonpad" : "") + (a.left_window >= 0 || a.right_window >= 0 ? " window" : "");
  info.flops = 2.0 * static_cast<double>(B * Hq * Sq * T) * static_cast<double>(D + Dv);
  const double work = static_cast<double>(B * Hq * Sq * T) * static_cast<double>(D + Dv);
  add_native_step(c, std::move(info), reads, {y}, [plan, work, mask_at, nonpad_at, y_at, nonpad](const std::vector<char*>& p) {
    const DecodePlan& pl = *plan;
    const AttentionDims& d = pl.d;
    const int64_t B = d.batch, Hk = d.kv_heads, T = d.total, D = d.head, Dv = d.v_head, R = d.group() * d.q_len;
    const float* q = reinterpret_cast<const float*>(p[0]);
    const float* kk = reinterpret_cast<const float*>(p[1]);
    const float* vv = reinterpret_cast<const float*>(p[2]);
    const char* mask = pl.rows[0].mask_off >= 0 ? p[mask_at] : nullptr;
    const size_t melem = pl.bool_mask ? 1 : sizeof(float);
    const int64_t* valid = nonpad ? reinterpret_cast<const int64_t*>(p[nonpad_at]) : nullptr;
    float* y = reinterpret_cast<float*>(p[y_at]);
    const kernels::VectorIsa isa = kernels::best_vector_isa();
    // The team, and the key ranges of each head: where the heads do not share the
    // team out evenly, each splits into ranges of at least kMinRange keys.
    const int64_t heads = B * Hk;
    const int team = static_cast<int>(std::min<double>(
        static_cast<double>(heads * std::max<int64_t>(1, T / kMinRange)),
        work < 2e6 ? 1 : kernels::team_for_work(omp_get_max_threads(), work / 1e6)));
    int64_t ranges = 1;
    while (team > 1 && (heads * ranges) % team != 0 && heads * ranges < 8 * team && T / (ranges + 1) >= kMinRange)
      ++ranges;
    const int64_t items = heads * ranges, part = R * (Dv + 2);
    std::vector<float> parts(static_cast<size_t>(items * part));
    kernels::parallel_teams(team, [&](int t, int nt) {
      thread_local std::vector<float> qbuf, scratch;
      thread_local std::vector<int64_t> lo, hi;
      thread_local std::vector<const char*> mrows;
      qbuf.resize(static_cast<size_t>(R * D));
      scratch.resize(static_cast<size_t>(kernels::decode_scratch_size(R)));
      lo.resize(static_cast<size_t>(R)), hi.resize(static_cast<size_t>(R)), mrows.resize(static_cast<size_t>(R));
      for (int64_t it = items * t / nt; it < items * (t + 1) / nt; ++it) {
        const int64_t head = it / ranges, k = it % ranges, b = head / Hk, hk = head % Hk;
        const int64_t j0 = T * k / ranges, j1 = T * (k + 1) / ranges;
        const DecodeRow* rows = pl.rows.data() + head * R;
        for (int64_t r = 0; r < R; ++r) {
          const float* src = q + rows[r].q_off;
          for (int64_t e = 0; e < D; ++e) qbuf[static_cast<size_t>(r * D + e)] = src[e * pl.q_d] * pl.scale;
          lo[static_cast<size_t>(r)] = rows[r].lo;
          hi[static_cast<size_t>(r)] = valid ? std::min(rows[r].hi, valid[b]) : rows[r].hi;
          mrows[static_cast<size_t>(r)] = mask ? mask + static_cast<size_t>(rows[r].mask_off) * melem : nullptr;
        }
        float* out = parts.data() + it * part;
        float *m = out, *l = out + R, *acc = out + 2 * R;
        std::fill(m, m + R, -std::numeric_limits<float>::infinity());
        std::fill(l, l + R + R * Dv, 0.0f);
        kernels::DecodeHead h;
        h.rows = R, h.D = D, h.Dv = Dv;
        h.q = qbuf.data(), h.q_row = D;
        h.k = kk + b * pl.keys.s[0] + hk * pl.keys.s[1], h.k_row = pl.keys.s[2];
        h.v = vv + b * pl.values.s[0] + hk * pl.values.s[1], h.v_row = pl.values.s[2];
        h.lo = lo.data(), h.hi = hi.data();
        h.mask = mask ? mrows.data() : nullptr;
        h.mask_step = pl.mask_step, h.bool_mask = pl.bool_mask;
        h.softcap = pl.softcap;
        kernels::decode_attention_keys(isa, h, j0, j1, m, l, acc, scratch.data());
      }
    });
    // Each row from its head's ranges.
    const float empty = pl.empty_row_nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    std::vector<float> m(static_cast<size_t>(ranges)), l(static_cast<size_t>(ranges));
    for (int64_t head = 0; head < heads; ++head)
      for (int64_t r = 0; r < R; ++r) {
        const float* first = parts.data() + head * ranges * part;
        for (int64_t k = 0; k < ranges; ++k) {
          m[static_cast<size_t>(k)] = first[k * part + r];
          l[static_cast<size_t>(k)] = first[k * part + R + r];
        }
        kernels::decode_attention_merge(m.data(), l.data(), first + 2 * R + r * Dv, part, ranges, Dv, empty,
                                        y + pl.rows[static_cast<size_t>(head * R + r)].y_off);
      }
  });
  return y;
}

}  // namespace isomer::runtime
