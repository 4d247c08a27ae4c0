#pragma once
// Outputs that need no computing: every one numeric, at static dims, with no elements.
// Operators size their index tables by the output's extents, so a Transpose, Slice or
// Gather of a [0, 2^40] tensor (valid: an Expand or Pad of a small constant makes one)
// built a 2^40-entry table before finding nothing to copy, and the evaluator, the
// template passes' folding and the runtime's compiler refused the model as out of memory.
#include <optional>
#include <span>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"

namespace isomer {

inline std::optional<std::vector<Tensor>> empty_outputs(const std::vector<TensorType>& types) {
  if (types.empty()) return std::nullopt;
  for (const TensorType& t : types) {
    bool zero = false;
    if (!is_numeric(t.dtype)) return std::nullopt;
    for (const Dim& d : t.shape) {
      if (!d.is_static()) return std::nullopt;
      zero = zero || d.value == 0;
    }
    if (!zero) return std::nullopt;
  }
  std::vector<Tensor> out;
  for (const TensorType& t : types) out.push_back(Tensor::from_f64(t.dtype, static_dims(t.shape), {}));
  return out;
}

}  // namespace isomer
