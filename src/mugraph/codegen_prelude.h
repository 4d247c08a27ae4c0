#pragma once
// The fixed part of every generated kernel: vector math (kernels/vmath.h, embedded
// at build time) and the register micro-kernels.
namespace isomer::mugraph {

inline constexpr const char* kMicroKernels = R"MGPRELUDE(
#include <immintrin.h>
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
// A contraction's output store: C = alpha * (A B) / rs[r * rss] for row r where on
// (a scalar factor of an operand, a per-row divisor after the contraction, moved
// into the store); off, C = A B. The micro-kernels apply it only with acc == 0.
struct mg_epi {
  int on = 0;
  float alpha = 1.0f;
  const float* rs = nullptr;
  int64_t rss = 0;
};
static inline __attribute__((always_inline)) float mg_epi_scale(const mg_epi& e, int64_t r) {
  return e.rs ? e.alpha / e.rs[r * e.rss] : e.alpha;
}
static inline __attribute__((always_inline)) mg_epi mg_epi_rows(mg_epi e, int64_t m) {
  if (e.rs) e.rs += m * e.rss;
  return e;
}
// exp for the kernels' inner loops: vm::exp's range reduction, a shorter polynomial
// (below) and lean edges (about 20 vector instructions for 8 values, vm::exp ~60, which makes it
// the bottleneck of softmax). Clamped to [-87, 88.72]: 2^n is built as
// 2^(n-1) * 2 with n in [-126, 128], so arguments below about -86.7 give exactly 0
// (no denormal is ever formed: one costs ~100 cycles, and masked softmax entries,
// exp(-1e9 - m), would hit it every time), 88.72 and above give inf, NaN stays NaN.
// e^r on |r| <= ln2/2 as 1 + r + r^2 Q(r), Q of degree 3 fitted minimax on the
// relative error (Lawson's iteration in double): 1.05e-7 there, at most 2e-7 in
// float with the rounding (mugraph_microkernel_test checks every 61st float). The
// degree-5 Q of vm::exp (Cephes) is below float's resolution, and its two extra
// multiply-adds of 11 a vector made exp the bound of softmax's rows (ViT's 197-wide
// rows' exp and sum 0.058 -> 0.049 ms).
#define MG_EXP_Q3 8.3125010133e-03f
#define MG_EXP_Q2 4.1890330613e-02f
#define MG_EXP_Q1 1.6667115688e-01f
#define MG_EXP_Q0 4.9999231100e-01f
// Relative error at most 2e-7 elsewhere.
static inline __attribute__((always_inline)) float mg_exp(float x) {
  float xc = x > -87.0f ? x : -87.0f;
  xc = xc < 88.7228393554688f ? xc : 88.7228393554688f;
  const float t = xc * 1.44269504088896341f + 12582912.0f;  // + 1.5 * 2^23 rounds to an integer
  const float n = t - 12582912.0f;
  const int32_t ni = __builtin_bit_cast(int32_t, t) - 0x4B400000;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = MG_EXP_Q3;
  p = p * r + MG_EXP_Q2;
  p = p * r + MG_EXP_Q1;
  p = p * r + MG_EXP_Q0;
  p = p * (r * r) + r + 1.0f;
  const float y = p * __builtin_bit_cast(float, (ni + 126) << 23) * 2.0f;
  return x != x ? x : y;
}
static inline __attribute__((always_inline)) float mg_sigmoid(float x) { return 1.0f / (1.0f + mg_exp(-x)); }
// erf(a) for 0 <= a < 3.9 as a * Q(u), Q of degree 14 in u = a / 1.95 - 1 (so |u| <= 1
// and Horner's rounding is not amplified), fitted minimax (Lawson's iteration, the
// coefficients rounded to float one at a time from the top, the rest refitted) on
// the absolute error. Past 3.9 erf is 1 within 3.5e-8. No exp, no division: 15 FMAs,
// an and, a multiply and a select per vector, against about 45 instructions and a
// division for the A&S 7.1.26 form it replaces (which made erf ~70% of LayerNorm +
// GELU). Checked over every float: at most 3.7e-7 from erf in absolute error (3.9e-7
// where the multiply-adds are not fused), 2e-6 relative for normal |x| < 0.5; odd,
// +-1 exactly from 3.9 on and at +-inf, NaN kept (mugraph_microkernel_test).
static const float mg_erf_q[15] = {
    5.098356009e-01f,
    -4.846551716e-01f,
    3.889051974e-01f,
    -1.781391501e-01f,
    -1.011831015e-01f,
    2.862022221e-01f,
    -2.377569377e-01f,
    1.392471045e-02f,
    1.604945660e-01f,
    -1.303531826e-01f,
    -1.291847229e-02f,
    7.095545530e-02f,
    -2.222521231e-02f,
    -1.392034069e-02f,
    7.244118489e-03f};
template <class V>
static inline __attribute__((always_inline)) V mg_erf_poly(V a) {
  const V u = a * 0.512820513f - 1.0f;
  V p = u * mg_erf_q[14] + mg_erf_q[13];
  for (int k = 12; k >= 0; --k) p = p * u + mg_erf_q[k];
  return a * p;
}
static inline __attribute__((always_inline)) float mg_erf(float x) {
  const float a = __builtin_fabsf(x);
  return __builtin_copysignf(a >= 3.9f ? 1.0f : mg_erf_poly(a), x);  // NaN: a >= 3.9 is false
}
// tanh as vm8::tanh computes it (the runtime's pointwise kernels), written on one
// float so that an `omp simd` loop vectorizes it with mg_exp: vm::tanh's scalar exp
// has NaN-exact clamps that become compare-and-blend chains, about three times the
// work.
static inline __attribute__((always_inline)) float mg_tanh(float x) {
  const float a = __builtin_fabsf(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const float near0 = x + x * z * p;
  const float big = __builtin_copysignf(1.0f - 2.0f / (mg_exp(a + a) + 1.0f), x);
  return a < 0.625f ? near0 : big;
}
typedef float mg_vf __attribute__((vector_size(MG_W * 4)));
static inline mg_vf mg_load(const float* p) { mg_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void mg_store(float* p, mg_vf v) { __builtin_memcpy(p, &v, sizeof v); }
// A broadcast (`mg_vf{} + x` would add +0.0 first: one more instruction per use).
static inline mg_vf mg_splat(float x) {
  mg_vf v;
  for (int i = 0; i < MG_W; ++i) v[i] = x;
  return v;
}
static inline float mg_hsum(mg_vf v) {
  float s = 0;
  for (int i = 0; i < MG_W; ++i) s += v[i];
  return s;
}
// mg_erf on a vector of any width (mgv::vf in the generated loops): the sign moved
// by bits, the same polynomial and select.
template <class V>
static inline __attribute__((always_inline)) V mg_erfv(V x) {
  typedef int32_t VI __attribute__((vector_size(sizeof(V))));
  const VI sign = (VI)x & (int32_t)0x80000000;
  const V a = (V)((VI)x & 0x7fffffff);
  const V one = V{} + 1.0f;  // a constant: folded
  const V y = a >= 3.9f ? one : mg_erf_poly(a);
  return (V)((VI)y | sign);
}

// The micro-kernels take `acc`: accumulate into C (1) or overwrite it (0, so a
// product that feeds no accumulator needs no zeroing pass first).
#if defined(__AVX2__) && defined(__FMA__)
#define MG_AVX2 1
// Lane masks for a partial vector of `rem` (1..7) floats: mg_mask_tab + 8 - rem.
static const int32_t mg_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i mg_mask(int64_t rem) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mg_mask_tab + 8 - rem));
}
#endif

