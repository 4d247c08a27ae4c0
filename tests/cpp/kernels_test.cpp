// The native kernels: vector math against libm, the pointwise engine on strided,
// broadcast and converted operands, reductions, softmax, normalization, copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/copy.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/pointwise.h"
#include "kernels/rows.h"
#include "kernels/vmath.h"
#include "strided_ref.h"

namespace isomer::kernels {
namespace {

float ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.f : 1e9f;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0.f : 1e9f;
  float w = static_cast<float>(want);
  float ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return static_cast<float>(std::fabs(got - want) / std::max(ulp, std::numeric_limits<float>::denorm_min()));
}

// The 8-lane forms that the loops use, against libm and at the special values
// (their out-of-range handling differs from the scalar forms': selects after the
// arithmetic, not clamps before it).
TEST(VectorMath, EightLaneFormsMatchLibm) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> wide(-90.f, 90.f), mid(-8.f, 8.f);
  float exp_err = 0, tanh_abs = 0, erf_abs = 0, sig_abs = 0;
  for (int i = 0; i < 50000; ++i) {
    alignas(32) float x[8], m[8], e[8], th[8], er[8], sg[8];
    for (int l = 0; l < 8; ++l) x[l] = wide(rng), m[l] = mid(rng);
    vm8::store(e, vm8::exp(vm8::load(x)));
    vm8::store(th, vm8::tanh(vm8::load(m)));
    vm8::store(er, vm8::erf(vm8::load(m)));
    vm8::store(sg, vm8::sigmoid(vm8::load(m)));
    for (int l = 0; l < 8; ++l) {
      if (x[l] > -86.9f && x[l] < 88.7f) exp_err = std::max(exp_err, ulp_error(e[l], std::exp(static_cast<double>(x[l]))));
      if (x[l] < -87.f) EXPECT_LT(e[l], 2.5e-38f);
      const double d = m[l];
      tanh_abs = std::max(tanh_abs, static_cast<float>(std::fabs(th[l] - std::tanh(d))));
      erf_abs = std::max(erf_abs, static_cast<float>(std::fabs(er[l] - std::erf(d))));
      sig_abs = std::max(sig_abs, static_cast<float>(std::fabs(sg[l] - 1 / (1 + std::exp(-d)))));
    }
  }
  EXPECT_LE(exp_err, 2.f);
  EXPECT_LE(tanh_abs, 3e-7f);
  EXPECT_LE(erf_abs, 4e-7f);
  EXPECT_LE(sig_abs, 2e-7f);
  const float inf = std::numeric_limits<float>::infinity();
  alignas(32) float special[8] = {-200.f, 200.f, NAN, -inf, inf, -87.5f, 88.8f, 0.f}, out[8];
  vm8::store(out, vm8::exp(vm8::load(special)));
  EXPECT_EQ(out[0], 0.f);
  EXPECT_TRUE(std::isinf(out[1]) && out[1] > 0);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 0.f);
  EXPECT_TRUE(std::isinf(out[4]) && out[4] > 0);
  EXPECT_EQ(out[5], 0.f);
  EXPECT_TRUE(std::isinf(out[6]));
  EXPECT_EQ(out[7], 1.f);
  alignas(32) float top[8] = {88.7f, 88.72f, 88.0f, 87.0f, -86.9f, -80.f, 1e-8f, -1e-8f};
  vm8::store(out, vm8::exp(vm8::load(top)));
  for (int l = 0; l < 8; ++l) EXPECT_LE(ulp_error(out[l], std::exp(static_cast<double>(top[l]))), 2.f) << top[l];
  // Softmax's exp of x - max: the same values on x <= 0, 0 below the range, NaN kept.
  std::uniform_real_distribution<float> neg(-100.f, 0.f);
  for (int i = 0; i < 20000; ++i) {
    alignas(32) float x[8], a[8], b[8];
    for (int l = 0; l < 8; ++l) x[l] = neg(rng);
    vm8::store(a, vm8::exp(vm8::load(x)));
    vm8::store(b, vm8::exp_nonpositive(vm8::load(x)));
    for (int l = 0; l < 8; ++l) {
      if (x[l] > -86.9f) ASSERT_LE(ulp_error(b[l], std::exp(static_cast<double>(x[l]))), 2.f) << x[l];
      else ASSERT_LT(b[l], 2.5e-38f) << x[l];
    }
  }
  alignas(32) float nonpos[8] = {0.f, -0.f, -inf, NAN, -1e30f, -87.4f, -1e-30f, -50.f};
  vm8::store(out, vm8::exp_nonpositive(vm8::load(nonpos)));
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[1], 1.f);
  EXPECT_EQ(out[2], 0.f);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], 0.f);
  EXPECT_EQ(out[5], 0.f);
  EXPECT_EQ(out[6], 1.f);
  EXPECT_LE(ulp_error(out[7], std::exp(-50.0)), 2.f);
  vm8::store(out, vm8::sigmoid(vm8::load(special)));
  EXPECT_EQ(out[0], 0.f);
  EXPECT_EQ(out[1], 1.f);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(VectorMath, MatchesLibmWithinAFewUlp) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> wide(-90.f, 90.f), pos(1e-30f, 1e30f), mid(-8.f, 8.f);
  float exp_err = 0, log_err = 0, tanh_abs = 0, erf_abs = 0, sig_abs = 0;
  for (int i = 0; i < 200000; ++i) {
    float x = wide(rng);
    if (std::fabs(x) < 87) exp_err = std::max(exp_err, ulp_error(vm::exp(x), std::exp(static_cast<double>(x))));
    float p = std::exp(mid(rng) * 8);
    log_err = std::max(log_err, ulp_error(vm::log(p), std::log(static_cast<double>(p))));
    float m = mid(rng);
    tanh_abs = std::max(tanh_abs, static_cast<float>(std::fabs(vm::tanh(m) - std::tanh(static_cast<double>(m)))));
    erf_abs = std::max(erf_abs, static_cast<float>(std::fabs(vm::erf(m) - std::erf(static_cast<double>(m)))));
    sig_abs = std::max(sig_abs, static_cast<float>(std::fabs(vm::sigmoid(m) - 1 / (1 + std::exp(-static_cast<double>(m))))));
  }
  EXPECT_LE(exp_err, 2.f);
  EXPECT_LE(log_err, 2.f);
  EXPECT_LE(tanh_abs, 3e-7f);
  EXPECT_LE(erf_abs, 4e-7f);
  EXPECT_LE(sig_abs, 2e-7f);
  // Special values.
  EXPECT_EQ(vm::exp(-200.f), 0.f);
  EXPECT_TRUE(std::isinf(vm::exp(200.f)));
  EXPECT_TRUE(std::isnan(vm::exp(NAN)));
  EXPECT_TRUE(std::isinf(vm::log(0.f)) && vm::log(0.f) < 0);
  EXPECT_TRUE(std::isnan(vm::log(-1.f)));
  EXPECT_EQ(vm::tanh(30.f), 1.f);
  EXPECT_EQ(vm::tanh(-30.f), -1.f);
  EXPECT_NEAR(vm::tanh(1e-6f), 1e-6f, 1e-12f);
  EXPECT_NEAR(vm::erf(1e-6f), 1.1283791e-6f, 1e-12f);
  EXPECT_FLOAT_EQ(vm::pow(-2.f, 3.f), -8.f);
  EXPECT_FLOAT_EQ(vm::pow(2.f, 0.5f), std::sqrt(2.f));
  EXPECT_TRUE(std::isnan(vm::pow(-2.f, 0.5f)));
  EXPECT_EQ(vm::pow(0.f, 2.f), 0.f);
  EXPECT_EQ(vm::pow(0.f, 0.f), 1.f);
  EXPECT_TRUE(std::isinf(vm::pow(0.f, -1.f)));
}


