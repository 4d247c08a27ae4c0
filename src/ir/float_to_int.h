#pragma once
// Float -> integer conversion of values isomer did not compute itself (model data,
// attributes, evaluated results). C++ leaves converting NaN, an infinity or a value
// outside the target's range undefined, and a hostile model can supply any of them,
// so every such conversion goes through one of these. All truncate toward zero, as
// C++ and ONNX's Cast do.
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "ir/error.h"

namespace isomer {

// trunc(v) if T holds it; nullopt for NaN, an infinity or a value outside T's range.
template <class T>
std::optional<T> float_to_int(double v) {
  static_assert(std::is_integral_v<T>);
  const double t = std::trunc(v);
  // T's range is [min, 2^digits): both bounds are powers of two (or zero), exact in a
  // double, so the comparison is exact. NaN fails both comparisons.
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (!(t >= lo && t < hi)) return std::nullopt;
  return static_cast<T>(t);
}

// v itself if it is an integer T holds; nullopt otherwise (a fraction, NaN, infinite,
// out of range).
template <class T>
std::optional<T> exact_float_to_int(double v) {
  if (v != std::trunc(v)) return std::nullopt;
  return float_to_int<T>(v);
}

// trunc(v) clamped to T's range, infinities included, and NaN -> 0: bounds and fill
// values isomer's runtime and its evaluator turn into integers.
template <class T>
T cast_float_to_int(double v) {
  if (std::optional<T> exact = float_to_int<T>(v)) return *exact;
  if (std::isnan(v)) return 0;
  return v < 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
}

// trunc(v) where int64 holds it; NaN, an infinity or a value outside int64 gives INT64_MIN
// (x86's "integer indefinite", which ONNX Runtime's Cast gives there; ONNX leaves it
// undefined). The runtime's integer kernels load floats through this; cast_float_to below
// says what Cast makes of it for each target.
inline int64_t cast_float_to_int64(double v) {
  if (std::optional<int64_t> exact = float_to_int<int64_t>(v)) return *exact;
  return std::numeric_limits<int64_t>::min();
}

// trunc(v) where int32 holds it, else INT32_MIN (x86's 32-bit "integer indefinite").
inline int32_t cast_float_to_int32(double v) {
  if (std::optional<int32_t> exact = float_to_int<int32_t>(v)) return *exact;
  return std::numeric_limits<int32_t>::min();
}

// How Cast turns a float into integer type I, as ONNX Runtime's Cast does on x86 (ONNX
// leaves NaN, infinities and values outside I undefined): int64 and uint32 through the
// 64-bit conversion above, int32 and the narrower types through the 32-bit one, then
// modulo 2^bits (300.0 is 44 as int8, 3e9 is 0 as int16); uint64 converts v - 2^63 where
// v >= 2^63 and sets the top bit again (an infinity is 0, NaN 2^63). ONNX Runtime's uint32
// depends on where an element stands (its vector loop converts as uint64 does here, its
// scalar tail as below), so no rule matches it everywhere; this one is its tail's.
template <class I>
I cast_float_to(double v) {
  static_assert(std::is_integral_v<I>);
  if constexpr (std::is_same_v<I, uint64_t>) {
    constexpr double two63 = 9223372036854775808.0;
    if (v >= two63) return static_cast<uint64_t>(cast_float_to_int64(v - two63)) ^ (uint64_t{1} << 63);
    return static_cast<uint64_t>(cast_float_to_int64(v));
  } else if constexpr (sizeof(I) == 8 || std::is_same_v<I, uint32_t>) {
    return static_cast<I>(cast_float_to_int64(v));
  } else {
    return static_cast<I>(cast_float_to_int32(v));
  }
}

// trunc(v) clamped to T's range (an infinity too). For values that are numbers rather
// than results of integer arithmetic: bounds (Clip's defaults are the type's limits),
// fill values, Cast (ONNX leaves out-of-range results undefined; isomer's runtime,
// built on oneDNN, saturates). NaN has no integer value: an Error naming `what`.
template <class T>
T saturate_float_to_int(double v, std::string_view what) {
  if (std::isnan(v)) throw Error(std::string(what) + ": NaN has no integer value");
  return cast_float_to_int<T>(v);
}

// "int8", "uint64", ... for messages.
template <class T>
std::string int_type_name() {
  return std::string(std::is_signed_v<T> ? "int" : "uint") +
         std::to_string(std::numeric_limits<T>::digits + std::is_signed_v<T>);
}

// trunc(v), which must fit T: otherwise an Error naming `what` and the value.
template <class T>
T checked_float_to_int(double v, std::string_view what) {
  std::optional<T> exact = float_to_int<T>(v);
  if (!exact) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    throw Error(std::string(what) + ": " + buf + " is outside the range of " + int_type_name<T>());
  }
  return *exact;
}

}  // namespace isomer
