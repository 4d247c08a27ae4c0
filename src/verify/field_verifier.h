#pragma once
// Random testing of rules over the prime field F_p (p = 2^61 - 1).
//
// For each verify-shapes instantiation of a rule, both sides are built at those
// shapes and evaluated with evaluate_field on the same uniformly random inputs in F_p
// (a fixed seed, so verdicts are reproducible), for T trials.
//
// The bound. Every operator with field semantics is polynomial, so each output
// element of each side is a polynomial in the input elements. degree_bound() gives
// an upper bound d on its total degree: an input has degree 1, a constant 0; Add,
// Sub and Concat take the maximum of their operands' degrees, every other operator
// the sum (a product of its operands' entries at most; linear data movement and
// averages by a constant count have one non-constant operand, so the sum is exact).
// If the two sides differ, some output element of source - target is a non-zero
// polynomial of degree <= d = max(d_source, d_target), and by Schwartz-Zippel one
// random point hides the difference with probability <= d/p; T independent trials
// all hide it with probability <= (d/p)^T. The verdict records
// p<2^-floor(T * (log2 p - log2 d)) with T chosen to reach the requested bits. The
// claim holds per instantiation (the rule is tested at those shapes) and for
// identities of polynomials over F_p: rules with integer coefficients smaller than
// p (all rules here) cannot differ over the integers and agree mod p.
//
// A rule whose sides use an operator without field semantics (Relu, Exp, Softmax,
// ...) gets verdict unknown ("needs Z3 (no field semantics for Relu)"): fingerprints
// alone never accept it. verify/verify.h runs the Z3 verifier (verify/z3_verifier.h)
// first and this tester where Z3 cannot decide.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "eval/field.h"
#include "rules/rule.h"

namespace isomer {

struct FieldVerifyOptions {
  uint64_t seed = 0x150e7;
  int target_bits = 120;  // trials are added until the error bound is below 2^-target_bits
  int min_trials = 2;
};

struct FieldVerifyResult {
  Verdict verdict;
  // Refuted: the instantiation (0-based) and the inputs (rule vars order) that differed.
  size_t instantiation = 0;
  std::vector<FieldArray> counterexample;
};

// Upper bound on the polynomial degree of any output element of `g` in its inputs.
// Throws Error if an operator has no field semantics.
int64_t degree_bound(const Graph& g);
// The same with a degree per graph input (a fold input is a polynomial of some degree
// in the rule's variables).
int64_t degree_bound(const Graph& g, const std::vector<int64_t>& input_degrees);

FieldVerifyResult field_verify(const Rule& rule, const FieldVerifyOptions& options = {});

// Verifies every rule and records its verdict in the set (the rule file's verdict lines).
void field_verify_all(RuleSet& set, const FieldVerifyOptions& options = {});

}  // namespace isomer
