#include "kernels/random.h"

#include <cmath>

#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

// SplitMix64's output function: a bijection of 64-bit words whose outputs on
// consecutive inputs pass the usual statistical tests.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

ISOMER_CLONES
void dropout_range(const float* x, float* y, bool* mask, int64_t begin, int64_t end, uint32_t threshold,
                   float scale, uint64_t key) {
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t u = static_cast<uint32_t>(mix(key + static_cast<uint64_t>(i) * kGolden) >> 40);
    const bool keep = u >= threshold;
    y[i] = keep ? x[i] * scale : 0.0f;
    if (mask) mask[i] = keep;
  }
}

}  // namespace

uint64_t random_key(uint64_t seed, uint64_t run) { return mix(mix(seed) + run * kGolden); }

void dropout(const float* x, float* y, bool* mask, int64_t n, double ratio, uint64_t key, int threads) {
  // Kept when the 24-bit draw u is at least ratio * 2^24: probability 1 - ratio.
  const auto threshold = static_cast<uint32_t>(std::ceil(ratio * 16777216.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - ratio));
  const int team = team_for_work(threads > 0 ? threads : 1, static_cast<double>(n) / 32768);
  parallel_teams(team, [&](int t, int size) {
    const int64_t per = (n + size - 1) / size, begin = per * t, end = begin + per < n ? begin + per : n;
    if (begin < end) dropout_range(x, y, mask, begin, end, threshold, scale, key);
  });
}

}  // namespace isomer::kernels
