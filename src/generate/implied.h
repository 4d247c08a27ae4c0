#pragma once
// "Implied by smaller rules": the generator's last pruning stage (generate/generate.h).
//
// The generator accepts rules level by level, smallest first (a rule's level is the
// number of operators on its two sides together). A candidate is implied when the
// rules accepted at lower levels already join its two sides: both sides are built at
// the rule's first verify-shapes instantiation, each side is rewritten once by every
// accepted rule (left to right and, where the target is a pattern, right to left) at
// every match, and the candidate is dropped if a side rewrites into the other, or
// both rewrite into a common graph. That is a derivation of at most two steps by
// verified rules, so dropping the candidate loses nothing the optimizer could not
// reach through the rules it has (its search chains rewrites); a longer derivation
// is not looked for, and such a candidate is kept.
//
// Graphs are compared by structural_hash (ir/graph.h): equal graphs built by
// different rewrites hash alike. A collision can only drop a rule, never accept one.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "rules/rule.h"

namespace isomer::gen {

class ImpliedChecker {
 public:
  // Makes `rule` (usable) available to later checks, with its reversal if it has one.
  void add(const Rule& rule);
  size_t size() const { return rules_.size(); }

  // True if the accepted rules join the two sides of `rule` (see above). Thread-safe
  // with other const calls; add() must not run concurrently.
  bool implied(const Rule& rule) const;

 private:
  // Operators per type (index in types_), for a quick "cannot match" test.
  using OpCounts = std::vector<uint8_t>;
  struct Entry {
    Rule rule;
    std::vector<std::pair<size_t, uint8_t>> needs;  // (type, count) its source contains
  };
  OpCounts op_counts(const Graph& g) const;
  // Hashes of every graph one rewrite of `g` gives.
  std::unordered_set<uint64_t> neighbours(const Graph& g) const;

  std::vector<Entry> rules_;
  std::unordered_map<std::string, size_t> types_;  // operator type -> index
};

}  // namespace isomer::gen
