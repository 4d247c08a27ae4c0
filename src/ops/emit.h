#pragma once
// Pieces of the operator entries' `emit_pointwise` hooks (op.h): how an
// elementwise operator computes one element, as instructions of a fused pointwise
// kernel (kernels/pointwise.h).
#include <optional>
#include <span>

#include "kernels/pointwise.h"
#include "ops/op.h"

namespace isomer::ops {

using kernels::PwOp;

// The value of constant input i if it is one element, else nullopt.
inline std::optional<double> scalar_constant(std::span<const Tensor* const> c, size_t i) {
  if (i >= c.size() || !c[i] || c[i]->numel() != 1 || !is_numeric(c[i]->dtype())) return std::nullopt;
  return c[i]->f64_at(0);
}

template <PwOp Op>
int emit_unary(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(Op, in[0]);
}

template <PwOp Op>
int emit_binary(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const>) {
  return p.emit(Op, in[0], in[1]);
}

// Variadic Max/Min/Sum/Mean: the binary instruction folded over the inputs.
template <PwOp Op>
int emit_fold(kernels::PwProgram& p, const Attributes&, std::span<const int> in, std::span<const Tensor* const>) {
  int acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) acc = p.emit(Op, acc, in[i]);
  return in.size() == 1 ? p.emit(PwOp::Copy, acc) : acc;
}

}  // namespace isomer::ops
