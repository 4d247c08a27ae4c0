#pragma once
// Float32 math written so that a loop over an array of them vectorizes: no
// branches, no calls into libm, integer/float reinterpretation through
// std::bit_cast. Accuracy is a few ulp on the ranges ML models use (checked
// against libm in tests/cpp/kernels_test.cpp), which is what ONNX Runtime's and
// oneDNN's own vector math give.
#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#define ISOMER_VINLINE inline __attribute__((always_inline))

namespace isomer::kernels::vm {

ISOMER_VINLINE float select(bool c, float a, float b) { return c ? a : b; }

// 2^n for integer-valued float n in [-126, 127].
ISOMER_VINLINE float pow2i(float n) {
  int32_t i = static_cast<int32_t>(n) + 127;
  return std::bit_cast<float>(i << 23);
}

// e^x. Range reduction x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for
// e^r, 2^n by building the exponent (in two factors when n is 128, the top of the
// range). Saturates to 0 below -87.3 and to +inf above 88.72. The clamps are
// written as (a < b ? a : b), which is exactly minps/maxps.
ISOMER_VINLINE float exp(float x) {
  const float hi = 88.7228393554688f, lo = -87.3365478515625f;
  float xc = x < hi ? x : hi;
  xc = xc > lo ? xc : lo;
  const float n = std::nearbyint(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float top = n > 127.5f ? 1.0f : 0.0f;
  float y = p * pow2i(n - top) * (1.0f + top);
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y;
}

// Natural logarithm. x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) from a
// polynomial in m - 1. log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
ISOMER_VINLINE float log(float x) {
  int32_t bits = std::bit_cast<int32_t>(x);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  bool small = m < 0.707106781186547524f;
  e = small ? e - 1 : e;
  m = small ? m + m : m;
  float f = m - 1.0f;
  float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float ef = static_cast<float>(e);
  float y = f * z * p;
  y = y + ef * -2.12194440e-4f;
  y = y - 0.5f * z;
  y = f + y + ef * 0.693359375f;
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  y = x == INFINITY ? INFINITY : y;
  return x != x ? x : y;
}

ISOMER_VINLINE float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the
// exponential form elsewhere.
ISOMER_VINLINE float tanh(float x) {
  float a = std::fabs(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float near0 = x + x * z * p;
  float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  big = std::copysign(big, x);
  return a < 0.625f ? near0 : big;
}

// erf: a Taylor polynomial below 0.5, Abramowitz & Stegun 7.1.26 above
// (absolute error under 1.5e-7 in exact arithmetic, 3.2e-7 in float).
ISOMER_VINLINE float erf(float x) {
  float a = std::fabs(x);
  float z = x * x;
  // Taylor: 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320); the next
  // term is below 2e-8 for |x| < 0.5.
  float p = -8.5483270e-4f;
  p = p * z + 5.2239776e-3f;
  p = p * z - 2.6866171e-2f;
  p = p * z + 1.1283792e-1f;
  p = p * z - 3.7612639e-1f;
  p = p * z + 1.1283791671e+0f;
  float near0 = x * p;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  float far = 1.0f - q * t * exp(-z);
  far = std::copysign(far, x);
  return a < 0.5f ? near0 : far;
}

// erf on [0, 4] for GELU, piecewise: 16 intervals of 0.25, on each a degree-5
// polynomial in the offset u from the interval's start (coefficient k of interval
// i at kErfPieces[k][i]; least-squares fits of erf in double precision at 400
// Chebyshev points of each interval, rounded to float). Evaluated in float its
// error is at most 7e-8 (an ulp of 1) over [0, 4]; past 4, erf is 1 in float
// (1 - 1.5e-8), and z is clamped to 4. A vector takes each coefficient from a
// 16-lane table with one permute (vpermps), no exp, no division: GELU costs a
// third of the A&S form's erf below.
inline constexpr float kErfPieces[6][16] = {
{2.470240679e-09f, 2.763263881e-01f, 5.204998851e-01f, 7.111556530e-01f, 8.427007794e-01f, 9.229001403e-01f, 9.661051631e-01f, 9.866716862e-01f, 9.953222871e-01f, 9.985373020e-01f, 9.995930195e-01f, 9.998993874e-01f, 9.999778867e-01f, 9.999957085e-01f, 9.999992847e-01f, 9.999998808e-01f},
{1.128378510e+00f, 1.060012460e+00f, 8.787811399e-01f, 6.429306865e-01f, 4.151079953e-01f, 2.365218848e-01f, 1.189308017e-01f, 5.277515203e-02f, 2.066693082e-02f, 7.142212708e-03f, 2.178205410e-03f, 5.862364778e-04f, 1.392366394e-04f, 2.918364044e-05f, 5.397953828e-06f, 8.810918075e-07f},
{3.144291622e-05f, -2.649251223e-01f, -4.393230081e-01f, -4.821781516e-01f, -4.151301682e-01f, -2.956868410e-01f, -1.784196049e-01f, -9.236382693e-02f, -4.133150354e-02f, -1.606525481e-02f, -5.441991147e-03f, -1.610329724e-03f, -4.169774475e-04f, -9.460688307e-05f, -1.882734068e-05f, -3.288989546e-06f},
{-3.766310215e-01f, -3.104992509e-01f, -1.476454288e-01f, 2.642009594e-02f, 1.387419105e-01f, 1.681411862e-01f, 1.391725242e-01f, 9.029362351e-02f, 4.818369076e-02f, 2.163985185e-02f, 8.285714313e-03f, 2.726659179e-03f, 7.753701066e-04f, 1.912622829e-04f, 4.104107575e-05f, 7.677347639e-06f},
{3.473182674e-03f, 1.370840669e-01f, 1.923896372e-01f, 1.538456082e-01f, 6.649830192e-02f, -1.083013602e-02f, -4.794137925e-02f, -4.924293235e-02f, -3.418057039e-02f, -1.843136735e-02f, -8.114748634e-03f, -2.988383872e-03f, -9.333984344e-04f, -2.494594373e-04f, -5.739207700e-05f, -1.141575649e-05f},
{1.035275310e-01f, 4.532604665e-02f, -2.703478374e-02f, -6.670883298e-02f, -6.106100976e-02f, -3.064394183e-02f, -2.303370275e-03f, 1.132792793e-02f, 1.244417578e-02f, 8.360580541e-03f, 4.236427136e-03f, 1.727717579e-03f, 5.842671962e-04f, 1.665817836e-04f, 4.046021786e-05f, 8.430602065e-06f},
};
ISOMER_VINLINE float erf_pieces(float z) {  // z in [0, 4]
  const int i = std::min(static_cast<int>(z * 4.0f), 15);
  const float u = z - static_cast<float>(i) * 0.25f;
  float p = kErfPieces[5][i];
  for (int k = 4; k >= 0; --k) p = p * u + kErfPieces[k][i];
  return p;
}
// x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) with the piecewise erf: 0.5 x + 0.5 x e.
ISOMER_VINLINE float gelu_erf(float x) {
  if (std::isnan(x)) return x;
  const float z = std::fmin(std::fabs(x) * 0.70710678118654752f, 4.0f);
  const float e = std::copysign(erf_pieces(z), x);
  const float h = 0.5f * x;
  return h * e + h;
}
ISOMER_VINLINE float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// a^b for any a, b (ONNX Pow on floats): |a|^b = e^(b log|a|), negative a only
// for integer b (odd b negates), NaN otherwise; 0^b, 1^b and b = 0 exactly.
ISOMER_VINLINE float pow(float a, float b) {
  float r = exp(b * log(std::fabs(a)));
  float bi = std::nearbyint(b);
  bool integer = bi == b;
  float half = bi * 0.5f;
  bool odd = integer && half != std::nearbyint(half);
  float neg = odd ? -r : r;
  neg = integer ? neg : NAN;
  r = a < 0.0f ? neg : r;
  float zero = b > 0.0f ? 0.0f : (b < 0.0f ? INFINITY : 1.0f);
  zero = (b < 0.0f && odd && std::signbit(a)) ? -INFINITY : zero;
  r = a == 0.0f ? zero : r;
  r = b == 0.0f ? 1.0f : r;
  r = a == 1.0f ? 1.0f : r;
  return r;
}

}  // namespace isomer::kernels::vm

// The same functions on a vector of floats at a time, with GCC's vector extension,
// written once over the vector type V (8 lanes: vm8, 16: vm16): the selects are
// written so that they become minps/maxps/blendvps (vblendmps with a mask under
// AVX-512), and rounding uses the 1.5 * 2^23 trick, so an exp is about 23
// instructions per vector (half of what the compiler makes of the scalar form,
// whose NaN-exact clamps become compare-and-blend chains). Loops over arrays use
// these and the scalar forms for their tails; both give the same results to within
// an ulp, and every lane of a V computes what the same lane of any other width does.
namespace isomer::kernels::vmv {

// A GCC vector of floats (the int vector of the same lanes is what its comparisons give).
template <class V>
concept FloatVector = requires(V v) {
  { v[0] } -> std::convertible_to<float>;
  requires sizeof(V) % 16 == 0;
  requires !std::is_arithmetic_v<V>;
};

template <FloatVector V>
using IntOf = decltype(V{} < V{});

template <FloatVector V>
inline constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));

// A broadcast (`V{} + x` would add +0.0 first and turn -0.0 into +0.0), in the
// form GCC 12 compiles well where it is used. Where the whole translation unit
// targets the vector unit (generated kernels, -march=native), an initializer of
// every lane: constants fold into vector constants (the lane loop's form made the
// generated LayerNorm+GELU kernel 12% slower). Where only a function's target
// attribute does (the runtime's AVX-512 entry points), the lane loop, one
// vbroadcastss: there the initializer became 16 masked broadcasts of a variable.
template <FloatVector V, size_t... I>
ISOMER_VINLINE V splat_lanes(float x, std::index_sequence<I...>) {
  return V{((void)I, x)...};
}
template <FloatVector V>
ISOMER_VINLINE V splat(float x) {
#if defined(__AVX2__)
  return splat_lanes<V>(x, std::make_index_sequence<kLanes<V>>{});
#else
  V v;
  for (int l = 0; l < kLanes<V>; ++l) v[l] = x;
  return v;
#endif
}

template <FloatVector V>
ISOMER_VINLINE IntOf<V> bits(V v) { return __builtin_bit_cast(IntOf<V>, v); }
template <FloatVector V>
ISOMER_VINLINE V floats(IntOf<V> v) { return __builtin_bit_cast(V, v); }

template <FloatVector V>
ISOMER_VINLINE V load(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <FloatVector V>
ISOMER_VINLINE void store(float* p, V v) { __builtin_memcpy(p, &v, sizeof v); }

// v rotated down by H lanes (lane l holds v[l + H], wrapping around).
template <int H, FloatVector V, size_t... I>
ISOMER_VINLINE V rotate_lanes(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, static_cast<int>((I + H) % sizeof...(I))...);
}

// The sum of the lanes, by halves: ((v0 + v4) + (v2 + v6)) + ... for 8. Shuffles in
// registers: a tree over a copy in memory read 64-byte stores back as floats, which
// the store buffer does not forward (a tenth of a 197-wide softmax row).
template <FloatVector V, int H = kLanes<V> / 2>
ISOMER_VINLINE float hsum(V v) {
  if constexpr (H == 0) return v[0];
  else return hsum<V, H / 2>(v + rotate_lanes<H>(v, std::make_index_sequence<kLanes<V>>{}));
}

// The largest lane, the same way (which lane a NaN wins against depends on the
// order: callers that propagate NaN check for it apart).
template <FloatVector V, int H = kLanes<V> / 2>
ISOMER_VINLINE float hmax(V v) {
  if constexpr (H == 0) return v[0];
  else {
    const V r = rotate_lanes<H>(v, std::make_index_sequence<kLanes<V>>{});
    return hmax<V, H / 2>(v > r ? v : r);
  }
}

// e^x = 2^n e^r: range reduction x = n ln2 + r (|r| <= ln2/2, n read from t's low
// mantissa bits as an integer: bits(t) - bits(magic)) and e^r as a degree-7
// polynomial, evaluated in Estrin's form: 4 dependent steps instead of Horner's 7
// (a loop over an array is latency bound; exp+sum went from 0.87 to 0.55 ns per
// element on one Zen 2 core). The input is not clamped: out of range the
// arithmetic gives garbage that the callers' selects replace.
template <FloatVector V>
struct ExpParts {
  V p;         // e^r
  IntOf<V> n;  // the power of two
};
template <FloatVector V>
ISOMER_VINLINE ExpParts<V> exp_parts(V x) {
  const V magic = splat<V>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V t = x * splat<V>(1.44269504088896341f) + magic;
  const V n = t - magic;
  V r = x - n * splat<V>(0.693359375f);
  r = r - n * splat<V>(-2.12194440e-4f);
  // e^r - 1 - r = r^2 (c2 + c3 r + r^2 (c4 + c5 r) + r^4 (c6 + c7 r))
  const V r2 = r * r;
  const V a = splat<V>(1.6666665459e-1f) * r + splat<V>(5.0000001201e-1f);
  const V b = splat<V>(8.3334519073e-3f) * r + splat<V>(4.1665795894e-2f);
  const V c = splat<V>(1.9875691500e-4f) * r + splat<V>(1.3981999507e-3f);
  return {(c * (r2 * r2) + (b * r2 + a)) * r2 + (r + splat<V>(1.0f)), bits(t) - bits(magic)};
}

// e^x: +inf above 88.72, NaN for NaN, and 0 below -86.99, where e^x < 2^-125 (the
// scalar form goes down to -87.34: building 2^(n-1) flushes n = -126, which costs
// 4 instructions per vector to avoid). Two selects after the arithmetic (a NaN
// compares false to both bounds and stays NaN) are 4 instructions where clamping
// first and fixing up after took 8.
template <FloatVector V>
ISOMER_VINLINE V exp(V x) {
  const ExpParts<V> e = exp_parts(x);
  // 2^(n - 1), then times 2 (n is 128 at the top).
  const V y = e.p * floats<V>((e.n + 126) << 23) * splat<V>(2.0f);
  return x > splat<V>(88.7228393554688f) ? splat<V>(INFINITY) : x < splat<V>(-87.3365478515625f) ? splat<V>(0.0f) : y;
}

// e^x for x <= 0 or NaN (softmax's x - max): one select, since nothing overflows,
// and 2^n as one factor (n >= -126 wherever the result is kept). 13% faster than
// exp in softmax's exp-and-sum loop.
template <FloatVector V>
ISOMER_VINLINE V exp_nonpositive(V x) {
  const ExpParts<V> e = exp_parts(x);
  const V y = e.p * floats<V>((e.n + 127) << 23);
  return x < splat<V>(-87.3365478515625f) ? splat<V>(0.0f) : y;
}

template <FloatVector V>
ISOMER_VINLINE V sigmoid(V x) { return splat<V>(1.0f) / (splat<V>(1.0f) + exp(-x)); }

template <FloatVector V>
ISOMER_VINLINE V tanh(V x) {
  const IntOf<V> sign = bits(x) & int32_t(0x80000000);
  const V a = floats<V>(bits(x) & int32_t(0x7fffffff));
  const V z = x * x;
  V p = splat<V>(-5.70498872745e-3f);
  p = p * z + splat<V>(2.06390887954e-2f);
  p = p * z + splat<V>(-5.37397155531e-2f);
  p = p * z + splat<V>(1.33314422036e-1f);
  p = p * z + splat<V>(-3.33332819422e-1f);
  const V near0 = x + x * z * p;
  V big = splat<V>(1.0f) - splat<V>(2.0f) / (exp(a + a) + splat<V>(1.0f));
  big = floats<V>(bits(big) | sign);
  return a < splat<V>(0.625f) ? near0 : big;
}

template <FloatVector V>
ISOMER_VINLINE V erf(V x) {
  const IntOf<V> sign = bits(x) & int32_t(0x80000000);
  const V a = floats<V>(bits(x) & int32_t(0x7fffffff));
  const V z = x * x;
  V p = splat<V>(-8.5483270e-4f);
  p = p * z + splat<V>(5.2239776e-3f);
  p = p * z + splat<V>(-2.6866171e-2f);
  p = p * z + splat<V>(1.1283792e-1f);
  p = p * z + splat<V>(-3.7612639e-1f);
  p = p * z + splat<V>(1.1283791671e+0f);
  const V near0 = x * p;
  const V t = splat<V>(1.0f) / (splat<V>(1.0f) + splat<V>(0.3275911f) * a);
  V q = splat<V>(1.061405429f);
  q = q * t + splat<V>(-1.453152027f);
  q = q * t + splat<V>(1.421413741f);
  q = q * t + splat<V>(-0.284496736f);
  q = q * t + splat<V>(0.254829592f);
  // -z <= 0: exp_nonpositive's one select (the same values: where it keeps a 2^-126
  // that exp flushes, 1 - q t e^-z rounds to 1 either way).
  V far = splat<V>(1.0f) - q * t * exp_nonpositive(-z);
  far = floats<V>(bits(far) | sign);
  return a < splat<V>(0.5f) ? near0 : far;
}

// Coefficient k of each lane's interval (vm::kErfPieces): one permute for 16
// lanes, a two-table permute for 8, a lane loop otherwise.
template <FloatVector V>
ISOMER_VINLINE V erf_piece(int k, IntOf<V> i) {
  using T16 = float __attribute__((vector_size(64)));
  using T8 = float __attribute__((vector_size(32)));
  if constexpr (kLanes<V> == 16) {
    return __builtin_shuffle(load<T16>(vm::kErfPieces[k]), i);
  } else if constexpr (kLanes<V> == 8) {
    return __builtin_shuffle(load<T8>(vm::kErfPieces[k]), load<T8>(vm::kErfPieces[k] + 8), i);
  } else {
    V v;
    for (int l = 0; l < kLanes<V>; ++l) v[l] = vm::kErfPieces[k][i[l] & 15];
    return v;
  }
}

// GELU with the piecewise erf (vm::gelu_erf); every lane as the scalar form.
template <FloatVector V>
ISOMER_VINLINE V gelu_erf(V x) {
  const IntOf<V> sign = bits(x) & int32_t(0x80000000);
  V z = floats<V>(bits(x) & int32_t(0x7fffffff)) * splat<V>(0.70710678118654752f);
  z = z < splat<V>(4.0f) ? z : splat<V>(4.0f);  // NaN -> 4 (the result is NaN from x)
  IntOf<V> i = __builtin_convertvector(z * splat<V>(4.0f), IntOf<V>);
  i = i < 15 ? i : 15;
  const V u = z - __builtin_convertvector(i, V) * splat<V>(0.25f);
  V p = erf_piece<V>(5, i);
  for (int k = 4; k >= 0; --k) p = p * u + erf_piece<V>(k, i);
  const V e = floats<V>(bits(p) | sign);
  const V h = splat<V>(0.5f) * x;
  return h * e + h;
}
template <FloatVector V>
ISOMER_VINLINE V gelu_tanh(V x) {
  return splat<V>(0.5f) * x *
         (splat<V>(1.0f) + tanh(splat<V>(0.79788456080286536f) * (x + splat<V>(0.044715f) * x * x * x)));
}

}  // namespace isomer::kernels::vmv

