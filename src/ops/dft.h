#pragma once
// DFT's geometry (ops/dft.cpp), shared by the operator entry and the runtime's lowering.
#include <vector>

#include "ir/attributes.h"
#include "ir/tensor.h"
#include "kernels/dft.h"

namespace isomer::ops {

// The axis (input 2, default -2) normalized into [0, rank - 2]; throws InvalidNode
// if it is out of range.
int64_t dft_axis(const Tensor* axis, int64_t rank);

// The transform of an input of dims `dims` ([..., parts]) along `axis`, of length
// `length` (dft_length's value; -1: the signal's own length), with the node's
// attributes; throws InvalidNode for a form ONNX does not define.
kernels::DftShape dft_geometry(const Attributes& attrs, const std::vector<int64_t>& dims, int64_t axis, int64_t length);

}  // namespace isomer::ops
