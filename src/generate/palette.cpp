#include "generate/palette.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer::gen {
namespace {

OpVariant variant(std::string op, std::string label, int arity, Attributes attrs = {}, std::string attr_text = "") {
  OpVariant v;
  v.op = std::move(op);
  v.label = std::move(label);
  v.arity = arity;
  v.attrs = std::move(attrs);
  v.attr_text = std::move(attr_text);
  v.commutative = get_op(v.op).props.commutative;
  return v;
}

OpVariant split_variant(int axis) {
  OpVariant v = variant("Split", "Split" + std::to_string(axis), 1, Attributes{{"axis", int64_t{axis}}},
                        "{axis=" + std::to_string(axis) + "}");
  v.split = true;
  v.split_axis = axis;
  return v;
}

OpVariant concat_variant(int axis) {
  return variant("Concat", "Concat" + std::to_string(axis), 2, Attributes{{"axis", int64_t{axis}}},
                 "{axis=" + std::to_string(axis) + "}");
}

OpVariant window_variant(const std::string& op, const std::string& label, int arity, int64_t k) {
  std::vector<int64_t> kernel{k, k};
  if (k == 1) {
    Attributes a{{"kernel_shape", kernel}};
    return variant(op, label, arity, a, "{kernel_shape=[1, 1]}");
  }
  Attributes a{{"kernel_shape", kernel}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  return variant(op, label, arity, a, "{kernel_shape=[3, 3], pads=[1, 1, 1, 1]}");
}

Family elementwise_family() {
  Family f;
  f.name = "elementwise";
  f.letters = {"a", "b"};
  f.sets = {{2, 3}, {4, 2}};
  f.vars = {{"p", {"a", "b"}}, {"q", {"a", "b"}}, {"r", {"a", "b"}}, {"s", {}}};
  // No Relu here: with Sub / Neg / Mul it yields hundreds of piecewise identities that
  // only Z3 can settle (slowly); Relu's structural rules come from the other families.
  f.ops = {variant("Add", "Add", 2), variant("Mul", "Mul", 2), variant("Sub", "Sub", 2), variant("Neg", "Neg", 1)};
  return f;
}

Family matrix_family() {
  Family f;
  f.name = "matrix";
  f.letters = {"a", "b", "c", "d"};
  f.sets = {{2, 3, 4, 5}, {5, 2, 6, 4}};
  f.vars = {{"x", {"a", "b"}}, {"y", {"b", "c"}}, {"z", {"b", "c"}}, {"w", {"c", "d"}}, {"s", {}}};
  f.ops = {variant("MatMul", "MatMul", 2),
           variant("Add", "Add", 2),
           variant("Mul", "Mul", 2),
           variant("Transpose", "Transpose", 1, Attributes{{"perm", std::vector<int64_t>{1, 0}}}, "{perm=[1, 0]}"),
           concat_variant(0),
           concat_variant(1),
           split_variant(0),
           split_variant(1),
           variant("Relu", "Relu", 1)};
  return f;
}

Family conv_family() {
  Family f;
  f.name = "conv";
  f.letters = {"n", "c", "h", "w", "e"};
  f.sets = {{2, 3, 4, 5, 6}, {5, 7, 2, 6, 4}};
  f.vars = {{"i", {"n", "c", "h", "w"}},
            {"j", {"n", "c", "h", "w"}},
            {"k", {"e", "c", "3", "3"}},
            {"l", {"e", "c", "3", "3"}},
            {"m", {"e", "c", "1", "1"}}};
  f.ops = {window_variant("Conv", "Conv3x3", 2, 3),
           window_variant("Conv", "Conv1x1", 2, 1),
           variant("Add", "Add", 2),
           concat_variant(0),
           concat_variant(1),
           split_variant(0),
           split_variant(1),
           variant("Relu", "Relu", 1),
           window_variant("AveragePool", "AveragePool", 1, 3),
           window_variant("MaxPool", "MaxPool", 1, 3)};
  return f;
}

// No two letter sums of 1..3 terms may have the same values in every set.
void check_letters(const Family& f) {
  std::set<std::vector<int64_t>> seen;
  size_t n = f.letters.size();
  for (LetterSum m = 1; m < (LetterSum{1} << (4 * n)); ++m) {
    bool fits = true;
    for (size_t l = 0; l < n; ++l) fits = fits && letter_count(m, l) <= 3;
    if (!fits || sum_terms(m) > 3) continue;
    std::vector<int64_t> values;
    for (size_t s = 0; s < f.num_sets(); ++s) values.push_back(sum_value(f, m, s));
    require(seen.insert(values).second, "generator family '" + f.name + "': letter sums coincide");
  }
}

}  // namespace

int Family::letter_index(const std::string& l) const {
  for (size_t i = 0; i < letters.size(); ++i)
    if (letters[i] == l) return static_cast<int>(i);
  return -1;
}

std::vector<int64_t> Family::var_dims(size_t v, size_t s) const {
  std::vector<int64_t> out;
  for (const std::string& d : vars[v].dims) {
    int li = letter_index(d);
    out.push_back(li >= 0 ? sets[s][static_cast<size_t>(li)] : std::stoll(d));
  }
  return out;
}

std::vector<Family> default_families(const std::vector<std::string>& ops) {
  for (const std::string& name : ops) {
    auto all = palette_op_names();
    require(std::find(all.begin(), all.end(), name) != all.end(),
            "unknown generator operator '" + name + "' (known: Add AveragePool Concat Conv MatMul MaxPool Mul Neg "
            "Relu Split Sub Transpose)");
  }
  std::vector<Family> out;
  for (Family f : {elementwise_family(), matrix_family(), conv_family()}) {
    check_letters(f);
    if (!ops.empty()) {
      std::vector<OpVariant> kept;
      for (OpVariant& v : f.ops)
        if (std::find(ops.begin(), ops.end(), v.op) != ops.end()) kept.push_back(std::move(v));
      f.ops = std::move(kept);
    }
    if (!f.ops.empty()) out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::string> palette_op_names() {
  return {"Add", "AveragePool", "Concat", "Conv", "MatMul", "MaxPool", "Mul", "Neg", "Relu", "Split", "Sub",
          "Transpose"};
}

int letter_count(LetterSum m, size_t letter) { return static_cast<int>((m >> (4 * letter)) & 0xF); }

int sum_terms(LetterSum m) {
  int n = 0;
  for (size_t l = 0; l < 8; ++l) n += letter_count(m, l);
  return n;
}

int64_t sum_value(const Family& f, LetterSum m, size_t set) {
  int64_t v = 0;
  for (size_t l = 0; l < f.letters.size(); ++l) v += letter_count(m, l) * f.sets[set][l];
  return v;
}

LetterSum decompose(const Family& f, const std::vector<int64_t>& values) {
  // Small search: up to three letters, with repetition.
  size_t n = f.letters.size();
  auto matches = [&](LetterSum m) {
    for (size_t s = 0; s < f.num_sets(); ++s)
      if (sum_value(f, m, s) != values[s]) return false;
    return true;
  };
  for (size_t a = 0; a < n; ++a) {
    LetterSum ma = LetterSum{1} << (4 * a);
    if (matches(ma)) return ma;
    for (size_t b = a; b < n; ++b) {
      LetterSum mb = ma + (LetterSum{1} << (4 * b));
      if (matches(mb)) return mb;
      for (size_t c = b; c < n; ++c) {
        LetterSum mc = mb + (LetterSum{1} << (4 * c));
        if (matches(mc)) return mc;
      }
    }
  }
  return 0;
}

std::vector<LetterSum> proper_parts(LetterSum m, size_t num_letters) {
  std::vector<LetterSum> out;
  // Enumerate every count vector below m's, letter by letter.
  std::vector<LetterSum> parts{0};
  for (size_t l = 0; l < num_letters; ++l) {
    std::vector<LetterSum> next;
    for (LetterSum p : parts)
      for (int c = 0; c <= letter_count(m, l); ++c) next.push_back(p + (static_cast<LetterSum>(c) << (4 * l)));
    parts = std::move(next);
  }
  for (LetterSum p : parts)
    if (p != 0 && p != m) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace isomer::gen
