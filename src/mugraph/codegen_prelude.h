#pragma once
// The fixed part of every generated kernel: vector math (kernels/vmath.h, embedded
// at build time) and the register micro-kernels.
namespace isomer::mugraph {

inline constexpr const char* kMicroKernels = R"MGPRELUDE(
#if defined(__AVX512F__)
#define MG_W 16
#define MG_MR 8
#elif defined(__AVX2__)
#define MG_W 8
#define MG_MR 6
#else
#define MG_W 4
#define MG_MR 4
#endif
// exp and sigmoid that never compute a denormal on the way to 0 (vm::exp forms
// p * 2^n before it selects 0 below -87.3, and a denormal product costs ~100 cycles
// on many cores; masked softmax entries, exp(-1e9 - m), hit it every time).
static inline __attribute__((always_inline)) float mg_exp(float x) {
  const float e = vm::exp(x < -87.0f ? -87.0f : x);
  return x < -87.0f ? 0.0f : e;
}
static inline __attribute__((always_inline)) float mg_sigmoid(float x) { return 1.0f / (1.0f + mg_exp(-x)); }
typedef float mg_vf __attribute__((vector_size(MG_W * 4)));
static inline mg_vf mg_load(const float* p) { mg_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void mg_store(float* p, mg_vf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline mg_vf mg_splat(float x) { return mg_vf{} + x; }
static inline float mg_hsum(mg_vf v) {
  float s = 0;
  for (int i = 0; i < MG_W; ++i) s += v[i];
  return s;
}

// C[R x V*MG_W] += A[R x K] B[K x V*MG_W]: the accumulators stay in registers.
template <int R, int V>
static inline __attribute__((always_inline)) void mg_block(int64_t K, const float* __restrict A, int64_t lda,
                                                           const float* __restrict B, int64_t ldb, float* __restrict C,
                                                           int64_t ldc) {
  mg_vf c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) c[r][v] = mg_load(C + r * ldc + v * MG_W);
  for (int64_t k = 0; k < K; ++k) {
    mg_vf b[V];
    for (int v = 0; v < V; ++v) b[v] = mg_load(B + k * ldb + v * MG_W);
    for (int r = 0; r < R; ++r) {
      mg_vf a = mg_splat(A[r * lda + k]);
      for (int v = 0; v < V; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) mg_store(C + r * ldc + v * MG_W, c[r][v]);
}

template <int V>
static inline void mg_rows(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                           int64_t ldc) {
  int64_t m = 0;
  for (; m + MG_MR <= M; m += MG_MR) mg_block<MG_MR, V>(K, A + m * lda, lda, B, ldb, C + m * ldc, ldc);
  for (; m + 2 <= M; m += 2) mg_block<2, V>(K, A + m * lda, lda, B, ldb, C + m * ldc, ldc);
  for (; m < M; ++m) mg_block<1, V>(K, A + m * lda, lda, B, ldb, C + m * ldc, ldc);
}

// C[M x N] += A[M x K] B[K x N]; unit strides along k (A) and n (B, C).
static void mg_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                    int64_t ldc) {
  int64_t n = 0;
  for (; n + 2 * MG_W <= N; n += 2 * MG_W) mg_rows<2>(M, K, A, lda, B + n, ldb, C + n, ldc);
  for (; n + MG_W <= N; n += MG_W) mg_rows<1>(M, K, A, lda, B + n, ldb, C + n, ldc);
  if (n < N)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const float a = A[m * lda + k];
#pragma omp simd
        for (int64_t j = n; j < N; ++j) C[m * ldc + j] += a * B[k * ldb + j];
      }
}

// C[m, n] += dot(A[m, :], B[n, :]); unit strides along k in A and B.
static void mg_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldcm, int64_t ldcn) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const float* a = A + m * lda;
      const float* b = B + n * ldb;
      mg_vf acc0 = mg_vf{}, acc1 = mg_vf{};
      int64_t k = 0;
      for (; k + 2 * MG_W <= K; k += 2 * MG_W) {
        acc0 += mg_load(a + k) * mg_load(b + k);
        acc1 += mg_load(a + k + MG_W) * mg_load(b + k + MG_W);
      }
      float s = mg_hsum(acc0 + acc1);
      for (; k < K; ++k) s += a[k] * b[k];
      C[m * ldcm + n * ldcn] += s;
    }
}
)MGPRELUDE";

}  // namespace isomer::mugraph