// C[R x V*MG_W] (+)= A[R x K] B[K x V*MG_W]: the accumulators stay in registers.
template <int R, int V>
static inline __attribute__((always_inline)) void mg_block(int64_t K, const float* __restrict A, int64_t lda,
                                                           const float* __restrict B, int64_t ldb, float* __restrict C,
                                                           int64_t ldc, int acc, mg_epi e = mg_epi{}) {
#if MG_W == 16
  // As the AVX2 form below, on 16 lanes: R * V of the 32 registers accumulate.
  __m512 c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) c[r][v] = acc ? _mm512_loadu_ps(C + r * ldc + v * 16) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_ps(B + k * ldb + v * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
      for (int v = 0; v < V; ++v) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);
    }
  }
  if (e.on)
    for (int r = 0; r < R; ++r) {
      const __m512 f = _mm512_set1_ps(mg_epi_scale(e, r));
      for (int v = 0; v < V; ++v) c[r][v] = _mm512_mul_ps(c[r][v], f);
    }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(C + r * ldc + v * 16, c[r][v]);
#elif defined(MG_AVX2) && MG_W == 8
  // Intrinsics: GCC keeps these in registers and broadcasts from memory (with vector
  // extensions it re-read B per FMA and built some broadcasts lane by lane).
  __m256 c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) c[r][v] = acc ? _mm256_loadu_ps(C + r * ldc + v * 8) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m256 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm256_loadu_ps(B + k * ldb + v * 8);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
      for (int v = 0; v < V; ++v) c[r][v] = _mm256_fmadd_ps(a, b[v], c[r][v]);
    }
  }
  if (e.on)
    for (int r = 0; r < R; ++r) {
      const __m256 f = _mm256_set1_ps(mg_epi_scale(e, r));
      for (int v = 0; v < V; ++v) c[r][v] = _mm256_mul_ps(c[r][v], f);
    }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(C + r * ldc + v * 8, c[r][v]);
