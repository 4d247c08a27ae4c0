// The native pooling kernel (kernels/window.h) against a direct loop, over the
// layouts it reads (channels last with odd channel counts, 8- and 16-channel
// blocks), max and average (padding counted or not), windows 1x1 to 5x5, strides
// 1 to 3, asymmetric padding, ceil mode's clipped last window, dilation, batch 2
// and two threads; and the runtime running a pool of a convolution's output on it,
// in the convolution's layout.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/window.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using kernels::Pool2d;
using testing::random_tensor;
using testing::run_checked;

struct Case {
  int64_t batch, c, h, w, kh, kw, stride, pad_top, pad_left, pad_bottom, pad_right, dil;
  bool ceil;
};

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pads, int64_t dil, bool ceil) {
  const int64_t span = in + pads - (k - 1) * dil - 1;
  return (ceil ? (span + stride - 1) / stride : span / stride) + 1;
}

// Element (b, c, y, x) of a [batch][c / lanes][h][w][lanes] buffer.
size_t at(const Case& k, int64_t lanes, int64_t h, int64_t w, int64_t b, int64_t c, int64_t y, int64_t x) {
  const int64_t blocks = k.c / lanes;
  return static_cast<size_t>((((b * blocks + c / lanes) * h + y) * w + x) * lanes + c % lanes);
}

TEST(PoolKernel, MatchesADirectLoop) {
  const Case cases[] = {
      {1, 64, 13, 17, 3, 3, 2, 0, 0, 1, 1, 1, true},  {2, 19, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, false},
      {1, 48, 8, 8, 2, 2, 2, 0, 0, 0, 0, 1, false},   {1, 7, 10, 9, 5, 5, 3, 2, 1, 2, 2, 1, true},
      {1, 32, 12, 12, 3, 3, 1, 2, 2, 2, 2, 2, false}, {2, 24, 6, 7, 1, 1, 2, 0, 0, 0, 0, 1, false},
      {1, 40, 5, 30, 3, 5, 2, 1, 2, 0, 2, 1, true},   {1, 16, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, true},
      {1, 35, 15, 14, 2, 3, 1, 0, 1, 1, 0, 1, false}, {1, 8, 3, 3, 5, 5, 1, 2, 2, 2, 2, 1, false},
      {1, 48, 11, 10, 3, 3, 1, 1, 1, 1, 1, 1, false}, {2, 32, 12, 13, 3, 3, 2, 1, 1, 1, 1, 1, true},
      {1, 16, 6, 9, 3, 3, 2, 0, 0, 0, 0, 1, false},
  };
  for (const Case& k : cases) {
    const int64_t oh = out_size(k.h, k.kh, k.stride, k.pad_top + k.pad_bottom, k.dil, k.ceil);
    const int64_t ow = out_size(k.w, k.kw, k.stride, k.pad_left + k.pad_right, k.dil, k.ceil);
    const std::vector<double> xs = random_tensor({k.batch, k.c, k.h, k.w}, 5).to_f64();
    for (int64_t lanes : {k.c, int64_t{8}, int64_t{16}}) {
      if (k.c % lanes != 0) continue;
      std::vector<float> x(xs.size());
      for (int64_t b = 0; b < k.batch; ++b)
        for (int64_t c = 0; c < k.c; ++c)
          for (int64_t y = 0; y < k.h; ++y)
            for (int64_t i = 0; i < k.w; ++i)
              x[at(k, lanes, k.h, k.w, b, c, y, i)] =
                  static_cast<float>(xs[static_cast<size_t>(((b * k.c + c) * k.h + y) * k.w + i)]);
      for (int mode = 0; mode < 3; ++mode)  // max, average, average counting the padding
        for (int threads : {1, 2}) {
          Pool2d p;
          p.batch = k.batch, p.blocks = k.c / lanes, p.lanes = lanes, p.in_h = k.h, p.in_w = k.w, p.out_h = oh;
          p.out_w = ow, p.kernel_h = k.kh, p.kernel_w = k.kw, p.stride_h = p.stride_w = k.stride;
          p.pad_top = k.pad_top, p.pad_left = k.pad_left, p.dilation_h = p.dilation_w = k.dil;
          p.average = mode > 0, p.count_pad = mode == 2;
          std::vector<float> y(static_cast<size_t>(k.batch * k.c * oh * ow), NAN);
          kernels::pool_2d(x.data(), y.data(), p, threads);
          for (int64_t b = 0; b < k.batch; ++b)
            for (int64_t c = 0; c < k.c; ++c)
              for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                  double m = -std::numeric_limits<double>::infinity(), s = 0;
                  int64_t n = 0;
                  for (int64_t ky = 0; ky < k.kh; ++ky)
                    for (int64_t kx = 0; kx < k.kw; ++kx) {
                      const int64_t iy = oy * k.stride - k.pad_top + ky * k.dil;
                      const int64_t ix = ox * k.stride - k.pad_left + kx * k.dil;
                      if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                      const double v = x[at(k, lanes, k.h, k.w, b, c, iy, ix)];
                      m = std::max(m, v), s += v, ++n;
                    }
                  const double want = mode == 0 ? m : s / static_cast<double>(mode == 2 ? k.kh * k.kw : n);
                  const float got = y[at(k, lanes, oh, ow, b, c, oy, ox)];
                  ASSERT_NEAR(got, want, 1e-5)
                      << "c" << k.c << " lanes " << lanes << " " << k.h << "x" << k.w << " k" << k.kh << "x" << k.kw
                      << " s" << k.stride << " mode " << mode << " t" << threads << " at " << b << "," << c << ","
                      << oy << "," << ox;
                }
        }
    }
  }
}