TEST(Rows, ReduceSoftmaxNormalize) {
  const int64_t outer = 5, n = 67, inner = 3;
  std::vector<float> x(static_cast<size_t>(outer * n * inner));
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0, 3);
  for (float& v : x) v = g(rng);
  for (int64_t in : {int64_t{1}, inner}) {
    const int64_t o = outer * (inner / in);  // the same data seen with inner = 1 or 3
    std::vector<float> sum(static_cast<size_t>(o * in)), mx(sum.size()), sm(x.size());
    reduce_axis(ReduceKind::Mean, x.data(), sum.data(), o, n, in);
    reduce_axis(ReduceKind::Max, x.data(), mx.data(), o, n, in);
    softmax_axis(x.data(), sm.data(), o, n, in, false);
    for (int64_t a = 0; a < o; ++a)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0, m = -INFINITY, z = 0;
        for (int64_t k = 0; k < n; ++k) {
          double v = x[static_cast<size_t>((a * n + k) * in + i)];
          s += v;
          m = std::max(m, v);
        }
        for (int64_t k = 0; k < n; ++k) z += std::exp(x[static_cast<size_t>((a * n + k) * in + i)] - m);
        EXPECT_NEAR(sum[static_cast<size_t>(a * in + i)], s / n, 1e-5);
        EXPECT_EQ(mx[static_cast<size_t>(a * in + i)], static_cast<float>(m));
        for (int64_t k = 0; k < n; ++k) {
          size_t e = static_cast<size_t>((a * n + k) * in + i);
          EXPECT_NEAR(sm[e], std::exp(x[e] - m) / z, 1e-6);
        }
      }
  }
  // Softmax of huge logits stays finite.
  std::vector<float> big = {1e30f, 1e30f, -1e30f}, out(3);
  softmax_axis(big.data(), out.data(), 1, 3, 1, false);
  EXPECT_FLOAT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[2], 0.f);
  // Layer normalization and RMS normalization.
  std::vector<float> row = {1, 2, 3, 4}, scale = {1, 1, 2, 2}, bias = {0, 0, 1, 1}, y(4);
  normalize_rows(row.data(), y.data(), 1, 4, scale.data(), bias.data(), 0.f, false);
  EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25), 1e-6);
  EXPECT_NEAR(y[3], 2 * 1.5 / std::sqrt(1.25) + 1, 1e-6);
  normalize_rows(row.data(), y.data(), 1, 4, scale.data(), nullptr, 0.f, true);
  EXPECT_NEAR(y[1], 2 / std::sqrt(7.5), 1e-6);
}

