// The register micro-kernels every generated kernel includes (codegen_prelude.h):
// mg_gemm (outer products, B and C unit-stride along n) and mg_dot (dot products,
// A and B unit-stride along k), accumulating or overwriting, against a reference in
// double on shapes that leave every kind of tail: rows below the register block,
// columns below a vector and below a block, k below and between vector lengths,
// and a C written transposed. One compiled library (cached after the first run).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "mugraph/codegen_prelude.h"
#include "mugraph/kernel_cache.h"

namespace isomer::mugraph {
namespace {

// in[0]: {mode (0 gemm, 1 dot), M, N, K, lda, ldb, ldcm, ldcn, acc, C's floats};
// in[1]: A, in[2]: B, in[3]: C before; out[0]: C after.
const char* kDriver = R"(
extern "C" void isomer_mugraph_run(const void* const* in, void* const* out, int) {
  const float* p = static_cast<const float*>(in[0]);
  const int64_t mode = (int64_t)p[0], M = (int64_t)p[1], N = (int64_t)p[2], K = (int64_t)p[3];
  const int64_t lda = (int64_t)p[4], ldb = (int64_t)p[5], ldcm = (int64_t)p[6], ldcn = (int64_t)p[7];
  const int acc = (int)p[8];
  float* C = static_cast<float*>(out[0]);
  const float* C0 = static_cast<const float*>(in[3]);
  for (int64_t i = 0; i < (int64_t)p[9]; ++i) C[i] = C0[i];
  const float* A = static_cast<const float*>(in[1]);
  const float* B = static_cast<const float*>(in[2]);
  if (mode == 0) mg_gemm(M, N, K, A, lda, B, ldb, C, ldcm, acc);
  else if (mode == 1) mg_dot(M, N, K, A, lda, B, ldb, C, ldcm, ldcn, acc);
  else if (mode == 2) {
#pragma omp simd
    for (int64_t i = 0; i < M; ++i) C[i] = mg_erf(A[i]);
  } else if (mode == 3) {
#pragma omp simd
    for (int64_t i = 0; i < M; ++i) C[i] = mg_tanh(A[i]);
  } else if (mode == 4) {
#pragma omp simd
    for (int64_t i = 0; i < M; ++i) C[i] = mg_exp(A[i]);
  } else if (mode == 5) {
    C[M] = mg_exp_shift_sum(M, A, p[2], C);  // p[2]: the shift
  } else if (mode == 9) {  // mg_erfv on whole vectors, mg_erf on the tail
    int64_t i = 0;
    for (; i + MG_W <= M; i += MG_W) mg_store(C + i, mg_erfv(mg_load(A + i)));
    for (; i < M; ++i) C[i] = mg_erf(A[i]);
  } else if (mode == 7) {
#ifdef MG_AVX2
    mg_pack_t(N, K, B, ldb, C, ldcm);  // Bᵀ (N x K at ldb) into C (K x N at ldcm)
#else
    C[0] = NAN;
#endif
  } else if (mode == 8) {
    C[0] = mg_dot_packs(M, N, K, ldcn) ? 1.0f : 0.0f;
  } else if (mode == 10 || mode == 11) {  // with a store epilogue: 0.75 / (1 + m / 4) on row m
    float rs[64];
    for (int i = 0; i < 64; ++i) rs[i] = 1.0f + 0.25f * i;
    mg_epi e;
    e.on = 1, e.alpha = 0.75f, e.rs = rs, e.rss = 1;
    if (mode == 10) mg_gemm(M, N, K, A, lda, B, ldb, C, ldcm, acc, e);
    else mg_dot(M, N, K, A, lda, B, ldb, C, ldcm, ldcn, acc, e);
  } else if (mode == 12) {
    C[0] = mg_row_max(M, A);
  } else {
    C[0] = MG_W;  // the vector width the library was compiled for
  }
}
extern "C" const char* isomer_mugraph_key();
)";

class MuGraphMicroKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
    if (kernel_compiler().empty()) GTEST_SKIP() << "no C++ compiler found: micro-kernels are not compiled here";
    std::string src = std::string("#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n") + kMicroKernels + kDriver;
    std::string why;
    kernel_ = load_kernel(src, &why);
    ASSERT_TRUE(kernel_) << why;
  }

  // Runs one call and returns the largest error relative to the largest |C| entry.
  double run(int mode, int64_t M, int64_t N, int64_t K, bool acc, bool c_transposed, bool epi = false) {
    std::mt19937 rng(static_cast<unsigned>(M * 1000003 + N * 1009 + K * 7 + mode));
    std::uniform_real_distribution<float> u(-1, 1);
    // Padded leading dimensions, so a kernel reading past a row's end reads wrong data.
    const int64_t lda = K + 3;
    const int64_t ldb = mode == 0 ? N + 5 : K + 2;  // gemm: B[k][n]; dot: B[n][k]
    const int64_t rows_b = mode == 0 ? K : N;
    int64_t ldcm = N + 1, ldcn = 1;
    if (c_transposed) ldcm = 1, ldcn = M + 2;
    const int64_t c_size = c_transposed ? ldcn * N : ldcm * M;
    std::vector<float> A(static_cast<size_t>(M * lda)), B(static_cast<size_t>(rows_b * ldb)),
        C0(static_cast<size_t>(c_size));
    for (float& x : A) x = u(rng);
    for (float& x : B) x = u(rng);
    for (float& x : C0) x = u(rng);
    std::vector<float> C(C0.size(), NAN);
    std::vector<float> params = {static_cast<float>(mode + (epi ? 10 : 0)), static_cast<float>(M), static_cast<float>(N),
                                 static_cast<float>(K),    static_cast<float>(lda), static_cast<float>(ldb),
                                 static_cast<float>(ldcm), static_cast<float>(ldcn), acc ? 1.0f : 0.0f,
                                 static_cast<float>(c_size)};
    const void* in[] = {params.data(), A.data(), B.data(), C0.data()};
    void* out[] = {C.data()};
    kernel_->run(in, out, 1);
    double worst = 0, mag = 1e-30;
    std::vector<double> want(C0.begin(), C0.end());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = acc ? C0[static_cast<size_t>(m * ldcm + n * ldcn)] : 0.0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<double>(A[static_cast<size_t>(m * lda + k)]) *
               (mode == 0 ? B[static_cast<size_t>(k * ldb + n)] : B[static_cast<size_t>(n * ldb + k)]);
        if (epi) s *= 0.75 / (1.0 + 0.25 * static_cast<double>(m));
        want[static_cast<size_t>(m * ldcm + n * ldcn)] = s;
      }
    for (double w : want) mag = std::max(mag, std::abs(w));
    for (size_t i = 0; i < C.size(); ++i) {
      if (!std::isfinite(C[i])) return INFINITY;  // padding is copied, so every entry is finite
      worst = std::max(worst, std::abs(C[i] - want[i]) / mag);
    }
    return worst;
  }

  std::shared_ptr<const CompiledKernel> kernel_;
};

