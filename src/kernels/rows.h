#pragma once
// Kernels over one axis of a contiguous float32 tensor seen as [outer, n, inner]:
// reductions, arg-max/min, running sums, softmax and normalization. inner == 1 is the common case (the last
// axis: rows of n contiguous values); inner > 1 walks the axis with stride inner
// and vectorizes across the inner lanes instead. Max and Min propagate NaN.
#include <cstdint>

#include "kernels/vector_isa.h"

namespace isomer::kernels {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

// out[o, i] = reduce over k of x[o, k, i]; out is [outer, inner].
void reduce_axis(ReduceKind kind, const float* x, float* out, int64_t outer, int64_t n, int64_t inner, int threads = 0);

// Softmax (or log-softmax) along the middle axis of [outer, n, inner]: max-shifted,
// exact for large logits. With `nan_to`, every NaN of the result (a row masked
// whole, all -inf) becomes *nan_to: torch's exports follow attention's softmax
// with Where(IsNaN(p), 0, p), which then needs no pass of its own.
void softmax_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, int threads = 0,
                  const float* nan_to = nullptr);

// Layer normalization of each of `rows` rows of n values: (x - mean) / sqrt(var + eps)
// * scale + bias (bias may be null). rms: no mean subtracted, x / sqrt(mean(x^2) + eps)
// * scale (RMSNormalization). Statistics in double precision-free two passes over
// the row while it is in cache.
void normalize_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms, int threads = 0);

// One row of softmax_axis (inner == 1) or of normalize_rows through the kernels of
// one instruction set (the axis functions take the best the CPU has), so that
// tests can compare the paths; throws if the CPU lacks `isa`.
void softmax_row(VectorIsa isa, const float* x, float* y, int64_t n, bool log);
// A softmax row left unnormalized: y = exp(x - max x) (zeros for a row of -inf),
// returning the sum of y; for a caller that divides later, fewer numbers than the
// row (attention divides each row of P V, Dv numbers, not P's T).
float softmax_exp_row(VectorIsa isa, const float* x, float* y, int64_t n);
void layer_norm_row(VectorIsa isa, const float* x, float* y, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms);

// out[o, i] = the index k of the largest (max) or smallest value x[o, k, i]; the
// first such k, or the last with `last`. A NaN wins over every number in both
// (the first NaN, as NumPy's argmax and argmin find it). n >= 1.
void argmax_axis(const float* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads = 0);
// The same over int32 and int64 data (CLIP's pooling takes the arg-max of token ids).
void argmax_axis(const int32_t* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads = 0);
void argmax_axis(const int64_t* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads = 0);

// Running sums along the middle axis of [outer, n, inner]: y[o, k, i] = sum of
// x[o, j, i] for j <= k (exclusive: j < k; reverse: j >= k, resp. j > k).
// Integer sums wrap around (two's complement), as ONNX Runtime's do.
void cumsum_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads = 0);
void cumsum_axis(const double* x, double* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads = 0);
void cumsum_axis(const int64_t* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads = 0);
void cumsum_axis(const int32_t* x, int32_t* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads = 0);

// Group normalization of x, [batch, channels, spatial] with `groups` groups of
// channels / groups consecutive channels: each group of each batch element is
// normalized over its channels and spatial positions, then y = x̂ * scale[c] +
// bias[c] per channel. InstanceNormalization is groups == channels. x and y are
// dense in blocks of `block` channels: channel c at position s is at
// (c / block) * block * spatial + s * block + c % block (1: plain; 16: nChw16c
// without padding; channels: channels last). A group fills whole blocks or lies
// in one: channels / groups a multiple or a divisor of block.
void normalize_groups(const float* x, float* y, int64_t batch, int64_t channels, int64_t spatial, int64_t groups,
                      const float* scale, const float* bias, float eps, int threads = 0, int64_t block = 1);

// LRN over NCHW... (dense, channels then `spatial` positions): y = x / (bias +
// alpha / size * sum of x^2 over channels c - below .. c + above) ^ beta.
void local_response_norm(const float* x, float* y, int64_t batch, int64_t channels, int64_t spatial, int64_t below,
                         int64_t above, float alpha_over_size, float beta, float bias, int threads = 0);

}  // namespace isomer::kernels
