#pragma once
// The reference evaluator's GEMM (C += A·B), one template for every element type
// the semantics run on: double (float semantics), int64_t, Fp (the field) and Sym.
// MatMul, Gemm, Conv (through im2col) and ConvTranspose reduce to it (ops/linear.cpp).
// float is constant folding's (OpDef::fold): the runtime's packed kernel, summing in
// float as the runtime does.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace isomer::ops {

// C[M×N] += A[M×K] · B[K×N], row-major with leading dimensions. Blocked as in
// GotoBLAS: a [kKC × kNC] block of B is packed into column panels kNR wide, a
// [kMR × kKC] sliver of A into rows kMR tall, and a micro-kernel keeps a
// kMR × kNR tile of C in registers while it walks the shared depth. The kernel is
// one template; for double it is also compiled for AVX2+FMA and picked at run time.
constexpr int64_t kMR = 4, kNR = 8, kKC = 256, kNC = 512;

template <class T>
[[gnu::always_inline]] inline void gemm_micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* c,
                                                     int64_t ldc, int64_t mr, int64_t nr) {
  T acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const T* ak = a + k * kMR;
    const T* bk = b + k * kNR;
    for (int64_t i = 0; i < kMR; ++i)
      for (int64_t j = 0; j < kNR; ++j) acc[i][j] += ak[i] * bk[j];
  }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] += acc[i][j];
}

template <class T>
struct PortableKernel {
  [[gnu::always_inline]] void operator()(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, int64_t mr,
                                         int64_t nr) const {
    gemm_micro_kernel(kc, a, b, c, ldc, mr, nr);
  }
};

// `MR` rows of A per sliver, `kernel` the micro-kernel for MR × kNR tiles.
template <int64_t MR = kMR, class T, class Kernel = PortableKernel<T>>
[[gnu::always_inline]] inline void gemm_blocked(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                                                int64_t ldb, T* C, int64_t ldc, Kernel kernel = {}) {
  const int64_t kc_max = std::min(K, kKC), nc_max = (std::min(N, kNC) + kNR - 1) / kNR * kNR;
  std::vector<T> b_pack(static_cast<size_t>(kc_max * nc_max)), a_pack(static_cast<size_t>(kc_max * MR));
  for (int64_t j0 = 0; j0 < N; j0 += kNC) {
    const int64_t nc = std::min(kNC, N - j0);
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      for (int64_t jp = 0; jp < nc; jp += kNR) {
        const int64_t nr = std::min(kNR, nc - jp);
        T* dst = b_pack.data() + jp * kc;
        for (int64_t k = 0; k < kc; ++k) {
          const T* src = B + (k0 + k) * ldb + j0 + jp;
          for (int64_t j = 0; j < kNR; ++j) dst[k * kNR + j] = j < nr ? src[j] : T();
        }
      }
      for (int64_t i0 = 0; i0 < M; i0 += MR) {
        const int64_t mr = std::min(MR, M - i0);
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < MR; ++i) a_pack[k * MR + i] = i < mr ? A[(i0 + i) * lda + k0 + k] : T();
        for (int64_t jp = 0; jp < nc; jp += kNR)
          kernel(kc, a_pack.data(), b_pack.data() + jp * kc, C + i0 * ldc + j0 + jp, ldc, mr, std::min(kNR, nc - jp));
      }
    }
  }
}

template <class T>
inline void gemm_accumulate(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
                     int64_t ldc) {
  gemm_blocked(M, N, K, A, lda, B, ldb, C, ldc);
}

// The most threads the double GEMM splits one product across when called on this
// thread: 1, the default (the evaluator computes where its caller runs: the runtime's
// reference steps run on the threads it was given), or 0 for one per core (constant
// folding, ScopedGemmThreads). Returns the previous setting. Results do not depend on
// it. (Only the AVX2 path splits.)
unsigned gemm_set_max_threads(unsigned n);

struct ScopedGemmThreads {
  explicit ScopedGemmThreads(unsigned n) : before(gemm_set_max_threads(n)) {}
  ~ScopedGemmThreads() { gemm_set_max_threads(before); }
  ScopedGemmThreads(const ScopedGemmThreads&) = delete;
  ScopedGemmThreads& operator=(const ScopedGemmThreads&) = delete;
  unsigned before;
};

// float: the runtime's float GEMM (kernels/gemm.h), split across up to the threads
// gemm_set_max_threads allows. Each element is summed by one thread in a fixed order,
// so the result does not depend on the thread count either; it is within float
// rounding of the double sum (about K · 2^-24 of the sum of |a·b|), as any runtime's.
// The fuzzing harnesses, which build the operator table without the runtime's
// kernels (fuzz/CMakeLists.txt defines ISOMER_WITHOUT_RUNTIME_KERNELS), sum floats
// with the portable blocked kernel above instead.
#if !defined(ISOMER_WITHOUT_RUNTIME_KERNELS)
template <>
void gemm_accumulate<float>(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                            int64_t ldb, float* C, int64_t ldc);
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// double picks an AVX2+FMA micro-kernel at run time where the CPU has one
// (reference_gemm.cpp); its sums are the same to the bit as the portable kernel's.
// A large double product is split across the cores by bands of rows or columns of C,
// each element still summed by one thread in the same order.
template <>
void gemm_accumulate<double>(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
                             int64_t ldb, double* C, int64_t ldc);
#endif

}  // namespace isomer::ops
