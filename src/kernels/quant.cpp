#include "kernels/quant.h"

#include <algorithm>
#include <numeric>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/vector_isa.h"

#if ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#endif

namespace isomer::kernels {
namespace {

// The team for a pass over `elements` values of `bytes_per_element` bytes read and
// written: a memory-bound step, that pays for a thread per kTeamBytes.
inline int memory_team(int team, int64_t elements, double bytes_per_element) {
  return team_for_work(team, static_cast<double>(elements) * bytes_per_element / kTeamBytes);
}

// [begin, end) of part `t` of `n` items split into `team` parts.
inline std::pair<int64_t, int64_t> part(int64_t n, int t, int team) {
  return {n * t / team, n * (t + 1) / team};
}

// The loops below are written so that GCC vectorizes them: the saturation is two
// selects (NaN fails the first, and lands on `lo`), the rounding one vrndscale.
template <class T>
ISOMER_CLONES void quantize_run(const float* __restrict x, T* __restrict y, int64_t n, float scale, float zp, float lo,
                                float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float r = std::nearbyint(x[i] / scale) + zp;
    r = r >= lo ? r : lo;
    r = r <= hi ? r : hi;
    y[i] = static_cast<T>(r);
  }
}

template <class T>
ISOMER_CLONES void dequantize_run(const T* __restrict x, float* __restrict y, int64_t n, float scale, int32_t zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

template <class T>
void quantize_t(const float* x, T* y, const QShape& s, const float* scale, const int32_t* zp, float lo, float hi,
                int team) {
  const int64_t rows = s.outer * s.channels;
  if (s.channels == 1 || s.inner * 4 < 64) {
    // One scale, or channels too short to split by row: split the flat range.
    const int64_t n = rows * s.inner;
    parallel_teams(memory_team(team, n, sizeof(float) + sizeof(T)), [&](int t, int k) {
      auto [b, e] = part(n, t, k);
      if (s.channels == 1) {
        quantize_run(x + b, y + b, e - b, scale[0], zp ? static_cast<float>(zp[0]) : 0.f, lo, hi);
        return;
      }
      for (int64_t i = b; i < e; ++i) {
        const int64_t c = (i / s.inner) % s.channels;
        quantize_run(x + i, y + i, 1, scale[c], zp ? static_cast<float>(zp[c]) : 0.f, lo, hi);
      }
    });
    return;
  }
  parallel_teams(std::min<int64_t>(memory_team(team, rows * s.inner, sizeof(float) + sizeof(T)), rows), [&](int t, int k) {
    auto [b, e] = part(rows, t, k);
    for (int64_t r = b; r < e; ++r) {
      const int64_t c = r % s.channels;
      quantize_run(x + r * s.inner, y + r * s.inner, s.inner, scale[c], zp ? static_cast<float>(zp[c]) : 0.f, lo, hi);
    }
  });
}

template <class T>
void dequantize_t(const T* x, float* y, const QShape& s, const float* scale, const int32_t* zp, int team) {
  const int64_t rows = s.outer * s.channels;
  parallel_teams(memory_team(team, rows * s.inner, sizeof(T) + sizeof(float)), [&](int t, int k) {
    auto [b, e] = part(rows * s.inner, t, k);
    while (b < e) {
      const int64_t r = b / s.inner, end = std::min(e, (r + 1) * s.inner);
      const int64_t c = s.channels == 1 ? 0 : r % s.channels;
      dequantize_run(x + b, y + b, end - b, scale[c], zp ? zp[c] : 0);
      b = end;
    }
  });
}

template <class T>
ISOMER_CLONES void requantize_row(const int32_t* __restrict acc, T* __restrict y, int64_t cols,
                                  const int32_t* __restrict bias, const float* __restrict mult, bool per_col, float zp,
                                  float lo, float hi) {
  for (int64_t j = 0; j < cols; ++j) {
    const int32_t a = acc[j] + (bias ? bias[j] : 0);
    float r = std::nearbyint(static_cast<float>(a) * mult[per_col ? j : 0]) + zp;
    r = r >= lo ? r : lo;
    r = r <= hi ? r : hi;
    y[j] = static_cast<T>(r);
  }
}

template <class T>
void requantize_t(const int32_t* acc, T* y, QType t, int64_t rows, int64_t cols, const int32_t* bias, const float* mult,
                  bool per_col, int32_t zp, int team) {
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  parallel_teams(memory_team(team, rows * cols, sizeof(int32_t) + sizeof(T)), [&](int th, int k) {
    auto [b, e] = part(rows, th, k);
    for (int64_t r = b; r < e; ++r)
      requantize_row(acc + r * cols, y + r * cols, cols, bias, mult, per_col, static_cast<float>(zp), lo, hi);
  });
}

// One row of correct_zero_points: the sum's step and the output's form fixed at
// compile time, so that the loop vectorizes (a run-time step made the sums a gather).
template <class T, bool SUM_COL, bool REQUANT, bool PER_COL>
ISOMER_CLONES void correct_row(const int32_t* __restrict acc, const int32_t* __restrict sum, int64_t cols,
                               const int32_t* __restrict zp, const int32_t* __restrict bias, T* __restrict y,
                               const float* __restrict mult, float y_zp, float lo, float hi) {
  const uint32_t s0 = static_cast<uint32_t>(sum[0]);
  for (int64_t j = 0; j < cols; ++j) {
    const uint32_t s = SUM_COL ? static_cast<uint32_t>(sum[j]) : s0;
    const auto v = static_cast<int32_t>(static_cast<uint32_t>(acc[j]) - s * static_cast<uint32_t>(zp[j]) +
                                        static_cast<uint32_t>(bias[j]));
    if constexpr (REQUANT) {
      float r = std::nearbyint(static_cast<float>(v) * mult[PER_COL ? j : 0]) + y_zp;
      r = r >= lo ? r : lo;
      r = r <= hi ? r : hi;
      y[j] = static_cast<T>(r);
    } else {
      y[j] = v;
    }
  }
}

template <class T, bool SUM_COL, bool REQUANT, bool PER_COL>
void correct_rows(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, const int32_t* bias, T* y,
                  QType t, const float* mult, int32_t y_zp, int team) {
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  parallel_teams(memory_team(team, rows * cols, 2 * sizeof(int32_t) + sizeof(T)), [&](int th, int k) {
    auto [b, e] = part(rows, th, k);
    for (int64_t r = b; r < e; ++r)
      correct_row<T, SUM_COL, REQUANT, PER_COL>(in.acc + r * in.acc_stride, in.sums + r * in.sum_stride, cols, zp,
                                                bias, y + r * cols, mult, static_cast<float>(y_zp), lo, hi);
  });
}

template <class T, bool REQUANT, bool PER_COL>
void correct_rows_of(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, const int32_t* bias,
                     void* y, QType t, const float* mult, int32_t y_zp, int team) {
  T* out = static_cast<T*>(y);
  if (in.sum_per_col)
    correct_rows<T, true, REQUANT, PER_COL>(in, rows, cols, zp, bias, out, t, mult, y_zp, team);
  else
    correct_rows<T, false, REQUANT, PER_COL>(in, rows, cols, zp, bias, out, t, mult, y_zp, team);
}

template <class T>
void correct_requantized(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, const int32_t* bias,
                         void* y, QType t, const float* mult, bool per_col, int32_t y_zp, int team) {
  if (per_col)
    correct_rows_of<T, true, true>(in, rows, cols, zp, bias, y, t, mult, y_zp, team);
  else
    correct_rows_of<T, true, false>(in, rows, cols, zp, bias, y, t, mult, y_zp, team);
}

template <bool SUM_COL, bool PER_COL, bool RELU>
ISOMER_CLONES void correct_row_scaled(const int32_t* __restrict acc, const int32_t* __restrict sum, int64_t cols,
                                      const int32_t* __restrict zp, float* __restrict y, const float* __restrict scale,
                                      const float* __restrict add, const float* __restrict res) {
  const uint32_t s0 = static_cast<uint32_t>(sum[0]);
  for (int64_t j = 0; j < cols; ++j) {
    const uint32_t s = SUM_COL ? static_cast<uint32_t>(sum[j]) : s0;
    const auto v = static_cast<int32_t>(static_cast<uint32_t>(acc[j]) - s * static_cast<uint32_t>(zp[j]));
    y[j] = static_cast<float>(v) * scale[PER_COL ? j : 0];
  }
  // The Add apart, so that no clone contracts it with the product into one FMA
  // (rounded once, where ONNX Runtime rounds the product and the sum); the residual
  // after it, rounded again, as ONNX Runtime's next Add.
  if (res) {
    for (int64_t j = 0; j < cols; ++j) {
      const float f = (y[j] + add[j]) + res[j];
      y[j] = RELU ? (f > 0.0f ? f : 0.0f) : f;
    }
    return;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float f = y[j] + add[j];
    y[j] = RELU ? (f > 0.0f ? f : 0.0f) : f;
  }
}

template <bool SUM_COL, bool PER_COL, bool RELU>
void correct_rows_scaled(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, float* y,
                         const float* scale, const float* add, const float* res, int team) {
  parallel_teams(memory_team(team, rows * cols, 2 * sizeof(int32_t) + sizeof(float)), [&](int th, int k) {
    auto [b, e] = part(rows, th, k);
    for (int64_t r = b; r < e; ++r)
      correct_row_scaled<SUM_COL, PER_COL, RELU>(in.acc + r * in.acc_stride, in.sums + r * in.sum_stride, cols, zp,
                                                 y + r * cols, scale, add, res ? res + r * cols : nullptr);
  });
}

template <bool SUM_COL>
void correct_scaled_of(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, float* y,
                       const float* scale, bool per_col, const float* add, const float* res, bool relu, int team) {
  if (per_col && relu) return correct_rows_scaled<SUM_COL, true, true>(in, rows, cols, zp, y, scale, add, res, team);
  if (per_col) return correct_rows_scaled<SUM_COL, true, false>(in, rows, cols, zp, y, scale, add, res, team);
  if (relu) return correct_rows_scaled<SUM_COL, false, true>(in, rows, cols, zp, y, scale, add, res, team);
  correct_rows_scaled<SUM_COL, false, false>(in, rows, cols, zp, y, scale, add, res, team);
}

// GCC keeps a min/max reduction over an array of lanes scalar (a compare and a
// branchless move per element, 5x ONNX Runtime's time); a vector of 16 lanes
// compiles to vminps/vmaxps. NaN never replaces a bound, as before.
ISOMER_CLONES void min_max(const float* __restrict x, int64_t n, float* mn_out, float* mx_out) {
  using V = float __attribute__((vector_size(64)));
  constexpr int L = 16;
  V mn = {}, mx = {};  // the range always includes 0
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, x + i, sizeof v);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  float a = 0, b = 0;
  for (int l = 0; l < L; ++l) a = std::min(a, mn[l]), b = std::max(b, mx[l]);
  for (; i < n; ++i) {
    a = x[i] < a ? x[i] : a;
    b = x[i] > b ? x[i] : b;
  }
  *mn_out = a;
  *mx_out = b;
}

}  // namespace

