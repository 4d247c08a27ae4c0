#pragma once
// Shapes. A dimension is either static (a non-negative extent) or symbolic (a
// named dynamic dimension such as "batch", or an anonymous unknown one). Shape
// rules compute with static dims and carry symbols through where they can.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace isomer {

struct Dim {
  int64_t value = -1;  // >= 0: static extent; -1: symbolic
  std::string symbol;  // name of a symbolic dim; empty = anonymous unknown

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor): dims read like ints
  static Dim sym(std::string name) {
    Dim d;
    d.symbol = std::move(name);
    return d;
  }
  static Dim unknown() { return Dim(); }

  bool is_static() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

using Shape = std::vector<Dim>;

Shape make_shape(const std::vector<int64_t>& dims);
bool is_static(const Shape& s);
// Static extents; throws Error naming `what` if a dim is symbolic.
std::vector<int64_t> static_dims(const Shape& s, const std::string& what = "shape");
// Product of static extents; nullopt if any dim is symbolic.
std::optional<int64_t> num_elements(const Shape& s);
int64_t num_elements(const std::vector<int64_t>& dims);
// The product of dims[from, to): the elements of those axes.
int64_t num_elements(const std::vector<int64_t>& dims, size_t from, size_t to);
// The element count of static `dims`; throws Error naming `what` if a dim is negative
// or the count does not fit in 64 bits (a hostile shape must not wrap around).
int64_t checked_num_elements(const std::vector<int64_t>& dims, const std::string& what);
// The same for the byte count of elements of `elem_bytes` bytes each: a shape whose
// elements fit 64 bits but whose bytes do not (an int64 input of 2^63 - 1) would wrap
// every buffer size computed from it.
int64_t checked_num_bytes(const std::vector<int64_t>& dims, size_t elem_bytes, const std::string& what);
// The most bytes one tensor may take: the machine's physical memory, or less where the
// process's address space is limited (ulimit -v), or ISOMER_MAX_TENSOR_BYTES.
uint64_t max_tensor_bytes();
// Throws Error naming `what` unless a tensor of `dims` with elements of `elem_bytes`
// bytes fits in max_tensor_bytes(); returns its element count. Called before every
// allocation sized by a model (evaluator arrays, runtime buffers, random inputs), so a
// memory bomb is refused with a message instead of an out-of-memory kill.
int64_t require_allocatable(const std::vector<int64_t>& dims, size_t elem_bytes, const std::string& what);
// "[1,3,N,?]"
std::string to_string(const Shape& s);
std::string to_string(const std::vector<int64_t>& dims);

// Numpy-style multidirectional broadcasting. Throws Error on incompatible dims.
Shape broadcast_shapes(const Shape& a, const Shape& b);
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Normalizes a possibly negative axis against `rank`; throws Error if out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what = "axis");

struct TensorType {
  DType dtype = DType::Undefined;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

// "f32[1,3,224,224]"
std::string to_string(const TensorType& t);

}  // namespace isomer
