#pragma once
// Variadic rules: one rule for any number of parallel operators (n matmuls that share
// an input merged at once, as NasRNN's 8 gates need; Q/K/V of a transformer layer):
//
//   rule matmul-merge {
//     vars %x, %w...: const
//     where rank(%x) == 2 && rank(%w...) == 2
//     verify-shapes %x: f32[2,3], %w1: f32[3,4], %w2: f32[3,5]
//     verify-shapes %x: f32[2,3], %w1: f32[3,4], %w2: f32[3,5], %w3: f32[3,1]
//     source {
//       %y... = MatMul(%x, %w...)
//       return %y...
//     }
//     target {
//       %c = Concat(%w...) {axis=1}
//       %m = MatMul(%x, %c)
//       %s = const i64[N] {$(dim(%w..., 1))}
//       %y... = Split(%m, %s) {axis=1}
//       return %y...
//     }
//   }
//
// `%w...` is a list of variables, `%y...` a list of values. The rule stands for its
// expansion at every n >= 2, made from the text line by line:
//   - a statement that defines `%y...` from a list operand (`%w...`) is repeated once
//     per element (`%y1 = MatMul(%x, %w1)`, ...);
//   - elsewhere a list is written out in place: `Concat(%w...)` is `Concat(%w1, ...,
//     %wn)`, `%y... = Split(...)` defines n outputs, `return %y...` returns them;
//   - `$(...)` around a list is repeated per element (`$(dim(%w1, 1)), ...`) and `N` in
//     a type is n;
//   - a guard over a list holds for every element.
// Each verify-shapes line names the elements it gives (`%w1`, `%w2`, ...): the rule is
// verified at the expansion of that many elements. Matchers that know variadic rules
// (the e-graph) match one element everywhere, group the matches by what the elements
// share, and apply the expansion for the size of each group; others use the
// expansion for two elements.
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace isomer {

struct Rule;

struct VariadicTemplate {
  std::vector<std::string> lines;  // the rule as written, `rule NAME {` to `}`
  std::set<std::string> names;     // the lists (variables and values), without % and ...
  std::set<std::string> vars;      // the list variables among them
  std::string file;
  int first_line = 0;
};

// True if a `vars` line declares a list.
bool declares_list(std::string_view vars_line);

// The template of the rule whose lines (header to closing brace) are `lines`.
VariadicTemplate make_template(std::vector<std::string> lines, std::string file, int first_line);

// The element counts the verify-shapes lines give (sorted, distinct).
std::vector<size_t> verify_arities(const VariadicTemplate& t);

// The rule text expanded for `n` elements: verify-shapes lines of that arity only.
std::string expand_template(const VariadicTemplate& t, size_t n);

// `rule` (variadic) expanded for n elements, checked like any rule; with no
// verify-shapes line of that arity it is built without instantiations (the expansion of
// a verified template). Throws Error if it does not load.
Rule expand_variadic(const Rule& rule, size_t n);

}  // namespace isomer