void quantize(const float* x, void* y, QType t, const QShape& s, const float* scale, const int32_t* zp, int team) {
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  switch (t) {
    case QType::U8: return quantize_t(x, static_cast<uint8_t*>(y), s, scale, zp, lo, hi, team);
    case QType::S8: return quantize_t(x, static_cast<int8_t*>(y), s, scale, zp, lo, hi, team);
    case QType::U16: return quantize_t(x, static_cast<uint16_t*>(y), s, scale, zp, lo, hi, team);
    case QType::S16: return quantize_t(x, static_cast<int16_t*>(y), s, scale, zp, lo, hi, team);
    case QType::S32: break;  // float rounding cannot reach every int32: ONNX has no int32 QuantizeLinear
  }
}

namespace {

// 16 rows of 16 bytes (row r at src + r ld_src) written transposed (row j at dst + j
// ld_dst). Four rounds of interleaving rows i and i + 8: each moves one bit of the
// column index into the row index and one of the row index into the column's.
void transpose16_bytes(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst) {
#if ISOMER_HAVE_ISA_TARGETS
  __m128i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ld_src));
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);
      t[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);
    }
    std::copy(t, t + 16, r);
  }
  for (int j = 0; j < 16; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j * ld_dst), r[j]);
#else
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
#endif
}