TEST_F(MuGraphMicroKernel, GemmMatchesTheReferenceOnTails) {
  for (int64_t M : {1, 2, 5, 6, 7, 10, 11, 13, 16})
    for (int64_t N : {1, 5, 8, 13, 16, 24, 37})
      for (int64_t K : {1, 3, 16, 67})
        for (bool acc : {false, true})
          EXPECT_LT(run(0, M, N, K, acc, false), 1e-5) << "gemm M=" << M << " N=" << N << " K=" << K << " acc=" << acc;
}

// The AVX-512 form (16 lanes, register blocks of 8 rows, masked column tails: on 8
// lanes where at most 8 columns are left, in blocks of 8, 4 and 1 rows) on columns
// around one and two vectors and half vectors and rows around one block.
TEST_F(MuGraphMicroKernel, Avx512GemmOnRaggedTails) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this CPU";
  float params[10] = {6, 0, 0, 0, 0, 0, 0, 0, 0, 0}, width = 0;
  const void* in[] = {params, nullptr, nullptr, nullptr};
  void* out[] = {&width};
  kernel_->run(in, out, 1);
  ASSERT_EQ(width, 16.0f) << "the library was not compiled for AVX-512";
  for (int64_t M : {1, 3, 5, 7, 8, 9, 12, 13, 15, 17})
    for (int64_t N : {1, 5, 8, 9, 15, 16, 17, 21, 24, 31, 32, 33, 47, 50})
      for (int64_t K : {1, 5, 33})
        for (bool acc : {false, true})
          EXPECT_LT(run(0, M, N, K, acc, false), 1e-5) << "gemm M=" << M << " N=" << N << " K=" << K << " acc=" << acc;
}

