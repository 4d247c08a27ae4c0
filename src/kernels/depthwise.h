#pragma once
// A depthwise 2-D convolution (one filter per channel, multiplier 1) over dense
// channels-last tensors, with its activation applied in the same pass. oneDNN's
// depthwise kernels take SiLU and sigmoid only as post-ops evaluated one vector at
// a time (slower than its convolution and a separate pass together), so the
// runtime ran them as a second pass over the output; here the activation runs on
// the accumulators before they are stored, and the output is written once.
#include <cstdint>

#include "kernels/pointwise.h"

namespace isomer::kernels {

struct DepthwiseGeometry {
  int64_t batch = 1, channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t k_h = 0, k_w = 0, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0, dil_h = 1, dil_w = 1;
};

// Whether depthwise_nhwc applies `act` (Copy: none).
bool depthwise_activation_supported(PwOp act);

// y[n, oy, ox, c] = act(bias[c] + sum over (ky, kx) of x[n, iy, ix, c] w[ky, kx, c]),
// iy = oy stride_h - pad_top + ky dil_h (likewise ix), terms outside the input left
// out. x: [batch, in_h, in_w, channels], y: [batch, out_h, out_w, channels], dense;
// w: [k_h, k_w, channels]; bias: [channels]. Rows are shared among `threads`.
void depthwise_nhwc(const DepthwiseGeometry& g, const float* x, const float* w, const float* bias, PwOp act,
                    float* y, int threads);

}  // namespace isomer::kernels
