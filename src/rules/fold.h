#pragma once
// Fold functions: the named C++ functions rules call to compute attributes, guards and
// constants from what a match bound (Halide's fold(...), MLIR's NativeCodeCall).
//
//   where is_identity_perm(compose_perm(%p, %q))           # a predicate
//   %0 = Transpose(%x) {perm=$(compose_perm(%p, %q))}       # a computed attribute
//   %w2 = fold scale_rows(%w, bn_factor(%s, %v, %eps))      # a computed constant
//
// Each is plain C++ over attribute values and tensors. A fold that computes a tensor
// from tensors (weights a rule combines) is written once as a template over the
// element type, like the operator kernels, so that the verifiers can run it on
// symbolic (Z3) and field elements: a rule with folds is proved for every value of
// its constants, not just tested at one. Every fold has a test against the operators
// it stands for (tests/cpp/fold_test.cpp).
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/array.h"
#include "eval/field.h"
#include "eval/sym.h"
#include "ir/attributes.h"

namespace isomer {

// An argument of a tensor fold at element type T: a tensor (as an array of T) or a
// concrete value (an int, a list, a float).
template <class T>
struct FoldArg {
  bool is_tensor = false;
  Array<T> array;
  AttrValue value;
};

using F64FoldFn = Array<double> (*)(std::span<const FoldArg<double>>);
using FieldFoldFn = Array<Fp> (*)(std::span<const FoldArg<Fp>>);
using SymFoldFn = Array<Sym> (*)(std::span<const FoldArg<Sym>>);

struct FoldDef {
  std::string_view name;
  std::string_view doc;  // one line: what it computes
  int min_args = 0;
  int max_args = 0;
  // Value folds: the evaluation; throws NotApplicable (rules/expr.h) where the
  // arguments do not fit (a guard is then false, a rewrite is not applied).
  AttrValue (*eval)(std::span<const AttrValue> args) = nullptr;
  // Tensor folds: which arguments are tensors, and the one function at each element
  // type: double (optimization time), field and symbolic (the verifiers; nullptr
  // where it has none: square roots over F_p).
  std::vector<int> tensor_args;
  F64FoldFn eval_f64 = nullptr;
  FieldFoldFn eval_field = nullptr;
  SymFoldFn eval_sym = nullptr;

  bool tensor_fold() const { return !tensor_args.empty(); }
};

// nullptr for an unknown name.
const FoldDef* find_fold(std::string_view name);
std::span<const FoldDef* const> all_folds();

}  // namespace isomer
