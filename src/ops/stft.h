#pragma once
// STFT's geometry (ops/stft.cpp), shared by the operator entry and the runtime's lowering.
#include <cstdint>
#include <vector>

#include "ir/attributes.h"
#include "kernels/dft.h"

namespace isomer::ops {

// signal [batch, n, parts] cut into `frames` frames of `length` samples, `step` apart,
// each (times the window) transformed into `bins` frequencies: [batch, frames, bins, 2].
struct StftShape {
  int64_t batch = 1, n = 1, parts = 1, step = 1, length = 1, frames = 0, bins = 1;
  // The transform of one frame (kernels/dft.h): outer 1, inner 1.
  kernels::DftShape frame() const;
};

// The frames of a signal of dims `dims`, `step` apart, `window_length` (-1: no window)
// and `frame_length` (-1: not given) long, with the node's attributes; throws
// InvalidNode for a form ONNX does not define.
StftShape stft_geometry(const Attributes& attrs, const std::vector<int64_t>& dims, int64_t step,
                        int64_t window_length, int64_t frame_length);

}  // namespace isomer::ops