// Each block of 16 channels quantized row-major into a tile of 16 x inner bytes,
// then written out 16 x 16 bytes at a time, transposed.
template <class T>
void quantize_last_t(const float* x, T* y, int64_t outer, int64_t channels, int64_t inner, float scale, float zp,
                     float lo, float hi, int team) {
  const int64_t blocks = channels / 16, n = outer * blocks;
  parallel_teams(std::min<int64_t>(memory_team(team, outer * channels * inner, sizeof(float) + sizeof(T)), n),
                 [&](int t, int k) {
                   std::vector<T> tile(static_cast<size_t>(16 * inner));
                   auto [b, e] = part(n, t, k);
                   for (int64_t i = b; i < e; ++i) {
                     const int64_t o = i / blocks, c0 = i % blocks * 16;
                     for (int64_t r = 0; r < 16; ++r)
                       quantize_run(x + (o * channels + c0 + r) * inner, tile.data() + r * inner, inner, scale, zp, lo,
                                    hi);
                     for (int64_t s0 = 0; s0 < inner; s0 += 16)
                       transpose16_bytes(reinterpret_cast<const uint8_t*>(tile.data() + s0), inner,
                                         reinterpret_cast<uint8_t*>(y + (o * inner + s0) * channels + c0), channels);
                   }
                 });
}

}  // namespace

