// The AVX2+FMA double kernel of the reference GEMM (reference_gemm.h).
#include "ops/reference_gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace isomer::ops {

namespace {

// The double kernel on AVX2: a 6 × 8 tile of C in twelve 4-wide registers (with the
// two of B and one broadcast of A, fifteen of sixteen). Written out, because the portable
// kernel compiled for AVX2 kept its tile in memory (constant folding TASO's BERT
// multiplied seven 1024² weight pairs at 11 GFLOP/s, most of a warm search). Each
// product is added by a fused multiply-add, as the portable kernel's `+=` of a
// product is contracted into one when compiled for FMA, in the same order over the
// depth: the sums are the same to the bit.
constexpr int64_t kMRAvx2 = 6;
static_assert(kNR == 8, "the AVX2 kernel's tile is 8 wide");

[[gnu::target("avx2,fma")]] inline void gemm_micro_kernel_avx2(int64_t kc, const double* __restrict a,
                                                               const double* __restrict b, double* c, int64_t ldc,
                                                               int64_t mr, int64_t nr) {
  __m256d acc[kMRAvx2][2];
  for (auto& row : acc) row[0] = row[1] = _mm256_setzero_pd();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256d b0 = _mm256_loadu_pd(b + k * kNR), b1 = _mm256_loadu_pd(b + k * kNR + 4);
    const double* ak = a + k * kMRAvx2;
    for (int64_t i = 0; i < kMRAvx2; ++i) {
      const __m256d ai = _mm256_broadcast_sd(ak + i);
      acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
    }
  }
  if (mr == kMRAvx2 && nr == kNR) {
    for (int64_t i = 0; i < kMRAvx2; ++i) {
      double* ci = c + i * ldc;
      _mm256_storeu_pd(ci, _mm256_add_pd(_mm256_loadu_pd(ci), acc[i][0]));
      _mm256_storeu_pd(ci + 4, _mm256_add_pd(_mm256_loadu_pd(ci + 4), acc[i][1]));
    }
    return;
  }
  alignas(32) double tile[kMRAvx2][kNR];
  for (int64_t i = 0; i < kMRAvx2; ++i) {
    _mm256_store_pd(tile[i], acc[i][0]);
    _mm256_store_pd(tile[i] + 4, acc[i][1]);
  }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] += tile[i][j];
}

[[gnu::target("avx2,fma")]] void gemm_accumulate_avx2(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
                                                      const double* B, int64_t ldb, double* C, int64_t ldc) {
  gemm_blocked<kMRAvx2>(M, N, K, A, lda, B, ldb, C, ldc, gemm_micro_kernel_avx2);
}

}  // namespace

template <>
void gemm_accumulate<double>(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
                             int64_t ldb, double* C, int64_t ldc) {
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2)
    gemm_accumulate_avx2(M, N, K, A, lda, B, ldb, C, ldc);
  else
    gemm_blocked(M, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace isomer::ops
#endif
