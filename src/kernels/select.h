#pragma once
// Selection and placement by value or index: the k extreme elements along an axis
// (TopK), element-wise scatters along an axis (ScatterElements) and one-hot
// encodings (OneHot). Tensors are contiguous, seen as [outer, n, inner] around the
// axis; the outer rows run in parallel where there is enough work.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/copy.h"  // ScatterReduce

namespace isomer::kernels {

// TopK along the middle axis of x [outer, n, inner]: values [outer, k, inner] and
// their int64 indices. An element comes before another when it is larger (smallest
// = false) or smaller, NaN counting above every number, ties in index order (ONNX
// Runtime's order). The result is always sorted. 0 <= k <= n; indices may be
// nullptr (only the values wanted).
void top_k(const float* x, float* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads = 0);
void top_k(const int64_t* x, int64_t* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads = 0);
void top_k(const int32_t* x, int32_t* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads = 0);

// ScatterElements in place on y (a copy of the data, row-major of y_dims): for each
// position p of the index tensor (index_dims, same rank, each dim within y's except
// along `axis`), y at p with its coordinate along `axis` replaced by index[p]
// (negative counts from the end) takes, or combines with, updates[p], in order.
// Indices are int64 or int32 (index_elem 8 or 4). Reductions other than None need
// float32 elements. Returns false on an index out of range (*bad = it) before
// writing anything.
bool scatter_elements(size_t elem, void* y, std::span<const int64_t> y_dims, const void* index, size_t index_elem,
                      std::span<const int64_t> index_dims, int64_t axis, const void* updates, ScatterReduce reduce,
                      int64_t* bad);

// OneHot: out [outer, depth, inner] is on_value where the index at [outer, inner]
// (negative counts from the end: index + depth) equals the position along depth,
// off_value elsewhere; an index outside [-depth, depth) gives a row of off_value.
// Elements of `elem` bytes (on and off point at one element each); indices int64,
// int32 or float32 (truncated toward zero, as ONNX Runtime reads them).
enum class IndexKind { Int64, Int32, Float32 };
void one_hot(size_t elem, const void* index, IndexKind kind, int64_t outer, int64_t inner, int64_t depth,
             const void* on, const void* off, void* out, int threads = 0);

}  // namespace isomer::kernels
