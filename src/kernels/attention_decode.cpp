#include "kernels/attention_decode.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "ir/error.h"
#include "kernels/rows_vec.h"
#include "kernels/vmath.h"

#ifdef ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#endif

namespace isomer::kernels {

namespace {

using rowv::FloatVector;
using rowv::kLanes;
using rowv::Part;

// Keys a block of scores holds (its rows stay in L1 between the products and the
// softmax).
constexpr int64_t kBlock = 256;
// Rows whose P V accumulators stay in registers at once (4 x 4 vectors).
constexpr int64_t kRowChunk = 4;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Lane i of the result reads lane pick(i) of the pair (x, y): x holds L / S
// segments of S lanes (the partial sums of one key each), y the next ones; the
// result holds their segments halved (the two halves' sum), x's then y's, in order.
template <int L, int S, int Half>
constexpr int pick(int lane) {
  const int h = S / 2, seg = lane / h, off = lane % h, n = L / S;
  return (seg < n ? seg * S : L + (seg - n) * S) + off + Half * h;
}
template <FloatVector V, int S, size_t... I>
ISOMER_VINLINE V fold(V x, V y, std::index_sequence<I...>) {
  constexpr int L = kLanes<V>;
  return __builtin_shufflevector(x, y, pick<L, S, 0>(static_cast<int>(I))...) +
         __builtin_shufflevector(x, y, pick<L, S, 1>(static_cast<int>(I))...);
}
// L vectors (one key's partial sums each) to one vector of their L lane sums, by
// halves: L - 1 adds and 2 (L - 1) shuffles, where a lane sum per key took 2 log L.
template <FloatVector V, int S = kLanes<V>>
ISOMER_VINLINE void fold_all(V* a) {
  constexpr int L = kLanes<V>, n = L / S;  // n: segments per vector now; L / n vectors left
  if constexpr (S > 1) {
#pragma GCC unroll 16
    for (int t = 0; t < L / n / 2; ++t) a[t] = fold<V, S>(a[2 * t], a[2 * t + 1], std::make_index_sequence<L>{});
    fold_all<V, S / 2>(a);
  }
}

// Scores of keys [j0, j0 + n) for RB rows (n <= L: the rest read key j0 again):
// a vector per row, lane j the dot of its query and key j0 + j. Eight keys of RB
// rows at a time, each pair with its own accumulator: key by key, each dot's chain
// of multiply-adds waited on the latency (16 cycles a key at D = 64), and a pointer
// for each of 16 keys ran out of registers; two rows read each key once.
template <FloatVector V, int RB>
ISOMER_VINLINE void dots(const DecodeHead& h, const float* q, int64_t j0, int64_t n, V* out) {
  constexpr int L = kLanes<V>, G = 8;
  V a[RB][L];
#pragma GCC unroll 2
  for (int g = 0; g < L; g += G) {
    const float* k[G];
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) {
      k[j] = h.k + (j0 + (g + j < n ? g + j : 0)) * h.k_row;
#pragma GCC unroll 2
      for (int r = 0; r < RB; ++r) a[r][g + j] = V{};
    }
    int64_t e = 0;
    for (; e + L <= h.D; e += L) {
      V x[RB];
#pragma GCC unroll 2
      for (int r = 0; r < RB; ++r) x[r] = vmv::load<V>(q + r * h.q_row + e);
#pragma GCC unroll 8
      for (int j = 0; j < G; ++j) {
        const V kj = vmv::load<V>(k[j] + e);
#pragma GCC unroll 2
        for (int r = 0; r < RB; ++r) a[r][g + j] += x[r] * kj;
      }
    }
    if (e < h.D) {
#pragma GCC unroll 8
      for (int j = 0; j < G; ++j) {
        const V kj = Part<V>::load(k[j] + e, h.D - e, 0.0f);
#pragma GCC unroll 2
        for (int r = 0; r < RB; ++r) a[r][g + j] += Part<V>::load(q + r * h.q_row + e, h.D - e, 0.0f) * kj;
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < RB; ++r) {
    fold_all<V>(a[r]);
    out[r] = a[r][0];
  }
}

template <FloatVector V, int RB>
ISOMER_VINLINE void scores(const DecodeHead& h, int64_t r, int64_t b0, int64_t j, int64_t w, float* p) {
  V s[RB];
  dots<V, RB>(h, h.q + r * h.q_row, b0 + j, w, s);
#pragma GCC unroll 2
  for (int i = 0; i < RB; ++i) {
    if (w == kLanes<V>) vmv::store(p + (r + i) * kBlock + j, s[i]);
    else Part<V>::store(p + (r + i) * kBlock + j, s[i], w);
  }
}

// x in every lane, as one broadcast (vmv::splat's lane loop became masked
// broadcasts in the AVX-512 entry point).
template <FloatVector V>
ISOMER_VINLINE V splat(float x) {
  return vmv::splat<V>(x);
}
#ifdef ISOMER_HAVE_ISA_TARGETS
template <>
ISOMER_TARGET_AVX512 inline vm16::v16 splat<vm16::v16>(float x) {
  return reinterpret_cast<vm16::v16>(_mm512_set1_ps(x));
}
#endif

// acc[r] += sum over keys j of p[r][j] v_j, for rows [r0, r0 + R) and columns [c0,
// c0 + C L) (whole vectors), keys [0, n) of the block.
template <FloatVector V, int R, int C>
ISOMER_VINLINE void pv_tile(const DecodeHead& h, const float* p, int64_t j0, int64_t n, int64_t r0, int64_t c0,
                            float* acc) {
  V s[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) s[r][c] = vmv::load<V>(acc + (r0 + r) * h.Dv + c0 + c * kLanes<V>);
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = h.v + (j0 + j) * h.v_row + c0;
    V x[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) x[c] = vmv::load<V>(vj + c * kLanes<V>);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const V w = splat<V>(p[(r0 + r) * kBlock + j]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) s[r][c] += w * x[c];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) vmv::store(acc + (r0 + r) * h.Dv + c0 + c * kLanes<V>, s[r][c]);
}

template <FloatVector V, int R>
ISOMER_VINLINE void pv_rows(const DecodeHead& h, const float* p, int64_t j0, int64_t n, int64_t r0, float* acc) {
  constexpr int L = kLanes<V>;
  int64_t c0 = 0;
  for (; c0 + 4 * L <= h.Dv; c0 += 4 * L) pv_tile<V, R, 4>(h, p, j0, n, r0, c0, acc);
  for (; c0 + L <= h.Dv; c0 += L) pv_tile<V, R, 1>(h, p, j0, n, r0, c0, acc);
  for (; c0 < h.Dv; ++c0)  // columns past the last whole vector
    for (int r = 0; r < R; ++r) {
      float s = acc[(r0 + r) * h.Dv + c0];
      for (int64_t j = 0; j < n; ++j) s += p[(r0 + r) * kBlock + j] * h.v[(j0 + j) * h.v_row + c0];
      acc[(r0 + r) * h.Dv + c0] = s;
    }
}

template <FloatVector V>
ISOMER_VINLINE void keys_for(const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l, float* acc,
                             float* scratch) {
  constexpr int L = kLanes<V>;
  float* p = scratch;  // [rows][kBlock] scores, then weights
  for (int64_t b0 = j0; b0 < j1; b0 += kBlock) {
    const int64_t n = std::min(kBlock, j1 - b0);
    for (int64_t j = 0; j < n; j += L) {
      const int64_t w = std::min<int64_t>(L, n - j);
      int64_t r = 0;
      for (; r + 2 <= h.rows; r += 2) scores<V, 2>(h, r, b0, j, w, p);
      if (r < h.rows) scores<V, 1>(h, r, b0, j, w, p);
    }
    for (int64_t r = 0; r < h.rows; ++r) {
      float* x = p + r * kBlock;
      const int64_t lo = std::clamp(h.lo[r] - b0, int64_t{0}, n), hi = std::clamp(h.hi[r] - b0, lo, n);
      if (h.softcap > 0) {
        const float cap = h.softcap, inv = 1.0f / cap;
        for (int64_t j = lo; j < hi; ++j) x[j] = cap * vm::tanh(x[j] * inv);
      }
      if (h.mask && h.mask[r]) {
        if (h.bool_mask) {
          const bool* mk = reinterpret_cast<const bool*>(h.mask[r]) + b0 * h.mask_step;
          for (int64_t j = lo; j < hi; ++j) x[j] = mk[j * h.mask_step] ? x[j] : kNegInf;
        } else {
          const float* mk = reinterpret_cast<const float*>(h.mask[r]) + b0 * h.mask_step;
          if (h.mask_step == 1) {
            for (int64_t j = lo; j < hi; ++j) x[j] += mk[j];
          } else {
            for (int64_t j = lo; j < hi; ++j) x[j] += mk[j * h.mask_step];
          }
        }
      }
      std::fill(x, x + lo, kNegInf);
      std::fill(x + hi, x + n, kNegInf);
      const float mb = rowv::max<V>(x, n);
      // The new running max; NaN stays (a NaN max, or one met now).
      const float m0 = m[r], m1 = mb != mb || mb > m0 ? mb : m0;
      if (m1 == kNegInf) {  // every key so far masked: nothing to weigh
        std::fill(x, x + n, 0.0f);
        continue;
      }
      if (m1 != m0) {
        const float f = std::exp(m0 - m1);  // 0 from -inf
        l[r] *= f;
        float* ar = acc + r * h.Dv;
        for (int64_t c = 0; c < h.Dv; ++c) ar[c] *= f;
        m[r] = m1;
      }
      l[r] += rowv::exp_sum<V>(x, x, n, m1);
    }
    int64_t r0 = 0;
    for (; r0 + kRowChunk <= h.rows; r0 += kRowChunk) pv_rows<V, kRowChunk>(h, p, b0, n, r0, acc);
    for (; r0 < h.rows; ++r0) pv_rows<V, 1>(h, p, b0, n, r0, acc);
  }
}

using KeysFn = void (*)(const DecodeHead&, int64_t, int64_t, float*, float*, float*, float*);

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void keys_avx512(const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l,
                                                     float* acc, float* scratch) {
  keys_for<vm16::v16>(h, j0, j1, m, l, acc, scratch);
}
ISOMER_TARGET_AVX2 void keys_avx2(const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l, float* acc,
                                  float* scratch) {
  keys_for<vm8::v8>(h, j0, j1, m, l, acc, scratch);
}
void keys_baseline(const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l, float* acc, float* scratch) {
  keys_for<vm8::v8>(h, j0, j1, m, l, acc, scratch);
}

}  // namespace

int64_t decode_scratch_size(int64_t rows) { return rows * kBlock; }

void decode_attention_keys(VectorIsa isa, const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l, float* acc,
                           float* scratch) {
  if (!vector_isa_available(isa))
    throw Error(std::string("decode_attention_keys: this CPU has no ") + vector_isa_name(isa));
  const KeysFn fn = isa == VectorIsa::Avx512 ? keys_avx512 : isa == VectorIsa::Avx2 ? keys_avx2 : keys_baseline;
  fn(h, j0, j1, m, l, acc, scratch);
}

void decode_attention_merge(const float* m, const float* l, const float* acc, int64_t acc_step, int64_t parts,
                            int64_t Dv, float empty, float* y) {
  float top = kNegInf;
  for (int64_t p = 0; p < parts; ++p)
    if (m[p] != m[p] || m[p] > top) top = m[p];
  if (top == kNegInf) {
    std::fill(y, y + Dv, empty);
    return;
  }
  double sum = 0;
  std::fill(y, y + Dv, 0.0f);
  for (int64_t p = 0; p < parts; ++p) {
    if (m[p] == kNegInf) continue;
    const float f = parts == 1 ? 1.0f : std::exp(m[p] - top);
    sum += static_cast<double>(f) * l[p];
    for (int64_t c = 0; c < Dv; ++c) y[c] += f * acc[p * acc_step + c];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t c = 0; c < Dv; ++c) y[c] *= inv;
}

}  // namespace isomer::kernels