bool quantize_to_channels_last(const float* x, void* y, QType t, int64_t outer, int64_t channels, int64_t inner,
                               float scale, int32_t zp, int team) {
  if (channels % 16 != 0 || inner % 16 != 0 || (t != QType::U8 && t != QType::S8)) return false;
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t)), z = static_cast<float>(zp);
  if (t == QType::U8)
    quantize_last_t(x, static_cast<uint8_t*>(y), outer, channels, inner, scale, z, lo, hi, team);
  else
    quantize_last_t(x, static_cast<int8_t*>(y), outer, channels, inner, scale, z, lo, hi, team);
  return true;
}

void dequantize(const void* x, QType t, float* y, const QShape& s, const float* scale, const int32_t* zp, int team) {
  switch (t) {
    case QType::U8: return dequantize_t(static_cast<const uint8_t*>(x), y, s, scale, zp, team);
    case QType::S8: return dequantize_t(static_cast<const int8_t*>(x), y, s, scale, zp, team);
    case QType::U16: return dequantize_t(static_cast<const uint16_t*>(x), y, s, scale, zp, team);
    case QType::S16: return dequantize_t(static_cast<const int16_t*>(x), y, s, scale, zp, team);
    case QType::S32: return dequantize_t(static_cast<const int32_t*>(x), y, s, scale, zp, team);
  }
}

DynamicParams dynamic_params(const float* x, int64_t n, int team) {
  float mn = 0, mx = 0;
  const int k = memory_team(team, n, sizeof(float));
  std::vector<float> mins(static_cast<size_t>(k)), maxs(static_cast<size_t>(k));
  parallel_teams(k, [&](int t, int kk) {
    auto [b, e] = part(n, t, kk);
    min_max(x + b, e - b, &mins[static_cast<size_t>(t)], &maxs[static_cast<size_t>(t)]);
  });
  for (int t = 0; t < k; ++t) mn = std::min(mn, mins[static_cast<size_t>(t)]), mx = std::max(mx, maxs[static_cast<size_t>(t)]);
  DynamicParams p;
  p.scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  const float zp = std::clamp(0.0f - mn / p.scale, 0.0f, 255.0f);
  p.zero_point = static_cast<uint8_t>(std::nearbyint(zp));
  return p;
}

void requantize(const int32_t* acc, void* y, QType t, int64_t rows, int64_t cols, const int32_t* bias,
                const float* mult, bool per_col, int32_t zp, int team) {
  switch (t) {
    case QType::U8: return requantize_t(acc, static_cast<uint8_t*>(y), t, rows, cols, bias, mult, per_col, zp, team);
    case QType::S8: return requantize_t(acc, static_cast<int8_t*>(y), t, rows, cols, bias, mult, per_col, zp, team);
    case QType::U16: return requantize_t(acc, static_cast<uint16_t*>(y), t, rows, cols, bias, mult, per_col, zp, team);
    case QType::S16: return requantize_t(acc, static_cast<int16_t*>(y), t, rows, cols, bias, mult, per_col, zp, team);
    case QType::S32: break;
  }
}

