#pragma once
// GridSample on 4-D images: out[n, c, h, w] samples x[n, c] at the point grid[n, h,
// w] = (x, y) in [-1, 1] (ONNX's GridSample, torch's F.grid_sample), by nearest,
// linear or cubic interpolation, with zeros, border or reflection padding. The
// sampling of one output point is a template over the element type, so the
// reference evaluator (double) and the runtime's kernel (float) share one statement
// of the semantics, ONNX Runtime's: coordinates unnormalized per align_corners,
// nearest rounding half to even, every tap read through the padding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace isomer::kernels {

enum class GridMode { Nearest, Linear, Cubic };
enum class GridPadding { Zeros, Border, Reflection };

// The modes by ONNX's names (opset 20's: linear, cubic); nullopt for another name.
inline std::optional<GridMode> grid_mode(std::string_view name) {
  if (name == "nearest") return GridMode::Nearest;
  if (name == "linear") return GridMode::Linear;
  if (name == "cubic") return GridMode::Cubic;
  return std::nullopt;
}
inline std::optional<GridPadding> grid_padding(std::string_view name) {
  if (name == "zeros") return GridPadding::Zeros;
  if (name == "border") return GridPadding::Border;
  if (name == "reflection") return GridPadding::Reflection;
  return std::nullopt;
}

struct GridSampleShape {
  int64_t batch = 0, channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
};

namespace grid_detail {

// Reflects v into [lo, hi] by the nearer border, as often as needed.
template <class T>
T reflect(T v, T lo, T hi) {
  const T range = hi - lo;
  if (!(range > 0)) return lo;
  if (v >= lo && v <= hi) return v;
  const T d = v < lo ? lo - v : v - hi;
  const T n = std::floor(d / range), r = d - n * range;
  const bool even = std::fmod(n, T(2)) == 0;
  if (v < lo) return even ? lo + r : hi - r;
  return even ? hi - r : lo + r;
}

template <class T>
struct Plane {
  int64_t h, w;
  GridPadding padding;
  T lo_x, lo_y, hi_x, hi_y;  // the borders reflection reflects at

  // The element a tap at row r, column c reads, or -1 for a zero (outside, zeros padding).
  int64_t index(int64_t r, int64_t c) const {
    switch (padding) {
      case GridPadding::Zeros:
        return r >= 0 && r < h && c >= 0 && c < w ? r * w + c : -1;
      case GridPadding::Border:
        return std::clamp<int64_t>(r, 0, h - 1) * w + std::clamp<int64_t>(c, 0, w - 1);
      case GridPadding::Reflection:
        break;
    }
    // Reflected, then clamped: a degenerate border never reads outside the plane.
    const auto rr = static_cast<int64_t>(reflect(static_cast<T>(r), lo_y, hi_y));
    const auto cc = static_cast<int64_t>(reflect(static_cast<T>(c), lo_x, hi_x));
    return std::clamp<int64_t>(rr, 0, h - 1) * w + std::clamp<int64_t>(cc, 0, w - 1);
  }
};

// Keys' cubic convolution weights (a = -0.75) of the four taps around t in [0, 1).
template <class T>
void cubic_weights(T t, T* k) {
  const T a = T(-0.75);
  const T t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  k[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  k[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  k[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  k[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

}  // namespace grid_detail

// The taps of one output point at the normalized point (gx, gy) of an h x w plane:
// up to 16 (element index, weight) pairs, index -1 for a zero. As ONNX Runtime: the
// point is not moved; each tap goes through the padding (zero outside, the nearest
// edge, or reflected at the borders). Returns how many taps there are.
constexpr int kMaxGridTaps = 16;
template <class T>
int grid_taps(int64_t h, int64_t w, T gx, T gy, GridMode mode, GridPadding padding, bool align_corners,
              int64_t* index, T* weight) {
  using namespace grid_detail;
  const T lo_x = align_corners ? T(0) : T(-0.5), lo_y = lo_x;
  const T hi_x = align_corners ? T(w - 1) : T(w) - T(0.5), hi_y = align_corners ? T(h - 1) : T(h) - T(0.5);
  const Plane<T> p{h, w, padding, lo_x, lo_y, hi_x, hi_y};
  auto unnormalize = [&](T g, int64_t n) {
    return align_corners ? (g + 1) / 2 * T(n - 1) : ((g + 1) * T(n) - 1) / 2;
  };
  // Far outside, the taps' integer coordinates could overflow: there zeros padding
  // reads nothing, border padding the edge, and reflection repeats with a period of
  // twice the span between the borders.
  auto tame = [&](T v, int64_t n, T lo, T hi) {
    const T far = T(4) + T(n);
    if (v >= -far && v <= far) return v;
    if (padding == GridPadding::Zeros) return far + T(4);
    if (padding == GridPadding::Border) return v < 0 ? -far : far;
    const T period = 2 * (hi - lo);
    return period > 0 ? std::fmod(v, period) : lo;
  };
  T px = unnormalize(gx, w), py = unnormalize(gy, h);
  if (!std::isfinite(px) || !std::isfinite(py)) {
    index[0] = padding == GridPadding::Zeros ? -1 : 0;
    weight[0] = T(1);
    return 1;
  }
  px = tame(px, w, lo_x, hi_x);
  py = tame(py, h, lo_y, hi_y);
  if (mode == GridMode::Nearest) {
    index[0] = p.index(static_cast<int64_t>(std::nearbyint(py)), static_cast<int64_t>(std::nearbyint(px)));
    weight[0] = T(1);
    return 1;
  }
  const auto x0 = static_cast<int64_t>(std::floor(px)), y0 = static_cast<int64_t>(std::floor(py));
  const T fx = px - T(x0), fy = py - T(y0);
  if (mode == GridMode::Linear) {
    const T wx[2] = {1 - fx, fx}, wy[2] = {1 - fy, fy};
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        index[2 * i + j] = p.index(y0 + i, x0 + j);
        weight[2 * i + j] = wy[i] * wx[j];
      }
    return 4;
  }
  T kx[4], ky[4];
  cubic_weights(fx, kx);
  cubic_weights(fy, ky);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      index[4 * i + j] = p.index(y0 - 1 + i, x0 - 1 + j);
      weight[4 * i + j] = ky[i] * kx[j];
    }
  return 16;
}

// One output point of one channel plane x [h, w]: its taps' weighted sum.
template <class T>
T grid_sample_point(const T* x, int64_t h, int64_t w, T gx, T gy, GridMode mode, GridPadding padding,
                    bool align_corners) {
  int64_t index[kMaxGridTaps];
  T weight[kMaxGridTaps];
  const int n = grid_taps(h, w, gx, gy, mode, padding, align_corners, index, weight);
  T sum = 0;
  for (int t = 0; t < n; ++t)
    if (index[t] >= 0) sum += weight[t] * x[index[t]];
  return sum;
}

// The whole operator on float32, contiguous x [N, C, H, W], grid [N, Ho, Wo, 2] and
// y [N, C, Ho, Wo]: the taps of each image's points computed once, then every
// channel's plane read through them, in parallel.
void grid_sample(const float* x, const float* grid, float* y, const GridSampleShape& s, GridMode mode,
                 GridPadding padding, bool align_corners, int threads = 0);

}  // namespace isomer::kernels
