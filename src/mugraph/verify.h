#pragma once
// Verification of a μGraph against its region program.
//
// Field test (verify_field): both run over F_p x F_q (mugraph/field.h) at random
// points, on a shrunk instance of the region: every atom cut to a few tiles or
// chunks of the μGraph's own sizes (the last one ragged, so edge tiles are run) or
// to 3 where it is whole in a tile, constant inputs (masks) cut to their leading
// corner, so skip tables are exercised, and in a second instance to a window where
// rows see several chunks of the loop: a causal mask's leading corner lets each
// kept query row see only the first chunk of keys, so a loop that never rescales
// its accumulators passes there. The second window is the first of these on which
// the target is defined everywhere (no row masked whole): the loop's leading
// elements with the other atoms' last ones (a causal mask's last rows against its
// first keys), then every atom's last elements. What this decides, and with what error:
//  - Polynomial and rational parts (+ - * /, sums, matmuls) are exact field
//    arithmetic: a wrong μGraph differs as a rational function of the inputs, and
//    by Schwartz-Zippel agrees at a random point with probability <= d/q, d the
//    degree bound tracked through both programs (numerator plus denominator).
//  - exp is the homomorphism x -> g^x, so exp(a+b) = exp(a)exp(b) exactly; each
//    exp(e) counts as one fresh variable of degree 1 in the bound (the heuristic
//    step: exps of different arguments behave as independent values).
//  - sqrt, erf, tanh, relu, log, max, min are uninterpreted functions (random
//    functions of the argument's image): proved only where the μGraph applies them
//    to what the target applies them to, which is sound for every real function.
//  - The online-softmax shift m is an arbitrary field value: the test passes only
//    if the result does not depend on m, which is exactly why subtracting the true
//    maximum is allowed.
//  - -inf (additive masks) is a value of its own; exp(-inf) = 0.
// With k points the error is below (d/q)^k; k is chosen so that this is <= 2^-60.
// Anything without an image (exp of an exp, -inf times a value, division by zero
// at a point) makes the verdict "not checkable" and the μGraph is rejected.
//
// Float check (float_check): the interpreter in double on the shrunk instance,
// inputs scaled to give large softmax logits, against the program in double; the
// compiled kernel is checked at full size against the reference evaluator (or
// against isomer's unfused runtime where the reference evaluator would be too slow)
// when it is loaded (kernel_cache.h).
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

struct FieldVerdict {
  bool ok = false;
  std::string reason;     // why not, or a summary
  int points = 0;         // random points tried
  int64_t degree = 0;     // degree bound d
  double error_log2 = 0;  // log2 of the error bound (d/q)^points
};

// A shrunk instance: program, block graph and a window of each constant input: its
// first elements along every atom (Leading), its last along every atom but the
// loop's (LastRows), or its last along every atom (Trailing).
struct Shrunk {
  Program program;
  BlockGraph graph;
  std::vector<std::vector<float>> constants;
};
enum class Corner { Leading, LastRows, Trailing };
Shrunk shrink(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
              Corner corner = Corner::Leading);

FieldVerdict verify_field(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
                          uint64_t seed);

struct FloatVerdict {
  bool ok = false;
  double max_rel_error = 0;
  std::string reason;
};
FloatVerdict float_check(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
                         uint64_t seed, double tolerance = 1e-6);

}  // namespace isomer::mugraph