void correct_zero_points(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, const int32_t* bias,
                         void* y, QType t, const float* mult, bool per_col, int32_t y_zp, int team) {
  switch (t) {
    case QType::U8: return correct_requantized<uint8_t>(in, rows, cols, zp, bias, y, t, mult, per_col, y_zp, team);
    case QType::S8: return correct_requantized<int8_t>(in, rows, cols, zp, bias, y, t, mult, per_col, y_zp, team);
    case QType::U16: return correct_requantized<uint16_t>(in, rows, cols, zp, bias, y, t, mult, per_col, y_zp, team);
    case QType::S16: return correct_requantized<int16_t>(in, rows, cols, zp, bias, y, t, mult, per_col, y_zp, team);
    case QType::S32: return correct_rows_of<int32_t, false, false>(in, rows, cols, zp, bias, y, t, mult, y_zp, team);
  }
}

void correct_zero_points_scaled(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, float* y,
                                const float* scale, bool per_col, const float* add, const float* residual, bool relu,
                                int team) {
  if (in.sum_per_col) return correct_scaled_of<true>(in, rows, cols, zp, y, scale, per_col, add, residual, relu, team);
  correct_scaled_of<false>(in, rows, cols, zp, y, scale, per_col, add, residual, relu, team);
}

namespace {

void lookup_scalar(const uint8_t* table, const uint8_t* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[in[i]];
}

#if ISOMER_HAVE_ISA_TARGETS
// 64 bytes an iteration with AVX-512 VBMI: the table's halves are each two
// registers of one two-source byte permute, and the index's top bit picks the half
// (a byte at a time, a lookup took 1.2 ns: most of a quantized EfficientNet's SiLUs).
__attribute__((target("arch=x86-64-v4,avx512vbmi"))) void lookup_vbmi(const uint8_t* table, const uint8_t* in,
                                                                       uint8_t* out, int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i idx = _mm512_loadu_si512(in + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1), hi = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
  }
  lookup_scalar(table, in + i, out + i, n - i);
}

bool have_vbmi() {
  static const bool yes = vector_isa_available(VectorIsa::Avx512) && __builtin_cpu_supports("avx512vbmi");
  return yes;
}
#endif

}  // namespace

void lookup(const uint8_t* table, const void* x, void* y, int64_t n, int team) {
  const auto* in = static_cast<const uint8_t*>(x);
  auto* out = static_cast<uint8_t*>(y);
  parallel_teams(memory_team(team, n, 2.0), [&](int th, int k) {
    auto [b, e] = part(n, th, k);
#if ISOMER_HAVE_ISA_TARGETS
    if (have_vbmi()) return lookup_vbmi(table, in + b, out + b, e - b);
#endif
    lookup_scalar(table, in + b, out + b, e - b);
  });
}

