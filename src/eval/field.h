#pragma once
// Arithmetic in the prime field F_p with p = 2^61 - 1 (a Mersenne prime), used for
// fingerprinting graphs and for probabilistic verification. Reduction is explicit;
// no native integer overflow is ever relied upon.
#include <cstdint>
#include <vector>

#include "eval/array.h"

namespace isomer {

class Fp {
 public:
  static constexpr uint64_t kP = (uint64_t{1} << 61) - 1;

  constexpr Fp() = default;
  constexpr explicit Fp(uint64_t v) : v_(reduce(v)) {}
  static constexpr Fp from_signed(int64_t v) {
    return v >= 0 ? Fp(static_cast<uint64_t>(v)) : Fp() - Fp(static_cast<uint64_t>(-(v + 1)) + 1);
  }
  constexpr uint64_t value() const { return v_; }

  friend constexpr Fp operator+(Fp a, Fp b) { return raw(reduce(a.v_ + b.v_)); }
  friend constexpr Fp operator-(Fp a, Fp b) { return raw(reduce(a.v_ + kP - b.v_)); }
  friend constexpr Fp operator*(Fp a, Fp b) {
    unsigned __int128 p = static_cast<unsigned __int128>(a.v_) * b.v_;
    uint64_t lo = static_cast<uint64_t>(p & kP);
    uint64_t hi = static_cast<uint64_t>(p >> 61);
    return raw(reduce(lo + hi));
  }
  constexpr Fp operator-() const { return Fp() - *this; }
  Fp& operator+=(Fp o) { return *this = *this + o; }
  Fp& operator-=(Fp o) { return *this = *this - o; }
  Fp& operator*=(Fp o) { return *this = *this * o; }
  constexpr bool operator==(const Fp& o) const { return v_ == o.v_; }
  constexpr bool operator!=(const Fp& o) const { return v_ != o.v_; }

  Fp pow(uint64_t e) const {
    Fp r(1), b = *this;
    while (e) {
      if (e & 1) r *= b;
      b *= b;
      e >>= 1;
    }
    return r;
  }
  Fp inverse() const { return pow(kP - 2); }  // Fermat; inverse of 0 is 0

 private:
  static constexpr uint64_t reduce(uint64_t x) {
    x = (x & kP) + (x >> 61);
    return x >= kP ? x - kP : x;
  }
  static constexpr Fp raw(uint64_t v) {
    Fp f;
    f.v_ = v;
    return f;
  }
  uint64_t v_ = 0;
};

// A tensor over F_p.
using FieldArray = Array<Fp>;

}  // namespace isomer
