#pragma once
// The C++ text of a tile's value (codegen.cpp): at the current loop indices as a
// float, or as the 8 lanes starting there (vm8), each operand read where the
// kernel plan put it (a view, scratch, a constant, an inlined expression) or from
// the name it was hoisted into above the innermost loop.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mugraph/codegen_plan.h"

namespace isomer::mugraph {

// A float literal exact in hex (the kernel cache keys on the text).
std::string float_literal(double v);

class ExprWriter {
 public:
  explicit ExprWriter(const KernelPlan& k) : k_(k) {}

  // The loop index of `atom`.
  std::string idx(int atom) const;
  // Offset of the element at the current loop indices in a tile over `atoms`.
  std::string offset(const Access& a, const std::vector<int>& atoms) const;
  // The same with `atom`'s index replaced by `lane` (a vector's first element).
  std::string offset_lane(const Access& a, const std::vector<int>& atoms, int atom, const std::string& lane);
  // Op i's value: hoisted name, constant, inlined expression or a load.
  std::string at(int i) const;
  // Op i's own expression from its operands' values.
  std::string expr(int i) const;
  // The scalar text of 1/x for a divisor `d` known before the loop (a constant, or
  // an operand whose reciprocal is hoisted), else nullopt.
  std::optional<std::string> reciprocal(int d) const;
  // 8 lanes along the lane atom; `inv`: ops read as one hoisted value (splat).
  std::string vat(int y, const std::vector<int>& inv) const;
  std::string vexpr(int i, const std::vector<int>& inv) const;
  // x where op i is the root of GELU's chain x * (erf(x / sqrt 2) + 1) * 0.5 (as the
  // runtime matches it: either operand order, x / sqrt 2 or x * sqrt 1/2) and every
  // op inside it is inlined into i; else -1. Written as one call (mg_gelu_erf).
  int gelu_of(int i) const;

  // While writing a vector statement: `atom`'s index is `lane`, the vector's first element.
  void set_lane(int atom, const std::string& lane) {
    lane_atom_ = atom;
    lane_expr_ = lane;
  }
  void clear_lane() { lane_atom_ = -1; }

  std::map<int, std::string> hoisted;  // op -> name of its value loaded above the innermost loop
  std::map<int, std::string> recips;   // hoisted divisor -> name of its reciprocal

 private:
  const KernelPlan& k_;
  int lane_atom_ = -1;
  std::string lane_expr_;
};

}  // namespace isomer::mugraph