// k in blocks (MG_KC = 256): the blocks accumulate onto C, overwritten or not, on
// long and ragged k, with B strided (copied into panels where there are enough rows).
TEST_F(MuGraphMicroKernel, GemmBlocksLongK) {
  for (int64_t M : {3, 9, 20})
    for (int64_t N : {7, 40})
      for (int64_t K : {255, 256, 257, 600})
        for (bool acc : {false, true})
          EXPECT_LT(run(0, M, N, K, acc, false), 1e-5) << "gemm M=" << M << " N=" << N << " K=" << K << " acc=" << acc;
}

TEST_F(MuGraphMicroKernel, DotMatchesTheReferenceOnTails) {
  for (int64_t M : {1, 2, 3, 16, 17})
    for (int64_t N : {1, 2, 3, 4, 5, 11, 197})
      for (int64_t K : {1, 7, 8, 9, 64, 67})
        for (bool acc : {false, true})
          for (bool ct : {false, true})
            EXPECT_LT(run(1, M, N, K, acc, ct), 1e-5)
                << "dot M=" << M << " N=" << N << " K=" << K << " acc=" << acc << " C transposed=" << ct;
}

// mg_dot's packed form: Bᵀ copied into a dense panel in 8 x 8 register blocks
// (mg_pack_t), then mg_gemm, in panels of 64 columns. Rows of A from the smallest
// that packs up, columns and k around the 8 x 8 blocks and the 64-column panels, a
// padded B and C, accumulating or not; and the transposition alone, element by
// element, with a destination stride wider than N.
TEST_F(MuGraphMicroKernel, PackedDotMatchesTheReference) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2/FMA";
  auto packs = [&](int64_t M, int64_t N, int64_t K, int64_t ldcn) {
    float params[10] = {8, static_cast<float>(M), static_cast<float>(N), static_cast<float>(K), 0, 0, 0,
                        static_cast<float>(ldcn), 0, 0};
    float r = -1;
    const void* in[] = {params, nullptr, nullptr, nullptr};
    void* out[] = {&r};
    kernel_->run(in, out, 1);
    return r == 1.0f;
  };
  EXPECT_TRUE(packs(16, 197, 64, 1));
  EXPECT_FALSE(packs(4, 4096, 64, 1)) << "a few rows of A: the dot form";
  EXPECT_FALSE(packs(197, 197, 64, 3)) << "C transposed: the dot form";
  for (int64_t M : {16, 17, 23, 40})
    for (int64_t N : {1, 5, 8, 9, 63, 64, 65, 129, 200})
      for (int64_t K : {1, 7, 8, 9, 63, 64, 65})
        for (bool acc : {false, true}) {
          ASSERT_TRUE(packs(M, N, K, 1));
          EXPECT_LT(run(1, M, N, K, acc, false), 1e-5) << "packed dot M=" << M << " N=" << N << " K=" << K
                                                       << " acc=" << acc;
        }
  for (int64_t N : {1, 7, 8, 9, 16, 23})
    for (int64_t K : {1, 5, 8, 13, 16, 17}) {
      const int64_t ldb = K + 3, ldd = N + 5;
      std::vector<float> B(static_cast<size_t>(N * ldb)), D(static_cast<size_t>(K * ldd), -7.0f);
      for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>(i) * 0.5f + 1.0f;
      float params[10] = {7, 0, static_cast<float>(N), static_cast<float>(K), 0, static_cast<float>(ldb),
                          static_cast<float>(ldd), 0, 0, static_cast<float>(D.size())};
      std::vector<float> D0 = D;
      const void* in[] = {params, nullptr, B.data(), D0.data()};
      void* out[] = {D.data()};
      kernel_->run(in, out, 1);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < ldd; ++j) {
          const float want = j < N ? B[static_cast<size_t>(j * ldb + k)] : -7.0f;  // padding untouched
          EXPECT_EQ(D[static_cast<size_t>(k * ldd + j)], want) << "pack N=" << N << " K=" << K << " k=" << k << " n=" << j;
        }
    }
}