#else
  mg_vf c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) c[r][v] = acc ? mg_load(C + r * ldc + v * MG_W) : mg_vf{};
  for (int64_t k = 0; k < K; ++k) {
    mg_vf b[V];
    for (int v = 0; v < V; ++v) b[v] = mg_load(B + k * ldb + v * MG_W);
    for (int r = 0; r < R; ++r) {
      mg_vf a = mg_splat(A[r * lda + k]);
      for (int v = 0; v < V; ++v) c[r][v] += a * b[v];
    }
  }
  if (e.on)
    for (int r = 0; r < R; ++r) {
      const mg_vf f = mg_splat(mg_epi_scale(e, r));
      for (int v = 0; v < V; ++v) c[r][v] *= f;
    }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) mg_store(C + r * ldc + v * MG_W, c[r][v]);
#endif
}

#if defined(MG_AVX2) && MG_W == 8
// The same for one partial vector of `rem` < 8 columns (masked loads and stores).
template <int R>
static inline __attribute__((always_inline)) void mg_block_tail(int64_t K, const float* __restrict A, int64_t lda,
                                                                const float* __restrict B, int64_t ldb,
                                                                float* __restrict C, int64_t ldc, int acc,
                                                                int64_t rem, mg_epi e = mg_epi{}) {
  const __m256i mask = mg_mask(rem);
  __m256 c[R];
  for (int r = 0; r < R; ++r) c[r] = acc ? _mm256_maskload_ps(C + r * ldc, mask) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b = _mm256_maskload_ps(B + k * ldb, mask);
    for (int r = 0; r < R; ++r) c[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(A + r * lda + k), b, c[r]);
  }
  if (e.on)
    for (int r = 0; r < R; ++r) c[r] = _mm256_mul_ps(c[r], _mm256_set1_ps(mg_epi_scale(e, r)));
  for (int r = 0; r < R; ++r) _mm256_maskstore_ps(C + r * ldc, mask, c[r]);
}
#endif

#if MG_W == 16
// The same for one partial vector of `rem` < 16 columns (masked loads and stores).
template <int R>
static inline __attribute__((always_inline)) void mg_block_tail(int64_t K, const float* __restrict A, int64_t lda,
                                                                const float* __restrict B, int64_t ldb,
                                                                float* __restrict C, int64_t ldc, int acc,
                                                                int64_t rem, mg_epi e = mg_epi{}) {
  const __mmask16 mask = static_cast<__mmask16>((1u << rem) - 1);
  __m512 c[R];
  for (int r = 0; r < R; ++r) c[r] = acc ? _mm512_maskz_loadu_ps(mask, C + r * ldc) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b = _mm512_maskz_loadu_ps(mask, B + k * ldb);
    for (int r = 0; r < R; ++r) c[r] = _mm512_fmadd_ps(_mm512_set1_ps(A[r * lda + k]), b, c[r]);
  }
  if (e.on)
    for (int r = 0; r < R; ++r) c[r] = _mm512_mul_ps(c[r], _mm512_set1_ps(mg_epi_scale(e, r)));
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(C + r * ldc, mask, c[r]);
}
#endif

#if MG_W == 16
// A partial vector of `rem` <= 8 columns on 8 lanes: AVX-512 FMAs on 8-lane
// registers issue twice as often as on 16 (Zen 4 splits a 512-bit FMA in two), so a
// narrow tail (ViT's 197 = 12 x 16 + 5 score columns) costs half the 16-lane form.
// R rows of independent accumulators cover the FMA latency.
template <int R>
static inline __attribute__((always_inline)) void mg_block_tail8(int64_t K, const float* __restrict A, int64_t lda,
                                                                 const float* __restrict B, int64_t ldb,
                                                                 float* __restrict C, int64_t ldc, int acc,
                                                                 int64_t rem, mg_epi e = mg_epi{}) {
  const __mmask8 mask = static_cast<__mmask8>((1u << rem) - 1);
  __m256 c[R];
  for (int r = 0; r < R; ++r) c[r] = acc ? _mm256_maskz_loadu_ps(mask, C + r * ldc) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b = _mm256_maskz_loadu_ps(mask, B + k * ldb);
    for (int r = 0; r < R; ++r) c[r] = _mm256_fmadd_ps(_mm256_set1_ps(A[r * lda + k]), b, c[r]);
  }
  if (e.on)
    for (int r = 0; r < R; ++r) c[r] = _mm256_mul_ps(c[r], _mm256_set1_ps(mg_epi_scale(e, r)));
  for (int r = 0; r < R; ++r) _mm256_mask_storeu_ps(C + r * ldc, mask, c[r]);
}
#endif