TEST(Copy, StridedTransposeBroadcastAndGather) {
  const int64_t R = 45, C = 70;
  std::vector<int32_t> a(static_cast<size_t>(R * C)), t(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i);
  std::vector<int64_t> dims = {C, R}, ss = {1, C}, ds = {R, 1};
  strided_copy(4, a.data(), ss, t.data(), ds, dims, 2);  // t = a^T
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(t[static_cast<size_t>(c * R + r)], a[static_cast<size_t>(r * C + c)]);
  std::vector<int64_t> e(12);
  int64_t v[3] = {7, 8, 9};
  std::vector<int64_t> bd = {4, 3}, bs = {0, 1}, bo = {3, 1};
  strided_copy(8, v, bs, e.data(), bo, bd);  // Expand [3] -> [4, 3]
  EXPECT_EQ(e[9], 7);
  EXPECT_EQ(e[11], 9);
  // Gather rows 2, -1, 0 of a [4, 3] table.
  std::vector<int64_t> idx = {2, -1, 0}, g(9);
  int64_t bad = 0;
  EXPECT_TRUE(gather_axis(8, e.data(), 1, 4, 3, idx.data(), 8, 3, g.data(), &bad));
  EXPECT_EQ(g, (std::vector<int64_t>{7, 8, 9, 7, 8, 9, 7, 8, 9}));
  idx[1] = 4;
  EXPECT_FALSE(gather_axis(8, e.data(), 1, 4, 3, idx.data(), 8, 3, g.data(), &bad));
  EXPECT_EQ(bad, 4);
}

// Arg-max/min against a plain scan: rows long enough for the lane path (ties in
// different lanes, NaNs) and columns; first and last index.
// NCHW to NHWC for 1 to 6 channels (the constant-channel forms and the general
// one), pixel counts that leave a partial run, batch 2, one and two threads.
TEST(Copy, PlanesToChannelsLast) {
  for (int64_t channels = 1; channels <= 6; ++channels)
    for (int64_t pixels : {int64_t{1}, int64_t{37}, int64_t{33 * 35}})
      for (int threads : {1, 2}) {
        const int64_t batch = 2, n = batch * channels * pixels;
        std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n), -1.0f);
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
        planes_to_channels_last(x.data(), batch, channels, pixels, y.data(), threads);
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t p = 0; p < pixels; ++p)
            for (int64_t c = 0; c < channels; ++c)
              ASSERT_EQ(y[static_cast<size_t>((b * pixels + p) * channels + c)],
                        x[static_cast<size_t>((b * channels + c) * pixels + p)])
                  << channels << " channels, " << pixels << " pixels, at " << b << "," << p << "," << c;
      }
}