TEST(PoolKernel, NanWinsAMaxWindow) {
  for (int64_t k : {2, 3}) {  // 3: column reductions sliding; 2: a window a pixel
    Pool2d p;
    p.lanes = 20, p.in_h = p.in_w = k, p.out_h = p.out_w = 1, p.kernel_h = p.kernel_w = k;
    std::vector<float> x(static_cast<size_t>(k * k * 20), 1.0f), y(20, 0.0f);
    for (int64_t c = 0; c < 20; ++c) x[static_cast<size_t>((c % (k * k)) * 20 + c)] = NAN;
    kernels::pool_2d(x.data(), y.data(), p, 1);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << "k" << k;
  }
}

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

// x -> 3x3 conv to c channels -> `pool` (3x3 at `stride`, padded by 1 or ceil mode) -> 1x1 conv.
Graph conv_pool_conv(int64_t c, int64_t hw, const std::string& pool, int64_t stride, bool ceil) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, 8, hw, hw}));
  Value e = b.op1("Conv", {x, b.constant(random_tensor({c, 8, 3, 3}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  const int64_t p = ceil ? 0 : 1;
  Value q = b.op1(pool, {e},
                  {{"kernel_shape", std::vector<int64_t>{3, 3}},
                   {"pads", std::vector<int64_t>{p, p, p, p}},
                   {"strides", std::vector<int64_t>{stride, stride}},
                   {"ceil_mode", int64_t{ceil}}});
  Value y = b.op1("Conv", {q, b.constant(random_tensor({c, c, 1, 1}, 2))});
  return b.finish({y}, {"y"});
}

TEST(RuntimePool, PoolOfAConvolutionRunsNativeInItsLayout) {
  for (const char* pool : {"MaxPool", "AveragePool"})
    for (int64_t stride : {1, 2})
      for (bool ceil : {false, true})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(pool) + " s" + std::to_string(stride) + (ceil ? " ceil" : "") + " t" +
                       std::to_string(threads));
          const auto steps = run_checked(conv_pool_conv(64, 29, pool, stride, ceil), threads);
          size_t native = 0, reorders = 0;
          for (const runtime::StepInfo& s : steps) {
            native += s.kind == "pool" && s.signature.find("-native") != std::string::npos;
            reorders += s.kind == "reorder";
          }
          EXPECT_EQ(native, 1u);
          EXPECT_EQ(reorders, 2u);  // the graph input's to channels last and the output's back: none at the pool
        }
}

}  // namespace
}  // namespace isomer
