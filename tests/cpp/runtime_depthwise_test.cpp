// The depthwise kernel with its activation in the epilogue (kernels/depthwise.h)
// against a direct loop, over odd channel counts (every vector width's tail),
// strides, windows, asymmetric padding, dilation, batch 2 and two threads; and
// the runtime choosing it for a depthwise convolution's SiLU or sigmoid
// (depthwise_step.h) only where it wins and nothing else reads the convolution.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/depthwise.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using kernels::DepthwiseGeometry;
using kernels::PwOp;
using testing::count_kind;
using testing::random_tensor;
using testing::run_checked;

float act_ref(float v, PwOp act) {
  switch (act) {
    case PwOp::Relu: return v < 0 ? 0 : v;
    case PwOp::Silu: return static_cast<float>(v / (1.0 + std::exp(-static_cast<double>(v))));
    case PwOp::Sigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
    default: return v;
  }
}

std::vector<float> random_floats(std::vector<int64_t> dims, uint64_t seed) {
  const std::vector<double> v = random_tensor(std::move(dims), seed).to_f64();
  return std::vector<float>(v.begin(), v.end());
}

TEST(DepthwiseKernel, MatchesADirectLoop) {
  struct Case {
    int64_t batch, c, h, w, kh, kw, stride, pad_top, pad_left, pad_bottom, pad_right, dil;
  };
  const Case cases[] = {
      {1, 16, 9, 21, 3, 3, 1, 1, 1, 1, 1, 1},  {2, 40, 11, 13, 3, 3, 2, 1, 1, 1, 1, 1},
      {1, 44, 12, 30, 5, 5, 2, 2, 2, 2, 2, 1}, {1, 3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1},
      {1, 29, 10, 17, 5, 5, 1, 2, 2, 2, 2, 1}, {2, 13, 6, 6, 5, 5, 1, 2, 2, 2, 2, 1},
      {1, 24, 8, 19, 3, 5, 1, 0, 2, 1, 1, 1},  {1, 36, 9, 23, 3, 3, 1, 2, 2, 2, 2, 2},
      {1, 7, 5, 40, 7, 7, 2, 3, 3, 3, 3, 1},   {1, 32, 4, 4, 3, 3, 2, 0, 1, 0, 0, 1},
  };
  for (const Case& k : cases)
    for (PwOp act : {PwOp::Copy, PwOp::Relu, PwOp::Silu, PwOp::Sigmoid})
      for (int threads : {1, 2}) {
        DepthwiseGeometry g;
        g.batch = k.batch, g.channels = k.c, g.in_h = k.h, g.in_w = k.w, g.k_h = k.kh, g.k_w = k.kw;
        g.stride_h = g.stride_w = k.stride, g.pad_top = k.pad_top, g.pad_left = k.pad_left, g.dil_h = g.dil_w = k.dil;
        g.out_h = (k.h + k.pad_top + k.pad_bottom - (k.kh - 1) * k.dil - 1) / k.stride + 1;
        g.out_w = (k.w + k.pad_left + k.pad_right - (k.kw - 1) * k.dil - 1) / k.stride + 1;
        const std::vector<float> x = random_floats({k.batch, k.h, k.w, k.c}, 1);
        const std::vector<float> w = random_floats({k.kh, k.kw, k.c}, 2);
        const std::vector<float> bias = random_floats({k.c}, 3);
        std::vector<float> y(static_cast<size_t>(k.batch * g.out_h * g.out_w * k.c), NAN);
        kernels::depthwise_nhwc(g, x.data(), w.data(), bias.data(), act, y.data(), threads);
        for (int64_t b = 0; b < k.batch; ++b)
          for (int64_t oy = 0; oy < g.out_h; ++oy)
            for (int64_t ox = 0; ox < g.out_w; ++ox)
              for (int64_t c = 0; c < k.c; ++c) {
                double s = bias[static_cast<size_t>(c)];
                for (int64_t ky = 0; ky < k.kh; ++ky)
                  for (int64_t kx = 0; kx < k.kw; ++kx) {
                    const int64_t iy = oy * k.stride - k.pad_top + ky * k.dil, ix = ox * k.stride - k.pad_left + kx * k.dil;
                    if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                    s += static_cast<double>(x[static_cast<size_t>(((b * k.h + iy) * k.w + ix) * k.c + c)]) *
                         w[static_cast<size_t>((ky * k.kw + kx) * k.c + c)];
                  }
                const float want = act_ref(static_cast<float>(s), act);
                const float got = y[static_cast<size_t>(((b * g.out_h + oy) * g.out_w + ox) * k.c + c)];
                ASSERT_NEAR(got, want, 1e-5 * (1 + std::fabs(want)))
                    << "case c" << k.c << " " << k.h << "x" << k.w << " k" << k.kh << "x" << k.kw << " s" << k.stride
                    << " act " << kernels::pw_name(act) << " at " << b << "," << oy << "," << ox << "," << c;
              }
      }
}

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

