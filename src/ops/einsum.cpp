// Einsum: output[output-labels] = sum over the other labels of the product of the
// operands at their labels. A sum of products, so it has field and symbolic
// semantics from the same templated kernel as its float semantics, and rules
// relating it to MatMul and Transpose can be proved. The runtime lowers the
// contractions of two operands to oneDNN's matmul over views and one operand's
// transposes and sums to views and a reduction (runtime/lower_einsum.cpp).
#include "ops/einsum.h"

#include <algorithm>
#include <map>
#include <optional>

#include "eval/sym.h"
#include "ops/kernels.h"

namespace isomer {
namespace ops {

namespace {

bool is_letter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

// One term: its letters, and where its ellipsis is (-1: none).
struct Term {
  std::string letters;
  int ellipsis_at = -1;
};

Term parse_term(const std::string& text, const std::string& equation) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "...") == 0) {
      require(t.ellipsis_at < 0, "Einsum equation '" + equation + "' has two ellipses in one term");
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else {
      require(is_letter(text[i]), "Einsum equation '" + equation + "' has the character '" + std::string(1, text[i]) +
                                      "' where a letter or '...' belongs");
      t.letters += text[i];
    }
  }
  return t;
}

}  // namespace

EinsumSpec parse_einsum(const std::string& equation, const std::vector<int64_t>& ranks) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), equation));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  require(terms.size() == ranks.size(), "Einsum equation '" + equation + "' has " + std::to_string(terms.size()) +
                                            " terms for " + std::to_string(ranks.size()) + " inputs");
  // Ellipsis dims: as many as the widest operand's ellipsis covers.
  int64_t ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const int64_t explicit_dims = static_cast<int64_t>(terms[k].letters.size());
    if (terms[k].ellipsis_at < 0) {
      require(explicit_dims == ranks[k], "Einsum term '" + terms[k].letters + "' names " +
                                             std::to_string(explicit_dims) + " dims of an input of rank " +
                                             std::to_string(ranks[k]));
    } else {
      require(explicit_dims <= ranks[k], "Einsum term of input " + std::to_string(k) + " names more dims than its rank");
      ell = std::max(ell, ranks[k] - explicit_dims);
    }
  }
  EinsumSpec s;
  std::map<char, int> label;
  s.num_labels = static_cast<int>(ell);
  s.ellipsis.assign(static_cast<size_t>(ell), true);
  auto label_of = [&](char ch) {
    auto [it, fresh] = label.emplace(ch, s.num_labels);
    if (fresh) {
      ++s.num_labels;
      s.ellipsis.push_back(false);
    }
    return it->second;
  };
  std::map<char, int> count;
  for (size_t k = 0; k < terms.size(); ++k) {
    std::vector<int> dims;
    const Term& t = terms[k];
    for (size_t i = 0; i <= t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis_at) {
        const int64_t n = ranks[k] - static_cast<int64_t>(t.letters.size());
        for (int64_t e = ell - n; e < ell; ++e) dims.push_back(static_cast<int>(e));
      }
      if (i < t.letters.size()) {
        dims.push_back(label_of(t.letters[i]));
        ++count[t.letters[i]];
      }
    }
    s.inputs.push_back(std::move(dims));
  }
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dims, then the letters used once, in ASCII order.
    for (int e = 0; e < ell; ++e) s.output.push_back(e);
    for (const auto& [ch, n] : count)
      if (n == 1) s.output.push_back(label.at(ch));
  } else {
    const Term out = parse_term(eq.substr(arrow + 2), equation);
    for (size_t i = 0; i <= out.letters.size(); ++i) {
      if (static_cast<int>(i) == out.ellipsis_at)
        for (int e = 0; e < ell; ++e) s.output.push_back(e);
      if (i < out.letters.size()) {
        auto it = label.find(out.letters[i]);
        require(it != label.end(), "Einsum output label '" + std::string(1, out.letters[i]) + "' names no input dim");
        require(std::find(s.output.begin(), s.output.end(), it->second) == s.output.end(),
                "Einsum output label '" + std::string(1, out.letters[i]) + "' repeats");
        s.output.push_back(it->second);
      }
    }
  }
  return s;
}

std::vector<int64_t> einsum_extents(const EinsumSpec& spec, const std::vector<std::vector<int64_t>>& dims) {
  std::vector<int64_t> ext(static_cast<size_t>(spec.num_labels), -1);
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    for (size_t i = 0; i < spec.inputs[k].size(); ++i) {
      const int l = spec.inputs[k][i];
      int64_t& e = ext[static_cast<size_t>(l)];
      const int64_t d = dims[k][i];
      if (e < 0 || (spec.ellipsis[static_cast<size_t>(l)] && e == 1)) e = d;
      else require(d == e || (spec.ellipsis[static_cast<size_t>(l)] && d == 1),
                   "Einsum operands disagree on a dim: " + std::to_string(e) + " and " + std::to_string(d));
    }
  for (int64_t& e : ext)
    if (e < 0) e = 1;  // an ellipsis dim no operand has (cannot happen with ell from the operands)
  return ext;
}

}  // namespace ops

using namespace ops;

