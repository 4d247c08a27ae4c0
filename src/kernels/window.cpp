#include "kernels/window.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ir/error.h"
#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

using v8 = float __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

// Output rows [r0, r1) of the (batch, block, out_h) grid, V vectors of 8 lanes each.
template <int V>
inline __attribute__((always_inline)) void pool_rows(const float* x, float* y, const Pool2d& p, int64_t r0, int64_t r1) {
  constexpr int64_t L = 8 * V;
  const v8 lowest = v8{} - std::numeric_limits<float>::infinity();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t plane = r / p.out_h, oy = r % p.out_h;  // plane: (batch, block)
    const float* xp = x + plane * p.in_h * p.in_w * L;
    float* yr = y + r * p.out_w * L;
    const int64_t y0 = oy * p.stride_h - p.pad_top;
    for (int64_t ox = 0; ox < p.out_w; ++ox) {
      const int64_t x0 = ox * p.stride_w - p.pad_left;
      v8 acc[V];
      for (int v = 0; v < V; ++v) acc[v] = lowest;
      for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
        const int64_t iy = y0 + ky * p.dilation_h;
        if (iy < 0 || iy >= p.in_h) continue;
        for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
          const int64_t ix = x0 + kx * p.dilation_w;
          if (ix < 0 || ix >= p.in_w) continue;
          const float* s = xp + (iy * p.in_w + ix) * L;
          for (int v = 0; v < V; ++v) {
            const v8 e = load8(s + 8 * v);
            acc[v] = (e > acc[v]) | (e != e) ? e : acc[v];  // NaN wins
          }
        }
      }
      for (int v = 0; v < V; ++v) store8(yr + ox * L + 8 * v, acc[v]);
    }
  }
}

ISOMER_CLONES void pool_range(const float* x, float* y, const Pool2d& p, int64_t r0, int64_t r1) {
  if (p.lanes == 16) pool_rows<2>(x, y, p, r0, r1);
  else pool_rows<1>(x, y, p, r0, r1);
}

}  // namespace

void max_pool_blocked(const float* x, float* y, const Pool2d& p, int threads) {
  require(p.lanes == 8 || p.lanes == 16, "max_pool_blocked: lanes must be 8 or 16");
  const int64_t rows = p.batch * p.blocks * p.out_h;
  if (rows == 0 || p.out_w == 0) return;
  int team = threads > 0 ? threads : omp_get_max_threads();
  const int64_t work = rows * p.out_w * p.lanes * p.kernel_h * p.kernel_w;
  team = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(work / 65536, rows), 1, team));
  parallel_teams(team, [&](int t, int nt) { pool_range(x, y, p, rows * t / nt, rows * (t + 1) / nt); });
}

}  // namespace isomer::kernels
