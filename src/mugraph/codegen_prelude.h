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
// exp for the kernels' inner loops: vm::exp's range reduction and polynomial with
// lean edges (about 20 vector instructions for 8 values, vm::exp ~60, which makes it
// the bottleneck of softmax). Clamped to [-87, 88.72]: 2^n is built as
// 2^(n-1) * 2 with n in [-126, 128], so arguments below about -86.7 give exactly 0
// (no denormal is ever formed: one costs ~100 cycles, and masked softmax entries,
// exp(-1e9 - m), would hit it every time), 88.72 and above give inf, NaN stays NaN.
// Relative error below 1e-7 elsewhere.
static inline __attribute__((always_inline)) float mg_exp(float x) {
  float xc = x > -87.0f ? x : -87.0f;
  xc = xc < 88.7228393554688f ? xc : 88.7228393554688f;
  const float t = xc * 1.44269504088896341f + 12582912.0f;  // + 1.5 * 2^23 rounds to an integer
  const float n = t - 12582912.0f;
  const int32_t ni = __builtin_bit_cast(int32_t, t) - 0x4B400000;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float y = p * __builtin_bit_cast(float, (ni + 126) << 23) * 2.0f;
  return x != x ? x : y;
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