namespace {

std::vector<TensorType> infer_einsum(const InferContext& ctx) {
  std::vector<int64_t> ranks;
  for (const TensorType& t : ctx.inputs) {
    require(is_numeric(t.dtype) && t.dtype != DType::Bool, "Einsum inputs must be numeric");
    require(t.dtype == ctx.in(0).dtype, "Einsum inputs must have one type");
    ranks.push_back(t.rank());
  }
  const EinsumSpec s = parse_einsum(ctx.attrs.get_string("equation"), ranks);
  // A label's dim: the static extent operands agree on (ellipsis dims may also be
  // 1, broadcasting), else a dynamic one.
  std::vector<Dim> ext(static_cast<size_t>(s.num_labels), Dim(1));
  for (int l = 0; l < s.num_labels; ++l) {
    std::optional<int64_t> extent;
    std::optional<Dim> dynamic;
    for (size_t k = 0; k < s.inputs.size(); ++k)
      for (size_t i = 0; i < s.inputs[k].size(); ++i) {
        if (s.inputs[k][i] != l) continue;
        const Dim& d = ctx.in(k).shape[i];
        if (!d.is_static()) dynamic = d;
        else if (d.value == 1 && s.ellipsis[static_cast<size_t>(l)]) continue;
        else if (extent) require(*extent == d.value, "Einsum operands disagree on a dim: " + std::to_string(*extent) +
                                                         " and " + std::to_string(d.value));
        else extent = d.value;
      }
    if (extent) ext[static_cast<size_t>(l)] = *extent;
    else if (dynamic) ext[static_cast<size_t>(l)] = *dynamic;
  }
  Shape out;
  for (int l : s.output) out.push_back(ext[static_cast<size_t>(l)]);
  return {{ctx.in(0).dtype, out}};
}

// The sum over every assignment of the labels of the product of the operands'
// elements there (an operand's broadcast dim of extent 1 reads index 0).
template <class T>
Array<T> einsum(const EinsumSpec& s, const std::vector<const Array<T>*>& in) {
  std::vector<std::vector<int64_t>> dims;
  for (const Array<T>* a : in) dims.push_back(a->dims);
  const std::vector<int64_t> ext = einsum_extents(s, dims);
  std::vector<int64_t> out_dims;
  for (int l : s.output) out_dims.push_back(ext[static_cast<size_t>(l)]);
  Array<T> out(out_dims);
  // Per operand and per label, the element stride that label moves it by.
  std::vector<std::vector<int64_t>> step(in.size(), std::vector<int64_t>(static_cast<size_t>(s.num_labels), 0));
  for (size_t k = 0; k < in.size(); ++k) {
    const std::vector<int64_t> st = strides_of(in[k]->dims);
    for (size_t i = 0; i < s.inputs[k].size(); ++i)
      if (in[k]->dims[i] != 1) step[k][static_cast<size_t>(s.inputs[k][i])] += st[i];
  }
  std::vector<int64_t> out_step(static_cast<size_t>(s.num_labels), 0);
  const std::vector<int64_t> ost = strides_of(out_dims);
  for (size_t i = 0; i < s.output.size(); ++i) out_step[static_cast<size_t>(s.output[i])] = ost[i];
  if (num_elements(ext) == 0) return out;
  std::vector<int64_t> idx(static_cast<size_t>(s.num_labels), 0), off(in.size(), 0);
  int64_t o = 0;
  while (true) {
    T prod = in[0]->data[static_cast<size_t>(off[0])];
    for (size_t k = 1; k < in.size(); ++k) prod = prod * in[k]->data[static_cast<size_t>(off[k])];
    out.data[static_cast<size_t>(o)] = out.data[static_cast<size_t>(o)] + prod;
    int l = s.num_labels - 1;
    for (; l >= 0; --l) {
      const auto u = static_cast<size_t>(l);
      if (++idx[u] < ext[u]) {
        for (size_t k = 0; k < in.size(); ++k) off[k] += step[k][u];
        o += out_step[u];
        break;
      }
      for (size_t k = 0; k < in.size(); ++k) off[k] -= step[k][u] * (ext[u] - 1);
      o -= out_step[u] * (ext[u] - 1);
      idx[u] = 0;
    }
    if (l < 0) break;
  }
  return out;
}

std::vector<int64_t> ranks_of(const std::vector<std::vector<int64_t>>& dims) {
  std::vector<int64_t> r;
  for (const auto& d : dims) r.push_back(static_cast<int64_t>(d.size()));
  return r;
}

template <class T>
Array<T> einsum_of(const Attributes& attrs, const std::vector<Array<T>>& arrays) {
  std::vector<std::vector<int64_t>> dims;
  std::vector<const Array<T>*> ptrs;
  for (const Array<T>& a : arrays) dims.push_back(a.dims), ptrs.push_back(&a);
  return einsum(parse_einsum(attrs.get_string("equation"), ranks_of(dims)), ptrs);
}

std::vector<Tensor> eval_einsum(const EvalContext& ctx) {
  const DType t = ctx.in(0).dtype();
  if (is_float(t)) {
    std::vector<Array<double>> a;
    for (const Tensor& x : ctx.inputs) a.push_back(f64(x));
    return {tensor(t, einsum_of(ctx.attrs, a))};
  }
  std::vector<Array<int64_t>> a;
  for (const Tensor& x : ctx.inputs) a.push_back(i64(x));
  return {tensor(t, einsum_of(ctx.attrs, a))};
}

template <class T>
std::vector<Array<T>> exact_einsum(const Attributes& attrs, std::span<const Array<T>> in) {
  return {einsum_of(attrs, std::vector<Array<T>>(in.begin(), in.end()))};
}

}  // namespace

OpDef def_Einsum() {
  OpDef d;
  d.name = "Einsum";
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.min_opset = 12;
  d.attributes = {{"equation", "string"}};
  d.infer = infer_einsum;
  d.eval = eval_einsum;
  d.eval_field = exact_einsum<Fp>;
  d.eval_sym = exact_einsum<Sym>;
  d.lower = Lowering::Einsum;
  return d;
}

}  // namespace isomer
