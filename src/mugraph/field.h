#pragma once
// The field in which μGraphs are verified: p = 2305843009213691579, a 61-bit safe
// prime (p = 2q + 1 with q = 1152921504606845789 prime; both are checked with
// Miller-Rabin in tests/cpp/mugraph_field_test.cpp), and g = 4, a quadratic
// residue and so of order q. A real value x is represented by its images in Z_p and
// Z_q; +, -, *, / act on both. exp(x) = g^(x mod q) mod p is a homomorphism from
// (Z_q, +) into (Z_p^*, *), so exp(a + b) = exp(a) exp(b) holds exactly, which is
// what online softmax's rescaling needs; the image of exp(x) in Z_q cannot be
// computed, so a value made by exp has no q part (feeding it to another exp is
// refused, never guessed). Operators without algebraic semantics (sqrt, erf, tanh,
// relu, ...) are uninterpreted functions: a random function of the argument's image
// (a keyed hash), the same on both sides of a comparison. An additive mask's -inf
// is kept as a value of its own (exp(-inf) = 0 exactly).
#include <cstdint>
#include <string_view>

namespace isomer::mugraph {

inline constexpr uint64_t kSafeP = 2305843009213691579ull;
inline constexpr uint64_t kSafeQ = (kSafeP - 1) / 2;
inline constexpr uint64_t kGenerator = 4;

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m);
uint64_t pow_mod(uint64_t b, uint64_t e, uint64_t m);
// Deterministic Miller-Rabin for 64-bit numbers (the first 12 primes as bases).
bool is_prime_u64(uint64_t n);

struct FieldVal {
  enum class Kind : uint8_t { Finite, NegInf, Poison };
  uint64_t p = 0;          // image mod kSafeP
  uint64_t q = 0;          // image mod kSafeQ (when q_known)
  bool q_known = true;
  Kind kind = Kind::Finite;

  bool finite() const { return kind == Kind::Finite; }
  bool operator==(const FieldVal& o) const {
    if (kind != o.kind) return false;
    if (kind != Kind::Finite) return true;
    return p == o.p && (!q_known || !o.q_known || q == o.q);
  }
  static FieldVal poison() { return FieldVal{0, 0, false, Kind::Poison}; }
  static FieldVal neg_inf() { return FieldVal{0, 0, true, Kind::NegInf}; }
  static FieldVal of_int(int64_t v);
  // The exact image of a double (a dyadic rational); -inf is NegInf, NaN and +inf poison.
  static FieldVal of_double(double d);
};

FieldVal operator+(const FieldVal& a, const FieldVal& b);
FieldVal operator-(const FieldVal& a, const FieldVal& b);
FieldVal operator*(const FieldVal& a, const FieldVal& b);
FieldVal operator/(const FieldVal& a, const FieldVal& b);
FieldVal field_exp(const FieldVal& x);
// An uninterpreted function `name` of one or two arguments (b may be absent).
FieldVal field_uf(std::string_view name, const FieldVal& a, const FieldVal* b = nullptr);
// The stabilizing shift of online softmax: any value works (it cancels), so the
// field picks an unpredictable one; -inf arguments are ignored as a real max would.
FieldVal field_shift(const FieldVal& a, const FieldVal& b);

}  // namespace isomer::mugraph