// The pointwise functions the generated loops vectorize, against libm: erf and
// tanh within 2e-6 absolute (vm8's approximations), exp within 4 ulp and exactly 0,
// inf and NaN at the edges.
TEST_F(MuGraphMicroKernel, PointwiseFunctionsMatchLibm) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.0025f);  // [-10, 10]
  for (float v : {-1e9f, -100.0f, -87.5f, 88.0f, 100.0f, INFINITY, -INFINITY, NAN}) x.push_back(v);
  auto eval = [&](int mode) {
    std::vector<float> y(x.size(), -7.0f);
    std::vector<float> params = {0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<float>(x.size())};
    params[0] = static_cast<float>(mode);
    params[1] = static_cast<float>(x.size());
    std::vector<float> c0(x.size(), 0.0f);
    const void* in[] = {params.data(), x.data(), x.data(), c0.data()};
    void* out[] = {y.data()};
    kernel_->run(in, out, 1);
    return y;
  };
  std::vector<float> e = eval(2), t = eval(3), ex = eval(4);
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(ex[i]));
      continue;
    }
    EXPECT_NEAR(e[i], std::erf(v), 2e-6) << "erf(" << v << ")";
    EXPECT_NEAR(t[i], std::tanh(v), 2e-6) << "tanh(" << v << ")";
    const double want = std::exp(static_cast<double>(v));
    if (v < -87.5f) EXPECT_EQ(ex[i], 0.0f) << "exp(" << v << ")";
    else if (v >= 88.75f) EXPECT_EQ(ex[i], INFINITY) << "exp(" << v << ")";
    else if (v > -80.0f) EXPECT_NEAR(ex[i] / want, 1.0, 4.8e-7) << "exp(" << v << ")";
  }
}

