#pragma once
// Max pooling over the channel-blocked layout convolutions write (oneDNN's
// nChw8c and nChw16c: [N][C / L][H][W][L] with L lanes of channels innermost):
// each output is the lane-wise max of a window of L-lane vectors, so the loop is
// a handful of vector max instructions per output vector. oneDNN 2.6's AVX2
// pooling kernel took 10 ns per output element on SqueezeNet's first pool, seven
// times ONNX Runtime.
#include <cstdint>

namespace isomer::kernels {

struct Pool2d {
  int64_t batch = 1, blocks = 1, lanes = 8;  // channels = blocks * lanes
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;     // window positions before the input: ignored
  int64_t dilation_h = 1, dilation_w = 1;
};

// y = max pooling of x, both blocked with p.lanes (8 or 16) lanes. Positions of a
// window outside the input do not count (ONNX MaxPool); a NaN in a window is its
// result; a window with no position inside the input gives -inf.
void max_pool_blocked(const float* x, float* y, const Pool2d& p, int threads = 0);

}  // namespace isomer::kernels
