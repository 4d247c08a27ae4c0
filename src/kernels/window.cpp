#include "kernels/window.h"

#include <omp.h>

#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

constexpr float kLowest = -std::numeric_limits<float>::infinity();

enum class Op { Max, Avg };

// One channel's window position added in (a channel count's tail).
template <Op O>
ISOMER_VINLINE float combine(float acc, float e) {
  if constexpr (O == Op::Avg) return acc + e;
  else return e > acc || e != e ? e : acc;  // NaN wins
}

// Where one output pixel's window lies: its first tap inside the input, and how
// many rows and columns of taps are inside.
struct Window {
  const float* first;
  int64_t rows, cols;
  float scale;  // an average: 1 / what it divides by
};

// The window's lanes [c, c + lanes of W). K: the window's width where it is a
// compile-time constant (every column inside), else 0 (w.cols).
template <vmv::FloatVector W, Op O, int K>
ISOMER_VINLINE W reduce(const Window& w, int64_t c, int64_t row_step, int64_t tap_step) {
  W acc = vmv::splat<W>(O == Op::Avg ? 0.0f : kLowest);
  // Max: 0, or a NaN of the window once one is seen; subtracted from the max at the
  // end (x - 0 is x, -0 included). Selecting on a compare of a NaN with itself was
  // split into lanes (GCC 12 at -O3 without trapping math: 5x slower), as was one
  // select on the or of two compares.
  W nan = vmv::splat<W>(0.0f);
  const auto add = [&](W e) {
    if constexpr (O == Op::Avg) {
      acc += e;
    } else {
      acc = e > acc ? e : acc;
      nan = e != e ? e : nan;
    }
  };
  const float* xr = w.first + c;
  for (int64_t ky = 0; ky < w.rows; ++ky, xr += row_step) {
    if constexpr (K != 0) {
#pragma GCC unroll 8
      for (int kx = 0; kx < K; ++kx) add(vmv::load<W>(xr + kx * tap_step));
    } else {
      for (int64_t kx = 0; kx < w.cols; ++kx) add(vmv::load<W>(xr + kx * tap_step));
    }
  }
  if constexpr (O == Op::Avg) return acc * vmv::splat<W>(w.scale);
  else return acc - nan;
}

// One output pixel's channels [c, P): vectors of V's lanes, then (AVX-512) one of
// 8, then one at a time.
template <vmv::FloatVector V, Op O, int K>
ISOMER_VINLINE void pixel(const Window& w, float* o, int64_t P, int64_t row_step, int64_t tap_step, int64_t c = 0) {
  constexpr int L = vmv::kLanes<V>;
  for (; c + L <= P; c += L) vmv::store(o + c, reduce<V, O, K>(w, c, row_step, tap_step));
  if constexpr (L > 8)
    if (c + 8 <= P) vmv::store(o + c, reduce<vm8::v8, O, K>(w, c, row_step, tap_step)), c += 8;
  for (; c < P; ++c) {
    float acc = O == Op::Avg ? 0.0f : kLowest;
    const float* xr = w.first + c;
    for (int64_t ky = 0; ky < w.rows; ++ky, xr += row_step)
      for (int64_t kx = 0; kx < w.cols; ++kx) acc = combine<O>(acc, xr[kx * tap_step]);
    o[c] = O == Op::Avg ? acc * w.scale : acc;
  }
}