// erf without exp or division (mg_erf, and mg_erfv as the vectorized loops call it):
// every 151st float from 0 to 5 (fewer than 2^24 values in all: the driver reads
// the count as a float), both signs, the worst points of the full sweep
// (DISABLED_ErfPolynomialOverEveryFloat: 3.67e-7 at 3.734237 with FMA, 3.93e-7 at
// 3.896519 without) and the edges: within 4e-7 of erf in absolute error, within
// 2e-6 relative for normal |x| < 0.5, exactly +-1 from 3.9 on and at +-inf, signed
// zeros kept, NaN kept, the same values scalar and vectorized.
TEST_F(MuGraphMicroKernel, ErfPolynomialIsWithinItsBoundOnEveryFloatOfAGrid) {
  std::vector<float> x;
  for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(5.0f); b += 151) {
    x.push_back(std::bit_cast<float>(b));
    x.push_back(-std::bit_cast<float>(b));
  }
  for (float v : {3.73423743f, 3.89651871f, 3.8999999f, 3.9f, 3.9000001f, 6.0f, 1e30f, FLT_MAX, INFINITY, 1e-40f, FLT_MIN, 0.0f,
                  -0.0f, NAN})
    for (float s : {1.0f, -1.0f}) x.push_back(s * v);
  auto eval = [&](int mode) {
    std::vector<float> y(x.size(), -7.0f);
    std::vector<float> params = {static_cast<float>(mode), static_cast<float>(x.size()), 0, 0, 0, 0, 0, 0, 0, 0};
    std::vector<float> c0(1, 0.0f);
    const void* in[] = {params.data(), x.data(), x.data(), c0.data()};
    void* out[] = {y.data()};
    kernel_->run(in, out, 1);
    return y;
  };
  const std::vector<float> scalar = eval(2), vec = eval(9);
  double worst = 0;
  int bad = 0;
  for (size_t i = 0; i < x.size() && bad < 10; ++i) {
    const float v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(scalar[i]) && std::isnan(vec[i])) << scalar[i] << " " << vec[i] << " at " << i << " of " << x.size();
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(scalar[i]), std::bit_cast<uint32_t>(vec[i])) << "erf(" << v << ")";
    const double want = std::erf(static_cast<double>(v)), err = std::fabs(scalar[i] - want);
    worst = std::max(worst, err);
    bad += err > 4e-7 || std::signbit(scalar[i]) != std::signbit(v);
    EXPECT_LE(err, 4e-7) << "erf(" << v << ")";
    EXPECT_EQ(std::signbit(scalar[i]), std::signbit(v)) << "erf(" << v << ")";
    if (std::fabs(v) >= 3.9f) {
      EXPECT_EQ(std::fabs(scalar[i]), 1.0f) << "erf(" << v << ")";
    }
    if (std::fabs(v) >= FLT_MIN && std::fabs(v) < 0.5f) {
      bad += std::fabs(err / want) > 2e-6;
      EXPECT_LE(std::fabs(err / want), 2e-6) << "erf(" << v << ")";
    }
  }
  EXPECT_GT(worst, 3e-7);  // the grid reaches near the bound (the bound is not loose)
}

// The full sweep behind the bound above: every non-negative float up to +inf (erf is
// odd by construction), in chunks, ~20 s; run with --gtest_also_run_disabled_tests.
TEST_F(MuGraphMicroKernel, DISABLED_ErfPolynomialOverEveryFloat) {
  const uint32_t top = std::bit_cast<uint32_t>(INFINITY), chunk = 1u << 22;
  std::vector<float> x(chunk), y(chunk);
  double worst = 0;
  float at = 0;
  for (uint64_t b0 = 0; b0 <= top; b0 += chunk) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk, top + 1 - b0));
    for (uint32_t j = 0; j < n; ++j) x[j] = std::bit_cast<float>(static_cast<uint32_t>(b0 + j));
    std::vector<float> params = {2, static_cast<float>(n), 0, 0, 0, 0, 0, 0, 0, 0};
    std::vector<float> c0(1, 0.0f);
    const void* in[] = {params.data(), x.data(), x.data(), c0.data()};
    void* out[] = {y.data()};
    kernel_->run(in, out, 1);
    for (uint32_t j = 0; j < n; ++j) {
      const double err = std::fabs(y[j] - std::erf(static_cast<double>(x[j])));
      if (err > worst) worst = err, at = x[j];
    }
  }
  EXPECT_LE(worst, 4e-7) << "at " << at;
  std::printf("erf: largest absolute error %.3g at %.9g\n", worst, at);
}

