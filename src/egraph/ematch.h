#pragma once
// E-matching of the shared pattern trees (rules/pattern.h) and rule application in
// the e-graph.
//
// A one-output source is matched top-down from every class that holds an e-node of
// its root operator: each pattern node tries every e-node of the class it is matched
// against (and both operand orders of a commutative operator), so one pattern finds
// what any number of rewritten forms of the graph hold. A multi-output source (two
// products sharing an input) is a multi-pattern: each root is matched alone and the
// lists are joined on the variables and pattern nodes they share, through a hash
// table keyed on those bindings (linear in the matches, not all pairs as Tensat's).
// Guards and computed constants are evaluated on the e-class analysis: a variable's
// type is its class's type, its data the class's constant value, materialized when
// asked for.
//
// Applying a match adds the target's e-nodes and merges each source root's class with
// the matching target value, after checking that their types agree (a rule that
// would change a value's shape at these types is not applied: the soundness of the
// elementwise rules without guards rests on this, see generate/collapse.h).
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "egraph/egraph.h"
#include "rules/rule.h"

namespace isomer::eg {

struct EMatch {
  std::vector<ClassId> roots;                        // per source output
  std::vector<ClassId> operands;                     // per rule variable (kNoClass for attribute variables)
  std::vector<std::optional<AttrValue>> attrs;       // per rule variable
  std::vector<std::optional<Attributes>> attr_sets;  // per rule variable
  std::vector<ClassId> node_classes;                 // per source pattern node (a multi-output operator: its tuple)
  std::vector<std::pair<const AttrPattern*, AttrValue>> deferred;  // computed attributes to check
  std::vector<std::pair<int, ClassId>> deferred_consts;            // computed constants to check
};

// Classes by the operators their e-nodes apply; rebuilt after each rebuild().
struct OpIndex {
  explicit OpIndex(const EGraph& g);
  // Classes holding a one-output e-node of the operator.
  std::map<const OpDef*, std::vector<ClassId>> single;
  // Value classes holding a projection of a tuple that holds an e-node of the operator
  // with that many outputs: (op, outputs) -> classes.
  std::map<std::pair<const OpDef*, uint32_t>, std::vector<ClassId>> projected;
};

// Matches of `rule`'s source, at most `limit` (a rule over its limit is reported by
// returning limit + 1 matches; the scheduler then bans it for a while).
std::vector<EMatch> ematch(EGraph& g, const Rule& rule, const OpIndex& index, size_t limit);

// True if every root of a multi-output source shares a variable with the roots before
// it. A multi-pattern whose roots share nothing joins every pair of matches (two
// unrelated Adds merged through a Concat: quadratic in the operators, Tensat's problem
// and no win on a CPU); the e-graph search leaves such rules out.
bool roots_are_joined(const Rule& rule);

// Expansions of variadic rules (rules/variadic.h), made once per size.
class VariadicExpansions {
 public:
  const Rule& of_size(const Rule& rule, size_t n);

 private:
  std::map<std::pair<const Rule*, size_t>, std::unique_ptr<Rule>> cache_;
};

// The most elements one match of a variadic rule takes.
constexpr size_t kMaxElements = 16;

// Matches of variadic `rule`: its one-element expansion matched everywhere, grouped by
// the bindings the elements share (a hash table again); each group of 2 to
// kMaxElements elements is one match of the rule expanded for that many. Elements whose
// value a merge made (read by a multi-output e-node whose origin o has
// merge_origins[o] set: the Split after a merged operator) are left out, so merges are
// not merged again.
std::vector<std::pair<const Rule*, EMatch>> ematch_variadic(EGraph& g, const Rule& rule, const OpIndex& index,
                                                            size_t limit, VariadicExpansions& expansions,
                                                            const std::vector<bool>& merge_origins = {});

enum class ApplyResult { Applied, Unchanged, NotApplicable };

// Builds the target and merges it with the roots (see above); `why`, if given, says
// why a match was not applicable.
ApplyResult apply_ematch(EGraph& g, const Rule& rule, const EMatch& m, std::string* why = nullptr);

}  // namespace isomer::eg
