// What constant folding prices a fold at (ops/fold_cost.h): the arithmetic
// of the contractions, whose work grows faster than their inputs and outputs (a chain of
// 4096x4096 weight products is 1.4e11 multiply-adds per link), and the elements read
// and written for every other operator.
#include <algorithm>
#include <map>

#include "ops/fold_cost.h"

namespace isomer {

namespace {

std::optional<double> elements(const TensorType& t) {
  const std::optional<int64_t> n = num_elements(t.shape);
  return n ? std::optional<double>(static_cast<double>(*n)) : std::nullopt;
}

std::optional<double> extent(const TensorType& t, int64_t axis) {
  if (axis < 0 || axis >= t.rank() || !t.shape[axis].is_static()) return std::nullopt;
  return static_cast<double>(t.shape[axis].value);
}

// Einsum: one multiply-add per combination of every label's extent. An ellipsis stands
// for axes the labels do not name: bounded by the output's elements times the largest
// input's.
std::optional<double> einsum_flops(const Attributes& attrs, std::span<const TensorType> in, double out_elems) {
  const std::string eq = attrs.get_string("equation", "");
  const std::string lhs = eq.substr(0, eq.find("->"));
  if (lhs.find('.') != std::string::npos) {
    double largest = 0;
    for (const TensorType& t : in) largest = std::max(largest, elements(t).value_or(0));
    return out_elems * std::max(1.0, largest);
  }
  std::map<char, double> extents;
  size_t term = 0, axis = 0;
  for (char c : lhs) {
    if (c == ',') {
      ++term;
      axis = 0;
    } else if (c != ' ') {
      if (term >= in.size()) return std::nullopt;
      const std::optional<double> e = extent(in[term], static_cast<int64_t>(axis++));
      if (!e) return std::nullopt;
      extents[c] = std::max(extents[c], *e);
    }
  }
  double product = 1;
  for (const auto& [label, e] : extents) product *= e;
  return product;
}

}  // namespace

std::optional<double> fold_flops(std::string_view op, const Attributes& attrs, std::span<const TensorType> in,
                                 std::span<const TensorType> out) {
  double moved = 0, out_elems = 0;
  for (const TensorType& t : in) {
    const std::optional<double> n = elements(t);
    if (!n) return std::nullopt;
    moved += *n;
  }
  for (const TensorType& t : out) {
    const std::optional<double> n = elements(t);
    if (!n) return std::nullopt;
    out_elems += *n;
  }
  moved += out_elems;
  if ((op == "MatMul" || op == "MatMulInteger" || op == "Gemm") && !in.empty() && in[0].rank() > 0) {
    // Each output element sums over A's last axis (its first under Gemm's transA).
    const bool trans = op == "Gemm" && attrs.get_int("transA", 0) != 0;
    const std::optional<double> k = extent(in[0], trans ? 0 : in[0].rank() - 1);
    return k ? std::optional<double>(moved + out_elems * *k) : std::nullopt;
  }
  if ((op == "Conv" || op == "ConvInteger" || op == "ConvTranspose") && in.size() > 1 && in[1].rank() > 0) {
    // Conv: each output element sums over a filter, the weight's elements over its M
    // filters. ConvTranspose: each input element spreads over the weight's elements
    // over its C input channels.
    const std::optional<double> w = elements(in[1]), first = extent(in[1], 0), x = elements(in[0]);
    if (!w || !first || !x || *first == 0) return std::nullopt;
    return moved + (op == "ConvTranspose" ? *x : out_elems) * (*w / *first);
  }
  if (op == "Einsum") {
    const std::optional<double> f = einsum_flops(attrs, in, out_elems);
    return f ? std::optional<double>(moved + *f) : std::nullopt;
  }
  return moved;
}

}  // namespace isomer
