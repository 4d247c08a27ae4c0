#pragma once
// Rewrite rules and their text DSL. One rule per entry, a stable name per rule; the
// two sides are written like the graph text format (ir/text.h) over shared variables,
// and parsed once into pattern trees (rules/pattern.h):
//
//   # Two products with a shared left operand become one product and a split.
//   rule matmul_shared_lhs_merge {
//     vars %x, %w1: const, %w2: const
//     where rank(%w1) == 2 && dim(%w1, 0) == dim(%w2, 0)
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
// Variables: `%x` an operand (any tensor), `%w: const` an operand that matches only
// constants (weights a rewrite may combine), `%p: attr` an attribute value
// (`{perm=%p}`), `%a: attrs` every other attribute of a node (`{...%a}`). Source
// output i is replaced by target output i.
// Guards (`where`) and `$(...)` are expressions (rules/expr.h): integers, lists,
// rank/dim/shape of operands, fold functions (rules/fold.h), arithmetic and
// comparisons, && || !. A guard may also name a source value (`same_type(%1, %x)`).
// `%k = fold f(...)` computes a constant tensor (targets). Source attributes are
// matched up to defaults (OpDef::canonical_attrs); the operands of a commutative binary
// operator match in either order.
// Each `verify-shapes` line is one concrete instantiation: a type per operand
// (`%x: f32[2,3]`), a value per attribute variable (`%p = [1, 0]`, `%a = {pads=[1,1,1,1]}`),
// or a fixed constant (`%t = const i64[] {0}`) where a guard needs the data. Loading a
// rule checks it: unbound variables, unknown operators or functions, and sides whose
// output types differ at an instantiation are rejected with the file and line.
// Text inside a rule is kept verbatim, so print(parse(text)) == text for canonical files
// (rules separated by one blank line; `#` lines before a rule are its comment).
// A rule name may carry a family: `eliminate-dropout/ratio` belongs to
// `eliminate-dropout`, which is the name reports count and `--disable` takes.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "rules/expr.h"
#include "rules/pattern.h"
#include "rules/variadic.h"

namespace isomer {

struct Guard {
  std::string text;  // verbatim, for printing
  Expr expr;
};

struct RuleVar {
  enum class Kind { Operand, Attr, Attrs } kind = Kind::Operand;
  std::string name;         // without the %
  bool const_only = false;  // Operand: matches only constants (weights that may be folded)

  bool operand() const { return kind == Kind::Operand; }
};

struct Verdict {
  enum class Kind { None, Proved, Tested, Refuted, Unknown } kind = Kind::None;
  int error_bits = 0;       // Tested: error probability < 2^-error_bits
  int trials = 0;           // Tested: trials per instantiation
  int64_t degree = 0;       // Tested: degree bound used
  double time_s = -1;       // < 0: not recorded
  std::string reason;       // Refuted: the counterexample; Unknown: why
};
std::string print_verdict(const Verdict& v);  // "tested p<2^-174 trials=3 degree=2 time=0.001s"
// "proved", "tested", "refuted", "unknown" or "none": the names reports use.
const char* verdict_kind_name(Verdict::Kind k);

// One verify-shapes instantiation: per variable (vars order) its type (operands), its
// fixed data (operands given as constants), or its value (attribute variables).
struct VerifyBinding {
  std::string text;  // verbatim
  std::vector<TensorType> types;
  std::vector<std::optional<Tensor>> constants;
  std::vector<std::optional<AttrValue>> attrs;
  std::vector<std::optional<Attributes>> attr_sets;
};

struct Rule {
  std::string name;
  std::string comment;                 // `#` lines before the rule, verbatim (with newlines)
  std::vector<RuleVar> vars;
  std::vector<Guard> guards;
  std::vector<VerifyBinding> verify;
  std::vector<std::string> source_lines, target_lines;  // block bodies, trimmed, verbatim
  Verdict verdict;
  int line = 0;                        // where `rule` was, for messages
  int source_first_line = 0, target_first_line = 0;  // file lines of the block bodies
  Pattern source, target;
  // A variadic rule (rules/variadic.h): its template; the fields above are then its
  // expansion for two elements (or the fewest its verify-shapes lines give).
  std::shared_ptr<const VariadicTemplate> variadic;
  // `leave-to-search`: a template rule the greedy pass does not apply before
  // `--search eqsat`, which has it among its rules and takes it where it prices
  // cheaper (a fusion applied first would hide the form other rules match).
  bool leave_to_search = false;
  // `templates-only`: a template rule the search does not take. The greedy engine
  // applies it only where the matched operators have no other reader; an e-graph has
  // no readers to check and would apply it through every shared value (a row
  // selection pushed up a residual stream through all the blocks of a model).
  bool templates_only = false;

  const RuleVar* find_var(std::string_view name) const;
  int var_index(std::string_view name) const;  // -1 if none
  size_t num_outputs() const { return source.outputs.size(); }
  // The family name (before a '/'): what reports count and --disable takes.
  std::string family() const;
  // Usable by the optimizer: proved, or field-tested with error < 2^-60.
  bool usable() const;
};

// `rule` read right to left (named NAME~rev), or nullopt with the reason in `why` when
// its target cannot serve as a pattern (a variable it does not bind, a fold whose value
// cannot be matched). Built on the trees; nothing is re-parsed.
std::optional<Rule> reversed_rule(const Rule& rule, std::string* why = nullptr);

struct RuleSet {
  std::vector<Rule> rules;
  std::string trailer;  // `#` lines after the last rule

  const Rule* find(std::string_view name) const;
};

// Parses and checks a rule file; errors read "file:line: reason".
RuleSet parse_rules(std::string_view text, std::string_view file = "<rules>");
RuleSet load_rules(const std::string& path);
// The same, but a rule with no verify-shapes line is accepted (the expansion of a
// verified variadic rule for a size it was not verified at).
RuleSet parse_rules_unverified(std::string_view text, std::string_view file);
std::string print_rules(const RuleSet& set);
std::string print_rule(const Rule& rule);

// Internal to rules/: parses a side's block lines into a pattern (pattern_parse.cpp).
// `source` selects what the side may contain; errors read "line L: why".
Pattern parse_pattern(const Rule& rule, const std::vector<std::string>& lines, int first_line, bool source,
                      const Pattern* source_side);

}  // namespace isomer
