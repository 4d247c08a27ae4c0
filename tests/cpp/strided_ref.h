// Tests' shorthand for an operand of the pointwise kernel and of GEMM epilogues.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "kernels/pointwise.h"

namespace isomer::kernels {

inline StridedRef ref(const void* p, DType t, std::vector<int64_t> strides, int64_t offset = 0) {
  StridedRef r;
  r.data = p;
  r.dtype = t;
  r.strides = std::move(strides);
  r.offset = offset;
  return r;
}

}  // namespace isomer::kernels
