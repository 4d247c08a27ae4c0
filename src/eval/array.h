#pragma once
// A dense row-major array of any element type. Operator kernels are written once
// as templates over the element type and instantiated for double (float reference
// semantics), int64_t (integer tensors) and Fp (finite-field semantics), so the
// three semantics of an operator cannot drift apart.
#include <cstdint>
#include <vector>

#include "ir/shape.h"

namespace isomer {

template <class T>
struct Array {
  std::vector<int64_t> dims;
  std::vector<T> data;

  Array() = default;
  Array(std::vector<int64_t> d, std::vector<T> v) : dims(std::move(d)), data(std::move(v)) {}
  explicit Array(std::vector<int64_t> d, T fill = T()) : dims(std::move(d)) {
    const int64_t n = require_allocatable(dims, sizeof(T), "a tensor of");
    data.assign(static_cast<size_t>(n), fill);
  }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

// Row-major strides of `dims`.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

}  // namespace isomer