TEST(Rows, ArgMaxAndArgMinAgreeWithAScan) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-4, 4);  // many ties
  for (int64_t inner : {int64_t{1}, int64_t{5}}) {
    const int64_t outer = 3, n = 103;
    std::vector<float> x(static_cast<size_t>(outer * n * inner));
    for (float& v : x) v = static_cast<float>(small(rng));
    x[static_cast<size_t>(57 * inner)] = NAN;  // row/column 0 has a NaN: it wins both
    for (bool max : {true, false})
      for (bool last : {false, true}) {
        std::vector<int64_t> got(static_cast<size_t>(outer * inner));
        argmax_axis(x.data(), got.data(), outer, n, inner, max, last, 2);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            auto at = [&](int64_t k) { return x[static_cast<size_t>((o * n + k) * inner + i)]; };
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
              const float v = at(k), b = at(best);
              const bool better = std::isnan(v) ? !std::isnan(b) : (!std::isnan(b) && (max ? v > b : v < b));
              const bool tie = (std::isnan(v) && std::isnan(b)) || v == b;
              if (better || (last && tie)) best = k;
            }
            ASSERT_EQ(got[static_cast<size_t>(o * inner + i)], best)
                << "inner " << inner << " max " << max << " last " << last << " at " << o << "," << i;
          }
      }
  }
}

TEST(Rows, CumSumAndGroupNormalization) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6);
  cumsum_axis(x.data(), y.data(), 1, 3, 2, false, false);  // [3, 2] along axis 0
  EXPECT_EQ(y, (std::vector<float>{1, 2, 4, 6, 9, 12}));
  cumsum_axis(x.data(), y.data(), 2, 3, 1, true, true);  // [2, 3] along axis 1, reverse exclusive
  EXPECT_EQ(y, (std::vector<float>{5, 3, 0, 11, 6, 0}));
  std::vector<int64_t> ids = {1, 1, 0, 1, std::numeric_limits<int64_t>::max(), 1}, pos(6);
  cumsum_axis(ids.data(), pos.data(), 1, 6, 1, false, false);
  EXPECT_EQ(pos[3], 3);
  EXPECT_EQ(pos[5], std::numeric_limits<int64_t>::min() + 3);  // wraps, no overflow trap
  // Two groups of two channels of two positions: group (1, 3, 5, 7) has mean 4, variance 5.
  std::vector<float> g = {1, 3, 5, 7, 0, 2, 4, 10}, scale = {1, 2, 1, 1}, bias = {0, 0, 1, 0}, out(8);
  normalize_groups(g.data(), out.data(), 1, 4, 2, 2, scale.data(), bias.data(), 0.f);
  EXPECT_NEAR(out[0], -3 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(out[3], 6 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(out[4], -4 / std::sqrt(14.0) + 1, 1e-6);
}

// The layouts a convolution leaves (channel blocks of 8 or 16, channels last)
// normalize to the plain result, moved the same way: groups of whole blocks,
// groups inside one block, one group, a group per channel; two batch elements.
TEST(Rows, GroupNormalizationInChannelBlocks) {
  const int64_t batch = 2, channels = 32, spatial = 5;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(static_cast<size_t>(batch * channels * spatial)), scale(channels), bias(channels);
  for (float& v : x) v = u(rng);
  for (float& v : scale) v = u(rng);
  for (float& v : bias) v = u(rng);
  // Plain index of (n, c, s) in a layout of blocks of `block` channels.
  const auto at = [&](int64_t block, int64_t n, int64_t c, int64_t s) {
    return static_cast<size_t>(n * channels * spatial + c / block * block * spatial + s * block + c % block);
  };
  for (int64_t groups : {1, 2, 4, 8, 32}) {
    std::vector<float> want(x.size());
    normalize_groups(x.data(), want.data(), batch, channels, spatial, groups, scale.data(), bias.data(), 1e-5f);
    for (int64_t block : {int64_t{8}, int64_t{16}, channels}) {
      const int64_t per = channels / groups;
      if (per % block != 0 && block % per != 0) continue;
      std::vector<float> bx(x.size()), by(x.size(), std::nanf(""));
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t s = 0; s < spatial; ++s) bx[at(block, n, c, s)] = x[at(1, n, c, s)];
      normalize_groups(bx.data(), by.data(), batch, channels, spatial, groups, scale.data(), bias.data(), 1e-5f, 0,
                       block);
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t s = 0; s < spatial; ++s)
            ASSERT_NEAR(by[at(block, n, c, s)], want[at(1, n, c, s)], 1e-4)
                << "groups " << groups << " block " << block << " at " << n << "," << c << "," << s;
    }
  }
}

