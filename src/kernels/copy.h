#pragma once
// Data movement of any element type: strided copies (materializing a transpose,
// a slice, a broadcast, a part of a concatenation or a padding's interior),
// fills, and gathers along an axis.
#include <cstddef>
#include <cstdint>
#include <span>

namespace isomer::kernels {

// dst[i] = src[i] for every index i of `dims`, both strided (in elements of
// `elem` bytes; a source stride of 0 broadcasts). Contiguous runs are copied with
// memcpy; 2-D transposes go through cache-sized tiles.
void strided_copy(size_t elem, const void* src, std::span<const int64_t> src_strides, void* dst,
                  std::span<const int64_t> dst_strides, std::span<const int64_t> dims, int threads = 0);

// Fills `count` elements of `elem` bytes with the bytes of `value`.
void fill(size_t elem, void* dst, int64_t count, const void* value);

// Gather along an axis of a contiguous tensor seen as [outer, n, inner]: out[o, j, i]
// = x[o, index[j], i] for j < m, out being [outer, m, inner]. Indices are int64 or
// int32 (index_elem 8 or 4), negative ones count from the end; returns false (and
// writes nothing more) if one is out of [-n, n), setting *bad to it.
bool gather_axis(size_t elem, const void* x, int64_t outer, int64_t n, int64_t inner, const void* index,
                 size_t index_elem, int64_t m, void* out, int64_t* bad, int threads = 0);

}  // namespace isomer::kernels
