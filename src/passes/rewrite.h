#pragma once
// The rule interface of the template passes (internal to passes/). A rule looks
// at one node of the graph being rebuilt, together with its already-rebuilt
// inputs, and either returns the values that replace the node's outputs or an
// empty vector ("no match"). A rule changes nothing before it has matched; the
// driver (simplify.cpp) checks that replacements keep the node's output types.
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"

namespace isomer::passes {

// How many times each value is read in a graph: once per reader input, plus once
// per graph output it is (a graph output always counts as used).
using UseCounts = std::unordered_map<Value, size_t, ValueHash>;
UseCounts count_uses(const Graph& g);

struct MatchContext {
  const Node& node;               // the node as it is in the graph being rebuilt
  const std::vector<Value>& in;   // its inputs, already rebuilt
  GraphBuilder& builder;          // where replacement nodes are made
  const UseCounts& uses;          // of the graph being rebuilt
  const PassOptions& opts;

  // The node's output types with its rebuilt inputs (shape rules re-run: inputs that
  // became constants may make dims static). Replacements must have these types.
  const std::vector<TensorType>& output_types() const;

  // Readers of the node's i-th input value, in the graph being rebuilt. Rules that
  // absorb a producer into this node require 1, so no work is duplicated.
  size_t input_uses(size_t i) const;
  bool output_used(size_t i) const;

  mutable std::optional<std::vector<TensorType>> output_types_cache = std::nullopt;
};

using Replacement = std::vector<Value>;  // empty = the rule does not apply here
using RuleFn = Replacement (*)(const MatchContext&);

struct Rule {
  std::string_view name;
  RuleFn fn;
};

// Rules that replace values by simpler or constant ones (safe in any order).
const std::vector<Rule>& eliminate_rules();  // eliminate.cpp
const std::vector<Rule>& fold_rules();       // fold.cpp
// Rules that absorb a single-user producer into its consumer (fuse.cpp). They run
// in a separate rebuild so that use counts describe the graph they rewrite.
const std::vector<Rule>& fuse_rules();

// ---- small matching helpers (rewrite.cpp) -----------------------------------------

// True if `v` is output `index` of an operator node of type `op_type`.
bool is_op(const Value& v, std::string_view op_type, uint32_t index = 0);
// The constant's integer values, or nullopt if `v` is not an integer constant.
std::optional<std::vector<int64_t>> constant_ints(const Value& v);
// A fully static shape and a known element type.
bool is_static_type(const TensorType& t);
// The values of constant `c` as one per channel of an output of `rank` dims with
// `channels` channels on axis 1 (so c broadcasts as [1,C,1,...]); nullopt if c
// varies along any other axis or does not broadcast that way.
std::optional<std::vector<double>> per_channel_values(const Tensor& c, int64_t rank, int64_t channels);

}  // namespace isomer::passes
