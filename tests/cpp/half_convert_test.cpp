// kernels/half.cpp's vectorized float16 / bfloat16 conversions against the scalar
// ones of ir/tensor.h, on every 16-bit pattern and on the float32 values where
// rounding, overflow and subnormals decide, at run lengths that leave tails of
// every size, on each instruction set this CPU has. tests/python/test_half_cast.py
// checks Cast models against numpy.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ir/tensor.h"
#include "kernels/half.h"

namespace isomer {
namespace {

using kernels::HalfConversions;
using kernels::VectorIsa;

// Each instruction set's conversions this CPU can run, named.
std::vector<std::pair<const char*, HalfConversions>> every_isa() {
  std::vector<std::pair<const char*, HalfConversions>> out;
  for (VectorIsa isa : {VectorIsa::Baseline, VectorIsa::Avx2, VectorIsa::Avx512})
    if (kernels::vector_isa_available(isa)) out.emplace_back(kernels::vector_isa_name(isa), kernels::half_conversions(isa));
  return out;
}

bool is_nan16(uint16_t h, bool bf16) {
  return bf16 ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u;
}

// The float32 values that decide a conversion's corner cases, both signs.
std::vector<float> edge_floats() {
  std::vector<float> v = {0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f,
                          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -26),
                          std::ldexp(1.0f, -14), std::ldexp(1023.0f, -24), std::ldexp(1023.5f, -24),
                          std::ldexp(1022.5f, -24), std::ldexp(3.0f, -25)};
  // Halfway cases of half's 10-bit and bfloat16's 7-bit mantissas, even and odd.
  for (uint32_t m : {0x00001000u, 0x00003000u, 0x00008000u, 0x00018000u, 0x00000fffu, 0x00001001u, 0x00007fffu})
    v.push_back(std::bit_cast<float>(0x3f800000u | m));
  std::vector<float> both = v;
  for (float x : v) both.push_back(-x);
  return both;
}

TEST(HalfConvert, EveryHalfPatternWidensAsTheScalarConversion) {
  for (const auto& [isa, c] : every_isa())
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(isa);
    std::vector<uint16_t> h(65536);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
    std::vector<float> got(h.size());
    (bf16 ? c.from_bf16 : c.from_f16)(h.data(), got.data(), static_cast<int64_t>(h.size()));
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = bf16 ? bfloat16_to_float(h[i]) : half_to_float(h[i]);
      if (is_nan16(h[i], bf16)) {
        EXPECT_TRUE(std::isnan(got[i])) << std::hex << h[i];
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << std::hex << h[i];
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << (bf16 ? "bf16 " : "f16 ") << std::hex << h[i];
      }
    }
  }
}

TEST(HalfConvert, NarrowingRoundsAsTheScalarConversion) {
  std::vector<float> x = edge_floats();
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) x.push_back(std::bit_cast<float>(bits(rng)));  // every exponent, NaNs included
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 5000; ++i) x.push_back(u(rng));
  for (const auto& [isa, c] : every_isa())
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(isa);
    std::vector<uint16_t> got(x.size());
    (bf16 ? c.to_bf16 : c.to_f16)(x.data(), got.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = bf16 ? float_to_bfloat16(x[i]) : float_to_half(x[i]);
      if (std::isnan(x[i])) {
        EXPECT_TRUE(is_nan16(got[i], bf16)) << x[i];
        EXPECT_EQ(got[i] & 0x8000u, want & 0x8000u) << "sign of a NaN";
      } else {
        EXPECT_EQ(got[i], want) << (bf16 ? "bf16 of " : "f16 of ") << x[i] << " bits " << std::hex
                                << std::bit_cast<uint32_t>(x[i]);
      }
    }
  }
}

// The entry points the runtime calls are the widest instruction set's.
TEST(HalfConvert, EntryPointsUseTheWidestInstructionSet) {
  const float x[3] = {1.0f / 3.0f, -65520.0f, 1e-6f};
  uint16_t a[3], b[3];
  kernels::float32_to_float16(x, a, 3);
  kernels::half_conversions(kernels::best_vector_isa()).to_f16(x, b, 3);
  EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
  EXPECT_EQ(a[1], 0xfc00u);  // -inf: past the largest half
}

// Runs of every length up to two vectors and a bit, at odd offsets: the tails write
// exactly their elements and nothing past them.
TEST(HalfConvert, TailsWriteOnlyTheirElements) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (const auto& [isa, c] : every_isa())
  for (int64_t n = 0; n <= 37; ++n)
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(isa);
      std::vector<float> x(static_cast<size_t>(n + 2));
      for (float& v : x) v = u(rng);
      std::vector<uint16_t> h(static_cast<size_t>(n + 3), 0xabcd);
      (bf16 ? c.to_bf16 : c.to_f16)(x.data() + 1, h.data() + 1, n);
      EXPECT_EQ(h[0], 0xabcd);
      EXPECT_EQ(h[static_cast<size_t>(n + 1)], 0xabcd) << "n " << n;
      std::vector<float> back(static_cast<size_t>(n + 3), -9.0f);
      (bf16 ? c.from_bf16 : c.from_f16)(h.data() + 1, back.data() + 1, n);
      EXPECT_EQ(back[0], -9.0f);
      EXPECT_EQ(back[static_cast<size_t>(n + 1)], -9.0f) << "n " << n;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = bf16 ? float_to_bfloat16(x[i + 1]) : float_to_half(x[i + 1]);
        EXPECT_EQ(h[i + 1], want) << "n " << n << " i " << i;
        EXPECT_EQ(back[i + 1], bf16 ? bfloat16_to_float(want) : half_to_float(want));
      }
    }
}

}  // namespace
}  // namespace isomer
