// kernels/quant.h: DynamicQuantizeLinear's parameters over every length class of
// the vector loop (empty, a tail only, whole vectors, vectors and a tail) and the
// ranges ONNX defines them for, against the formula stated by ONNX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/quant.h"

namespace isomer {
namespace {

// ONNX's DynamicQuantizeLinear: the range [min(x, 0), max(x, 0)] onto uint8.
kernels::DynamicParams onnx_params(const std::vector<float>& x) {
  float mn = 0, mx = 0;
  for (float v : x)
    if (!std::isnan(v)) mn = std::min(mn, v), mx = std::max(mx, v);
  kernels::DynamicParams p;
  p.scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  p.zero_point = static_cast<uint8_t>(std::nearbyint(std::clamp(-mn / p.scale, 0.0f, 255.0f)));
  return p;
}

TEST(QuantKernels, DynamicParamsFollowOnnxAtEveryLength) {
  std::mt19937 rng(11);
  for (int64_t n : {0, 1, 15, 16, 17, 100, 4099}) {
    for (const float shift : {0.0f, 3.0f, -3.0f}) {  // mixed signs, all positive, all negative
      std::uniform_real_distribution<float> dist(-1.0f + shift, 1.0f + shift);
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = dist(rng);
      if (n > 0) x[static_cast<size_t>(n - 1)] = 5.0f + shift;  // the extreme in the tail
      const kernels::DynamicParams want = onnx_params(x);
      for (int team : {1, 2}) {
        const kernels::DynamicParams got = kernels::dynamic_params(x.data(), n, team);
        EXPECT_EQ(got.scale, want.scale) << "n " << n << " shift " << shift << " team " << team;
        EXPECT_EQ(got.zero_point, want.zero_point) << "n " << n << " shift " << shift << " team " << team;
      }
    }
  }
}

TEST(QuantKernels, DynamicParamsIgnoreNaN) {
  std::vector<float> x(40, 0.5f);
  x[3] = std::numeric_limits<float>::quiet_NaN();  // in a whole vector
  x[39] = std::numeric_limits<float>::quiet_NaN();  // in the tail
  x[20] = -2.0f;
  const kernels::DynamicParams got = kernels::dynamic_params(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(got.scale, 2.5f / 255.0f);
  EXPECT_EQ(got.zero_point, onnx_params(x).zero_point);
}

TEST(QuantKernels, QuantizingToChannelsLastTransposesTheRowMajorResult) {
  // Several 16-channel blocks, an inner extent of one and of several 16-position
  // tiles, two images; u8 and s8; values that saturate both ends and sit at ties.
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> dist(-40.0f, 40.0f);
  for (auto [outer, channels, inner] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 16}, {2, 48, 80}, {3, 32, 256}})
    for (kernels::QType t : {kernels::QType::U8, kernels::QType::S8}) {
      std::vector<float> x(static_cast<size_t>(outer * channels * inner));
      for (size_t i = 0; i < x.size(); ++i) x[i] = i % 7 == 0 ? std::floor(dist(rng)) * 0.25f + 0.125f : dist(rng);
      kernels::QShape all;
      all.inner = static_cast<int64_t>(x.size());
      const float scale = 0.25f;
      const int32_t zp = t == kernels::QType::U8 ? 131 : -3;
      std::vector<uint8_t> plain(x.size()), last(x.size());
      kernels::quantize(x.data(), plain.data(), t, all, &scale, &zp);
      for (int team : {1, 2}) {
        ASSERT_TRUE(kernels::quantize_to_channels_last(x.data(), last.data(), t, outer, channels, inner, scale, zp, team));
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t c = 0; c < channels; ++c)
            for (int64_t s = 0; s < inner; ++s)
              ASSERT_EQ(last[static_cast<size_t>((o * inner + s) * channels + c)],
                        plain[static_cast<size_t>((o * channels + c) * inner + s)])
                  << outer << "x" << channels << "x" << inner << " at " << o << "," << c << "," << s;
      }
    }
  std::vector<float> x(24 * 16);
  std::vector<uint8_t> y(x.size());
  EXPECT_FALSE(kernels::quantize_to_channels_last(x.data(), y.data(), kernels::QType::U8, 1, 24, 16, 1.0f, 0));
}

}  // namespace
}  // namespace isomer