template <int V>
static inline __attribute__((always_inline)) void mg_rows(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                           int64_t ldc, int acc, mg_epi e = mg_epi{}) {
  int64_t m = 0;
  for (; m + MG_MR <= M; m += MG_MR) mg_block<MG_MR, V>(K, A + m * lda, lda, B, ldb, C + m * ldc, ldc, acc, mg_epi_rows(e, m));
  // The rest in one block: rows of independent accumulators hide the FMA latency.
  A += m * lda, C += m * ldc;
  e = mg_epi_rows(e, m);
  switch (M - m) {
#if MG_MR > 7
    case 7: mg_block<7, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
    case 6: mg_block<6, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
#endif
#if MG_MR > 5
    case 5: mg_block<5, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
    case 4: mg_block<4, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
#endif
    case 3: mg_block<3, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
    case 2: mg_block<2, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
    case 1: mg_block<1, V>(K, A, lda, B, ldb, C, ldc, acc, e); break;
    default: break;
  }
}

// A thread's copy of a B panel (mg_gemm), grown as needed, freed with the thread.
struct mg_panel_buffer {
  float* p = nullptr;
  int64_t size = 0;
  ~mg_panel_buffer() { std::free(p); }
  float* get(int64_t floats) {
    if (floats > size) {
      std::free(p);
      size = (floats + 15) / 16 * 16;
      p = static_cast<float*>(std::aligned_alloc(64, size * 4));
    }
    return p;
  }
};

// mg_gemm on one block of k (at most MG_KC).
static inline __attribute__((always_inline)) void mg_gemm_panel(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                    int64_t ldc, int acc, mg_epi e = mg_epi{}) {
  // A tile of a wide B (a weight's columns) is read at the weight's row stride: at
  // 3072 floats (12 KB) every row of the tile falls into one L1 set and a few dozen
  // L2 sets, and each block of rows of A read it from L3 (LayerNorm+MatMul ran at
  // 9 GFLOP/s). Copied once into a dense panel, the tile stays in L1/L2 while the
  // rows of A stream by.
  if (ldb != N && M > MG_MR && K * N <= (int64_t{1} << 18)) {
    static thread_local mg_panel_buffer panel;
    float* d = panel.get(K * N);
    for (int64_t k = 0; k < K; ++k) __builtin_memcpy(d + k * N, B + k * ldb, static_cast<size_t>(N) * 4);
    B = d;
    ldb = N;
  }
  int64_t n = 0;
  for (; n + 2 * MG_W <= N; n += 2 * MG_W) mg_rows<2>(M, K, A, lda, B + n, ldb, C + n, ldc, acc, e);
  for (; n + MG_W <= N; n += MG_W) mg_rows<1>(M, K, A, lda, B + n, ldb, C + n, ldc, acc, e);
  if (n == N) return;
#if MG_W == 16 || (defined(MG_AVX2) && MG_W == 8)
  {
    int64_t m = 0;
#if MG_W == 16
    if (N - n <= 8) {
      for (; m + 8 <= M; m += 8) mg_block_tail8<8>(K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc, N - n, mg_epi_rows(e, m));
      for (; m + 4 <= M; m += 4) mg_block_tail8<4>(K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc, N - n, mg_epi_rows(e, m));
      for (; m < M; ++m) mg_block_tail8<1>(K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc, N - n, mg_epi_rows(e, m));
      return;
    }
#endif
    for (; m + 4 <= M; m += 4) mg_block_tail<4>(K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc, N - n, mg_epi_rows(e, m));
    for (; m < M; ++m) mg_block_tail<1>(K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc, N - n, mg_epi_rows(e, m));
  }
#else
  for (int64_t m = 0; m < M; ++m) {
    if (!acc)
      for (int64_t j = n; j < N; ++j) C[m * ldc + j] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[m * lda + k];
#pragma omp simd
      for (int64_t j = n; j < N; ++j) C[m * ldc + j] += a * B[k * ldb + j];
    }
    if (e.on)
      for (int64_t j = n; j < N; ++j) C[m * ldc + j] *= mg_epi_scale(e, m);
  }
#endif
}

// C[M x N] (+)= A[M x K] B[K x N]; unit strides along k (A) and n (B, C).
// k runs in blocks of MG_KC, C accumulating between them: a 32-column strip of one
// block of B (32 KB) stays in L1 while every block of rows of A passes, and a
// strided B is copied into a dense panel block by block. Unblocked, a tile with
// the whole of k (1024-2048) read its strip from L2 at every row block, and a wide
// strided B too large to copy at once was read at the weight's row stride: 0.45x
// oneDNN's time on 128x2048x2048 in column tiles of 256 (0.93x blocked).
#ifndef MG_KC
#define MG_KC 256
#endif
// With an epilogue (acc == 0) the last block of k stores the scaled sum.
static inline __attribute__((always_inline)) void mg_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                    int64_t ldc, int acc, mg_epi e = mg_epi{}) {
  for (int64_t k0 = 0; k0 < K; k0 += MG_KC)
    mg_gemm_panel(M, N, K - k0 < MG_KC ? K - k0 : MG_KC, A + k0, lda, B + k0 * ldb, ldb, C, ldc, acc || k0 > 0,
                  k0 + MG_KC >= K ? e : mg_epi{});
  if (K <= 0 && !acc)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = 0.0f;
}

