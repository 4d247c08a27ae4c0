#include "kernels/recurrent.h"

#include <algorithm>
#include <cstring>

#include "kernels/parallel.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

// 16-wide vectors (GCC's vector extension: one AVX-512 register, two AVX ones): the
// compiler does not vectorize a float dot product by itself, since that reorders
// the additions.
using v16 = float __attribute__((vector_size(64)));

[[gnu::always_inline]] inline v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// PP panels (16 rows of R each) times NB batch rows: per k, PP panel loads and NB
// broadcasts feed PP * NB independent multiply-adds. The loads bound the loop, so
// the block shapes (gemm_panels) are those with the fewest loads per multiply-add
// that still keep enough accumulators in flight and in registers.
//
// With several batch rows, GCC folds each panel load into every row's multiply-add
// (a memory operand per FMA: NB loads of the same vector per k, which bound the
// loop at batch 2). Adding -0.0f, which the compiler cannot see through, keeps one
// loaded vector in a register for all rows; the add is exact (x + -0 = x, also for
// x = -0) and runs on Zen 4's add pipes, beside the FMAs.
template <int PP, int NB>
[[gnu::always_inline]] inline void panels_times_rows(const float* a, const float* const* h, float* y, int64_t ldy,
                                                     int64_t K, int64_t n_out) {
  v16 s[PP][NB] = {};
  float minus_zero = -0.0f;
  constexpr bool kKeep = NB > 1 && PP > 1;  // one panel over four rows measured faster without
  if constexpr (kKeep) asm("" : "+r"(minus_zero));
  const v16 keep = {minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero,
                    minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero, minus_zero};
  for (int64_t k = 0; k < K; ++k) {
    v16 w[PP];
    for (int q = 0; q < PP; ++q) w[q] = kKeep ? load16(a + (q * K + k) * 16) + keep : load16(a + (q * K + k) * 16);
    for (int i = 0; i < NB; ++i) {
      const float hv = h[i][k];
      const v16 x = {hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv, hv};
      for (int q = 0; q < PP; ++q) s[q][i] += w[q] * x;
    }
  }
  for (int q = 0; q < PP; ++q)
    for (int i = 0; i < NB; ++i) {
      const int64_t n = std::min<int64_t>(n_out - q * 16, 16);
      if (n == 16) std::memcpy(y + i * ldy + q * 16, &s[q][i], sizeof(v16));
      else
        for (int64_t r = 0; r < n; ++r) y[i * ldy + q * 16 + r] = s[q][i][r];
    }
}

// NB batch rows over `panels` panels starting at `a`: blocks of PP panels, then one
// at a time.
template <int PP, int NB>
[[gnu::always_inline]] inline void rows_over_panels(const float* a, const float* const* h, float* y, int64_t ldy,
                                                    int64_t K, int64_t panels, int64_t n_out) {
  int64_t q = 0;
  for (; q + PP <= panels; q += PP)
    panels_times_rows<PP, NB>(a + q * K * 16, h, y + q * 16, ldy, K, n_out - q * 16);
  for (; q < panels; ++q) panels_times_rows<1, NB>(a + q * K * 16, h, y + q * 16, ldy, K, n_out - q * 16);
}

// Bounds a gate's input when Clip (ONNX's `clip` attribute).
template <bool Clip>
[[gnu::always_inline]] inline float bound(float v, float clip) {
  return Clip ? std::min(std::max(v, -clip), clip) : v;
}

template <bool Clip, class V>
[[gnu::always_inline]] inline V bound(V v, float clip) {
  if constexpr (!Clip) return v;
  const V hi = vm16::splat(clip), lo = -hi;
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

// The gates run 16 units at a time on vm16's vectors (the compiler left the scalar
// loop at 8 lanes in the AVX-512 clone; the LSTM's gates took 11% of a batch-1
// step), then the rest one at a time with the same functions.
template <bool Clip>
[[gnu::always_inline]] inline void lstm_units(const float* __restrict a, const float* __restrict b, float* __restrict c,
                                              float* __restrict h, int64_t count, int64_t H, float clip) {
  using vm16::load, vm16::store;
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const vm16::v16 i = vm16::sigmoid(bound<Clip>(load(a + j) + load(b + j), clip));
    const vm16::v16 o = vm16::sigmoid(bound<Clip>(load(a + H + j) + load(b + H + j), clip));
    const vm16::v16 f = vm16::sigmoid(bound<Clip>(load(a + 2 * H + j) + load(b + 2 * H + j), clip));
    const vm16::v16 g = vm16::tanh(bound<Clip>(load(a + 3 * H + j) + load(b + 3 * H + j), clip));
    const vm16::v16 cv = f * load(c + j) + i * g;
    store(c + j, cv);
    store(h + j, o * vm16::tanh(cv));
  }
  for (; j < count; ++j) {
    const float i = vm::sigmoid(bound<Clip>(a[j] + b[j], clip));
    const float o = vm::sigmoid(bound<Clip>(a[H + j] + b[H + j], clip));
    const float f = vm::sigmoid(bound<Clip>(a[2 * H + j] + b[2 * H + j], clip));
    const float g = vm::tanh(bound<Clip>(a[3 * H + j] + b[3 * H + j], clip));
    const float cv = f * c[j] + i * g;
    c[j] = cv;
    h[j] = o * vm::tanh(cv);
  }
}

