// The 16-lane vector math (vmath.h's vm16), the per-instruction-set row kernels
// (rows.h's softmax_row, layer_norm_row) and batched GEMM tiles (gemm.h): each
// width against the other and against double-precision references, on rows and
// products of every kind of tail.
// (16-lane values between inline helpers are not an ABI.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/rows.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

namespace isomer::kernels {
namespace {

// exp, tanh, erf, sigmoid, gelu_erf of 16 values, on 16 lanes and on two vectors
// of 8, both compiled for AVX-512 as the runtime's entry points are (the same FMA
// contractions: the baseline's forms differ from them in the last bit).
struct Wide {
  float exp[16], tanh[16], erf[16], sigmoid[16], gelu[16];
};

ISOMER_TARGET_AVX512 void wide16(const float* x, Wide* w) {
  const vm16::v16 v = vm16::load(x);
  vm16::store(w->exp, vm16::exp(v));
  vm16::store(w->tanh, vm16::tanh(v));
  vm16::store(w->erf, vm16::erf(v));
  vm16::store(w->sigmoid, vm16::sigmoid(v));
  vm16::store(w->gelu, vm16::gelu_erf(v));
}

ISOMER_TARGET_AVX512 void wide8(const float* x, Wide* w) {
  for (int h = 0; h < 16; h += 8) {
    const vm8::v8 v = vm8::load(x + h);
    vm8::store(w->exp + h, vm8::exp(v));
    vm8::store(w->tanh + h, vm8::tanh(v));
    vm8::store(w->erf + h, vm8::erf(v));
    vm8::store(w->sigmoid + h, vm8::sigmoid(v));
    vm8::store(w->gelu + h, vm8::gelu_erf(v));
  }
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

// The lanes compute what vm8's do, bit for bit (one template), and so agree with
// libm as vm8 does.
TEST(VectorMathWide, SixteenLanesAreTheEightLaneFormsBitForBit) {
  if (!vector_isa_available(VectorIsa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-90.f, 90.f), mid(-8.f, 8.f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[16] = {-200.f, 200.f, NAN, -inf, inf, -87.5f, 88.8f, 0.f, -0.f, 1e-30f, -1e-30f, 0.5f, -0.625f,
                             88.72f, -86.9f, 1e-6f};
  double exp_err = 0, erf_abs = 0;
  for (int i = 0; i < 20000; ++i) {
    float x[16];
    for (int l = 0; l < 16; ++l) x[l] = i == 0 ? special[l] : (i % 2 ? wide(rng) : mid(rng));
    Wide a, b;
    wide16(x, &a);
    wide8(x, &b);
    for (int l = 0; l < 16; ++l) {
      EXPECT_TRUE(same_bits(a.exp[l], b.exp[l])) << "exp " << x[l];
      EXPECT_TRUE(same_bits(a.tanh[l], b.tanh[l])) << "tanh " << x[l];
      EXPECT_TRUE(same_bits(a.erf[l], b.erf[l])) << "erf " << x[l] << ": " << a.erf[l] << " " << b.erf[l];
      EXPECT_TRUE(same_bits(a.sigmoid[l], b.sigmoid[l])) << "sigmoid " << x[l];
      EXPECT_TRUE(same_bits(a.gelu[l], b.gelu[l])) << "gelu " << x[l];
      const double d = x[l];
      if (x[l] > -86.9f && x[l] < 88.7f) exp_err = std::max(exp_err, std::fabs(a.exp[l] / std::exp(d) - 1));
      if (std::fabs(x[l]) < 8) erf_abs = std::max(erf_abs, std::fabs(a.erf[l] - std::erf(d)));
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_LE(exp_err, 3e-7);
  EXPECT_LE(erf_abs, 4e-7);
}

// GELU's piecewise erf (vm::kErfPieces) on 16 lanes, on 8 and as the scalar form,
// against 0.5 x (1 + erf(x / sqrt 2)) in double precision over [-12, 12] (every
// interval of the table, the clamp at |x| = 4 sqrt 2) and at the special values.
ISOMER_TARGET_AVX512 void gelu16(const float* x, float* y) { vm16::store(y, vm16::gelu_erf(vm16::load(x))); }
ISOMER_TARGET_AVX2 void gelu8(const float* x, float* y) { vm8::store(y, vm8::gelu_erf(vm8::load(x))); }

TEST(VectorMathWide, GeluErfIsWithinAFewUlpsOfTheExactFunction) {
  const bool has512 = vector_isa_available(VectorIsa::Avx512), has2 = vector_isa_available(VectorIsa::Avx2);
  double worst = 0;
  auto check = [&](float x, float got, const char* form) {
    const double d = x, want = 0.5 * d * (1.0 + std::erf(d / std::sqrt(2.0)));
    const double err = std::fabs(got - want) / std::max(1.0, std::fabs(d));
    worst = std::max(worst, err);
    EXPECT_LE(err, 3e-7) << form << " gelu(" << x << ") = " << got << ", want " << want;
  };
  std::vector<float> xs;
  for (int i = -240000; i <= 240000; ++i) xs.push_back(static_cast<float>(i) * 5e-5f);
  for (float b : {4.0f * 1.41421356f, 0.25f * 1.41421356f, 1e-30f, -1e-30f, 0.f, -0.f, 1e6f, -1e6f}) {
    xs.push_back(b);
    xs.push_back(std::nextafter(b, 1e9f));
    xs.push_back(std::nextafter(b, -1e9f));
  }
  while (xs.size() % 16) xs.push_back(1.f);
  std::vector<float> y16(xs.size()), y8(xs.size());
  for (size_t i = 0; i < xs.size(); i += 16) {
    if (has512) gelu16(&xs[i], &y16[i]);
    if (has2) {
      gelu8(&xs[i], &y8[i]);
      gelu8(&xs[i + 8], &y8[i + 8]);
    }
  }
  for (size_t i = 0; i < xs.size() && !::testing::Test::HasFailure(); ++i) {
    check(xs[i], vm::gelu_erf(xs[i]), "scalar");
    if (has512) check(xs[i], y16[i], "16 lanes");
    if (has2) check(xs[i], y8[i], "8 lanes");
  }
  EXPECT_GT(worst, 0.0);
  // Specials: NaN stays NaN, +inf is +inf, large negative values give (signed) zero.
  const float inf = std::numeric_limits<float>::infinity();
  alignas(64) float s[16] = {NAN, inf, -1e30f, -50.f, 50.f, 3.f, -3.f, 0.f, 1, 1, 1, 1, 1, 1, 1, 1}, r[16];
  auto specials = [&](const float* out, const char* form) {
    EXPECT_TRUE(std::isnan(out[0])) << form;
    EXPECT_EQ(out[1], inf) << form;
    EXPECT_EQ(out[2], 0.f) << form;
    EXPECT_EQ(out[3], 0.f) << form;
    EXPECT_EQ(out[4], 50.f) << form;
  };
  for (int l = 0; l < 16; ++l) r[l] = vm::gelu_erf(s[l]);
  specials(r, "scalar");
  if (has512) {
    gelu16(s, r);
    specials(r, "16 lanes");
  }
  if (has2) {
    gelu8(s, r);
    gelu8(s + 8, r + 8);
    specials(r, "8 lanes");
  }
}

TEST(VectorMathWide, LaneSumsAndMaxima) {
  vm16::v16 v;
  vm8::v8 w;
  for (int l = 0; l < 16; ++l) v[l] = static_cast<float>(l * l - 40);
  for (int l = 0; l < 8; ++l) w[l] = static_cast<float>(3 - l);
  EXPECT_EQ(vm16::hsum(v), 600.f);  // sum of l^2 = 1240, minus 640
  EXPECT_EQ(vm16::hmax(v), 185.f);
  EXPECT_EQ(vm8::hsum(w), -4.f);
  EXPECT_EQ(vm8::hmax(w), 3.f);
}

// The instruction sets this CPU runs (the baseline always).
std::vector<VectorIsa> isas() {
  std::vector<VectorIsa> out;
  for (VectorIsa isa : {VectorIsa::Baseline, VectorIsa::Avx2, VectorIsa::Avx512})
    if (vector_isa_available(isa)) out.push_back(isa);
  return out;
}

std::vector<double> softmax_ref(const std::vector<float>& x, bool log) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(v - m);
  std::vector<double> y;
  for (float v : x) y.push_back(log ? v - m - std::log(s) : std::exp(v - m) / s);
  return y;
}

const int64_t kLengths[] = {1, 7, 15, 16, 17, 31, 32, 33, 1000};

TEST(RowsWide, SoftmaxRowsOfEveryTailOnEachInstructionSet) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 4.f);
  for (VectorIsa isa : isas())
    for (int64_t n : kLengths)
      for (bool masked : {false, true})
        for (bool log : {false, true}) {
          std::vector<float> x(static_cast<size_t>(n));
          for (size_t j = 0; j < x.size(); ++j) {
            x[j] = d(rng);
            // Attention masks: large negative and -inf entries (not the first, so a row keeps one value).
            if (masked && j > 0 && j % 3 == 1) x[j] = j % 2 ? -1e9f : -std::numeric_limits<float>::infinity();
          }
          std::vector<float> y(x.size(), NAN);
          softmax_row(isa, x.data(), y.data(), n, log);
          const std::vector<double> want = softmax_ref(x, log);
          for (size_t j = 0; j < x.size(); ++j) {
            if (log && std::isinf(want[j])) {
              EXPECT_TRUE(std::isinf(y[j]) && y[j] < 0) << vector_isa_name(isa) << " n=" << n << " j=" << j;
              continue;
            }
            const double tol = log ? 2e-5 * (1 + std::fabs(want[j])) : 2e-6 * std::max(want[j], 1e-3);
            ASSERT_NEAR(y[j], want[j], tol) << vector_isa_name(isa) << " n=" << n << " j=" << j
                                            << " masked=" << masked << " log=" << log;
          }
        }
}

// Attention's unnormalized rows: exp(x - max) and their sum, each row divided later.
TEST(RowsWide, UnnormalizedSoftmaxRowsAndTheirSumsOnEachInstructionSet) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 4.f);
  for (VectorIsa isa : isas())
    for (int64_t n : kLengths) {
      std::vector<float> x(static_cast<size_t>(n));
      for (size_t j = 0; j < x.size(); ++j) x[j] = j > 0 && j % 3 == 1 ? -std::numeric_limits<float>::infinity() : d(rng);
      std::vector<float> y(x.size(), NAN);
      const float sum = softmax_exp_row(isa, x.data(), y.data(), n);
      const std::vector<double> want = softmax_ref(x, false);
      for (size_t j = 0; j < x.size(); ++j)
        ASSERT_NEAR(y[j] / sum, want[j], 2e-6 * std::max(want[j], 1e-3)) << vector_isa_name(isa) << " n=" << n << " j=" << j;
      // A row of -inf (every key masked): zeros and a zero sum, no NaN.
      std::fill(x.begin(), x.end(), -std::numeric_limits<float>::infinity());
      EXPECT_EQ(softmax_exp_row(isa, x.data(), y.data(), n), 0.0f) << vector_isa_name(isa) << " n=" << n;
      for (float v : y) EXPECT_EQ(v, 0.0f) << vector_isa_name(isa) << " n=" << n;
    }
}

TEST(RowsWide, SoftmaxPropagatesNaNAndAllMaskedRowsAreNaN) {
  for (VectorIsa isa : isas())
    for (int64_t n : kLengths) {
      std::vector<float> x(static_cast<size_t>(n), 1.0f), y(x.size());
      x[static_cast<size_t>(n - 1)] = NAN;  // in the tail where there is one
      softmax_row(isa, x.data(), y.data(), n, false);
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << vector_isa_name(isa) << " n=" << n;
      std::fill(x.begin(), x.end(), -std::numeric_limits<float>::infinity());
      softmax_row(isa, x.data(), y.data(), n, false);
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << vector_isa_name(isa) << " n=" << n << " (all -inf)";
    }
}

TEST(RowsWide, LayerNormRowsOfEveryTailOnEachInstructionSet) {
  std::mt19937 rng(6);
  std::normal_distribution<float> d(1.f, 3.f);
  for (VectorIsa isa : isas())
    for (int64_t n : kLengths)
      for (bool rms : {false, true})
        for (bool bias : {false, true}) {
          std::vector<float> x(static_cast<size_t>(n)), s(x.size()), b(x.size()), y(x.size(), NAN);
          for (size_t j = 0; j < x.size(); ++j) x[j] = d(rng), s[j] = d(rng), b[j] = d(rng);
          layer_norm_row(isa, x.data(), y.data(), n, s.data(), bias ? b.data() : nullptr, 1e-5f, rms);
          double mean = 0, var = 0;
          if (!rms) {
            for (float v : x) mean += v;
            mean /= static_cast<double>(n);
          }
          for (float v : x) var += (v - mean) * (v - mean);
          var /= static_cast<double>(n);
          for (size_t j = 0; j < x.size(); ++j) {
            const double want = (x[j] - mean) / std::sqrt(var + 1e-5) * s[j] + (bias ? b[j] : 0.0);
            ASSERT_NEAR(y[j], want, 2e-5 * (1 + std::fabs(want)))
                << vector_isa_name(isa) << " n=" << n << " j=" << j << " rms=" << rms << " bias=" << bias;
          }
        }
}

TEST(RowsWide, EachInstructionSetOrAClearError) {
  EXPECT_TRUE(vector_isa_available(VectorIsa::Baseline));
  EXPECT_TRUE(vector_isa_available(best_vector_isa()));
  float x = 1, y = 0;
  for (VectorIsa isa : {VectorIsa::Avx2, VectorIsa::Avx512})
    if (!vector_isa_available(isa)) {
      EXPECT_THROW(softmax_row(isa, &x, &y, 1, false), std::exception);
    }
  if (!vector_isa_available(VectorIsa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  EXPECT_EQ(best_vector_isa(), VectorIsa::Avx512);
}

// Batched products on each instruction set's tiles (8 rows x 32 columns on
// AVX-512, 6 x 16 otherwise) at shapes with row, column and depth tails: B read
// row-major, transposed (K^T read from K, as attention's scores do) and through a
// column stride; C written with a row stride and per-product offsets; with and
// without an epilogue that adds a per-product operand: y = a b + r.
TEST(GemmWide, BatchedProductsOfEveryTailOnEachInstructionSet) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (VectorIsa isa : isas())
    for (auto [M, K, N] : {std::tuple{1, 1, 1}, std::tuple{7, 5, 31}, std::tuple{8, 64, 32}, std::tuple{9, 17, 33},
                           std::tuple{17, 64, 70}, std::tuple{65, 3, 15}})
      for (int form = 0; form < 3; ++form)
        for (bool epi : {false, true}) {
          const int64_t batch = 3, ldc = N + 3;
          BatchedGemm g;
          g.batch = batch, g.M = M, g.K = K, g.N = N;
          g.a_row = K + 2;  // rows of A apart, as a head's rows of [tokens, heads x d] are
          // form 0: B[k, n] at k N + n; 1: transposed, at n K + k; 2: a column stride of 2.
          g.b_k = form == 1 ? 1 : form == 2 ? 2 * N : N;
          g.b_n = form == 1 ? K : form == 2 ? 2 : 1;
          g.c_row = ldc;
          const int64_t a_size = M * g.a_row, b_size = form == 2 ? 2 * K * N : K * N, c_size = M * ldc;
          std::vector<float> a(static_cast<size_t>(batch * a_size)), b(static_cast<size_t>(batch * b_size)),
              r(static_cast<size_t>(batch * M * N)), c(static_cast<size_t>(batch * c_size), -7.0f);
          for (float& v : a) v = u(rng);
          for (float& v : b) v = u(rng);
          for (float& v : r) v = u(rng);
          for (int64_t bi = 0; bi < batch; ++bi) {
            // Products in reverse order in memory: offsets are per product, not implied.
            g.a_off.push_back((batch - 1 - bi) * a_size);
            g.b_off.push_back(bi * b_size);
            g.c_off.push_back((batch - 1 - bi) * c_size);
            g.op_off.push_back(bi * M * N);
          }
          GemmEpilogue e;
          e.program.num_inputs = e.program.num_regs = 2;
          e.program.results = {e.program.emit(PwOp::Add, 0, 1)};
          e.operands = {StridedRef{r.data(), DType::Float32, {N, 1}, 0}};
          gemm_batched_on(isa, a.data(), b.data(), c.data(), g, epi ? &e : nullptr, 1);
          for (int64_t bi = 0; bi < batch; ++bi)
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < ldc; ++n) {
                const float got = c[static_cast<size_t>(g.c_off[bi] + m * ldc + n)];
                if (n >= N) {
                  ASSERT_EQ(got, -7.0f) << "wrote past the row's N columns";
                  continue;
                }
                double want = epi ? r[static_cast<size_t>(bi * M * N + m * N + n)] : 0.0;
                for (int64_t k = 0; k < K; ++k)
                  want += double(a[static_cast<size_t>(g.a_off[bi] + m * g.a_row + k)]) *
                          b[static_cast<size_t>(g.b_off[bi] + k * g.b_k + n * g.b_n)];
                ASSERT_NEAR(got, want, 1e-4) << vector_isa_name(isa) << " " << M << "x" << K << "x" << N << " form "
                                             << form << (epi ? " epilogue" : "") << " at " << bi << "," << m << "," << n;
              }
        }
}

// Products on panels packed once (attention's K^T and V per key head) on each
// instruction set: B read row-major, transposed (K^T from K's rows: whole 16 x 16
// blocks and their tails) and through a column stride, times a scale; the product
// reading fewer keys than were packed (packed_k, packed_n); a causal frontier along
// N (columns past every row's frontier of a tile untouched, those before it exact)
// and along K (A zero past each row's frontier, as the attention step leaves P);
// rows scaled as they are stored; a bias row the accumulators start from, and
// whole panels stored straight from the registers next to partial ones (of at
// most one vector of columns, and of more; 16 packed columns: a 16-lane panel half
// full).
TEST(GemmWide, PanelProductsWithCausalFrontiersOnEachInstructionSet) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1, 1);
  for (VectorIsa isa : isas())
    for (auto [M, K, N] : {std::tuple{1, 1, 1}, std::tuple{9, 17, 33}, std::tuple{64, 64, 128},
                           std::tuple{37, 48, 70}, std::tuple{20, 33, 16}, std::tuple{11, 40, 57}, std::tuple{7, 9, 11}})
      for (int form = 0; form < 3; ++form)
        for (int64_t frontier : {int64_t{-1}, int64_t{0}, int64_t{5}})
          for (bool on_k : {false, true})
          for (bool biased : {false, true}) {
            if (frontier < 0 && on_k) continue;
            const int64_t pk = K + 3, pn = N + 5;  // packed with more than the product reads
            const int64_t b_k = form == 1 ? 1 : form == 2 ? 2 * pn : pn, b_n = form == 1 ? pk : form == 2 ? 2 : 1;
            std::vector<float> b(static_cast<size_t>(form == 2 ? 2 * pk * pn : pk * pn));
            for (float& v : b) v = u(rng);
            const float scale = 0.375f;
            std::vector<float> panels(static_cast<size_t>(panels_size(isa, pk, pn)), -3.0f);
            pack_panels(isa, b.data(), b_k, b_n, pk, pn, scale, panels.data());
            PanelGemm g;
            g.M = M, g.K = K, g.N = N, g.a_row = K + 2, g.c_row = N + 3, g.packed_k = pk, g.packed_n = pn;
            g.frontier = frontier, g.frontier_on_k = on_k;
            std::vector<float> a(static_cast<size_t>(M * g.a_row)), rs(static_cast<size_t>(M));
            for (float& v : a) v = u(rng);
            for (float& v : rs) v = u(rng);
            // Row m reads keys [0, m + frontier + 1): past that, A is zero up to
            // kMaxTileRows beyond it (along K), and beyond that garbage it must not read.
            if (on_k)
              for (int64_t m = 0; m < M; ++m)
                for (int64_t k = m + frontier + 1; k < K; ++k)
                  a[static_cast<size_t>(m * g.a_row + k)] =
                      k < m + frontier + 1 + kMaxTileRows ? 0.0f : std::numeric_limits<float>::quiet_NaN();
            g.row_scale = rs.data();
            std::vector<float> bias(static_cast<size_t>(panels_size(isa, 1, pn)), 0.0f);
            for (int64_t n = 0; n < pn; ++n) bias[static_cast<size_t>(n)] = u(rng);
            if (biased) g.bias = bias.data();
            std::vector<float> c(static_cast<size_t>(M * g.c_row), -7.0f);
            gemm_panels(isa, a.data(), panels.data(), c.data(), g);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < g.c_row; ++n) {
                const float got = c[static_cast<size_t>(m * g.c_row + n)];
                if (n >= N) {
                  ASSERT_EQ(got, -7.0f) << "wrote past the row's N columns";
                  continue;
                }
                if (frontier >= 0 && !on_k && n >= m + frontier + 1) continue;  // past the row's frontier
                double want = 0;
                for (int64_t k = 0; k < K; ++k) {
                  if (on_k && k >= m + frontier + 1) break;
                  want += double(a[static_cast<size_t>(m * g.a_row + k)]) * b[static_cast<size_t>(k * b_k + n * b_n)];
                }
                want *= double(scale);
                if (biased) want += bias[static_cast<size_t>(n)];
                want *= rs[static_cast<size_t>(m)];
                ASSERT_NEAR(got, want, 1e-4) << vector_isa_name(isa) << " " << M << "x" << K << "x" << N << " form "
                                             << form << " frontier " << frontier << (on_k ? " on K" : " on N")
                                             << (biased ? " biased" : "")
                                             << " at " << m << "," << n;
              }
            // Along N, a tile's columns all past its rows' frontier are not computed.
            if (frontier == 0 && !on_k && M >= 64 && N >= 128)
              EXPECT_EQ(c[static_cast<size_t>(0 * g.c_row + N - 1)], -7.0f) << "computed a tile past the frontier";
          }
}

}  // namespace
}  // namespace isomer::kernels