// x -> 1x1 conv to c channels -> depthwise k x k (stride s) -> act; `tap`: the
// depthwise convolution's output is a graph output too.
Graph depthwise_block(int64_t batch, int64_t c, int64_t hw, int64_t k, int64_t stride, bool sigmoid, bool tap) {
  GraphBuilder b;
  Value x = b.input("x", f32({batch, 8, hw, hw}));
  Value e = b.op1("Conv", {x, b.constant(random_tensor({c, 8, 1, 1}, 1))});
  const int64_t p = k / 2;
  Value d = b.op1("Conv", {e, b.constant(random_tensor({c, 1, k, k}, 2)), b.constant(random_tensor({c}, 3))},
                  {{"group", c}, {"pads", std::vector<int64_t>{p, p, p, p}}, {"strides", std::vector<int64_t>{stride, stride}}});
  Value y = sigmoid ? b.op1("Sigmoid", {d}) : b.op1("Mul", {d, b.op1("Sigmoid", {d})});
  if (tap) return b.finish({y, d}, {"y", "d"});
  return b.finish({y}, {"y"});
}

TEST(RuntimeDepthwise, GateRunsInTheDepthwiseKernel) {
  struct Case {
    int64_t batch, c, hw, k, stride;
  };
  // 3x3 at stride 1, 64 channels and more, rows of 48 columns and more; odd counts.
  for (const Case& k : {Case{1, 144, 56, 3, 1}, Case{2, 67, 48, 3, 1}, Case{1, 83, 61, 3, 1}})
    for (bool sigmoid : {false, true})
      for (int threads : {1, 2}) {
        SCOPED_TRACE("c" + std::to_string(k.c) + " hw" + std::to_string(k.hw) + " k" + std::to_string(k.k) +
                     (sigmoid ? " sigmoid" : " silu") + " t" + std::to_string(threads));
        const auto steps = run_checked(depthwise_block(k.batch, k.c, k.hw, k.k, k.stride, sigmoid, false), threads);
        EXPECT_EQ(count_kind(steps, "depthwise"), 1u);
        EXPECT_EQ(count_kind(steps, "pointwise"), 0u);
      }
}

TEST(RuntimeDepthwise, StaysOnOneDnnWhereItWouldLoseOrTheOutputIsRead) {
  // Narrow rows, few channels, stride 2, 5x5: oneDNN's kernel and the gate step.
  for (const auto& steps : {run_checked(depthwise_block(1, 96, 14, 5, 1, false, false), 1),
                            run_checked(depthwise_block(1, 64, 24, 3, 1, false, false), 1),
                            run_checked(depthwise_block(1, 32, 112, 3, 1, false, false), 1),
                            run_checked(depthwise_block(1, 144, 112, 3, 2, false, false), 1),
                            run_checked(depthwise_block(1, 144, 56, 5, 1, false, false), 1)})
    EXPECT_EQ(count_kind(steps, "depthwise"), 0u);
  // The convolution's own output is read too: the activation is no post-op of it.
  for (bool sigmoid : {false, true})
    EXPECT_EQ(count_kind(run_checked(depthwise_block(1, 144, 56, 3, 1, sigmoid, true), 1), "depthwise"), 0u);
}

}  // namespace
}  // namespace isomer
