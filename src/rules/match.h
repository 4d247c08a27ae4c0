#pragma once
// Matching a rule's source pattern in a graph and applying the rewrite.
//
// A match binds every source output to a value of the graph (multi-output sources:
// all roots matched consistently, a variable shared by two roots bound to one value),
// every operand variable to a value (`: const` variables only to constants), every
// attribute variable to an attribute value, and passes the rule's guards at the bound
// values. Operators match on type, attributes (up to defaults, see
// OpDef::canonical_attrs) and input wiring; the operands of a commutative binary
// operator match in either order (the first order that matches is kept). Values a
// source computes (`$(...)` constants and attributes, in reversed rules) are checked
// once everything else is bound. Applying a match builds the target from its pattern
// tree through the graph's builder; if the target does not build there (a shape rule
// rejects it) or its output types differ from the replaced values, the graph is
// returned unchanged and `why` says what failed: never an invalid graph.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "rules/binding.h"
#include "rules/rule.h"

namespace isomer {

struct Match {
  std::vector<Value> roots;  // graph value matched by each source output
  Binding binding;           // what the variables are bound to (operands, attributes)
  std::vector<NodePtr> nodes;  // graph nodes matched by the source's operators (sorted)

  const std::vector<Value>& vars() const { return binding.operands; }
};

// What fired: per rule name, matches found and matches applied.
struct RuleStats {
  size_t matches = 0;
  size_t applications = 0;
};
using RuleCounts = std::map<std::string, RuleStats>;

// A graph's operator nodes by type (topological order), built once when many rules
// are matched against one graph (the search tries thousands).
struct GraphIndex {
  explicit GraphIndex(const Graph& g);
  std::map<std::string, std::vector<NodePtr>> by_type;
};

// All matches of `rule`'s source in `g` (deterministic order), at most `limit`.
std::vector<Match> find_matches(const Graph& g, const Rule& rule, RuleCounts* counts = nullptr,
                                size_t limit = SIZE_MAX);
std::vector<Match> find_matches(const GraphIndex& index, const Rule& rule, RuleCounts* counts = nullptr,
                                size_t limit = SIZE_MAX);

// The first match of a one-output `rule` whose root is `root` (the greedy engine
// walks the graph node by node).
std::optional<Match> match_at(const Rule& rule, const Value& root);

// The target built through `b` with `bind` (operands already in `b`'s graph): one value
// per source output, or nullopt with the reason in `why`.
std::optional<std::vector<Value>> build_target_at(const Rule& rule, const Binding& bind, GraphBuilder& b,
                                                  std::string* why = nullptr);

// `g` with the match's roots replaced by the target (through rebuild). Returns `g`
// itself (same outputs) when the rewrite cannot be applied; `applied` tells which.
Graph apply_rule(const Graph& g, const Rule& rule, const Match& m, RuleCounts* counts = nullptr,
                 bool* applied = nullptr, std::string* why = nullptr);

// What apply_rules did.
struct ApplyInfo {
  std::vector<bool> applied;  // per match
  std::string error;          // why the last skipped match failed
  size_t merged = 0;          // nodes merged into a structurally equal one while rebuilding
  // Each operator node of the input -> the node it became (before any replacement).
  std::unordered_map<const Node*, NodePtr> kept;
};

// Several matches applied in one rebuild (the greedy engine's round): matches whose
// rewrites cannot be applied are skipped. `merge_equal` = false keeps structurally
// equal nodes apart (CSE switched off).
Graph apply_rules(const Graph& g, const std::vector<std::pair<const Rule*, const Match*>>& matches,
                  ApplyInfo* info = nullptr, bool merge_equal = true);

}  // namespace isomer
