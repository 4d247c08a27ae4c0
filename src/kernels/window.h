#pragma once
// Max and average pooling over the layouts convolutions write, where each pixel's
// channels lie together: oneDNN's channel-blocked nChw8c and nChw16c
// ([N][C / L][H][W][L]) and channels-last nhwc ([N][H][W][C], one block of all C).
// Each output pixel is the lane-wise max or sum of a window of pixel vectors, so
// the loop is a few vector instructions per output vector; 3-wide windows reuse
// each input column's reduction over the window's rows. oneDNN 2.6's AVX2 pooling
// took 10 ns per output element on SqueezeNet's first pool, seven times ONNX
// Runtime; its AVX-512 one 10-20% longer than this on 16-channel blocks.
#include <cstdint>

namespace isomer::kernels {

struct Pool2d {
  // [batch][blocks][in_h][in_w][lanes]: lanes channels lie together in each pixel
  // (a block of 8 or 16; channels last: all channels, in one block).
  int64_t batch = 1, blocks = 1, lanes = 8;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // window positions before the input
  int64_t dilation_h = 1, dilation_w = 1;
  bool average = false;    // else max
  bool count_pad = false;  // average: divide by the whole window, else by its positions inside the input
};

// y = pooling of x, both in p's layout. Positions of a window outside the input do
// not count (ONNX MaxPool; AveragePool unless count_pad); a NaN in a max window is
// its result; a max window with no position inside the input gives -inf.
void pool_2d(const float* x, float* y, const Pool2d& p, int threads = 0);

}  // namespace isomer::kernels
