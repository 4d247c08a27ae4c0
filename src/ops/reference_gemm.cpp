// The GEMM's thread setting, its float specialization (the runtime's packed kernel)
// and the AVX2+FMA double kernel (reference_gemm.h).
#include "ops/reference_gemm.h"

#include <algorithm>
#include <thread>
#include <utility>

#if !defined(ISOMER_WITHOUT_RUNTIME_KERNELS)
#include "kernels/gemm.h"
#endif

namespace isomer::ops {

namespace {
thread_local unsigned gemm_max_threads = 1;

// The most threads one product may take on this thread (gemm_set_max_threads).
unsigned gemm_thread_cap() {
  static const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  return gemm_max_threads ? gemm_max_threads : hw;
}
}  // namespace

unsigned gemm_set_max_threads(unsigned n) { return std::exchange(gemm_max_threads, n); }

#if !defined(ISOMER_WITHOUT_RUNTIME_KERNELS)
template <>
void gemm_accumulate<float>(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float* C, int64_t ldc) {
  if (M == 0 || N == 0 || K == 0) return;
  const kernels::PackedB packed = kernels::pack_b(B, K, N, ldb);
  std::vector<float> product(static_cast<size_t>(M * N));
  kernels::gemm_packed(A, lda, M, packed, product.data(), N, nullptr, static_cast<int>(gemm_thread_cap()));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] += product[static_cast<size_t>(i * N + j)];
}
#endif

}  // namespace isomer::ops

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

[[gnu::target("avx2,fma")]] void gemm_serial_avx2(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
                                                  const double* B, int64_t ldb, double* C, int64_t ldc) {
  gemm_blocked<kMRAvx2>(M, N, K, A, lda, B, ldb, C, ldc, gemm_micro_kernel_avx2);
}

// Large products are split (where the caller allows it: gemm_set_max_threads) across
// the cores into bands of whole rows (or, when there are few rows, whole columns) of
// C, one per thread: each element is still summed by
// one thread, over the same depth tiles in the same order, so the result is the same
// to the bit whatever the thread count. (The kernel itself runs near the core's FMA
// peak: constant folding's 1024² weight products were bound by the one core.)
constexpr double kFlopsPerThread = 3e7;  // about a millisecond; below it a thread costs too much

unsigned gemm_threads(int64_t M, int64_t N, int64_t K) {
  const unsigned cores = gemm_thread_cap();
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  return static_cast<unsigned>(std::clamp(flops / kFlopsPerThread, 1.0, static_cast<double>(cores)));
}

template <int64_t MR, class Serial>
void gemm_parallel(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
                   double* C, int64_t ldc, Serial serial) {
  unsigned threads = gemm_threads(M, N, K);
  const bool by_rows = M >= N || M >= static_cast<int64_t>(threads) * 16 * MR;
  const int64_t extent = by_rows ? M : N, unit = by_rows ? MR : kNR, units = (extent + unit - 1) / unit;
  threads = static_cast<unsigned>(std::min<int64_t>(threads, units));
  if (threads <= 1) return serial(M, N, K, A, lda, B, ldb, C, ldc);
  auto band = [&](unsigned t) {  // bands of whole micro-tiles, as even as they can be
    const int64_t lo = std::min(extent, units * t / threads * unit),
                  hi = std::min(extent, units * (t + 1) / threads * unit);
    if (hi <= lo) return;
    if (by_rows)
      serial(hi - lo, N, K, A + lo * lda, lda, B, ldb, C + lo * ldc, ldc);
    else
      serial(M, hi - lo, K, A, lda, B + lo, ldb, C + lo, ldc);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(band, t);
  band(0);
  for (auto& th : pool) th.join();
}

void gemm_serial_portable(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
                          double* C, int64_t ldc) {
  gemm_blocked(M, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace

template <>
void gemm_accumulate<double>(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
                             int64_t ldb, double* C, int64_t ldc) {
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2)
    gemm_parallel<kMRAvx2>(M, N, K, A, lda, B, ldb, C, ldc, gemm_serial_avx2);
  else
    gemm_parallel<kMR>(M, N, K, A, lda, B, ldb, C, ldc, gemm_serial_portable);
}

}  // namespace isomer::ops
#endif