#ifdef MG_AVX2
// d[k * ldd + n] = B[n * ldb + k] for n < 8, k < 8: one 8 x 8 block transposed in
// registers (unpack pairs, then quads, then halves).
static inline __attribute__((always_inline)) void mg_tr8(const float* __restrict B, int64_t ldb, float* __restrict d,
                                                         int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(B + i * ldb);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(d + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(d + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// d[k * ldd + n] = B[n * ldb + k] for n < N, k < K: Bᵀ as a dense panel, in 8 x 8
// register blocks, the ragged edges element by element.
static inline void mg_pack_t(int64_t N, int64_t K, const float* B, int64_t ldb, float* d, int64_t ldd) {
  int64_t n = 0;
  for (; n + 8 <= N; n += 8) {
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) mg_tr8(B + n * ldb + k, ldb, d + k * ldd + n, ldd);
    for (; k < K; ++k)
      for (int64_t j = 0; j < 8; ++j) d[k * ldd + n + j] = B[(n + j) * ldb + k];
  }
  for (; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) d[k * ldd + n] = B[n * ldb + k];
}

// The eight lane sums of x[0..7], in order, in one vector.
static inline __attribute__((always_inline)) __m256 mg_sum8(const __m256* x) {
  const __m256 t0 = _mm256_hadd_ps(x[0], x[1]), t1 = _mm256_hadd_ps(x[2], x[3]);
  const __m256 t2 = _mm256_hadd_ps(x[4], x[5]), t3 = _mm256_hadd_ps(x[6], x[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// C[m, n0 + j] (+)= dot(A[m, :], B[n0 + j, :]) for R rows by J <= 4 columns: R * 4
// accumulators of 8 lanes along k, summed across lanes once at the end.
template <int R, int J>
static inline __attribute__((always_inline)) void mg_dot_block(int64_t K, const float* __restrict A, int64_t lda,
                                                               const float* __restrict B, int64_t ldb,
                                                               float* __restrict C, int64_t ldcm, int64_t ldcn,
                                                               int acc, mg_epi e = mg_epi{}) {
  __m256 c[8];
  for (int q = 0; q < 8; ++q) c[q] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 b[J];
    for (int j = 0; j < J; ++j) b[j] = _mm256_loadu_ps(B + j * ldb + k);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_loadu_ps(A + r * lda + k);
      for (int j = 0; j < J; ++j) c[r * 4 + j] = _mm256_fmadd_ps(a, b[j], c[r * 4 + j]);
    }
  }
  if (k < K) {
    const __m256i mask = mg_mask(K - k);
    __m256 b[J];
    for (int j = 0; j < J; ++j) b[j] = _mm256_maskload_ps(B + j * ldb + k, mask);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_maskload_ps(A + r * lda + k, mask);
      for (int j = 0; j < J; ++j) c[r * 4 + j] = _mm256_fmadd_ps(a, b[j], c[r * 4 + j]);
    }
  }
  __m256 s = mg_sum8(c);
  if (e.on) {
    const float f0 = mg_epi_scale(e, 0), f1 = R == 2 ? mg_epi_scale(e, 1) : f0;
    s = _mm256_mul_ps(s, _mm256_setr_ps(f0, f0, f0, f0, f1, f1, f1, f1));
  }
  if (J == 4 && ldcn == 1) {
    const __m128 lo = _mm256_castps256_ps128(s), hi = _mm256_extractf128_ps(s, 1);
    _mm_storeu_ps(C, acc ? _mm_add_ps(_mm_loadu_ps(C), lo) : lo);
    if (R == 2) _mm_storeu_ps(C + ldcm, acc ? _mm_add_ps(_mm_loadu_ps(C + ldcm), hi) : hi);
    return;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      float& d = C[r * ldcm + j * ldcn];
      d = acc ? d + t[r * 4 + j] : t[r * 4 + j];
    }
}

template <int R>
static inline __attribute__((always_inline)) void mg_dot_row(int64_t N, int64_t K, const float* A, int64_t lda,
                                                             const float* B, int64_t ldb, float* C, int64_t ldcm,
                                                             int64_t ldcn, int acc, mg_epi e = mg_epi{}) {
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) mg_dot_block<R, 4>(K, A, lda, B + n * ldb, ldb, C + n * ldcn, ldcm, ldcn, acc, e);
  switch (N - n) {
    case 3: mg_dot_block<R, 3>(K, A, lda, B + n * ldb, ldb, C + n * ldcn, ldcm, ldcn, acc, e); break;
    case 2: mg_dot_block<R, 2>(K, A, lda, B + n * ldb, ldb, C + n * ldcn, ldcm, ldcn, acc, e); break;
    case 1: mg_dot_block<R, 1>(K, A, lda, B + n * ldb, ldb, C + n * ldcn, ldcm, ldcn, acc, e); break;
    default: break;
  }
}
#endif

#ifdef MG_AVX2
// mg_exp on U vectors in lockstep: the independent chains interleaved, which the
// small FP scheduler needs to keep both FMA pipes busy (11.5 cycles per 8 values
// against 18 for the vectorized scalar form). The clamps keep NaN (its second
// operand is what max/min return on NaN); below -86.7 the result is exactly 0.
template <int U>
static inline __attribute__((always_inline)) void mg_exp8(__m256* v) {
  __m256 t[U], r[U], p[U];
  for (int u = 0; u < U; ++u) {
    v[u] = _mm256_min_ps(_mm256_set1_ps(88.7228393554688f), _mm256_max_ps(_mm256_set1_ps(-87.0f), v[u]));
    t[u] = _mm256_fmadd_ps(v[u], _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(12582912.0f));
  }
  for (int u = 0; u < U; ++u) {
    const __m256 n = _mm256_sub_ps(t[u], _mm256_set1_ps(12582912.0f));
    r[u] = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v[u]);
    r[u] = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r[u]);
  }
  for (int u = 0; u < U; ++u) p[u] = _mm256_fmadd_ps(_mm256_set1_ps(MG_EXP_Q3), r[u], _mm256_set1_ps(MG_EXP_Q2));
  for (int u = 0; u < U; ++u) p[u] = _mm256_fmadd_ps(p[u], r[u], _mm256_set1_ps(MG_EXP_Q1));
  for (int u = 0; u < U; ++u) p[u] = _mm256_fmadd_ps(p[u], r[u], _mm256_set1_ps(MG_EXP_Q0));
  for (int u = 0; u < U; ++u)
    p[u] = _mm256_add_ps(_mm256_fmadd_ps(p[u], _mm256_mul_ps(r[u], r[u]), r[u]), _mm256_set1_ps(1.0f));
  for (int u = 0; u < U; ++u) {
    // 2^(n - 1) from t's low mantissa bits (n + 0x4B400000), then times 2.
    const __m256i e = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_castps_si256(t[u]), _mm256_set1_epi32(0x4B400000 - 126)), 23);
    v[u] = _mm256_mul_ps(_mm256_mul_ps(p[u], _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
  }
}
#endif

