#pragma once
// The row kernels of softmax and normalization over a vector type V (vmath.h's
// vm8::v8 or vm16::v16), always inlined: the function that calls them (a
// target_clones clone or one [[gnu::target]] entry point per instruction set)
// decides the instructions. Partial results stay in vectors: the compiler does
// not vectorize a float reduction by itself, since that reorders the additions.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

#ifdef ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#endif

namespace isomer::kernels::rowv {

using vmv::FloatVector;
using vmv::kLanes;

// The first r (0 < r <= L) floats of a vector at p, `fill` in the other lanes, and
// their store: through a padded copy in general, masked loads and stores for 16
// lanes (AVX-512), where a row of 197 spent a fifth of its time in the copies.
// (The 16-lane forms carry the AVX-512 target, so they cannot be always_inline
// into the templates below; the entry points that instantiate these for 16 lanes
// are `flatten`, which inlines them once the template sits inside an AVX-512 body.)
template <FloatVector V>
struct Part {
  static ISOMER_VINLINE V load(const float* p, int64_t r, float fill) {
    alignas(64) float t[kLanes<V>];
    for (int l = 0; l < kLanes<V>; ++l) t[l] = l < r ? p[l] : fill;
    return vmv::load<V>(t);
  }
  static ISOMER_VINLINE void store(float* p, V v, int64_t r) {
    alignas(64) float t[kLanes<V>];
    vmv::store(t, v);
    for (int64_t l = 0; l < r; ++l) p[l] = t[l];
  }
};

#ifdef ISOMER_HAVE_ISA_TARGETS
template <>
struct Part<vm16::v16> {
  static ISOMER_TARGET_AVX512 vm16::v16 load(const float* p, int64_t r, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << r) - 1), p);
  }
  static ISOMER_TARGET_AVX512 void store(float* p, vm16::v16 v, int64_t r) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << r) - 1), v);
  }
};
#endif

// Lane sums as a tree (vmv::hsum): a chain of one add per lane was a tenth of a
// softmax row of 197 at 16 lanes.
template <FloatVector V>
ISOMER_VINLINE float lane_sum(V v) {
  return vmv::hsum(v);
}

template <FloatVector V>
ISOMER_VINLINE float sum(const float* x, int64_t n) {
  constexpr int L = kLanes<V>;
  V a = {}, b = {};
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    a += vmv::load<V>(x + j);
    b += vmv::load<V>(x + j + L);
  }
  float s = lane_sum(a + b);
  for (; j < n; ++j) s += x[j];
  return s;
}

// The sum of (x - shift)^2.
template <FloatVector V>
ISOMER_VINLINE float sum_sq(const float* x, int64_t n, float shift) {
  constexpr int L = kLanes<V>;
  V a = {}, b = {};
  const V sh = vmv::splat<V>(shift);
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    const V d = vmv::load<V>(x + j) - sh, e = vmv::load<V>(x + j + L) - sh;
    a += d * d;
    b += e * e;
  }
  float s = lane_sum(a + b);
  for (; j < n; ++j) s += (x[j] - shift) * (x[j] - shift);
  return s;
}

// The largest element (NaN if there is one, as ONNX Runtime's Max and Softmax).
template <FloatVector V>
ISOMER_VINLINE float max(const float* x, int64_t n) {
  constexpr int L = kLanes<V>;
  const float ninf = -std::numeric_limits<float>::infinity();
  V a = vmv::splat<V>(ninf), b = a;
  // NaN in the lanes that met one, 0 elsewhere. (As selects on the ordered u == u:
  // an int vector of u != u, or-ed up, became a lane-by-lane loop in GCC 12's
  // 16-lane form.)
  V seen = {};
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    const V u = vmv::load<V>(x + j), w = vmv::load<V>(x + j + L);
    a = a > u ? a : u;
    b = b > w ? b : w;
    seen = u == u ? seen : u;
    seen = w == w ? seen : w;
  }
  for (; j < n; j += L) {  // the rest by vectors, the last padded with -inf
    const V u = Part<V>::load(x + j, n - j < L ? n - j : L, ninf);
    a = a > u ? a : u;
    seen = u == u ? seen : u;
  }
  const float any = lane_sum(seen);
  if (any != any)
    for (int64_t k = 0; k < n; ++k)
      if (x[k] != x[k]) return x[k];
  return vmv::hmax(a > b ? a : b);
}

