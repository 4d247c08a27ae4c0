#pragma once
// Rewrite rules and their text DSL. One rule per entry, a stable name per rule; the
// two sides are written in the graph text format (ir/text.h) over shared pattern
// variables, so a rule reads like the graphs it rewrites:
//
//   # Two products with a shared left operand become one product and a split.
//   rule matmul_shared_lhs_merge {
//     vars %x, %w1: const, %w2: const
//     where rank(%w1) == 2
//     where dim(%w1, 0) == dim(%w2, 0)
//     verify-shapes %x: f32[2,3], %w1: f32[3,4], %w2: f32[3,5]
//     source {
//       %0 = MatMul(%x, %w1)
//       %1 = MatMul(%x, %w2)
//       return %0, %1
//     }
//     target {
//       %c = Concat(%w1, %w2) {axis=1}
//       %m = MatMul(%x, %c)
//       %s = const i64[2] {$(dim(%w1, 1)), $(dim(%w2, 1))}
//       %0, %1 = Split(%m, %s) {axis=-1}
//       return %0, %1
//     }
//     verdict tested p<2^-174 trials=3 degree=2 time=0.0012s
//   }
//
// `: const` restricts a variable to constants (weights a later fold can combine);
// source output i is replaced by target output i; $(expr) is computed from the match.
// Header lines (vars, where, verify-shapes, verdict) are re-printed from their parsed
// form; block lines are graph text and may carry `#` comments.
// Variables carry no shapes: a rule applies at any shapes its guards allow. Each
// `verify-shapes` line is one concrete instantiation; loading a rule builds both sides
// at every instantiation, so unbound variables, unknown operators and sides whose
// output types differ are rejected when the rule is read. Guard and $(...) expressions:
// integers, rank(%v), dim(%v, i) (i < 0 counts from the end), + - *, parentheses;
// guards compare with == != < <= > >=. Source attributes are matched up to defaults (they
// are the attribute constraints); a guard on a symbolic dim fails (never guessed).
// Text inside a rule is kept verbatim, so print(parse(text)) == text for canonical
// files (rules separated by one blank line; `#` lines before a rule are its comment).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace isomer {

// A small integer expression over the shapes of matched variables.
struct ShapeExpr {
  enum class Kind { Int, Rank, Dim, Add, Sub, Mul, Neg } kind = Kind::Int;
  int64_t value = 0;        // Int: the value; Dim: the axis
  std::string var;          // Rank, Dim: the variable's name (without %)
  std::vector<ShapeExpr> args;
};

// Evaluates `e` given each variable's type; nullopt where a needed dim is symbolic
// or an axis is out of range.
using VarTypeFn = std::function<const TensorType*(const std::string& var)>;
std::optional<int64_t> eval_shape_expr(const ShapeExpr& e, const VarTypeFn& type_of);

struct Guard {
  std::string text;  // verbatim, for printing
  ShapeExpr lhs, rhs;
  std::string op;    // == != < <= > >=
};

struct RuleVar {
  std::string name;           // without the %
  bool const_only = false;    // matches only Constant nodes (weights that may be folded)
};

struct Verdict {
  enum class Kind { None, Proved, Tested, Refuted, Unknown } kind = Kind::None;
  int error_bits = 0;       // Tested: error probability < 2^-error_bits
  int trials = 0;           // Tested: trials per instantiation
  int64_t degree = 0;       // Tested: degree bound used
  double time_s = -1;       // < 0: not recorded
  std::string reason;       // Refuted: the counterexample; Unknown: why
};
std::string print_verdict(const Verdict& v);
// "proved", "tested", "refuted", "unknown" or "none": the names reports use.
const char* verdict_kind_name(Verdict::Kind k);  // "tested p<2^-174 trials=3 degree=2 time=0.001s"

struct Rule {
  std::string name;
  std::string comment;                 // `#` lines before the rule, verbatim (with newlines)
  std::vector<RuleVar> vars;
  std::vector<Guard> guards;
  // Per instantiation: the text after `verify-shapes`, and one type per var (vars order).
  std::vector<std::string> verify_text;
  std::vector<std::vector<TensorType>> verify_shapes;
  std::vector<std::string> source_lines, target_lines;  // block bodies, trimmed, verbatim
  Verdict verdict;
  int line = 0;                        // where `rule` was, for messages
  int source_first_line = 0, target_first_line = 0;  // file lines of the block bodies

  // The source side built at verify instantiation 0: the pattern the matcher walks
  // (its Input nodes are the variables, in vars order; types are ignored by matching).
  Graph source_pattern;

  const RuleVar* find_var(std::string_view name) const;
  size_t num_outputs() const { return source_pattern.outputs().size(); }
  // Both sides as graphs with the given variable types (vars order), $(...) evaluated
  // against those types. Throws Error if a side does not build (shape rule rejects it).
  Graph build_source(const std::vector<TensorType>& var_types) const;
  Graph build_target(const std::vector<TensorType>& var_types) const;
  // True if every guard holds for these variable types (false where undecidable).
  bool guards_hold(const std::vector<TensorType>& var_types, std::string* failed = nullptr) const;
  // Usable by the optimizer: proved, or field-tested with error < 2^-60.
  bool usable() const;
};

struct RuleSet {
  std::vector<Rule> rules;
  std::string trailer;  // `#` lines after the last rule

  const Rule* find(std::string_view name) const;
};

// Parses and checks a rule file; errors read "file:line: reason".
RuleSet parse_rules(std::string_view text, std::string_view file = "<rules>");
RuleSet load_rules(const std::string& path);
std::string print_rules(const RuleSet& set);
std::string print_rule(const Rule& rule);

}  // namespace isomer