TEST(Copy, TriluGatherElementsScatterND) {
  std::vector<int32_t> m = {1, 2, 3, 4, 5, 6, 7, 8, 9}, t(9);
  trilu(4, m.data(), t.data(), 1, 3, 3, 0, true);
  EXPECT_EQ(t, (std::vector<int32_t>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  trilu(4, m.data(), t.data(), 1, 3, 3, -1, false);
  EXPECT_EQ(t, (std::vector<int32_t>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  trilu(4, m.data(), t.data(), 1, 3, 3, std::numeric_limits<int64_t>::max(), false);  // all kept, no overflow
  EXPECT_EQ(t, m);
  // GatherElements along axis 1 of [2, 3] with int32 indices of [2, 2].
  std::vector<int32_t> idx = {2, 0, -1, 1}, g(4);
  std::vector<int64_t> xd = {2, 3}, id = {2, 2};
  int64_t bad = 0;
  EXPECT_TRUE(gather_elements(4, m.data(), xd, idx.data(), 4, id, 1, g.data(), &bad));
  EXPECT_EQ(g, (std::vector<int32_t>{3, 1, 6, 5}));
  std::vector<int64_t> idx0 = {1, 0, 1, 1}, g0(4);
  std::vector<int64_t> m64 = {1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(gather_elements(8, m64.data(), xd, idx0.data(), 8, id, 0, g0.data(), &bad));  // axis 0
  EXPECT_EQ(g0, (std::vector<int64_t>{4, 2, 4, 5}));
  idx[1] = 3;
  EXPECT_FALSE(gather_elements(4, m.data(), xd, idx.data(), 4, id, 1, g.data(), &bad));
  EXPECT_EQ(bad, 3);
  // ScatterND: rows 2 then 0 of a [3, 2], in place; then a reduction.
  std::vector<float> data = {1, 2, 3, 4, 5, 6}, upd = {10, 20, 30, 40};
  std::vector<int64_t> rows = {2, 0}, yd = {3, 2};
  EXPECT_TRUE(scatter_nd(4, data.data(), yd, rows.data(), 2, 1, upd.data(), &bad));
  EXPECT_EQ(data, (std::vector<float>{30, 40, 3, 4, 10, 20}));
  EXPECT_TRUE(scatter_nd(4, data.data(), yd, rows.data(), 2, 1, upd.data(), &bad, ScatterReduce::Add));
  EXPECT_EQ(data, (std::vector<float>{60, 80, 3, 4, 20, 40}));
  rows[0] = -4;
  EXPECT_FALSE(scatter_nd(4, data.data(), yd, rows.data(), 2, 1, upd.data(), &bad));
  EXPECT_EQ(bad, -4);
}

TEST(Gemm, PackedWeightsWithAnEpilogue) {
  // Shapes with row and column tails; the epilogue adds a per-column bias, applies
  // Relu and adds a residual of C's shape: y = relu(a b + bias) + r.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [M, K, N] : {std::tuple{13, 37, 41}, std::tuple{1, 64, 16}, std::tuple{6, 5, 100}, std::tuple{200, 37, 70}}) {
    std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)), bias(static_cast<size_t>(N)),
        r(static_cast<size_t>(M * N)), c(static_cast<size_t>(M * N)), bt(b.size());
    for (float* v : {a.data(), b.data(), bias.data(), r.data()})
      for (size_t i = 0; i < (v == a.data() ? a.size() : v == b.data() ? b.size() : v == bias.data() ? bias.size() : r.size()); ++i)
        v[i] = u(rng);
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) bt[static_cast<size_t>(n * K + k)] = b[static_cast<size_t>(k * N + n)];
    GemmEpilogue e;
    e.program.num_inputs = e.program.num_regs = 3;
    e.program.results = {e.program.emit(PwOp::Add, e.program.emit(PwOp::Relu, e.program.emit(PwOp::Add, 0, 1)), 2)};
    e.operands = {ref(bias.data(), DType::Float32, {0, 1}), ref(r.data(), DType::Float32, {N, 1})};
    std::vector<float> at(a.size());  // A stored [K, M]: the transposed-A form
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) at[static_cast<size_t>(k * M + m)] = a[static_cast<size_t>(m * K + k)];
    for (int form : {0, 1, 2}) {
      const bool transposed = form == 1;
      PackedB p = transposed ? pack_b(bt.data(), K, N, K, true) : pack_b(b.data(), K, N, N);
      if (form == 2) gemm_packed(at.data(), M, M, p, c.data(), N, &e, 2, nullptr, /*a_transposed=*/true);
      else gemm_packed(a.data(), K, M, p, c.data(), N, &e, 2);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double s = bias[static_cast<size_t>(n)];
          for (int k = 0; k < K; ++k) s += double(a[static_cast<size_t>(m * K + k)]) * b[static_cast<size_t>(k * N + n)];
          const double want = std::max(s, 0.0) + r[static_cast<size_t>(m * N + n)];
          ASSERT_NEAR(c[static_cast<size_t>(m * N + n)], want, 1e-4) << M << "x" << K << "x" << N << " at " << m << "," << n;
        }
    }
  }
}

