#include "kernels/grid_sample.h"

#include <omp.h>

#include "kernels/parallel.h"

namespace isomer::kernels {

void grid_sample(const float* x, const float* grid, float* y, const GridSampleShape& s, GridMode mode,
                 GridPadding padding, bool align_corners, int threads) {
  const int64_t planes = s.batch * s.channels, points = s.out_h * s.out_w;
  const int64_t work = planes * points * (mode == GridMode::Cubic ? 16 : 4);
  const int team = static_cast<int>(
      std::clamp<int64_t>(std::min(work / 32768 + 1, planes), 1, threads > 0 ? threads : omp_get_max_threads()));
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t plane = planes * t / nt; plane < planes * (t + 1) / nt; ++plane) {
      const int64_t n = plane / s.channels;
      const float* xp = x + plane * s.in_h * s.in_w;
      const float* g = grid + n * points * 2;
      float* yp = y + plane * points;
      for (int64_t q = 0; q < points; ++q)
        yp[q] = grid_sample_point(xp, s.in_h, s.in_w, g[2 * q], g[2 * q + 1], mode, padding, align_corners);
    }
  });
}

}  // namespace isomer::kernels