// A 3-wide window at stride S (1 or 2), every column inside: output columns
// [ox0, ox1) of one row, lanes [c, c + lanes of V) of each pixel. Each input
// column's reduction over the window's rows serves 3 / S outputs (at stride 1, 5
// operations an output instead of 9: GoogLeNet's and Inception's stride-1 pools).
template <vmv::FloatVector V, Op O, int S>
ISOMER_VINLINE void slide3(const float* xr, float* yr, int64_t P, int64_t rows, int64_t row_step, int64_t ox0,
                           int64_t ox1, int64_t pad_left, float scale, int64_t c) {
  struct Col {
    V v, nan;  // max: 0, or the column's NaN once one is seen (as reduce's)
  };
  const auto column = [&](int64_t ix) {
    Col k{vmv::splat<V>(O == Op::Avg ? 0.0f : kLowest), vmv::splat<V>(0.0f)};
    const float* xp = xr + ix * P + c;
    for (int64_t ky = 0; ky < rows; ++ky, xp += row_step) {
      const V e = vmv::load<V>(xp);
      if constexpr (O == Op::Avg) {
        k.v += e;
      } else {
        k.v = e > k.v ? e : k.v;
        k.nan = e != e ? e : k.nan;
      }
    }
    return k;
  };
  Col a = column(ox0 * S - pad_left), b = column(ox0 * S - pad_left + 1);
  for (int64_t ox = ox0; ox < ox1; ++ox) {
    const Col n = column(ox * S - pad_left + 2);
    V out;
    if constexpr (O == Op::Avg) {
      out = (a.v + b.v + n.v) * vmv::splat<V>(scale);
    } else {
      V m = a.v > b.v ? a.v : b.v;
      m = n.v > m ? n.v : m;
      out = m - (a.nan + b.nan + n.nan);
    }
    vmv::store(yr + ox * P + c, out);
    if constexpr (S == 1) {
      a = b, b = n;
    } else if (ox + 1 < ox1) {
      a = n, b = column(ox * S - pad_left + 3);
    }
  }
}

// Output rows [r0, r1) of the (batch, block, out_h) grid. Columns [inner0, inner1)
// have every tap column inside the input; the others are clipped to it.
template <vmv::FloatVector V, Op O, int K>
ISOMER_VINLINE void pool_rows(const float* x, float* y, const Pool2d& p, int64_t inner0, int64_t inner1, int64_t r0,
                              int64_t r1) {
  const int64_t P = p.lanes, row_step = p.dilation_h * p.in_w * P, tap_step = p.dilation_w * P;
  const float whole = 1.0f / static_cast<float>(p.kernel_h * p.kernel_w);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t plane = r / p.out_h, oy = r % p.out_h;  // plane: (batch, block)
    const int64_t iy0 = oy * p.stride_h - p.pad_top;
    int64_t ky0 = 0, ky1 = p.kernel_h;
    while (ky0 < ky1 && iy0 + ky0 * p.dilation_h < 0) ++ky0;
    while (ky1 > ky0 && iy0 + (ky1 - 1) * p.dilation_h >= p.in_h) --ky1;
    const int64_t rows = ky1 - ky0;
    // Tap row ky0's input row at column 0 (the plane's first row where no tap row is inside).
    const float* xr = x + (plane * p.in_h + (rows > 0 ? iy0 + ky0 * p.dilation_h : 0)) * p.in_w * P;
    float* yr = y + r * p.out_w * P;
    const auto border = [&](int64_t ox) {
      const int64_t ix0 = ox * p.stride_w - p.pad_left;
      int64_t kx0 = 0, kx1 = p.kernel_w;
      while (kx0 < kx1 && ix0 + kx0 * p.dilation_w < 0) ++kx0;
      while (kx1 > kx0 && ix0 + (kx1 - 1) * p.dilation_w >= p.in_w) --kx1;
      const int64_t cols = kx1 - kx0;
      const Window w{xr + (cols > 0 ? ix0 + kx0 * p.dilation_w : 0) * P, rows, cols,
                     p.count_pad ? whole : 1.0f / static_cast<float>(rows * cols)};
      pixel<V, O, 0>(w, yr + ox * P, P, row_step, tap_step);
    };
    for (int64_t ox = 0; ox < inner0; ++ox) border(ox);
    const float scale = p.count_pad ? whole : 1.0f / static_cast<float>(rows * p.kernel_w);
    int64_t c = 0;  // the channels done
    // In tiles of columns whose input (all its channels) stays in the L1 cache while
    // each vector of channels slides over it (channels last: the whole row did not).
    constexpr int64_t L = vmv::kLanes<V>;
    const int64_t tile = std::max<int64_t>(8, 16384 / (rows * P * 4 * p.stride_w + 1));
    // At stride 2 a column serves 1.5 outputs: that paid for one vector a pixel (a
    // 16-channel block), not for channels last's several (64: 0.078 ms, 0.069 a pixel).
    const bool slide = p.stride_w == 1 || (p.stride_w == 2 && P == L);
    if (K == 3 && slide && p.dilation_w == 1 && inner1 > inner0 && P >= L) {
      for (int64_t t0 = inner0; t0 < inner1; t0 += tile)
        for (c = 0; c + L <= P; c += L) {
          const int64_t t1 = std::min(inner1, t0 + tile);
          if (p.stride_w == 1) slide3<V, O, 1>(xr, yr, P, rows, row_step, t0, t1, p.pad_left, scale, c);
          else slide3<V, O, 2>(xr, yr, P, rows, row_step, t0, t1, p.pad_left, scale, c);
        }
    }
    for (int64_t ox = inner0; ox < inner1 && c < P; ++ox) {
      const Window w{xr + (ox * p.stride_w - p.pad_left) * P, rows, p.kernel_w, scale};
      pixel<V, O, K>(w, yr + ox * P, P, row_step, tap_step, c);
    }
    for (int64_t ox = std::max(inner0, inner1); ox < p.out_w; ++ox) border(ox);
  }
}