// One namespace a width, with the same names, so that code written against one
// (`vm8::exp`, `vm8::load`, `vm8::vf`) moves to the other by its namespace alone.
#define ISOMER_VM_WIDTH(NS, LANES, TYPE)                                                      \
  namespace isomer::kernels::NS {                                                              \
  using TYPE = float __attribute__((vector_size(4 * LANES)));                                  \
  using TYPE##i = int32_t __attribute__((vector_size(4 * LANES)));                             \
  using vf = TYPE;                                                                             \
  inline constexpr int lanes = LANES;                                                          \
  ISOMER_VINLINE TYPE splat(float x) { return vmv::splat<TYPE>(x); }                           \
  ISOMER_VINLINE TYPE load(const float* p) { return vmv::load<TYPE>(p); }                      \
  ISOMER_VINLINE void store(float* p, TYPE v) { vmv::store(p, v); }                            \
  using vmv::bits, vmv::hsum, vmv::hmax, vmv::exp_parts, vmv::exp, vmv::exp_nonpositive;       \
  using vmv::sigmoid, vmv::tanh, vmv::erf, vmv::gelu_erf, vmv::gelu_tanh;                      \
  ISOMER_VINLINE TYPE floats(TYPE##i v) { return vmv::floats<TYPE>(v); }                       \
  }

ISOMER_VM_WIDTH(vm8, 8, v8)
ISOMER_VM_WIDTH(vm16, 16, v16)
#undef ISOMER_VM_WIDTH
