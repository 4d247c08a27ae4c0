#pragma once
// Integer arithmetic on values a hostile model chooses. C++ leaves a signed sum or
// product that overflows undefined, and INT64_MIN / -1 traps (SIGFPE) as x / 0 does;
// ONNX Runtime and numpy compute integers in two's complement, so these wrap, and
// division says when it has no value. The evaluator (folding, checks) and the
// runtime's integer kernels compute through these.
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace isomer {

inline int64_t wrap_add(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
}
inline int64_t wrap_sub(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
}
inline int64_t wrap_mul(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
}
inline int64_t wrap_neg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }
inline int64_t wrap_abs(int64_t x) { return x < 0 ? wrap_neg(x) : x; }

// x + y, x - y and x * y of any element type the evaluator computes in (double,
// int64_t, field and symbolic values): wrapping where it is int64_t.
template <class T>
T add_wrapping(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) return wrap_add(x, y);
  else return x + y;
}
template <class T>
T sub_wrapping(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) return wrap_sub(x, y);
  else return x - y;
}
template <class T>
T mul_wrapping(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) return wrap_mul(x, y);
  else return x * y;
}

// x / y truncated toward zero (C and ONNX's integer Div); INT64_MIN / -1 wraps to
// INT64_MIN. No value for y == 0 (ONNX leaves it undefined).
inline std::optional<int64_t> int_div(int64_t x, int64_t y) {
  if (y == 0) return std::nullopt;
  if (y == -1) return wrap_neg(x);
  return x / y;
}

// Mod: with fmod, the remainder of int_div (the dividend's sign); without, the
// remainder of floor division (the divisor's sign, Python's %). x % -1 is 0 for every
// x (C traps on INT64_MIN % -1). No value for y == 0.
inline std::optional<int64_t> int_mod(int64_t x, int64_t y, bool fmod) {
  if (y == 0) return std::nullopt;
  if (y == -1) return 0;
  const int64_t r = x % y;
  return !fmod && r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

// A uint64 is held as its bits in an int64_t (the evaluator's integers, the runtime's
// integer groups). Addition, subtraction, multiplication and equality are the same on
// those bits; division, remainder and order are not. Quotient and remainder of the
// unsigned values (Mod's two rules agree on them); no value for y == 0.
inline std::optional<int64_t> uint_div(int64_t x, int64_t y) {
  if (y == 0) return std::nullopt;
  return static_cast<int64_t>(static_cast<uint64_t>(x) / static_cast<uint64_t>(y));
}
inline std::optional<int64_t> uint_mod(int64_t x, int64_t y) {
  if (y == 0) return std::nullopt;
  return static_cast<int64_t>(static_cast<uint64_t>(x) % static_cast<uint64_t>(y));
}
// The signed value that orders as the unsigned one does (top bit flipped); its own
// inverse, so a Max or Min of keys maps back through it too.
inline int64_t uint_order_key(int64_t x) { return x ^ std::numeric_limits<int64_t>::min(); }

}  // namespace isomer
