#include "kernels/depthwise.h"

#include <algorithm>

#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

template <vmv::FloatVector V>
ISOMER_VINLINE V activate(V v, PwOp act) {
  switch (act) {
    case PwOp::Silu: return v / (vmv::splat<V>(1.0f) + vmv::exp(-v));  // as the pointwise kernel's Silu
    case PwOp::Sigmoid: return vmv::sigmoid(v);
    case PwOp::Relu: return v < vmv::splat<V>(0.0f) ? vmv::splat<V>(0.0f) : v;
    default: return v;
  }
}

// What one output row's columns share.
struct RowCtx {
  const DepthwiseGeometry* g;
  const float *xr, *w, *bias;  // xr: the first tap row inside the input, at column 0
  float* yr;                   // the output row
  int64_t ky0, ky1;            // the tap rows inside the input
  PwOp act;
};

// N adjacent output columns from ox, every channel block of them in turn (memory
// order), taps kx in [kx0, kx1) (inside the input for all N). N sums in flight hide
// the multiply-add latency (one column's taps are a dependent chain), and each
// tap's weights are loaded once for all of them. K: the window's width where it is
// a constant (3, 5), with every tap inside (kx0 = 0, kx1 = K), else 0.
template <vmv::FloatVector V, int N, int K>
ISOMER_VINLINE void columns(const RowCtx& r, int64_t ox, int64_t kx0, int64_t kx1, int64_t c_begin, int64_t c_end) {
  constexpr int L = vmv::kLanes<V>;
  const DepthwiseGeometry& g = *r.g;
  const int64_t C = g.channels, kw = g.k_w;
  if constexpr (K != 0) kx0 = 0, kx1 = K;
  const int64_t step = g.stride_w * C, row_step = g.dil_h * g.in_w * C, tap_step = g.dil_w * C;
  const float* xc = r.xr + (ox * g.stride_w - g.pad_left) * C;
  float* o = r.yr + ox * C;
  for (int64_t c0 = c_begin; c0 + L <= c_end; c0 += L) {
    V acc[N];
    const V bv = vmv::load<V>(r.bias + c0);
    for (int j = 0; j < N; ++j) acc[j] = bv;
    const float* xk = xc + c0;
    const float* wk = r.w + r.ky0 * kw * C + c0;
    for (int64_t ky = r.ky0; ky < r.ky1; ++ky, xk += row_step, wk += kw * C) {
#pragma GCC unroll 5
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const V wv = vmv::load<V>(wk + kx * C);
        const float* xp = xk + kx * tap_step;
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) acc[j] += vmv::load<V>(xp + j * step) * wv;
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) vmv::store(o + j * C + c0, activate(acc[j], r.act));
  }
}

// The taps [kx0, kx1) of output column ox that read inside the input.
inline void column_taps(const DepthwiseGeometry& g, int64_t ox, int64_t& kx0, int64_t& kx1) {
  const int64_t ix0 = ox * g.stride_w - g.pad_left;
  kx0 = 0, kx1 = g.k_w;
  while (kx0 < kx1 && ix0 + kx0 * g.dil_w < 0) ++kx0;
  while (kx1 > kx0 && ix0 + (kx1 - 1) * g.dil_w >= g.in_w) --kx1;
}

// Half a vector's lanes (16 -> 8 -> 4).
using v4 = float __attribute__((vector_size(16)));
template <class V>
struct Half;
template <>
struct Half<vm16::v16> {
  using type = vm8::v8;
};
template <>
struct Half<vm8::v8> {
  using type = v4;
};
template <class V>
using HalfOf = typename Half<V>::type;

// Channels [c_begin, c_end) of one output row, a vector V of them at a time, and
// what is left of them with vectors of half as many lanes, down to 4: the border
// columns one at a time, the inner ones (every tap inside) 8, 4, then 1 at a time.
// Returns the channels left (fewer than 4). K as for `columns`.
template <vmv::FloatVector V, int K>
ISOMER_VINLINE int64_t row_channels(const RowCtx& r, int64_t inner0, int64_t inner1, int64_t c_begin, int64_t c_end) {
  constexpr int L = vmv::kLanes<V>;
  const DepthwiseGeometry& g = *r.g;
  const int64_t c_mid = c_begin + (c_end - c_begin) / L * L;
  if (c_mid > c_begin) {
    int64_t kx0 = 0, kx1 = 0, ox = 0;
    for (; ox < inner0; ++ox) {
      column_taps(g, ox, kx0, kx1);
      columns<V, 1, 0>(r, ox, kx0, kx1, c_begin, c_mid);
    }
    for (; ox + 8 <= inner1; ox += 8) columns<V, 8, K>(r, ox, 0, g.k_w, c_begin, c_mid);
    for (; ox + 4 <= inner1; ox += 4) columns<V, 4, K>(r, ox, 0, g.k_w, c_begin, c_mid);
    for (; ox < inner1; ++ox) columns<V, 1, K>(r, ox, 0, g.k_w, c_begin, c_mid);
    for (; ox < g.out_w; ++ox) {
      column_taps(g, ox, kx0, kx1);
      columns<V, 1, 0>(r, ox, kx0, kx1, c_begin, c_mid);
    }
  }
  if constexpr (sizeof(V) > 16) return row_channels<HalfOf<V>, K>(r, inner0, inner1, c_mid, c_end);
  else return c_end - c_mid;
}