// Softmax's exp-and-sum helper: every row length's vector blocks and tail at 8 and
// 16 lanes (and nothing past the row read into the sum), the shift -inf (a row
// masked out), -inf entries (masked), a NaN kept.
// The store epilogue (a scalar factor and a per-row divisor, mg_epi) on every store
// path: register blocks, column tails, the remainder rows, k in blocks, the dot
// form and its packed form, C transposed.
// exp's degree-5 polynomial (mg_exp, and mg_exp16 or mg_exp8 through the row
// exponentials, the latter also with AVX-512 hidden from the prelude): every 61st
// float from -86.8 (below it the exponent nears the bottom of the normal range) to
// 88.72, every form within 2.2e-7 of exp relative (the fit's 1.05e-7 and float
// rounding), and the bound is not loose.
TEST_F(MuGraphMicroKernel, ExpPolynomialIsWithinItsBoundOnEveryFloatOfAGrid) {
  std::string why;
  auto avx2 = load_kernel(std::string("#undef __AVX512F__\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n") +
                              kMicroKernels + kDriver,
                          &why);
  ASSERT_TRUE(avx2) << why;
  float params[10] = {6, 0, 0, 0, 0, 0, 0, 0, 0, 0}, width = 0;
  const void* pin[] = {params, nullptr, nullptr, nullptr};
  void* pout[] = {&width};
  avx2->run(pin, pout, 1);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) EXPECT_EQ(width, 8.0f);
  std::vector<float> x;
  for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(88.72f); b += 61) x.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(86.8f); b += 61) x.push_back(-std::bit_cast<float>(b));
  double worst_scalar = 0, worst_vector = 0, worst_avx2 = 0;
  const size_t chunk = 1 << 22;  // the driver reads the count as a float
  for (size_t at = 0; at < x.size(); at += chunk) {
    const size_t n = std::min(chunk, x.size() - at);
    std::vector<float> scalar(n), vec(n + 1), c0(n + 1, 0.0f);
    std::vector<float> p4 = {4, static_cast<float>(n), 0, 0, 0, 0, 0, 0, 0, 0};
    std::vector<float> p5 = {5, static_cast<float>(n), 0, 0, 0, 0, 0, 0, 0, 0};
    const void* in4[] = {p4.data(), x.data() + at, x.data() + at, c0.data()};
    void* out4[] = {scalar.data()};
    kernel_->run(in4, out4, 1);
    std::vector<float> vec8(n + 1);
    const void* in5[] = {p5.data(), x.data() + at, x.data() + at, c0.data()};
    void* out5[] = {vec.data()};
    kernel_->run(in5, out5, 1);
    void* out8[] = {vec8.data()};
    avx2->run(in5, out8, 1);
    for (size_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[at + i]));
      worst_scalar = std::max(worst_scalar, std::abs(scalar[i] / want - 1.0));
      worst_vector = std::max(worst_vector, std::abs(vec[i] / want - 1.0));
      worst_avx2 = std::max(worst_avx2, std::abs(vec8[i] / want - 1.0));
    }
  }
  EXPECT_LE(worst_scalar, 2.2e-7);
  EXPECT_LE(worst_vector, 2.2e-7);
  EXPECT_LE(worst_avx2, 2.2e-7);
  EXPECT_GT(std::max(worst_scalar, worst_vector), 1.2e-7);  // the grid reaches near the bound
  std::printf("exp: worst relative error %.3g (scalar), %.3g (vector), %.3g (8 lanes) over %zu floats\n",
              worst_scalar, worst_vector, worst_avx2, x.size());
}

TEST_F(MuGraphMicroKernel, StoreEpilogueScalesEveryRow) {
  for (int64_t M : {1, 2, 5, 7, 9, 13, 17, 40})
    for (int64_t N : {1, 5, 8, 13, 16, 17, 37})
      for (int64_t K : {1, 16, 67, 300}) {
        EXPECT_LT(run(0, M, N, K, false, false, true), 1e-5) << "gemm M=" << M << " N=" << N << " K=" << K;
        EXPECT_LT(run(1, M, N, K, false, false, true), 1e-5) << "dot M=" << M << " N=" << N << " K=" << K;
        EXPECT_LT(run(1, M, N, K, false, true, true), 1e-5) << "dot, C transposed, M=" << M << " N=" << N;
      }
}

// mg_row_max: whole vectors, the masked tail (values past n never count), NaN
// skipped, -inf for an empty row.
TEST_F(MuGraphMicroKernel, RowMaxMatchesTheScalarForm) {
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 197}) {
    std::vector<float> x(static_cast<size_t>(n + 16), 1000.0f);  // past the row: larger than any value in it
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 0.7f) * 4.0f - 0.01f * static_cast<float>(i);
    if (n > 2) x[1] = NAN;
    float got = 0.0f;
    std::vector<float> params = {12, static_cast<float>(n), 0, 0, 0, 0, 0, 0, 0, 0};
    const void* in[] = {params.data(), x.data(), x.data(), nullptr};
    void* out[] = {&got};
    kernel_->run(in, out, 1);
    float scalar = -INFINITY;
    for (int64_t i = 0; i < n; ++i) scalar = x[static_cast<size_t>(i)] > scalar ? x[static_cast<size_t>(i)] : scalar;
    EXPECT_EQ(got, scalar) << "n=" << n;
  }
}

