#pragma once
// Data movement of any element type: strided copies (materializing a transpose,
// a slice, a broadcast, a part of a concatenation or a padding's interior),
// fills, gathers along an axis, triangles of matrices, and element-wise gathers
// and scatters by index.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace isomer::kernels {

// dst[i] = src[i] for every index i of `dims`, both strided (in elements of
// `elem` bytes; a source stride of 0 broadcasts). Contiguous runs are copied with
// memcpy; 2-D transposes go through cache-sized tiles.
void strided_copy(size_t elem, const void* src, std::span<const int64_t> src_strides, void* dst,
                  std::span<const int64_t> dst_strides, std::span<const int64_t> dims, int threads = 0);

// Channel planes to channels last: y[n, p, c] = x[n, c, p] for `batch` images of
// `channels` planes of `pixels` floats, both dense (NCHW to NHWC). For the few
// channels of an image input (RGB), where oneDNN's reorder stores one float at a
// time (224 x 224 x 3 in cache: 0.041 ms, here 0.01; from memory, inside whole
// runs, 0.043 -> 0.028).
void planes_to_channels_last(const float* x, int64_t batch, int64_t channels, int64_t pixels, float* y,
                             int threads = 1);

// Fills `count` elements of `elem` bytes with the bytes of `value`.
void fill(size_t elem, void* dst, int64_t count, const void* value);

// Gather along an axis of a contiguous tensor seen as [outer, n, inner]: out[o, j, i]
// = x[o, index[j], i] for j < m, out being [outer, m, inner]. Indices are int64 or
// int32 (index_elem 8 or 4), negative ones count from the end; returns false (and
// writes nothing more) if one is out of [-n, n), setting *bad to it.
bool gather_axis(size_t elem, const void* x, int64_t outer, int64_t n, int64_t inner, const void* index,
                 size_t index_elem, int64_t m, void* out, int64_t* bad, int threads = 0);

// Trilu on `mats` row-major matrices of rows x cols: y keeps element (i, j) where
// j - i >= k (upper) or j - i <= k (lower) and is zero elsewhere. x == y is allowed.
void trilu(size_t elem, const void* x, void* y, int64_t mats, int64_t rows, int64_t cols, int64_t k, bool upper,
           int threads = 0);

// GatherElements: out (of index_dims) at position p is x at p with the coordinate
// along `axis` replaced by index[p] (negative counts from the end). x and the index
// are row-major, of equal rank. Returns false on an index out of range (*bad = it).
bool gather_elements(size_t elem, const void* x, std::span<const int64_t> x_dims, const void* index,
                     size_t index_elem, std::span<const int64_t> index_dims, int64_t axis, void* out, int64_t* bad,
                     int threads = 0);

// ScatterND in place on y (a copy of the data, row-major of y_dims): for each of
// the `tuples` int64 index tuples of length k, the slice of y it names (dims k..)
// is overwritten by (or, with a reduction, combined with) the next slice of
// `updates`, in order. Reductions other than None need float32 elements. Returns
// false on an index out of range (*bad = it).
enum class ScatterReduce { None, Add, Mul, Max, Min };
// The reduction by its ONNX name (none, add, mul, max, min); nullopt for another.
inline std::optional<ScatterReduce> scatter_reduce_named(std::string_view name) {
  if (name == "none") return ScatterReduce::None;
  if (name == "add") return ScatterReduce::Add;
  if (name == "mul") return ScatterReduce::Mul;
  if (name == "max") return ScatterReduce::Max;
  if (name == "min") return ScatterReduce::Min;
  return std::nullopt;
}
bool scatter_nd(size_t elem, void* y, std::span<const int64_t> y_dims, const int64_t* index, int64_t tuples,
                int64_t k, const void* updates, int64_t* bad, ScatterReduce reduce = ScatterReduce::None);

}  // namespace isomer::kernels
