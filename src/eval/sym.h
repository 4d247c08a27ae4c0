#pragma once
// Symbolic tensor elements for the formal verifier (verify/z3_verifier.h).
//
// A Sym is a 32-bit handle into a thread_local, hash-consed expression arena: equal
// expressions built on one thread get the same handle, so two sides of a rule that
// compute the same element (data movement, elementwise functions applied to the
// same operands) end up with identical handles and need no solver at all. The
// operator kernels are templates over the element type (eval/array.h); at T = Sym
// the SAME kernels that give float and field semantics build expressions instead
// of numbers, so the verifier proves what the evaluator runs.
//
// Values are real numbers, not IEEE floats: a constant is an exact rational (a
// double attribute such as alpha = 0.01 converts exactly from its binary value).
// Node kinds:
//   Const    exact rational: num/den when it fits int64, else an exact decimal string
//   Var      input element #var (one per input element of a rule instantiation)
//   Add, Mul, Neg, Div   real arithmetic, Add with 2+ terms (Div is real
//            division; a divisor that is 0 is left to the solver, which treats
//            x/0 as an unspecified value)
//   IteGt, IteGe   args {a, b, then, else}: (a > b or a >= b) ? then : else; Relu,
//            Max, Clip, MaxPool, HardSigmoid, ... are built from these
//   Max, Min the largest / smallest of 2+ args: an ite whose branches are its own
//            comparands becomes one (a > b ? a : b is max(a, b)); nested ones are
//            flattened, constants folded, args sorted and unique, so any order and
//            grouping of maxima over the same elements is one node (Relu and
//            MaxPool commute with each other and with data movement without a solver)
//   Apply    an uninterpreted function `text` of its args (Exp, Tanh, Gelu[...]):
//            a proof for every function f holds for the real one (sound), but
//            identities that need the function's properties are not found.
// Construction folds constants and drops x+0, x*1, x*0, -(-x), x-x, ite(c, t, t),
// and orders the operands of * so that commuted forms are shared. Add is n-ary:
// nested sums flattened, constants folded into one term, x and -x cancelled, terms
// sorted, so a sum of the same terms in any order or grouping is one node.
//
// Handles are valid until the arena is reset (sym_arena_reset / SymArenaScope);
// the verifier resets it between rules to keep memory bounded. Sym has no
// operator== on purpose: structural identity (identical()) is not equality.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/array.h"

namespace isomer {

enum class SymKind : uint8_t { Const, Var, Add, Mul, Neg, Div, IteGt, IteGe, Max, Min, Apply };

class Sym {
 public:
  constexpr Sym() = default;  // the constant 0 (Array<Sym>'s fill value)
  Sym(double v);              // NOLINT(google-explicit-constructor): the exact value of v; throws if not finite
  static Sym rational(int64_t num, int64_t den = 1);
  static Sym var(uint32_t index);
  // Uninterpreted function `fn` applied to `args`.
  static Sym apply(std::string_view fn, std::span<const Sym> args);

  uint32_t id() const { return id_; }
  bool identical(Sym o) const { return id_ == o.id_; }

  friend Sym operator+(Sym a, Sym b);
  friend Sym operator*(Sym a, Sym b);
  friend Sym operator/(Sym a, Sym b);
  friend Sym operator-(Sym a);
  friend Sym operator-(Sym a, Sym b) { return a + (-b); }
  Sym& operator+=(Sym o) { return *this = *this + o; }
  Sym& operator-=(Sym o) { return *this = *this - o; }
  Sym& operator*=(Sym o) { return *this = *this * o; }
  Sym& operator/=(Sym o) { return *this = *this / o; }

 private:
  friend struct SymArena;
  explicit constexpr Sym(uint32_t id, int) : id_(id) {}
  uint32_t id_ = 0;  // 0 is the constant 0 and 1 the constant 1 in every arena
};

using SymArray = Array<Sym>;

struct SymNode {
  SymKind kind = SymKind::Const;
  uint32_t var = 0;             // Var: the input element index
  int64_t num = 0, den = 1;     // Const that fits: num/den in lowest terms, den > 0
  std::string text;             // Const too large for num/den: exact decimal; Apply: function name
  std::vector<Sym> args;
};

// The node behind `s` in this thread's arena.
const SymNode& sym_node(Sym s);
size_t sym_arena_size();
// Clears this thread's arena; every Sym made before is invalid afterwards.
void sym_arena_reset();

// Resets the arena on construction and on destruction.
class SymArenaScope {
 public:
  SymArenaScope() { sym_arena_reset(); }
  ~SymArenaScope() { sym_arena_reset(); }
  SymArenaScope(const SymArenaScope&) = delete;
  SymArenaScope& operator=(const SymArenaScope&) = delete;
};

// The value of `s` if it is an integer constant.
std::optional<int64_t> sym_int(Sym s);
// Integer operands (shapes, axes, indices) of a symbolic evaluation; throws Error if
// an element is not an integer constant.
std::vector<int64_t> sym_ints(const SymArray& a);
// A short human-readable form (for messages and tests), cut off after `max_chars`.
std::string to_string(Sym s, size_t max_chars = 200);

// (a > b ? if_greater : otherwise) and (a >= b ? ... : ...), written once for both
// element types so a kernel states a piecewise function once (ops/unary.cpp).
Sym select_gt(Sym a, Sym b, Sym if_greater, Sym otherwise);
Sym select_ge(Sym a, Sym b, Sym if_greater_or_equal, Sym otherwise);
inline double select_gt(double a, double b, double t, double e) { return a > b ? t : e; }
inline double select_ge(double a, double b, double t, double e) { return a >= b ? t : e; }

// std::clamp(v, lo, hi) as selects: v < lo ? lo : (hi < v ? hi : v).
template <class T>
T clamp_select(T v, T lo, T hi) {
  return select_gt(lo, v, lo, select_gt(v, hi, hi, v));
}

}  // namespace isomer
