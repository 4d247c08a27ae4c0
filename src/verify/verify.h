#pragma once
// Combined rule verification: Z3 (verify/z3_verifier.h) first, the random F_p
// tester (verify/field_verifier.h) second.
//
// Z3 gives proved or refuted for every operator with symbolic semantics (exact for
// polynomial and piecewise-linear ones); those verdicts are final. Where Z3 cannot
// decide (timeout, a counterexample that depends on an uninterpreted function, an
// operator without symbolic semantics), polynomial rules fall back to the field
// tester: tested p<2^-k (or refuted by a field counterexample). Otherwise the
// verdict is unknown and its reason names both verifiers' reasons.
#include "rules/rule.h"
#include "verify/field_verifier.h"

namespace isomer {

struct VerifyOptions {
  double timeout_s = 10;   // Z3 time limit per rule
  unsigned rlimit = 0;     // Z3 deterministic resource limit per solver call (0 = none)
  bool use_z3 = true;      // false: the field tester alone
  FieldVerifyOptions field;
};

// Z3 first: proved / refuted are final; otherwise the field tester (polynomial rules) gives
// tested p<2^-k, else unknown with both reasons. Thread-safe: no shared mutable state.
Verdict verify_rule(const Rule& rule, const VerifyOptions& options = {});

// Verifies every rule (using `jobs` threads; deterministic result) and records the verdicts.
void verify_all(RuleSet& set, const VerifyOptions& options = {}, int jobs = 1);

}  // namespace isomer
