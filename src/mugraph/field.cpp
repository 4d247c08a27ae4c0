#include "mugraph/field.h"

#include <cmath>
#include <cstring>

namespace isomer::mugraph {

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t pow_mod(uint64_t b, uint64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  b %= m;
  while (e) {
    if (e & 1) r = mul_mod(r, b, m);
    b = mul_mod(b, b, m);
    e >>= 1;
  }
  return r;
}

bool is_prime_u64(uint64_t n) {
  if (n < 2) return false;
  static const uint64_t small[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (uint64_t p : small)
    if (n % p == 0) return n == p;
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) d >>= 1, ++s;
  for (uint64_t a : small) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s && composite; ++r) {
      x = mul_mod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

namespace {

uint64_t neg_mod(uint64_t a, uint64_t m) { return a == 0 ? 0 : m - a; }
uint64_t add_mod(uint64_t a, uint64_t b, uint64_t m) {
  uint64_t s = a + b;  // both < 2^61: no overflow
  return s >= m ? s - m : s;
}
uint64_t inv_mod(uint64_t a, uint64_t m) { return pow_mod(a, m - 2, m); }  // m prime

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// Image of a non-negative integer below 2^64.
uint64_t reduce_u64(uint64_t v, uint64_t m) { return v % m; }

}  // namespace

FieldVal FieldVal::of_int(int64_t v) {
  FieldVal f;
  uint64_t a = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  f.p = reduce_u64(a, kSafeP);
  f.q = reduce_u64(a, kSafeQ);
  if (v < 0) f.p = neg_mod(f.p, kSafeP), f.q = neg_mod(f.q, kSafeQ);
  return f;
}

FieldVal FieldVal::of_double(double d) {
  if (std::isnan(d) || d == INFINITY) return poison();
  if (d == -INFINITY) return neg_inf();
  int e = 0;
  double m = std::frexp(d, &e);  // d = m 2^e, 0.5 <= |m| < 1
  // m 2^53 is an integer exactly; d = (m 2^53) 2^(e - 53).
  int64_t mant = static_cast<int64_t>(std::ldexp(m, 53));
  int shift = e - 53;
  FieldVal f = of_int(mant);
  if (shift > 0) {
    f.p = mul_mod(f.p, pow_mod(2, static_cast<uint64_t>(shift), kSafeP), kSafeP);
    f.q = mul_mod(f.q, pow_mod(2, static_cast<uint64_t>(shift), kSafeQ), kSafeQ);
  } else if (shift < 0) {
    f.p = mul_mod(f.p, inv_mod(pow_mod(2, static_cast<uint64_t>(-shift), kSafeP), kSafeP), kSafeP);
    f.q = mul_mod(f.q, inv_mod(pow_mod(2, static_cast<uint64_t>(-shift), kSafeQ), kSafeQ), kSafeQ);
  }
  return f;
}

FieldVal operator+(const FieldVal& a, const FieldVal& b) {
  using K = FieldVal::Kind;
  if (a.kind == K::Poison || b.kind == K::Poison) return FieldVal::poison();
  if (a.kind == K::NegInf || b.kind == K::NegInf) return FieldVal::neg_inf();  // -inf + finite, -inf + -inf
  return FieldVal{add_mod(a.p, b.p, kSafeP), add_mod(a.q, b.q, kSafeQ), a.q_known && b.q_known,
                  K::Finite};
}

FieldVal operator-(const FieldVal& a, const FieldVal& b) {
  using K = FieldVal::Kind;
  if (a.kind == K::Poison || b.kind != K::Finite) return FieldVal::poison();  // x - (-inf) = +inf
  if (a.kind == K::NegInf) return FieldVal::neg_inf();
  return FieldVal{add_mod(a.p, neg_mod(b.p, kSafeP), kSafeP), add_mod(a.q, neg_mod(b.q, kSafeQ), kSafeQ),
                  a.q_known && b.q_known, K::Finite};
}

FieldVal operator*(const FieldVal& a, const FieldVal& b) {
  // -inf times a value of unknown sign has no image.
  if (!a.finite() || !b.finite()) return FieldVal::poison();
  return FieldVal{mul_mod(a.p, b.p, kSafeP), mul_mod(a.q, b.q, kSafeQ), a.q_known && b.q_known,
                  FieldVal::Kind::Finite};
}

FieldVal operator/(const FieldVal& a, const FieldVal& b) {
  if (!a.finite() || !b.finite() || b.p == 0) return FieldVal::poison();
  bool qk = a.q_known && b.q_known && b.q != 0;
  return FieldVal{mul_mod(a.p, inv_mod(b.p, kSafeP), kSafeP), qk ? mul_mod(a.q, inv_mod(b.q, kSafeQ), kSafeQ) : 0,
                  qk, FieldVal::Kind::Finite};
}

FieldVal field_exp(const FieldVal& x) {
  if (x.kind == FieldVal::Kind::NegInf) return FieldVal::of_int(0);
  if (!x.finite() || !x.q_known) return FieldVal::poison();
  return FieldVal{pow_mod(kGenerator, x.q, kSafeP), 0, false, FieldVal::Kind::Finite};
}

FieldVal field_uf(std::string_view name, const FieldVal& a, const FieldVal* b) {
  if (!a.finite() || (b && !b->finite())) return FieldVal::poison();
  // A function of the p images: equal real arguments have equal images.
  uint64_t h = mix(hash_name(name) ^ mix(a.p));
  if (b) h = mix(h ^ mix(b->p + 0x51ed27));
  uint64_t h2 = mix(h ^ 0xabcdef12345ull);
  return FieldVal{h % kSafeP, h2 % kSafeQ, true, FieldVal::Kind::Finite};
}

FieldVal field_shift(const FieldVal& a, const FieldVal& b) {
  if (a.kind == FieldVal::Kind::NegInf) return b;
  if (b.kind == FieldVal::Kind::NegInf) return a;
  if (!a.finite() || !b.finite()) return FieldVal::poison();
  return field_uf("shift", a, &b);
}

}  // namespace isomer::mugraph
