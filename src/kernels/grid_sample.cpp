#include "kernels/grid_sample.h"

#include <omp.h>

#include <vector>

#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

// Each point's taps as element offsets and weights, a zero tap as offset 0 with
// weight 0: the channel loop then runs without a branch.
template <int Taps>
ISOMER_CLONES void sample_plane(const float* x, const int64_t* offset, const float* weight, float* y, int64_t points) {
  for (int64_t q = 0; q < points; ++q) {
    float sum = 0;
    for (int t = 0; t < Taps; ++t) sum += weight[q * Taps + t] * x[offset[q * Taps + t]];
    y[q] = sum;
  }
}

}  // namespace

void grid_sample(const float* x, const float* grid, float* y, const GridSampleShape& s, GridMode mode,
                 GridPadding padding, bool align_corners, int threads) {
  const int64_t points = s.out_h * s.out_w, plane = s.in_h * s.in_w;
  const int taps = mode == GridMode::Nearest ? 1 : mode == GridMode::Linear ? 4 : 16;
  const int max_team = threads > 0 ? threads : omp_get_max_threads();
  std::vector<int64_t> offset(static_cast<size_t>(points * taps));
  std::vector<float> weight(offset.size());
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* g = grid + n * points * 2;
    const int table_team = static_cast<int>(std::clamp<int64_t>(points / 4096, 1, max_team));
    parallel_teams(table_team, [&](int t, int nt) {
      int64_t index[kMaxGridTaps];
      float w[kMaxGridTaps];
      for (int64_t q = points * t / nt; q < points * (t + 1) / nt; ++q) {
        const int k = grid_taps(s.in_h, s.in_w, g[2 * q], g[2 * q + 1], mode, padding, align_corners, index, w);
        for (int j = 0; j < taps; ++j) {
          const bool real = j < k && index[j] >= 0;
          offset[q * taps + j] = real ? index[j] : 0;
          weight[q * taps + j] = real ? w[j] : 0.0f;
        }
      }
    });
    const int64_t work = s.channels * points * taps;
    const int team = static_cast<int>(std::clamp<int64_t>(std::min(work / 32768 + 1, s.channels), 1, max_team));
    parallel_teams(team, [&](int t, int nt) {
      for (int64_t c = s.channels * t / nt; c < s.channels * (t + 1) / nt; ++c) {
        const float* xp = x + (n * s.channels + c) * plane;
        float* yp = y + (n * s.channels + c) * points;
        if (taps == 1) sample_plane<1>(xp, offset.data(), weight.data(), yp, points);
        else if (taps == 4) sample_plane<4>(xp, offset.data(), weight.data(), yp, points);
        else sample_plane<16>(xp, offset.data(), weight.data(), yp, points);
      }
    });
  }
}

}  // namespace isomer::kernels
