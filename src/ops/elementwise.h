#pragma once
// Building blocks of the elementwise operator entries (ops/unary.cpp,
// ops/activation.cpp, ops/compare.cpp): float semantics from a one-line function
// F::apply(x, attrs) evaluated in double, symbolic semantics from the same
// function templated over double and Sym (piecewise ones use select_gt/select_ge),
// and transcendental functions as uninterpreted functions of the verifier.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <string>
#include <variant>

#include "eval/sym.h"
#include "ops/kernels.h"

namespace isomer::ops {

// Evaluates an elementwise float function F::apply(x, attrs) in double precision and
// rounds to the input's type. Integer inputs go through the same function, or through
// its int64_t overload where it has one (Neg, Abs, Sign: exact past 2^53, and INT_MIN
// wraps as ONNX Runtime's does rather than saturating).
template <class F>
std::vector<Tensor> eval_unary(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  if constexpr (requires(int64_t v, const Attributes& at) { { F::apply(v, at) } -> std::same_as<int64_t>; }) {
    if (!is_float(x.dtype())) {
      Array<int64_t> a = i64(x);
      if constexpr (requires(int64_t v) { F::apply_uint64(v); }) {  // Abs, Sign: its bits are no sign
        if (x.dtype() == DType::UInt64) {
          for (int64_t& v : a.data) v = F::apply_uint64(v);
          return {tensor(x.dtype(), a)};
        }
      }
      for (int64_t& v : a.data) v = F::apply(v, ctx.attrs);
      return {tensor(x.dtype(), a)};
    }
  }
  Array<double> a = f64(x);
  for (double& v : a.data) v = F::apply(v, ctx.attrs);
  return {tensor(x.dtype(), a)};
}

inline std::vector<TensorType> infer_float_unary(const InferContext& ctx) {
  require_float(ctx.in(0), "input");
  return {ctx.in(0)};
}

template <class F>
OpDef unary(std::string_view name, bool float_only = true) {
  OpDef d;
  d.name = name;
  d.props.elementwise = true;
  d.infer = float_only ? infer_float_unary : same_as_input0;
  d.eval = eval_unary<F>;
  return d;
}

// Symbolic semantics of an elementwise F::apply(x, attrs) templated over double and Sym.
template <class F>
std::vector<SymArray> sym_unary(const Attributes& attrs, std::span<const SymArray> in) {
  return {map(in[0], [&](Sym x) { return F::apply(x, attrs); })};
}

// A string usable as a template argument: the uninterpreted function's name.
template <size_t N>
struct FunctionName {
  char text[N];
  constexpr FunctionName(const char (&s)[N]) { std::copy_n(s, N, text); }  // NOLINT
};

// The name of `fn` as an uninterpreted function: attributes that change the
// function (Gelu's approximate) become part of it, e.g. "Gelu[approximate=tanh]".
inline std::string uninterpreted_name(std::string name, const Attributes& attrs) {
  std::string sep = "[";
  for (const auto& [key, value] : attrs.items()) {
    name += sep + key + "=";
    sep = ",";
    if (const auto* v = std::get_if<std::string>(&value)) name += *v;
    else if (const auto* i = std::get_if<int64_t>(&value)) name += std::to_string(*i);
    else if (const auto* f = std::get_if<double>(&value)) name += std::to_string(*f);
    else name += "#" + std::to_string(attr_hash(value));
  }
  if (!attrs.empty()) name += "]";
  return name;
}

// The uninterpreted function of one real that the operator entry `fn` (without
// attributes) stands for in the verifier: Exp, Log, Sqrt, Tanh, ... Kernels that
// use one of these functions inside a larger formula call it through here, so
// that a rule relating them to the operator itself can be proved.
inline Sym sym_call(std::string_view fn, Sym x) { return Sym::apply(fn, std::span<const Sym>(&x, 1)); }

// `fn` as an uninterpreted function of one real.
template <FunctionName fn>
std::vector<SymArray> sym_uninterpreted(const Attributes& attrs, std::span<const SymArray> in) {
  const std::string name = uninterpreted_name(fn.text, attrs);
  return {map(in[0], [&](Sym x) { return sym_call(name, x); })};
}

// Uninterpreted for the verifier: a function of its input, nothing more.
template <class F, FunctionName fn>
OpDef transcendental(std::string_view name) {
  OpDef d = unary<F>(name);
  d.eval_sym = sym_uninterpreted<fn>;
  return d;
}

// Exp written once for both element types: std::exp on double, the verifier's
// uninterpreted Exp (the Exp operator's own) on Sym.
inline double exp_of(double x) { return std::exp(x); }
inline Sym exp_of(Sym x) { return sym_call("Exp", x); }

}  // namespace isomer::ops