// Deep K runs in cache blocks with partial sums kept aside; a bias set on the
// packed weights starts the sums: y = relu(a b + bias), at 1 and 2 threads, with
// more tiles than one chunk of partial sums holds.
TEST(Gemm, DeepProductsInCacheBlocksWithAPackedBias) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [M, K, N] : {std::tuple{13, 1100, 41}, std::tuple{600, 700, 50}, std::tuple{1, 1537, 16}}) {
    std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)), bias(static_cast<size_t>(N)),
        c(static_cast<size_t>(M * N));
    for (auto* v : {&a, &b, &bias})
      for (float& x : *v) x = u(rng);
    GemmEpilogue e;
    e.program.num_inputs = e.program.num_regs = 1;
    e.program.results = {e.program.emit(PwOp::Relu, 0)};
    PackedB p = pack_b(b.data(), K, N, N);
    ASSERT_LT(p.kc, K) << "K = " << K << " should run in more than one block";
    const std::vector<float> padded = panel_bias(bias.data(), N);
    for (int threads : {1, 2}) {
      gemm_packed(a.data(), K, M, p, c.data(), N, &e, threads, padded.data());
      for (int m = 0; m < M; m += (M > 50 ? 7 : 1))
        for (int n = 0; n < N; ++n) {
          double s = bias[static_cast<size_t>(n)];
          for (int k = 0; k < K; ++k) s += double(a[static_cast<size_t>(m * K + k)]) * b[static_cast<size_t>(k * N + n)];
          ASSERT_NEAR(c[static_cast<size_t>(m * N + n)], std::max(s, 0.0), 2e-4)
              << M << "x" << K << "x" << N << " at " << m << "," << n << " threads " << threads;
        }
    }
  }
}

