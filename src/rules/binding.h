#pragma once
// What a match binds, and building a rule side from a binding through a GraphBuilder
// (the greedy engine and the backtracking search apply rules this way; verification
// builds both sides the same way at verify-shapes).
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "eval/array.h"
#include "ir/graph.h"
#include "rules/rule.h"

namespace isomer {

struct Binding {
  std::vector<Value> operands;                      // per rule var (absent for attribute vars)
  std::vector<std::optional<AttrValue>> attrs;      // per rule var: attribute variables
  std::vector<std::optional<Attributes>> attr_sets; // per rule var: `...%a` variables
  // Per source pattern node: the graph values it matched (guards may read them).
  std::vector<std::vector<Value>> source_values;

  Binding() = default;
  explicit Binding(size_t num_vars) : operands(num_vars), attrs(num_vars), attr_sets(num_vars) {}
};

// ExprEnv over a binding, and over the values built so far for the side being built.
class BindingEnv : public ExprEnv {
 public:
  BindingEnv(const Binding& b, const std::vector<std::vector<Value>>* built = nullptr) : b_(b), built_(built) {}
  const TensorType* type_of(const ExprRef& r) const override;
  const Tensor* constant_of(const ExprRef& r) const override;
  const AttrValue* attr_of(const ExprRef& r) const override;
  const Attributes* attrs_of(const ExprRef& r) const override;

 private:
  const Value* value(const ExprRef& r) const;
  const Binding& b_;
  const std::vector<std::vector<Value>>* built_;
};

// True if every guard of `rule` holds for `b`; `failed` names the first that does not.
bool guards_hold(const Rule& rule, const Binding& b, std::string* failed = nullptr);

// Called for a target `fold` node before it is evaluated; returns a value to use
// instead (verification: a graph input standing for a symbolic constant), or nullopt.
using FoldHook = std::function<std::optional<Value>(int node, const PatternNode& fold, GraphBuilder& b,
                                                    const std::vector<std::vector<Value>>& built)>;

// Builds `side` through `b` with the values and attributes of `bind`: one value per side
// output. Throws Error (a shape rule rejects a node) or NotApplicable (an expression
// cannot be evaluated at this binding).
// `built`, if given, receives every side node's values (pattern node order).
std::vector<Value> build_side(const Rule& rule, const Pattern& side, const Binding& bind, GraphBuilder& b,
                              const FoldHook& hook = nullptr, std::vector<std::vector<Value>>* built = nullptr);

// Both sides of a rule built as graphs at one verify-shapes instantiation, for the
// verifiers and the load-time checks. The inputs of both graphs are the operands that
// are not fixed constants, in vars order (`input_vars`); the target has one more input
// per tensor fold that reads them (`fold_nodes`, computed with fold_inputs()).
struct RuleInstance {
  Graph source, target;
  std::vector<int> input_vars;
  std::vector<int> fold_nodes;  // target pattern nodes whose values are extra target inputs
  Binding binding;              // operands are the graphs' input (or constant) values
  std::vector<std::vector<Value>> source_values, target_values;
};

// Builds both sides at verify instantiation k (and checks the guards hold there).
// Throws Error naming the side and the reason if a side does not build.
RuleInstance instantiate(const Rule& rule, size_t k);

// The extra target inputs of `inst` (one per fold_nodes entry) from the values of its
// source inputs, at element type T (Fp for the field tester, Sym for Z3, double).
template <class T>
std::vector<Array<T>> fold_inputs(const Rule& rule, const RuleInstance& inst, const std::vector<Array<T>>& inputs);

}  // namespace isomer

namespace isomer {

// Matches the attributes of pattern operator `p` against a host operator's canonical
// attributes (`host`; `input_types` canonicalize the pattern's literals, e.g. a
// default written out): without `...%a` the attributes must be equal up to defaults,
// with it the named ones must be and the rest bind the set. Attribute variables bind
// (or must equal their binding); computed attributes are appended to `deferred` with
// the host's value, to check once every variable is bound. Shared by the graph
// matcher and the e-graph's.
bool match_attributes(const PatternNode& p, const Attributes& host, std::span<const TensorType> input_types,
                      std::vector<std::optional<AttrValue>>& attrs, std::vector<std::optional<Attributes>>& sets,
                      std::vector<std::pair<const AttrPattern*, AttrValue>>& deferred);

// Numbers compare by value (an int attribute 1 equals a computed 1.0); the rest exactly.
bool same_attr_value(const AttrValue& a, const AttrValue& b);

}  // namespace isomer