#if MG_W == 16
// mg_exp8 on 16 lanes: U vectors in lockstep, the same reduction and polynomial; 2^n
// by one scalef (p * 2^n) where mg_exp8 builds it in the exponent bits (two integer
// operations and two multiplies), and arguments at or below -86.9 zeroed by the
// scalef's mask instead of a lower clamp (a NaN compares unordered, so it is kept).
// Above -86.9, n >= -125 and p >= 0.7: p * 2^n is normal (no denormal is formed);
// mg_exp8 gives 0 from about -87 on, so between the two bounds this gives 0 where it
// gives at most 2e-38. attention_vit_6x197's kernel ~1% faster (0.615 -> 0.609 ms).
template <int U>
static inline __attribute__((always_inline)) void mg_exp16(__m512* v) {
  __m512 t[U], r[U], p[U];
  __mmask16 live[U];
  for (int u = 0; u < U; ++u) {
    live[u] = _mm512_cmp_ps_mask(v[u], _mm512_set1_ps(-86.9f), _CMP_NLE_UQ);
    v[u] = _mm512_min_ps(_mm512_set1_ps(88.7228393554688f), v[u]);
    t[u] = _mm512_fmadd_ps(v[u], _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f));
  }
  __m512 n[U];
  for (int u = 0; u < U; ++u) {
    n[u] = _mm512_sub_ps(t[u], _mm512_set1_ps(12582912.0f));
    r[u] = _mm512_fnmadd_ps(n[u], _mm512_set1_ps(0.693359375f), v[u]);
    r[u] = _mm512_fnmadd_ps(n[u], _mm512_set1_ps(-2.12194440e-4f), r[u]);
  }
  for (int u = 0; u < U; ++u) p[u] = _mm512_fmadd_ps(_mm512_set1_ps(MG_EXP_Q3), r[u], _mm512_set1_ps(MG_EXP_Q2));
  for (int u = 0; u < U; ++u) p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(MG_EXP_Q1));
  for (int u = 0; u < U; ++u) p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(MG_EXP_Q0));
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_add_ps(_mm512_fmadd_ps(p[u], _mm512_mul_ps(r[u], r[u]), r[u]), _mm512_set1_ps(1.0f));
  for (int u = 0; u < U; ++u) v[u] = _mm512_maskz_scalef_ps(live[u], p[u], n[u]);
}
#endif

