#include "kernels/recurrent.h"

#include <cstring>

#include "kernels/parallel.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

// 16-wide vectors (GCC's vector extension: one AVX-512 register, two AVX ones): the
// compiler does not vectorize a float dot product by itself, since that reorders
// the additions.
using v16 = float __attribute__((vector_size(64)));

inline v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::vector<float> pack_rows16(const float* A, int64_t rows, int64_t K) {
  const int64_t panels = (rows + 15) / 16;
  std::vector<float> out(static_cast<size_t>(panels * K * 16), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) out[static_cast<size_t>(((r / 16) * K + k) * 16 + r % 16)] = A[r * K + k];
  return out;
}

// Four accumulators over alternating k keep four chains of multiply-adds in flight.
ISOMER_CLONES void gemv_panels(const float* __restrict packed, const float* __restrict x, float* __restrict y,
                               int64_t rows, int64_t K) {
  for (int64_t p = 0; p * 16 < rows; ++p) {
    const float* a = packed + p * K * 16;
    v16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      s0 += load16(a + k * 16) * x[k];
      s1 += load16(a + (k + 1) * 16) * x[k + 1];
      s2 += load16(a + (k + 2) * 16) * x[k + 2];
      s3 += load16(a + (k + 3) * 16) * x[k + 3];
    }
    for (; k < K; ++k) s0 += load16(a + k * 16) * x[k];
    const v16 s = (s0 + s1) + (s2 + s3);
    const int64_t n = rows - p * 16 < 16 ? rows - p * 16 : 16;
    for (int64_t i = 0; i < n; ++i) y[p * 16 + i] = s[i];
  }
}

ISOMER_CLONES void lstm_gates(const float* __restrict a, const float* __restrict b, float* __restrict c,
                              float* __restrict h, int64_t count, int64_t H) {
  for (int64_t j = 0; j < count; ++j) {
    const float i = vm::sigmoid(a[j] + b[j]), o = vm::sigmoid(a[H + j] + b[H + j]);
    const float f = vm::sigmoid(a[2 * H + j] + b[2 * H + j]), g = vm::tanh(a[3 * H + j] + b[3 * H + j]);
    const float cv = f * c[j] + i * g;
    c[j] = cv;
    h[j] = o * vm::tanh(cv);
  }
}

ISOMER_CLONES void gru_lbr_gates(const float* __restrict a, const float* __restrict b, const float* __restrict rb,
                                 const float* __restrict h_prev, float* __restrict h, int64_t count, int64_t H) {
  for (int64_t j = 0; j < count; ++j) {
    const float z = vm::sigmoid(a[j] + b[j]), r = vm::sigmoid(a[H + j] + b[H + j]);
    const float cand = vm::tanh(a[2 * H + j] + r * (b[2 * H + j] + rb[j]));
    h[j] = (1.0f - z) * cand + z * h_prev[j];
  }
}

ISOMER_CLONES void rnn_gates(const float* __restrict a, const float* __restrict b, float* __restrict h, int64_t count) {
  for (int64_t j = 0; j < count; ++j) h[j] = vm::tanh(a[j] + b[j]);
}

}  // namespace isomer::kernels
