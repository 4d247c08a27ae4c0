#pragma once
// Formal verification of rules with Z3.
//
// For each verify-shapes instantiation of a rule, both sides are built at those
// shapes (Rule::build_source / build_target) and evaluated with evaluate_sym: one
// real variable per input element, and each output element becomes an expression
// over them (eval/sym.h), computed by the SAME templated kernels as the float and
// field semantics. Elements whose expressions are identical after hash-consing need
// nothing more (data movement, elementwise functions of the same operands). Of the
// others, one element per class of pairs equal up to renaming the input variables
// is kept (an elementwise rule over n elements is one small problem). Those go to
// Z3 as real arithmetic: first each difference is simplified to a sum
// of monomials (polynomial identities end there), then the solver looks for a point
// where some element differs: OR over elements of (source != target), with a
// timeout per rule (Z3's "timeout" parameter, the rule's remaining time). unsat at every instantiation => proved.
//
// Semantics. Tensors of real numbers, not IEEE floats: rounding, overflow and NaN
// are not modelled (a rule is an identity of the exact computation; the optimizer's
// float tolerance covers the rest). A proof holds at the verify-shapes
// instantiations, the concrete shapes listed in the rule, which is what its guards
// and the matcher restrict it to. Relu, Max, Min, Abs, Clip, MaxPool, LeakyRelu,
// HardSigmoid and HardSwish are exact (if-then-else on comparisons); Div is real
// division (x/0 is an unspecified value to Z3). Transcendental operators (Exp, Tanh,
// Sigmoid, Erf, Gelu, Log, Sqrt, Reciprocal) are uninterpreted functions: a proof
// for every function is a proof for the real one (sound), but rules that need a
// function's properties (exp(a + b) = exp(a) exp(b)) are not proved (incomplete).
// Softmax, BatchNormalization, LayerNormalization, Pow, Equal, Where, Cast and
// Dropout have no symbolic semantics yet: rules using them get unknown here (and
// the field tester cannot test them either).
//
// Refutation. Before the solver, a few random small-integer points are tried,
// evaluated exactly by Z3's simplifier (nonlinear refutations such as a dropped
// scale factor are easy to hit this way and slow for the solver); otherwise sat
// gives a model. The point's input values are reported in the verdict reason. The model is also checked with the float evaluator (inputs rounded to
// the rule's dtypes). If the formula uses an uninterpreted function (or a division
// by a non-constant, whose x/0 Z3 leaves unspecified), the model is only a
// counterexample for SOME function, so it counts only when the float evaluator
// confirms the difference; otherwise the verdict is unknown
// ("counterexample depends on uninterpreted Exp"). Timeouts and solver give-ups
// are unknown with Z3's reason, never an error.
//
// Thread-safe: each call has its own Z3 context, and the symbolic arena is
// thread_local (reset at the start and end of each instantiation).
#include <cstddef>
#include <string>
#include <vector>

#include "rules/rule.h"

namespace isomer {

struct Z3VerifyOptions {
  double timeout_s = 10;  // for the whole rule (all instantiations)
  // Z3's deterministic resource limit per solver call (0 = none). Unlike the wall
  // clock, it gives the same verdicts on a busy machine and a quiet one, so a
  // generated rule file is reproducible byte for byte.
  unsigned rlimit = 0;
};

struct Z3VerifyResult {
  Verdict verdict;
  // Refuted: the instantiation (0-based) and the input values (rule vars order,
  // row-major) of the counterexample, as doubles; float_confirmed says whether the
  // float evaluator sees the difference there too.
  size_t instantiation = 0;
  std::vector<std::vector<double>> counterexample;
  bool float_confirmed = false;
  size_t solver_calls = 0;  // instantiations that needed the solver
};

Z3VerifyResult z3_verify(const Rule& rule, const Z3VerifyOptions& options = {});

}  // namespace isomer