namespace {

// Where window o of axis a lies: its kernel offsets inside x, [*k0, *k1).
void window_span(const PoolAxis& a, int64_t o, int64_t* k0, int64_t* k1) {
  const int64_t start = o * a.stride - a.pad_begin;
  *k0 = std::max<int64_t>(0, -start);
  *k1 = std::min(a.kernel, a.in - start);
}

template <class T>
void qlinear_average_pool_t(const T* x, T* y, QType t, const QLinearPool& p, int team) {
  const PoolAxis &a0 = p.axes[0], &a1 = p.axes[1], &a2 = p.axes[2];
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  const int64_t C = p.channels, in_size = a0.in * a1.in * a2.in, out_size = a0.out * a1.out * a2.out;
  const float ratio = p.sx;
  auto quantized = [&](int32_t sum, int64_t count) {
    const float avg = static_cast<float>(sum) * ratio / static_cast<float>(count);
    float r = std::nearbyint(avg / p.sy) + static_cast<float>(p.zy);
    r = r >= lo ? r : lo;
    return static_cast<T>(r <= hi ? r : hi);
  };
  // Each output position: its taps' offsets in x (in positions), and its count.
  const int64_t positions = p.batch * out_size;
  parallel_teams(memory_team(team, positions * C * a0.kernel * a1.kernel * a2.kernel, 1.0), [&](int th, int k) {
    auto [b, e] = part(positions, th, k);
    std::vector<int64_t> taps(static_cast<size_t>(a0.kernel * a1.kernel * a2.kernel));
    std::vector<int32_t> acc(static_cast<size_t>(C));
    for (int64_t q = b; q < e; ++q) {
      const int64_t n = q / out_size, o = q % out_size;
      const int64_t o2 = o % a2.out, o1 = (o / a2.out) % a1.out, o0 = o / (a2.out * a1.out);
      int64_t k00, k01, k10, k11, k20, k21;
      window_span(a0, o0, &k00, &k01);
      window_span(a1, o1, &k10, &k11);
      window_span(a2, o2, &k20, &k21);
      size_t nt = 0;
      for (int64_t i0 = k00; i0 < k01; ++i0)
        for (int64_t i1 = k10; i1 < k11; ++i1)
          for (int64_t i2 = k20; i2 < k21; ++i2)
            taps[nt++] = ((o0 * a0.stride - a0.pad_begin + i0) * a1.in + o1 * a1.stride - a1.pad_begin + i1) * a2.in +
                         o2 * a2.stride - a2.pad_begin + i2;
      // With the padding included ONNX Runtime counts the whole kernel, also where a
      // ceil-mode window reaches past the end padding.
      const int64_t count = std::max<int64_t>(1, p.include_pad ? a0.kernel * a1.kernel * a2.kernel : static_cast<int64_t>(nt));
      const int32_t shift = static_cast<int32_t>(nt) * p.zx;
      if (p.channels_last) {
        std::fill(acc.begin(), acc.end(), -shift);
        for (size_t i = 0; i < nt; ++i) {
          const T* xp = x + (n * in_size + taps[i]) * C;
          for (int64_t c = 0; c < C; ++c) acc[static_cast<size_t>(c)] += static_cast<int32_t>(xp[c]);
        }
        T* yp = y + (n * out_size + o) * C;
        for (int64_t c = 0; c < C; ++c) yp[c] = quantized(acc[static_cast<size_t>(c)], count);
      } else {
        for (int64_t c = 0; c < C; ++c) {
          const T* xp = x + (n * C + c) * in_size;
          int32_t sum = -shift;
          for (size_t i = 0; i < nt; ++i) sum += static_cast<int32_t>(xp[taps[i]]);
          y[(n * C + c) * out_size + o] = quantized(sum, count);
        }
      }
    }
  });
}

}  // namespace

void qlinear_average_pool(const void* x, void* y, QType t, const QLinearPool& p, int team) {
  if (t == QType::U8)
    return qlinear_average_pool_t(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), t, p, team);
  qlinear_average_pool_t(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), t, p, team);
}

void concat_rows(const ConcatPart* parts, size_t count, int64_t rows, void* y, int team) {
  int64_t width = 0;
  for (size_t i = 0; i < count; ++i) width += parts[i].width;
  parallel_teams(memory_team(team, rows * width, 2.0), [&](int th, int k) {
    auto [b, e] = part(rows, th, k);
    for (int64_t r = b; r < e; ++r) {
      uint8_t* out = static_cast<uint8_t*>(y) + r * width;
      for (size_t i = 0; i < count; ++i) {
        const ConcatPart& p = parts[i];
        const uint8_t* in = static_cast<const uint8_t*>(p.data) + r * p.width;
        if (p.table)
          for (int64_t j = 0; j < p.width; ++j) out[j] = p.table[in[j]];
        else
          std::memcpy(out, in, static_cast<size_t>(p.width));
        out += p.width;
      }
    }
  });
}

namespace {

// One stretch of outputs whose operands advance by AS and BS (1, or 0 for an
// operand held still): steps and the operation fixed at compile time, so that the
// loop vectorizes (a run-time step made it a gather: 2 ns an element).
template <class T, int AS, int BS, bool MUL>
ISOMER_CLONES void qlinear_stretch(const T* __restrict a, const T* __restrict b, T* __restrict c, int64_t n,
                                   QLinearBinary p, float lo, float hi) {
  const float za = static_cast<float>(p.za), zb = static_cast<float>(p.zb), zc = static_cast<float>(p.zc);
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(a[i * AS]) - za, y = static_cast<float>(b[i * BS]) - zb;
    float r = std::nearbyint(MUL ? x * y * p.ra : x * p.ra + y * p.rb) + zc;
    r = r >= lo ? r : lo;
    r = r <= hi ? r : hi;
    c[i] = static_cast<T>(r);
  }
}

