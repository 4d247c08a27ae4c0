#pragma once
// The rule generator (`isomer rules generate`): discovers graph substitutions the
// TASO way. Stages, each with a count:
//
//   1. enumerate   every graph of up to N operators per family (generate/enumerate.h),
//                  fingerprinted over F_p (or exactly in double for Relu/MaxPool);
//                  graphs equal up to renaming of same-shaped variables are dropped
//   2. distinct    graphs bucketed by (family, output count, sorted output
//                  fingerprints, output shapes over the shape sets); exact duplicates
//                  (the same DAG reached in another order) removed
//   3. candidates  in each bucket, the representative (fewest operators, then the
//                  canonical text) is paired with every other member; rules implied
//                  through the representative are not repeated
//   4. rechecked   each pair compared exactly on fresh inputs under every shape set;
//                  a member unequal to the representative (a fingerprint coincidence)
//                  is compared with the bucket's other classes or starts its own
//   5. pruned      trivial pairs (same graph); pairs whose sides share an operator on
//                  identical inputs (they follow from a smaller pair, TASO); pairs of
//                  more than 4 operators equal modulo associativity/commutativity of
//                  Add and Mul and the signs of Sub / Neg (they follow from the small
//                  ring rules, which stay: at most 4 operators are never pruned); pairs
//                  with the same single outermost operator whose operands are pairwise
//                  equal (congruence: they follow from smaller pairs); pairs whose
//                  target needs a variable the source does not bind, or where both
//                  sides contain a Split (a source cannot compute Split sizes); pairs
//                  whose rule text equals a kept one after renaming the variables
//   6. verified    level by level (a rule's level: operators on both sides together),
//                  smallest first: a rule the usable rules of lower levels with at
//                  most kImpliedMaxSide operators a side already join in at most two
//                  rewrites is dropped as implied (generate/implied.h;
//                  `prune_implied`), every other one goes through verify_rule
//                  (verify/verify.h):
//                  polynomial rules with the field tester alone unless `prove` (fast,
//                  and the verdict does not depend on a solver's time limit), rules
//                  with a non-polynomial side with Z3 (`timeout_s` each). Only usable
//                  rules (proved, or field-tested below 2^-60) are written. Rules with a
//                  non-polynomial side were never accepted on fingerprints: without a
//                  proof they stay unknown (or refuted: integer inputs can miss a real
//                  counterexample, e.g. relu(x - x*x) = 0 holds on the integers) and are
//                  reported, not written. Their verdicts depend on Z3 finishing within
//                  the time limit, so on a loaded machine a run may write fewer of them.
//
// Written rules: variables %x, %y, ... in order of first appearance in the source;
// `where` guards pin the rank of every variable, equal dims for equal letters and
// literal dims, so a rule never applies where broadcasting would change its meaning;
// one verify-shapes line per shape set; Split sizes as $(dim(...)) sums. Direction:
// the source is the side with more operators (ties: the larger canonical text), unless
// only the other side binds every variable; the optimizer may use rules either way.
// Output is deterministic: the same options give the same file for any `jobs`.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "generate/shards.h"
#include "rules/rule.h"

namespace isomer::gen {

struct GenerateOptions {
  int max_ops = 3;
  std::vector<std::string> ops;  // operator names; empty = every operator of the palette
  int jobs = 0;                  // 0 = all cores
  uint64_t seed = 0x15033e7;
  double timeout_s = 10;         // Z3 wall-clock limit per rule (a safety net; rlimit decides)
  // Z3's deterministic resource limit per solver call: the verdicts, and so the
  // written file, do not depend on how busy the machine is (0 = wall clock only).
  unsigned rlimit = 300000;
  bool verify = true;            // false: stop before verification (verdicts stay None)
  bool prove = false;            // also run Z3 on polynomial rules (default: field tester only)
  bool prune_implied = true;     // drop rules the accepted smaller rules join (generate/implied.h)
  // Called with one line per finished stage and verification level (may be empty).
  std::function<void(const std::string&)> progress;
  // Several processes sharing the work (generate/shards.h); every rank returns the
  // same result as one process.
  Shards shards;
};

// Rules with larger sides are not used to find implied rules: with 4-operator graphs
// they are too many to try as rewrites (11,440 usable rules of 4 + 2 operators alone),
// and the rules of up to 3 operators a side already imply most of what is implied.
constexpr int kImpliedMaxSide = 3;

struct RuleReport {
  std::string name;
  std::string family;
  bool needs_proof = false;  // a side has no field semantics
  int level = 0;             // operators on both sides together
  int largest_side = 0;      // operators on the larger side
  bool implied = false;      // dropped: the accepted smaller rules join its sides (not verified)
  Verdict verdict;
};

struct GenerateResult {
  RuleSet rules;                                       // the usable rules, with verdicts, in file order
  std::vector<Rule> all;                               // every rule that reached stage 6
  std::vector<RuleReport> reports;                     // one per rule in `all`
  std::vector<std::pair<std::string, uint64_t>> counts;  // stage -> count, in stage order
  std::vector<std::pair<std::string, double>> seconds;   // stage -> seconds
  std::string verifier;                                // "verify_rule" or "field_verify"

  uint64_t count(const std::string& stage) const;
};

GenerateResult generate_rules(const GenerateOptions& options);

// The text of `result.rules` as written to the output file (verdict times dropped so
// that the file is byte-identical across runs).
std::string print_generated(const GenerateResult& result, const GenerateOptions& options);

}  // namespace isomer::gen
