// Rotate-half RoPE rows (rope.h).
#include "kernels/rope.h"

#include <algorithm>

#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

// The common case: every operand contiguous along the row (the vector loop).
ISOMER_CLONES void rope_row_unit(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                                 float* __restrict y, int64_t h) {
  for (int64_t j = 0; j < h; ++j) y[j] = x[j] * c[j] - x[j + h] * s[j];
  for (int64_t j = 0; j < h; ++j) y[j + h] = x[j + h] * c[j + h] + x[j] * s[j + h];
}

void rope_row_strided(const float* x, int64_t xs, const float* c, int64_t cs, const float* s, int64_t ss, float* y,
                      int64_t h) {
  for (int64_t j = 0; j < h; ++j) y[j] = x[j * xs] * c[j * cs] - x[(j + h) * xs] * s[j * ss];
  for (int64_t j = 0; j < h; ++j) y[j + h] = x[(j + h) * xs] * c[(j + h) * cs] + x[j * xs] * s[(j + h) * ss];
}

}  // namespace

void rope_rows(const RopeRows& s, const float* x, const float* cos, const float* sin, float* out, int threads) {
  const int64_t n = 2 * s.half;
  int team = threads > 0 ? threads : omp_get_max_threads();
  // A row is a few hundred bytes: split only work that pays for waking a team.
  team = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(s.rows * n / 32768, s.rows), 1, team));
  const bool unit = s.x_step == 1 && s.cos_step == 1 && s.sin_step == 1;
  parallel_teams(team, [&](int t, int nt) {
    const int64_t r0 = s.rows * t / nt, r1 = s.rows * (t + 1) / nt;
    for (int64_t r = r0; r < r1; ++r) {
      const size_t i = static_cast<size_t>(r);
      const float* xr = x + s.x_off[i];
      const float* cr = cos + s.cos_off[i];
      const float* sr = sin + s.sin_off[i];
      float* yr = out + r * n;
      if (unit) rope_row_unit(xr, cr, sr, yr, s.half);
      else rope_row_strided(xr, s.x_step, cr, s.cos_step, sr, s.sin_step, yr, s.half);
    }
  });
}

}  // namespace isomer::kernels
