// ONNX RotaryEmbedding rows on float32 (rotary.h).
#include "kernels/rotary.h"

#include <algorithm>
#include <atomic>

#include "kernels/parallel.h"

namespace isomer::kernels {

int64_t rotary_embedding(const RotaryShape& g, const float* x, const float* cos, const float* sin,
                         const int64_t* position_ids, float* y, int threads) {
  const int64_t rows = g.rows();
  int team = threads > 0 ? threads : omp_get_max_threads();
  // A row is a few hundred bytes: split only work that pays for waking a team.
  team = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(rows * g.head / 32768, rows), 1, team));
  std::atomic<int64_t> bad{-1};
  parallel_teams(team, [&](int t, int nt) {
    const int64_t b = rotary_rows(g, x, cos, sin, position_ids, y, rows * t / nt, rows * (t + 1) / nt);
    if (b >= 0) bad.store(b);
  });
  return bad.load();
}

}  // namespace isomer::kernels