TEST_F(MuGraphMicroKernel, ExpShiftSumMatchesTheScalarForm) {
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 77, 128, 197})
    for (float m : {0.0f, 3.5f, -INFINITY}) {
      // Past the row: values whose exp is inf, which a tail reading or summing lanes
      // beyond n would add.
      std::vector<float> x(static_cast<size_t>(n + 16), 1000.0f);
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 0.7f) * 4.0f;
      if (n > 4) x[3] = -INFINITY;
      std::vector<float> y(static_cast<size_t>(n + 1), -7.0f), c0(y.size(), 0.0f);
      std::vector<float> params = {5, static_cast<float>(n), m, 0, 0, 0, 0, 0, 0, 0};
      const void* in[] = {params.data(), x.data(), x.data(), c0.data()};
      void* out[] = {y.data()};
      kernel_->run(in, out, 1);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = m == -INFINITY ? 0.0 : std::exp(static_cast<double>(x[static_cast<size_t>(i)]) - m);
        sum += want;
        EXPECT_NEAR(y[static_cast<size_t>(i)], want, 4.8e-7 * want) << "n=" << n << " m=" << m << " i=" << i;
      }
      EXPECT_NEAR(y[static_cast<size_t>(n)], sum, 1e-6 * sum) << "sum, n=" << n << " m=" << m;
    }
  std::vector<float> x = {1.0f, NAN, 2.0f}, y(4, 0.0f), c0(4, 0.0f);
  std::vector<float> params = {5, 3, 0, 0, 0, 0, 0, 0, 0, 0};
  const void* in[] = {params.data(), x.data(), x.data(), c0.data()};
  void* out[] = {y.data()};
  kernel_->run(in, out, 1);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(y[3]));
  // The edges, in whole vectors and the tail: never a denormal; 0 from -87 down and
  // at -inf (from -86.9 on 16 lanes), accurate from -86.8 (the exponent near its
  // normal bottom), inf past 88.73.
  std::vector<float> e = {-1e9f, -INFINITY, -100.0f, -87.0f, -86.95f, -86.9f, -86.8f, -86.0f, -80.0f, -1e-3f,
                          0.0f,  10.0f,     80.0f,   88.5f,  88.7f,   89.0f,  1e9f,   INFINITY};
  std::vector<float> xe;
  for (int k = 0; k < 3; ++k) xe.insert(xe.end(), e.begin(), e.end());  // 54: vectors and a tail
  std::vector<float> ye(xe.size() + 1, -7.0f), ce(ye.size(), 0.0f);
  std::vector<float> pe = {5, static_cast<float>(xe.size()), 0, 0, 0, 0, 0, 0, 0, 0};
  const void* ine[] = {pe.data(), xe.data(), xe.data(), ce.data()};
  void* oute[] = {ye.data()};
  kernel_->run(ine, oute, 1);
  for (size_t i = 0; i < xe.size(); ++i) {
    const float v = xe[i], got = ye[i];
    EXPECT_TRUE(got == 0.0f || got >= FLT_MIN) << "exp(" << v << ") = " << got;
    if (v <= -87.0f) {
      EXPECT_EQ(got, 0.0f) << "exp(" << v << ")";
    } else if (v >= 88.73f) {
      EXPECT_EQ(got, INFINITY) << "exp(" << v << ")";
    } else if (v >= -86.8f) {
      EXPECT_NEAR(got / std::exp(static_cast<double>(v)), 1.0, 4.8e-7) << "exp(" << v << ")";
    }
  }
}

}  // namespace
}  // namespace isomer::mugraph
