#pragma once
// The written rule set made lean (the generator's last stage):
//
//   1. Commutative operands put in canonical order on both sides (the matchers try
//      both orders of a commutative binary operator, so the order a rule is written
//      in carries nothing). A rule whose sides are then equal only commutes operands
//      and is dropped: `Add(x, y) => Add(y, x)` matches nothing the matcher does not
//      already see.
//   2. Rules equal after step 1 up to their guards and verify-shapes (the copies the
//      generator finds once per shape family: rank 0, rank 2, NCHW) become one rule:
//      its verify-shapes are all the copies' instantiations, its verdict the weakest
//      of theirs, and its guard
//        - none, when every operator of the rule is elementwise and one instantiation
//          is all scalars: each output element is then the same scalar function of the
//          broadcast input elements on both sides, so an identity proved on scalars
//          holds at every shape where both sides have the output's type (the matchers
//          check that when they apply a rule);
//        - otherwise the disjunction of the copies' guards: the rule applies exactly
//          where one of the copies did.
//   3. A rule the rules kept before it now join in at most two rewrites (they apply
//      more widely than their copies did) is dropped, as in the generator's stage 6.
// Every rule is written compactly: its guards on one `where` line.
#include <cstddef>

#include "rules/rule.h"

namespace isomer::gen {

struct CollapseStats {
  size_t commutations_dropped = 0;  // rules that only commuted operands
  size_t copies_merged = 0;         // rules merged into an earlier one
  size_t guards_dropped = 0;        // merged elementwise rules that need no guard
  size_t implied_dropped = 0;       // rules the rules before them join (generate/implied.h)
};

// `drop_implied`: also drop the rules the earlier merged ones join (off when the
// generator is asked to keep implied rules).
RuleSet collapse_rules(const RuleSet& rules, CollapseStats* stats = nullptr, bool drop_implied = true);

}  // namespace isomer::gen
