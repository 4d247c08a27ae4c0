#pragma once
// What the rule generator enumerates over: "families" of input variables and operator
// variants. Graphs of one family only combine that family's variables, which keeps
// the enumeration tractable (a convolution kernel and a matrix never meet anyway):
//
//   elementwise  p, q, r: [a,b], s: []          Add Mul Sub Neg
//   matrix       x: [a,b], y, z: [b,c], w: [c,d], s: []
//                                               MatMul Add Mul Transpose Concat Split Relu
//   conv         i, j: [n,c,h,w], k, l: [e,c,3,3], m: [e,c,1,1]
//                                               Conv (3x3 pad 1, 1x1) Add Concat Split Relu
//                                               AveragePool MaxPool (3x3 pad 1 stride 1)
//
// Shapes are written with dim LETTERS. Each family has two shape sets (concrete values
// for its letters), chosen so that no two letter sums of up to three terms agree in
// both sets at once: a graph that type-checks only because of a coincidence in one set
// fails the other, and a concrete dim tuple over the sets names at most one letter sum
// (which is how Split finds the boundary of an earlier Concat: its sizes are letter
// sums, written as $(dim(...)) expressions in the rule).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attributes.h"

namespace isomer::gen {

struct PaletteVar {
  std::string name;                 // palette name (the rule renames to %x, %y, ... )
  std::vector<std::string> dims;    // one entry per axis: a letter, or a literal like "3"
};

struct OpVariant {
  std::string op;          // operator name in the op table
  Attributes attrs;
  std::string attr_text;   // the attributes in graph-text form ("" or "{axis=1}")
  std::string label;       // short unique label, e.g. "Concat1", "Conv3x3"
  int arity = 1;           // 1 or 2 data inputs
  bool commutative = false;
  bool split = false;      // Split: 2 outputs at the boundary of a letter sum
  int split_axis = 0;
};

struct Family {
  std::string name;
  std::vector<std::string> letters;
  std::vector<std::vector<int64_t>> sets;  // sets[s][letter index]
  std::vector<PaletteVar> vars;
  std::vector<OpVariant> ops;

  size_t num_sets() const { return sets.size(); }
  int letter_index(const std::string& l) const;  // -1 for a literal
  // Concrete dims of var `v` in shape set `s`.
  std::vector<int64_t> var_dims(size_t v, size_t s) const;
};

// The default families restricted to operators named in `ops` (empty = all); families
// left without operators are dropped. Throws Error for an unknown operator name.
std::vector<Family> default_families(const std::vector<std::string>& ops = {});

// All operator names the default families use.
std::vector<std::string> palette_op_names();

// A multiset of letters as counts (4 bits per letter): the symbolic value of a dim.
using LetterSum = uint32_t;
// The letter sum (1 to 3 terms) whose values over the shape sets are `values`; 0 if none.
LetterSum decompose(const Family& f, const std::vector<int64_t>& values);
int sum_terms(LetterSum m);
int letter_count(LetterSum m, size_t letter);
int64_t sum_value(const Family& f, LetterSum m, size_t set);
// Proper non-empty sub-multisets of `m` (candidate first parts of a split), ascending.
std::vector<LetterSum> proper_parts(LetterSum m, size_t num_letters);

}  // namespace isomer::gen