// y[i] = exp(x[i] - m) for i < n, and their sum (softmax's numerators and
// denominator in one pass); all 0 where m is -inf (a row masked out entirely).
// The maximum of x[0..n), NaN skipped (max_ps(v, m) is v > m ? v : m, the compare
// form of the generic loop), -inf for n == 0. Four vector maxima, the last partial
// vector masked with -inf: a row of ViT's 197 scores ended in five scalar compares
// on one dependency chain after the vector loop.
static inline float mg_row_max(int64_t n, const float* x) {
#if MG_W == 16
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 m[4] = {ninf, ninf, ninf, ninf};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int u = 0; u < 4; ++u) m[u] = _mm512_max_ps(_mm512_loadu_ps(x + i + 16 * u), m[u]);
  for (int u = 0; i + 16 <= n; i += 16, ++u) m[u] = _mm512_max_ps(_mm512_loadu_ps(x + i), m[u]);
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    m[3] = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, x + i), m[3]);
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
#elif defined(MG_AVX2)
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 m[4] = {ninf, ninf, ninf, ninf};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int u = 0; u < 4; ++u) m[u] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * u), m[u]);
  for (int u = 0; i + 8 <= n; i += 8, ++u) m[u] = _mm256_max_ps(_mm256_loadu_ps(x + i), m[u]);
  if (i < n) {
    const __m256i mask = mg_mask(n - i);
    m[3] = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, mask), _mm256_castsi256_ps(mask)), m[3]);
  }
  __m256 v = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
#else
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  return mx;
#endif
}

static inline float mg_exp_shift_sum(int64_t n, const float* x, float m, float* y) {
  if (m == -INFINITY) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return 0.0f;
  }
#if MG_W == 16
  // 16 lanes, two vectors in lockstep (rows of 128-512: four left a long tail of
  // single vectors), the last partial vector masked (its lanes past n summed as 0).
  const __m512 vm = _mm512_set1_ps(m);
  __m512 s[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 v[2] = {_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm)};
    mg_exp16<2>(v);
    _mm512_storeu_ps(y + i, v[0]);
    _mm512_storeu_ps(y + i + 16, v[1]);
    s[0] = _mm512_add_ps(s[0], v[0]);
    s[1] = _mm512_add_ps(s[1], v[1]);
  }
  if (i + 16 <= n) {
    __m512 v[1] = {_mm512_sub_ps(_mm512_loadu_ps(x + i), vm)};
    mg_exp16<1>(v);
    _mm512_storeu_ps(y + i, v[0]);
    s[0] = _mm512_add_ps(s[0], v[0]);
    i += 16;
  }
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 v[1] = {_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)};
    mg_exp16<1>(v);
    _mm512_mask_storeu_ps(y + i, k, v[0]);
    s[1] = _mm512_add_ps(s[1], _mm512_maskz_mov_ps(k, v[0]));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s[0], s[1]));
#elif defined(MG_AVX2)
  const __m256 vm = _mm256_set1_ps(m);
  __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v[4];
    for (int u = 0; u < 4; ++u) v[u] = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * u), vm);
    mg_exp8<4>(v);
    for (int u = 0; u < 4; ++u) {
      _mm256_storeu_ps(y + i + 8 * u, v[u]);
      s[u] = _mm256_add_ps(s[u], v[u]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    __m256 v[1] = {_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)};
    mg_exp8<1>(v);
    _mm256_storeu_ps(y + i, v[0]);
    s[0] = _mm256_add_ps(s[0], v[0]);
  }
  if (i < n) {
    const __m256i mask = mg_mask(n - i);
    __m256 v[1] = {_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vm)};
    mg_exp8<1>(v);
    v[0] = _mm256_and_ps(v[0], _mm256_castsi256_ps(mask));  // the lanes past n are not summed
    _mm256_maskstore_ps(y + i, mask, v[0]);
    s[1] = _mm256_add_ps(s[1], v[0]);
  }
  const __m256 t = _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3]));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
#else
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const float e = mg_exp(x[i] - m);
    y[i] = e;
    s += e;
  }
  return s;
#endif
}

// Whether mg_dot packs Bᵀ and calls mg_gemm: C unit-stride along n, at least
// MG_DOT_PACK_ROWS rows, and a panel that fits in L2.
#ifndef MG_DOT_PACK_ROWS
#define MG_DOT_PACK_ROWS 16
#endif
#ifndef MG_DOT_PACK_COLS
#define MG_DOT_PACK_COLS 64
#endif
static inline bool mg_dot_packs(int64_t M, int64_t N, int64_t K, int64_t ldcn) {
  (void)N;
  return ldcn == 1 && M >= MG_DOT_PACK_ROWS && K <= 1024;
}