template <vmv::FloatVector V>
ISOMER_VINLINE void rows_on(const float* x, float* y, const Pool2d& p, int64_t inner0, int64_t inner1, int64_t r0,
                            int64_t r1) {
  const auto run = [&]<Op O>() {
    if (p.kernel_w == 3) pool_rows<V, O, 3>(x, y, p, inner0, inner1, r0, r1);
    else if (p.kernel_w == 2) pool_rows<V, O, 2>(x, y, p, inner0, inner1, r0, r1);
    else pool_rows<V, O, 0>(x, y, p, inner0, inner1, r0, r1);
  };
  if (p.average) run.template operator()<Op::Avg>();
  else run.template operator()<Op::Max>();
}

using Rows = void (*)(const float*, float*, const Pool2d&, int64_t, int64_t, int64_t, int64_t);

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void rows_avx512(const float* x, float* y, const Pool2d& p, int64_t inner0,
                                                     int64_t inner1, int64_t r0, int64_t r1) {
  rows_on<vm16::v16>(x, y, p, inner0, inner1, r0, r1);
}
ISOMER_TARGET_AVX2 ISOMER_FLATTEN void rows_avx2(const float* x, float* y, const Pool2d& p, int64_t inner0,
                                                 int64_t inner1, int64_t r0, int64_t r1) {
  rows_on<vm8::v8>(x, y, p, inner0, inner1, r0, r1);
}
ISOMER_FLATTEN void rows_baseline(const float* x, float* y, const Pool2d& p, int64_t inner0, int64_t inner1, int64_t r0,
                                  int64_t r1) {
  rows_on<vm8::v8>(x, y, p, inner0, inner1, r0, r1);
}

}  // namespace

void pool_2d(const float* x, float* y, const Pool2d& p, int threads) {
  require(p.lanes > 0 && p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 &&
              p.dilation_w > 0,
          "pool_2d: lanes, kernel, strides and dilations must be positive");
  static const Rows rows_fn = [] {
    switch (best_vector_isa()) {
      case VectorIsa::Avx512: return rows_avx512;
      case VectorIsa::Avx2: return rows_avx2;
      default: return rows_baseline;
    }
  }();
  const int64_t rows = p.batch * p.blocks * p.out_h;
  if (rows == 0 || p.out_w == 0) return;
  // Output columns whose every tap column is inside the input.
  int64_t inner0 = 0, inner1 = p.out_w;
  while (inner0 < p.out_w && inner0 * p.stride_w - p.pad_left < 0) ++inner0;
  while (inner1 > inner0 && (inner1 - 1) * p.stride_w - p.pad_left + (p.kernel_w - 1) * p.dilation_w >= p.in_w)
    --inner1;
  int team = threads > 0 ? threads : omp_get_max_threads();
  const int64_t work = rows * p.out_w * p.lanes * p.kernel_h * p.kernel_w;
  team = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(work / 65536, rows), 1, team));
  parallel_teams(team, [&](int t, int nt) { rows_fn(x, y, p, inner0, inner1, rows * t / nt, rows * (t + 1) / nt); });
}

}  // namespace isomer::kernels