// One row of A (a fully connected layer at batch 1) runs as a matrix-vector
// product over all of K with several partial sums: depths that are and are not
// multiples of its unroll, a column tail, A read with a stride (transA), a bias
// and a Relu epilogue, at 1 and 2 threads, against a double-precision sum.
TEST(Gemm, MatrixVectorProducts) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [K, N] : {std::pair{1, 5}, std::pair{3, 16}, std::pair{4, 33}, std::pair{7, 17}, std::pair{4099, 1000},
                      std::pair{9216, 40}}) {
    std::vector<float> b(static_cast<size_t>(K * N)), bias(static_cast<size_t>(N)), c(static_cast<size_t>(N));
    std::vector<float> a(static_cast<size_t>(3 * K));  // element k at a[3 k] when strided
    for (auto* v : {&a, &b, &bias})
      for (float& x : *v) x = u(rng);
    GemmEpilogue e;
    e.program.num_inputs = e.program.num_regs = 1;
    e.program.results = {e.program.emit(PwOp::Relu, 0)};
    const PackedB p = pack_b(b.data(), K, N, N);
    const std::vector<float> padded = panel_bias(bias.data(), N);
    for (int strided : {0, 1})
      for (int with_bias : {0, 1})
        for (int threads : {1, 2}) {
          std::fill(c.begin(), c.end(), -7.0f);
          gemm_packed(a.data(), strided ? 3 : K, 1, p, c.data(), N, &e, threads, with_bias ? padded.data() : nullptr,
                      /*a_transposed=*/strided == 1);
          for (int n = 0; n < N; ++n) {
            double s = with_bias ? bias[static_cast<size_t>(n)] : 0.0;
            for (int k = 0; k < K; ++k)
              s += double(a[static_cast<size_t>(strided ? 3 * k : k)]) * b[static_cast<size_t>(k * N + n)];
            ASSERT_NEAR(c[static_cast<size_t>(n)], std::max(s, 0.0), 1e-4 * (1 + std::sqrt(double(K))))
                << K << "x" << N << " at " << n << " strided " << strided << " bias " << with_bias << " threads " << threads;
          }
        }
  }
}
}  // namespace
}  // namespace isomer::kernels

namespace isomer {
namespace {

// Where isomer's GEMM runs: every AVX2+FMA CPU takes it for a single row against
// constant weights (an RNN step's matrix-vector product), with or without
// AVX-512; with AVX-512, oneDNN keeps the larger products; $ISOMER_GEMM decides
// over both.
TEST(PackedGemm, ChoiceByCpuAndRows) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f");
  unsetenv("ISOMER_GEMM");
  EXPECT_EQ(kernels::prefer_packed_gemm(1), avx2);
  EXPECT_EQ(kernels::prefer_packed_gemm(128), avx2 && !avx512);
  EXPECT_EQ(kernels::prefer_packed_gemm(), avx2 && !avx512);
  setenv("ISOMER_GEMM", "onednn", 1);
  EXPECT_FALSE(kernels::prefer_packed_gemm(1));
  setenv("ISOMER_GEMM", "native", 1);
  EXPECT_TRUE(kernels::prefer_packed_gemm(128));
  unsetenv("ISOMER_GEMM");
}

// A team grows with the work, one thread per unit while threads spin between
// regions, one per 4 units while they sleep (the cores are busy), within [1, threads].
TEST(TeamForWork, GrowsWithTheWorkAndAsksMoreWhileThreadsSleep) {
  unsetenv("OMP_WAIT_POLICY");
  EXPECT_EQ(kernels::team_for_work(2, 0.3), 1);
  EXPECT_EQ(kernels::team_for_work(2, 2.0), 2);
  EXPECT_EQ(kernels::team_for_work(8, 3.5), 3);
  EXPECT_EQ(kernels::team_for_work(2, 1e9), 2);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  EXPECT_EQ(kernels::team_for_work(2, 2.0), 1);
  EXPECT_EQ(kernels::team_for_work(2, 7.9), 1);
  EXPECT_EQ(kernels::team_for_work(2, 8.0), 2);
  EXPECT_EQ(kernels::team_for_work(8, 16.0), 4);
  unsetenv("OMP_WAIT_POLICY");
}

// A spin barrier holds every member until all have arrived, round after round: each
// member publishes its round, meets the others, then must see every member's
// round at least as far as its own (a member let through early would see a stale one).
TEST(SpinBarrier, NoMemberPassesBeforeEveryOneArrives) {
  for (int members : {1, 2, 3}) {
    kernels::SpinBarrier barrier(members);
    std::vector<std::atomic<int>> round(static_cast<size_t>(members));
    for (auto& r : round) r.store(-1);
    std::atomic<int> stale{0};
    std::vector<std::thread> team;
    for (int m = 0; m < members; ++m)
      team.emplace_back([&, m] {
        for (int k = 0; k < 2000; ++k) {
          round[static_cast<size_t>(m)].store(k);
          barrier.wait();
          for (auto& r : round)
            if (r.load() < k) ++stale;
          barrier.wait();
        }
      });
    for (std::thread& t : team) t.join();
    EXPECT_EQ(stale.load(), 0) << members << " members";
  }
}

}  // namespace
}  // namespace isomer