// C[m, n] (+)= dot(A[m, :], B[n, :]); unit strides along k in A and B (Q·Kᵀ with K
// read in place, or packed transposed where enough rows of A reuse it).
static inline __attribute__((always_inline)) void mg_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldcm, int64_t ldcn, int acc, mg_epi e = mg_epi{}) {
#ifdef MG_AVX2
  // Enough rows of A to amortize a transposed copy of B: Bᵀ packed once into a dense
  // panel (one read and write of B), and the product runs on mg_gemm's register
  // blocks (outer products, 16 lanes where the CPU has AVX-512). The dot form below
  // sums 8-lane partial products across lanes per output, far below GEMM speed.
  // B in blocks of MG_DOT_PACK_COLS rows: a panel of K x 64 floats (16 KiB at
  // K = 64) stays in L1 while the rows of A pass over it, and its rows are 256 bytes
  // apart (a whole 4096-row B packed at once put them 16 KiB apart, onto a few cache
  // sets: 4x slower). Microbenchmarks on Zen 4, one core: 197 x 197 x 64 (ViT's
  // scores) 76 -> 104 GFLOP/s, 512 x 512 x 64 56 -> 109, 16 x 512 x 64 55 -> 86;
  // below 16 rows of A the dot form is as fast or faster (4 x 64 x 64: 3x).
  if (mg_dot_packs(M, N, K, ldcn)) {
    static thread_local mg_panel_buffer panel;
    float* d = panel.get(K * MG_DOT_PACK_COLS);
    for (int64_t n0 = 0; n0 < N; n0 += MG_DOT_PACK_COLS) {
      const int64_t nn = N - n0 < MG_DOT_PACK_COLS ? N - n0 : MG_DOT_PACK_COLS;
      mg_pack_t(nn, K, B + n0 * ldb, ldb, d, nn);
      mg_gemm(M, nn, K, A, lda, d, nn, C + n0, ldcm, acc, e);
    }
    return;
  }
  // B in panels of rows that stay in L1 (about 16 KiB) while every row pair of A
  // passes over them: row pair by row pair over all of B re-read it from L2 each
  // time (ViT's 16 x 197 scores: 53 -> 59 GFLOP/s, 64 x 197: 67 -> 75, one core).
  int64_t nb = (4096 / (K > 0 ? K : 1)) / 4 * 4;
  nb = nb < 4 ? 4 : nb;
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t nn = N - n0 < nb ? N - n0 : nb;
    int64_t m = 0;
    for (; m + 2 <= M; m += 2)
      mg_dot_row<2>(nn, K, A + m * lda, lda, B + n0 * ldb, ldb, C + m * ldcm + n0 * ldcn, ldcm, ldcn, acc,
                    mg_epi_rows(e, m));
    if (m < M)
      mg_dot_row<1>(nn, K, A + m * lda, lda, B + n0 * ldb, ldb, C + m * ldcm + n0 * ldcn, ldcm, ldcn, acc,
                    mg_epi_rows(e, m));
  }
#else
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
      float& d = C[m * ldcm + n * ldcn];
      d = acc ? d + s : (e.on ? s * mg_epi_scale(e, m) : s);
    }
#endif
}
)MGPRELUDE";

// The vector math of the generated loops (vmath.h, which the micro-kernels do not
// need): 16 lanes where the CPU has AVX-512, 8 otherwise (pairs of SSE registers
// without AVX). After kMicroKernels, which decides MG_W.
inline constexpr const char* kVectorMath = R"MGPRELUDE(
namespace vm = isomer::kernels::vm;
#if MG_W == 16
namespace mgv = isomer::kernels::vm16;
#else
namespace mgv = isomer::kernels::vm8;
#endif
// GELU's x * (erf(x / sqrt 2) + 1) * 0.5 where a kernel computes it (ExprWriter::
// gelu_of). On 16 lanes the runtime's piecewise erf (vm::gelu_erf: 16 intervals of
// degree 5, one permute per coefficient, at most 7e-8 from erf), which is what the
// unfused runtime runs for GELU there: 10 multiply-adds a vector against the chain's
// 19 on mg_erfv's degree-14 polynomial (LayerNorm + GELU 128x768's kernel 0.051 ->
// 0.046 ms on Zen 4). On 8 lanes the chain as written, on mg_erfv: there the
// two-table permutes made the piecewise form no faster (0.070 ms either way).
static inline __attribute__((always_inline)) float mg_gelu_erf(float x) {
#if MG_W == 16
  return vm::gelu_erf(x);
#else
  return (x * (mg_erf(x * 0.70710678118654752f) + 1.0f)) * 0.5f;
#endif
}
static inline __attribute__((always_inline)) mgv::vf mg_gelu_erfv(mgv::vf x) {
#if MG_W == 16
  return mgv::gelu_erf(x);
#else
  return (x * (mg_erfv(x * mgv::splat(0.70710678118654752f)) + mgv::splat(1.0f))) * mgv::splat(0.5f);
#endif
}
)MGPRELUDE";

}  // namespace isomer::mugraph
