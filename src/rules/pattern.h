#pragma once
// Pattern trees: a rule side parsed once into a small DAG of pattern nodes that every
// engine shares (the greedy template engine, the backtracking search, the e-graph).
// Matching binds variables; applying builds the target from the tree. Nothing is
// spliced into text or re-parsed when a rule is applied.
//
// A side is a list of statements (graph text over variables, see rules/rule.h):
//   %0 = Conv(%x, %w, %b) {pads=[1,1,1,1], group=%g, ...%rest}
//   %1, %2 = Split(%0, %s) {axis=1}
//   %s = const i64[2] {$(dim(%w1, 0)), $(dim(%w2, 0))}
//   %k = fold bn_factor(%scale, %var, %eps)
//   return %1, %2
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rules/expr.h"

namespace isomer {

struct OpDef;

// One output of a pattern node; node < 0 is an omitted optional input (`_`).
struct PatternRef {
  int node = -1;
  uint32_t output = 0;
  bool present() const { return node >= 0; }
  bool operator==(const PatternRef& o) const { return node == o.node && output == o.output; }
};

// An attribute of a pattern operator.
struct AttrPattern {
  enum class Kind {
    Literal,   // {axis=1}: in a source, the node's attribute equals it (up to defaults)
    Var,       // {perm=%p}: binds (source) or uses (target) an attribute variable
    Computed,  // {perm=$(compose_perm(%p, %q))}: computed from the binding
  } kind = Kind::Literal;
  std::string name;
  AttrValue literal;
  int var = -1;
  Expr expr;
};

struct PatternNode {
  enum class Kind {
    Var,    // an operand variable
    Const,  // `const TYPE {...}`: a literal tensor, or elements computed with $(...)
    Op,     // an operator of the table
    Fold,   // `fold EXPR`: a constant computed by a fold function (targets)
  } kind = Kind::Op;
  std::string label;  // the %name the text gives it (a variable's name for Var)
  int line = 0;       // file line, for messages

  int var = -1;  // Var: the rule variable

  std::optional<Tensor> literal;  // Const: the value, when literal
  TensorType const_type;          // Const: the declared type (computed elements)
  std::vector<Expr> elements;     // Const: one expression per element, when computed

  const OpDef* op = nullptr;  // Op
  std::vector<PatternRef> inputs;
  std::vector<AttrPattern> attrs;
  int spread = -1;  // Op: `...%a`, the attribute-set variable taking every other attribute
  uint32_t num_outputs = 1;

  Expr fold;  // Fold: a tensor-valued expression

  bool computed_const() const { return kind == Kind::Const && !literal; }
};

struct Pattern {
  std::vector<PatternNode> nodes;  // operands before their users
  std::vector<PatternRef> outputs;
  // Node of each rule variable on this side (-1: the side does not use it).
  std::vector<int> var_node;
  // The names the side's statements define (without %), for guards and messages.
  std::map<std::string, PatternRef> names;

  size_t num_ops() const;
};

}  // namespace isomer
