#pragma once
// Matching a rule's source in a graph and applying the rewrite.
//
// A match binds every source output to a value of the graph (multi-output sources:
// all roots matched consistently, a variable shared by two roots bound to one value),
// every variable to a value (`: const` variables only to constants), and passes the
// rule's guards at the bound values' types. Operators match on type, attributes
// (up to defaults, see OpDef::canonical_attrs) and input wiring; the operands of a
// commutative binary operator match in either order (the first order that matches
// the operator's inputs is kept). Applying a match builds the target through the
// graph's builder at the bound types; if the target does not build there (a shape
// rule rejects it) or its output types differ from the replaced values, the graph
// is returned unchanged and `why` says what failed: never an invalid graph.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rules/rule.h"

namespace isomer {

struct Match {
  std::vector<Value> roots;       // graph value matched by each source output
  std::vector<Value> vars;        // graph value bound to each variable (rule vars order)
  std::vector<NodePtr> nodes;     // graph nodes matched by the source's operators
};

// What fired: per rule name, matches found and matches applied.
struct RuleStats {
  size_t matches = 0;
  size_t applications = 0;
};
using RuleCounts = std::map<std::string, RuleStats>;

// All matches of `rule`'s source in `g` (deterministic order), at most `limit`.
std::vector<Match> find_matches(const Graph& g, const Rule& rule, RuleCounts* counts = nullptr,
                                size_t limit = SIZE_MAX);

// A graph's operator nodes by type (topological order), built once when many rules
// are matched against one graph (the search tries thousands).
struct GraphIndex {
  explicit GraphIndex(const Graph& g);
  std::map<std::string, std::vector<NodePtr>> by_type;
};
std::vector<Match> find_matches(const GraphIndex& index, const Rule& rule, RuleCounts* counts = nullptr,
                                size_t limit = SIZE_MAX);

// The target built through `b` with `var_values` (values already in `b`'s graph) for
// the variables: one value per source output, or nullopt with the reason in `why`.
std::optional<std::vector<Value>> build_target_at(const Rule& rule, const std::vector<Value>& var_values,
                                                  GraphBuilder& b, std::string* why = nullptr);

// `g` with the match's roots replaced by the target (through rebuild). Returns `g`
// itself (same outputs) when the rewrite cannot be applied; `applied` tells which.
Graph apply_rule(const Graph& g, const Rule& rule, const Match& m, RuleCounts* counts = nullptr,
                 bool* applied = nullptr, std::string* why = nullptr);

}  // namespace isomer