// y = exp(x - m), returns the sum of y (one pass).
template <FloatVector V>
ISOMER_VINLINE float exp_sum(const float* x, float* y, int64_t n, float m) {
  constexpr int L = kLanes<V>;
  const V mm = vmv::splat<V>(m);
  V acc = {};
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    const V e = vmv::exp_nonpositive(vmv::load<V>(x + j) - mm);
    vmv::store(y + j, e);
    acc += e;
  }
  if (j < n) {  // the tail as one vector, padded with -inf (whose exp adds 0)
    const V e = vmv::exp_nonpositive(Part<V>::load(x + j, n - j, -std::numeric_limits<float>::infinity()) - mm);
    acc += e;
    Part<V>::store(y + j, e, n - j);
  }
  return lane_sum(acc);
}

template <FloatVector V>
ISOMER_VINLINE void scale(float* y, int64_t n, float s) {
  constexpr int L = kLanes<V>;
  const V sv = vmv::splat<V>(s);
  int64_t j = 0;
  for (; j + L <= n; j += L) vmv::store(y + j, vmv::load<V>(y + j) * sv);
  if (j < n) Part<V>::store(y + j, Part<V>::load(y + j, n - j, 0.0f) * sv, n - j);
}

// y *= s, then every NaN becomes `to` (a NaN is the one value unequal to itself):
// Where(IsNaN(p), to, p) after a softmax, in the same pass.
template <FloatVector V>
ISOMER_VINLINE void scale_nan(float* y, int64_t n, float s, float to) {
  constexpr int L = kLanes<V>;
  const V sv = vmv::splat<V>(s), tv = vmv::splat<V>(to);
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    const V v = vmv::load<V>(y + j) * sv;
    vmv::store(y + j, v == v ? v : tv);
  }
  if (j < n) {
    const V v = Part<V>::load(y + j, n - j, 0.0f) * sv;
    Part<V>::store(y + j, v == v ? v : tv, n - j);
  }
}

// y = x - s.
template <FloatVector V>
ISOMER_VINLINE void shift(const float* x, float* y, int64_t n, float s) {
  constexpr int L = kLanes<V>;
  const V sv = vmv::splat<V>(s);
  int64_t j = 0;
  for (; j + L <= n; j += L) vmv::store(y + j, vmv::load<V>(x + j) - sv);
  if (j < n) Part<V>::store(y + j, Part<V>::load(x + j, n - j, 0.0f) - sv, n - j);
}

// y = (x - mean) * inv * scale (+ bias).
template <FloatVector V>
ISOMER_VINLINE void normalize(const float* x, float* y, int64_t n, float mean, float inv, const float* scale,
                              const float* bias) {
  constexpr int L = kLanes<V>;
  const V mv = vmv::splat<V>(mean), iv = vmv::splat<V>(inv);
  int64_t j = 0;
  if (bias) {
    for (; j + L <= n; j += L)
      vmv::store(y + j, (vmv::load<V>(x + j) - mv) * iv * vmv::load<V>(scale + j) + vmv::load<V>(bias + j));
    for (; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else {
    for (; j + L <= n; j += L) vmv::store(y + j, (vmv::load<V>(x + j) - mv) * iv * vmv::load<V>(scale + j));
    for (; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  }
}

// One row of softmax (log: log-softmax), max-shifted.
template <FloatVector V>
// With `nan_to`, NaNs of the result (a row of -inf) become *nan_to.
ISOMER_VINLINE void softmax(const float* x, float* y, int64_t n, bool log, const float* nan_to = nullptr) {
  float m = max<V>(x, n);
  if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: exp gives 0s, sum 0 -> NaN as ONNX Runtime
  if (log) {
    // The sum with the vector exp (its exponentials go to y, then x - m - log(sum)).
    const float ls = std::log(exp_sum<V>(x, y, n, m));
    shift<V>(x, y, n, m);
    shift<V>(y, y, n, ls);
    if (nan_to)
      for (int64_t j = 0; j < n; ++j) y[j] = std::isnan(y[j]) ? *nan_to : y[j];
  } else if (nan_to) {
    scale_nan<V>(y, n, 1.0f / exp_sum<V>(x, y, n, m), *nan_to);
  } else {
    scale<V>(y, n, 1.0f / exp_sum<V>(x, y, n, m));
  }
}

// One row of layer normalization (rms: RMSNormalization, no mean subtracted).
template <FloatVector V>
ISOMER_VINLINE void layer_norm(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                               bool rms) {
  const float mean = rms ? 0.0f : sum<V>(x, n) / static_cast<float>(n);
  const float var = sum_sq<V>(x, n, mean) / static_cast<float>(n);
  normalize<V>(x, y, n, mean, 1.0f / std::sqrt(var + eps), scale, bias);
}

}  // namespace isomer::kernels::rowv
