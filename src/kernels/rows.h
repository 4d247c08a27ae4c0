#pragma once
// Kernels over one axis of a contiguous float32 tensor seen as [outer, n, inner]:
// reductions, softmax and normalization. inner == 1 is the common case (the last
// axis: rows of n contiguous values); inner > 1 walks the axis with stride inner
// and vectorizes across the inner lanes instead. Max and Min propagate NaN.
#include <cstdint>

namespace isomer::kernels {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSumExp };

// out[o, i] = reduce over k of x[o, k, i]; out is [outer, inner].
void reduce_axis(ReduceKind kind, const float* x, float* out, int64_t outer, int64_t n, int64_t inner, int threads = 0);

// Softmax (or log-softmax) along the middle axis of [outer, n, inner]: max-shifted,
// exact for large logits.
void softmax_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, int threads = 0);

// Layer normalization of each of `rows` rows of n values: (x - mean) / sqrt(var + eps)
// * scale + bias (bias may be null). rms: no mean subtracted, x / sqrt(mean(x^2) + eps)
// * scale (RMSNormalization). Statistics in double precision-free two passes over
// the row while it is in cache.
void normalize_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms, int threads = 0);

}  // namespace isomer::kernels