// Output row oy of image b; channels past the last vector of 4 through a
// zero-padded one. K as for `columns`.
template <vmv::FloatVector V, int K>
ISOMER_VINLINE void row(const DepthwiseGeometry& g, const float* x, const float* w, const float* bias, PwOp act,
                        float* y, int64_t b, int64_t oy) {
  const int64_t C = g.channels;
  const int64_t iy0 = oy * g.stride_h - g.pad_top;
  int64_t ky0 = 0, ky1 = g.k_h;
  while (ky0 < ky1 && iy0 + ky0 * g.dil_h < 0) ++ky0;
  while (ky1 > ky0 && iy0 + (ky1 - 1) * g.dil_h >= g.in_h) --ky1;
  // xr: tap row ky0's input row, at column 0.
  const RowCtx r{&g, x + (b * g.in_h + iy0 + ky0 * g.dil_h) * g.in_w * C, w, bias,
                 y + (b * g.out_h + oy) * g.out_w * C, ky0, ky1, act};
  // Columns [inner0, inner1) have every tap inside the input.
  int64_t inner0 = 0, kx0 = 0, kx1 = 0;
  while (inner0 < g.out_w && (column_taps(g, inner0, kx0, kx1), kx0 != 0 || kx1 != g.k_w)) ++inner0;
  int64_t inner1 = inner0;
  while (inner1 < g.out_w && (column_taps(g, inner1, kx0, kx1), kx0 == 0 && kx1 == g.k_w)) ++inner1;
  const int64_t left = row_channels<V, K>(r, inner0, inner1, 0, C);
  constexpr int L = vmv::kLanes<V>;
  for (int64_t ox = 0; ox < g.out_w && left > 0; ++ox) {
    alignas(64) float acc[L] = {};
    const int64_t c0 = C - left;
    for (int64_t c = c0; c < C; ++c) acc[c - c0] = bias[c];
    column_taps(g, ox, kx0, kx1);
    const int64_t ix0 = ox * g.stride_w - g.pad_left;
    for (int64_t ky = ky0; ky < ky1; ++ky)
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const float* xp = x + ((b * g.in_h + iy0 + ky * g.dil_h) * g.in_w + ix0 + kx * g.dil_w) * C;
        const float* wp = w + (ky * g.k_w + kx) * C;
        for (int64_t c = c0; c < C; ++c) acc[c - c0] += xp[c] * wp[c];
      }
    vmv::store(acc, activate(vmv::load<V>(acc), act));
    for (int64_t c = c0; c < C; ++c) r.yr[ox * C + c] = acc[c - c0];
  }
}

template <vmv::FloatVector V>
ISOMER_VINLINE void rows_on(const DepthwiseGeometry& g, const float* x, const float* w, const float* bias, PwOp act,
                            float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / g.out_h, oy = r % g.out_h;
    if (g.k_w == 3) row<V, 3>(g, x, w, bias, act, y, b, oy);
    else if (g.k_w == 5) row<V, 5>(g, x, w, bias, act, y, b, oy);
    else row<V, 0>(g, x, w, bias, act, y, b, oy);
  }
}

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void rows_avx512(const DepthwiseGeometry& g, const float* x, const float* w,
                                                     const float* bias, PwOp act, float* y, int64_t r0, int64_t r1) {
  rows_on<vm16::v16>(g, x, w, bias, act, y, r0, r1);
}
ISOMER_TARGET_AVX2 ISOMER_FLATTEN void rows_avx2(const DepthwiseGeometry& g, const float* x, const float* w,
                                                 const float* bias, PwOp act, float* y, int64_t r0, int64_t r1) {
  rows_on<vm8::v8>(g, x, w, bias, act, y, r0, r1);
}
ISOMER_FLATTEN void rows_baseline(const DepthwiseGeometry& g, const float* x, const float* w, const float* bias,
                                  PwOp act, float* y, int64_t r0, int64_t r1) {
  rows_on<vm8::v8>(g, x, w, bias, act, y, r0, r1);
}

}  // namespace

bool depthwise_activation_supported(PwOp act) {
  return act == PwOp::Copy || act == PwOp::Relu || act == PwOp::Silu || act == PwOp::Sigmoid;
}

void depthwise_nhwc(const DepthwiseGeometry& g, const float* x, const float* w, const float* bias, PwOp act,
                    float* y, int threads) {
  using Rows = void (*)(const DepthwiseGeometry&, const float*, const float*, const float*, PwOp, float*, int64_t,
                        int64_t);
  static const Rows rows = [] {
    switch (best_vector_isa()) {
      case VectorIsa::Avx512: return rows_avx512;
      case VectorIsa::Avx2: return rows_avx2;
      default: return rows_baseline;
    }
  }();
  const int64_t total = g.batch * g.out_h;
  parallel_teams(static_cast<int>(std::min<int64_t>(threads, total)), [&](int t, int team) {
    const int64_t r0 = total * t / team, r1 = total * (t + 1) / team;
    rows(g, x, w, bias, act, y, r0, r1);
  });
}

}  // namespace isomer::kernels