template <bool Clip>
[[gnu::always_inline]] inline void gru_lbr_units(const float* __restrict a, const float* __restrict b,
                                                 const float* __restrict rb, const float* __restrict h_prev,
                                                 float* __restrict h, int64_t count, int64_t H, float clip) {
  using vm16::load, vm16::store;
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const vm16::v16 z = vm16::sigmoid(bound<Clip>(load(a + j) + load(b + j), clip));
    const vm16::v16 r = vm16::sigmoid(bound<Clip>(load(a + H + j) + load(b + H + j), clip));
    const vm16::v16 cand = vm16::tanh(bound<Clip>(load(a + 2 * H + j) + r * (load(b + 2 * H + j) + load(rb + j)), clip));
    store(h + j, (vm16::splat(1.0f) - z) * cand + z * load(h_prev + j));
  }
  for (; j < count; ++j) {
    const float z = vm::sigmoid(bound<Clip>(a[j] + b[j], clip));
    const float r = vm::sigmoid(bound<Clip>(a[H + j] + b[H + j], clip));
    const float cand = vm::tanh(bound<Clip>(a[2 * H + j] + r * (b[2 * H + j] + rb[j]), clip));
    h[j] = (1.0f - z) * cand + z * h_prev[j];
  }
}

}  // namespace

std::vector<float> pack_rows16(const float* A, int64_t rows, int64_t K) {
  const int64_t panels = (rows + 15) / 16;
  std::vector<float> out(static_cast<size_t>(panels * K * 16), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) out[static_cast<size_t>(((r / 16) * K + k) * 16 + r % 16)] = A[r * K + k];
  return out;
}

void gemv_panels(const float* packed, const float* x, float* y, int64_t rows, int64_t K) {
  gemm_panels(packed, &x, 1, y, rows, rows, K);
}

// Groups of four panels (64 rows of R: 32 KiB of L1 at K = 128) are taken in turn,
// and every batch row passes over a group before the next: blocks of 4 rows x 1
// panel, 3 x 2, 2 x 4, 1 x 2, the fastest of the shapes measured for each count on
// Zen 4 (2 x 1 panel: 1.6, 2 x 4: 3.0 multiply-adds per ns at H = 128).
ISOMER_CLONES void gemm_panels(const float* __restrict packed, const float* const* h, int64_t N, float* __restrict y,
                               int64_t ldy, int64_t rows, int64_t K) {
  const int64_t panels = (rows + 15) / 16;
  for (int64_t p = 0; p < panels; p += 4) {
    const float* a = packed + p * K * 16;
    const int64_t group = std::min<int64_t>(panels - p, 4), n_out = std::min<int64_t>(rows - p * 16, 64);
    float* yp = y + p * 16;
    int64_t i = 0;
    for (; i + 4 <= N; i += 4) rows_over_panels<1, 4>(a, h + i, yp + i * ldy, ldy, K, group, n_out);
    switch (N - i) {
      case 3: rows_over_panels<2, 3>(a, h + i, yp + i * ldy, ldy, K, group, n_out); break;
      case 2: rows_over_panels<4, 2>(a, h + i, yp + i * ldy, ldy, K, group, n_out); break;
      case 1: rows_over_panels<2, 1>(a, h + i, yp + i * ldy, ldy, K, group, n_out); break;
      default: break;
    }
  }
}

ISOMER_CLONES void lstm_gates(const float* a, const float* b, float* c, float* h, int64_t count, int64_t H,
                              float clip) {
  if (clip > 0) lstm_units<true>(a, b, c, h, count, H, clip);
  else lstm_units<false>(a, b, c, h, count, H, clip);
}

ISOMER_CLONES void gru_lbr_gates(const float* a, const float* b, const float* rb, const float* h_prev, float* h,
                                 int64_t count, int64_t H, float clip) {
  if (clip > 0) gru_lbr_units<true>(a, b, rb, h_prev, h, count, H, clip);
  else gru_lbr_units<false>(a, b, rb, h_prev, h, count, H, clip);
}

ISOMER_CLONES void rnn_gates(const float* __restrict a, const float* __restrict b, float* __restrict h, int64_t count,
                             float clip, bool relu) {
  if (relu) {  // NaN -> 0, as ONNX's Relu in the reference (ops/rnn.cpp)
    for (int64_t j = 0; j < count; ++j) {
      const float v = clip > 0 ? bound<true>(a[j] + b[j], clip) : a[j] + b[j];
      h[j] = v > 0.0f ? v : 0.0f;
    }
  } else if (clip > 0) {
    for (int64_t j = 0; j < count; ++j) h[j] = vm::tanh(bound<true>(a[j] + b[j], clip));
  } else {
    for (int64_t j = 0; j < count; ++j) h[j] = vm::tanh(a[j] + b[j]);
  }
}

}  // namespace isomer::kernels