template <class T, bool MUL>
void qlinear_stretch_of(const T* a, const T* b, T* c, int64_t n, bool a_moves, bool b_moves, const QLinearBinary& p,
                        float lo, float hi) {
  if (a_moves && b_moves) qlinear_stretch<T, 1, 1, MUL>(a, b, c, n, p, lo, hi);
  else if (a_moves) qlinear_stretch<T, 1, 0, MUL>(a, b, c, n, p, lo, hi);
  else if (b_moves) qlinear_stretch<T, 0, 1, MUL>(a, b, c, n, p, lo, hi);
  else qlinear_stretch<T, 0, 0, MUL>(a, b, c, n, p, lo, hi);
}

template <class T>
void qlinear_binary_t(const T* a, const T* b, T* c, QType t, int64_t n, Broadcast ab, Broadcast bb,
                      const QLinearBinary& p, int team) {
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  // Blocks of `block` outputs within which each operand either advances one element
  // at a time (run 1: blocks of its period) or holds still (blocks of its run),
  // cut into pieces of at most 4096.
  auto span = [](Broadcast x) { return x.run == 1 ? x.period : x.run; };
  const int64_t block = std::gcd(span(ab), span(bb)), piece = std::min<int64_t>(block, 4096);
  const int64_t per_block = (block + piece - 1) / piece, pieces = n / block * per_block;
  parallel_teams(memory_team(team, n, 3), [&](int th, int k) {
    auto [p0, p1] = part(pieces, th, k);
    for (int64_t q = p0; q < p1; ++q) {
      const int64_t start = q / per_block * block + q % per_block * piece;
      const int64_t len = std::min(piece, block - q % per_block * piece);
      const T* as = a + start / ab.run % ab.period;
      const T* bs = b + start / bb.run % bb.period;
      if (p.mul) qlinear_stretch_of<T, true>(as, bs, c + start, len, ab.run == 1, bb.run == 1, p, lo, hi);
      else qlinear_stretch_of<T, false>(as, bs, c + start, len, ab.run == 1, bb.run == 1, p, lo, hi);
    }
  });
}

}  // namespace

void qlinear_binary(const void* a, const void* b, void* c, QType t, int64_t n, Broadcast ab, Broadcast bb,
                    const QLinearBinary& p, int team) {
  if (t == QType::U8)
    qlinear_binary_t(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<uint8_t*>(c), t, n,
                     ab, bb, p, team);
  else if (t == QType::S8)
    qlinear_binary_t(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), static_cast<int8_t*>(c), t, n,
                     ab, bb, p, team);
}

namespace {

template <class T>
void qlinear_mean_t(const T* x, T* y, QType t, int64_t images, int64_t channels, int64_t size, bool channels_last,
                    float scale, int32_t zx, int32_t zy, int team) {
  const float lo = static_cast<float>(qmin(t)), hi = static_cast<float>(qmax(t));
  auto out = [&](int64_t sum) {
    float r = std::nearbyint(static_cast<float>(sum - static_cast<int64_t>(zx) * size) * scale) + static_cast<float>(zy);
    r = r >= lo ? r : lo;
    r = r <= hi ? r : hi;
    return static_cast<T>(r);
  };
  parallel_teams(memory_team(team, images * channels * size, 1), [&](int th, int k) {
    if (!channels_last) {
      auto [b, e] = part(images * channels, th, k);
      for (int64_t r = b; r < e; ++r) {
        int64_t sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += x[r * size + i];
        y[r] = out(sum);
      }
      return;
    }
    auto [b, e] = part(images, th, k);
    std::vector<int64_t> sums(static_cast<size_t>(channels));
    for (int64_t img = b; img < e; ++img) {
      std::fill(sums.begin(), sums.end(), 0);
      const T* xi = x + img * size * channels;
      for (int64_t i = 0; i < size; ++i)
        for (int64_t ch = 0; ch < channels; ++ch) sums[static_cast<size_t>(ch)] += xi[i * channels + ch];
      for (int64_t ch = 0; ch < channels; ++ch) y[img * channels + ch] = out(sums[static_cast<size_t>(ch)]);
    }
  });
}

}  // namespace

void qlinear_mean(const void* x, void* y, QType t, int64_t images, int64_t channels, int64_t size,
                  bool channels_last, float scale, int32_t zx, int32_t zy, int team) {
  if (t == QType::U8)
    qlinear_mean_t(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), t, images, channels, size, channels_last,
                   scale, zx, zy, team);
  else if (t == QType::S8)
    qlinear_mean_t(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), t, images, channels, size, channels_last,
                   scale, zx, zy, team);
}

}  // namespace isomer::kernels
