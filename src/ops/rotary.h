#pragma once
// RotaryEmbedding's geometry (kernels/rotary.h) from its attributes and operand
// extents, checked as ONNX defines them: for the evaluator and the runtime alike.
#include <cstdint>
#include <vector>

#include "ir/attributes.h"
#include "kernels/rotary.h"

namespace isomer {

// X's, the cos cache's and position_ids' extents (`positions` null: none given).
// Throws InvalidNode where the operands do not fit together.
kernels::RotaryShape rotary_shape(const Attributes& attrs, const std::vector<int64_t>& x,
                                  const std::vector<int64_t>& cos, const std::vector<int64_t>* positions);

}  // namespace isomer
