#pragma once
// The arithmetic of evaluating an operator on constants, as the optimizer's folding and
// the e-graph's constant evaluation price it: both leave to the runtime what is past
// their limits (a product of two 2048x2048 weights is 1.7e10), rather than spend
// minutes at optimization time.
#include <optional>
#include <span>
#include <string_view>

#include "ir/attributes.h"
#include "ir/shape.h"

namespace isomer {

// Multiply-adds of the contractions (MatMul, MatMulInteger, Gemm, Conv, ConvInteger,
// ConvTranspose, Einsum) plus the elements read and written, for any other operator
// the elements read and written, of operator `op` on inputs and outputs of these
// types; nullopt when a shape is not static.
std::optional<double> fold_flops(std::string_view op, const Attributes& attrs, std::span<const TensorType> in,
                                 std::span<const TensorType> out);

}  // namespace isomer
