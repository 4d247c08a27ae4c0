#pragma once
// Rotary position embedding (RoPE) in its rotate-half form, as exporters of
// LLaMA-style attention write it:
//   y = x * cos + concat(-x[..., h:], x[..., :h]) * sin,   x rows of 2h values,
// in one pass over each row, where the decomposed graph takes two slices, a
// negation, a concatenation and three elementwise steps.
#include <cstdint>
#include <vector>

namespace isomer::kernels {

// `rows` rows of 2 * half values. Each operand gives the element offset of every
// row's first value and its element stride along the row (0: one value for the
// whole row, a broadcast). The result is dense: row r at out + r * 2 * half.
struct RopeRows {
  int64_t rows = 0, half = 0;
  std::vector<int64_t> x_off, cos_off, sin_off;
  int64_t x_step = 1, cos_step = 1, sin_step = 1;
};

void rope_rows(const RopeRows& s, const float* x, const float* cos, const float* sin, float* out, int threads = 0);

}  // namespace isomer::kernels
