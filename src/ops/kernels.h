#pragma once
// Helpers shared by the operator entries: conversions between Tensor and Array,
// broadcasting maps, and the common shape rules. Kernels are templates over the
// element type (double, int64_t, Fp); see eval/array.h.
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/array.h"
#include "eval/field.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/int_arith.h"
#include "ops/op.h"

namespace isomer::ops {

inline Array<double> f64(const Tensor& t) { return {t.dims(), t.to_f64()}; }
inline Array<int64_t> i64(const Tensor& t) { return {t.dims(), t.to_i64()}; }
inline Tensor tensor(DType dtype, const Array<double>& a) { return Tensor::from_f64(dtype, a.dims, a.data); }
inline Tensor tensor(DType dtype, const Array<int64_t>& a) { return Tensor::from_i64(dtype, a.dims, a.data); }
// An integer tensor's elements as keys that order as its values do (i64 holds a uint64's
// bits, which order as signed: ir/int_arith.h), and keys back to a tensor. Max, Min,
// comparisons, Clip and the extreme-value reductions compute on keys.
inline int64_t order_key(DType t, int64_t v) { return t == DType::UInt64 ? uint_order_key(v) : v; }
inline Array<int64_t> ordered_i64(const Tensor& t) {
  Array<int64_t> a = i64(t);
  if (t.dtype() == DType::UInt64)
    for (int64_t& v : a.data) v = uint_order_key(v);
  return a;
}
inline Tensor tensor_of_keys(DType dtype, Array<int64_t> keys) {
  if (dtype == DType::UInt64)
    for (int64_t& v : keys.data) v = uint_order_key(v);
  return tensor(dtype, keys);
}
// A float32 tensor's elements as they are stored, and back (constant folding at the
// runtime's precision: OpDef::fold).
inline Array<float> f32(const Tensor& t) {
  require(t.dtype() == DType::Float32, "f32: a tensor of " + std::string(dtype_name(t.dtype())));
  Array<float> a;
  a.dims = t.dims();
  a.data.resize(static_cast<size_t>(t.numel()));
  std::memcpy(a.data.data(), t.bytes().data(), t.byte_size());
  return a;
}
inline Tensor tensor(const Array<float>& a) {
  return Tensor(DType::Float32, a.dims,
                std::string(reinterpret_cast<const char*>(a.data.data()), a.data.size() * sizeof(float)));
}

// Strides of `dims` as seen from a broadcast output of rank `rank`: 0 where the
// dim is broadcast (size 1 or missing).
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims,
                                              const std::vector<int64_t>& out_dims) {
  std::vector<int64_t> own = strides_of(dims);
  std::vector<int64_t> s(out_dims.size(), 0);
  size_t off = out_dims.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) s[off + i] = dims[i] == 1 ? 0 : own[i];
  return s;
}

// Calls f(out_index, offsets...) for every element of out_dims, where offsets are
// the element offsets in each broadcast input.
template <size_t N, class F>
void for_each_broadcast(const std::vector<int64_t>& out_dims, const std::array<std::vector<int64_t>, N>& strides,
                        F f) {
  const int64_t rank = static_cast<int64_t>(out_dims.size());
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t n = 0; n < total; ++n) {
    f(n, off);
    for (int64_t ax = rank - 1; ax >= 0; --ax) {
      if (++idx[ax] < out_dims[ax]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][ax];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][ax] * (out_dims[ax] - 1);
      idx[ax] = 0;
    }
  }
}

template <class T, class F>
auto map(const Array<T>& a, F f) {
  using R = decltype(f(a.data[0]));
  Array<R> out;
  out.dims = a.dims;
  out.data.resize(a.data.size());
  for (size_t i = 0; i < a.data.size(); ++i) out.data[i] = f(a.data[i]);
  return out;
}

template <class T, class F>
auto broadcast_map(const Array<T>& a, const Array<T>& b, F f) {
  using R = decltype(f(T(), T()));
  Array<R> out;
  if (a.dims == b.dims) {
    out.dims = a.dims;
    out.data.resize(a.data.size());
    for (size_t i = 0; i < a.data.size(); ++i) out.data[i] = f(a.data[i], b.data[i]);
    return out;
  }
  out.dims = broadcast_dims(a.dims, b.dims);
  out.data.resize(static_cast<size_t>(num_elements(out.dims)));
  std::array<std::vector<int64_t>, 2> st{broadcast_strides(a.dims, out.dims), broadcast_strides(b.dims, out.dims)};
  for_each_broadcast<2>(out.dims, st, [&](int64_t n, const std::array<int64_t, 2>& o) {
    out.data[n] = f(a.data[o[0]], b.data[o[1]]);
  });
  return out;
}

// A tensor seen as [outer, n, inner] around `axis` (operators along one axis).
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
inline Around around(const std::vector<int64_t>& dims, int64_t axis) {
  Around a;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) (i < axis ? a.outer : i == axis ? a.n : a.inner) *= dims[i];
  return a;
}

// Shape rule: one output with input 0's type.
std::vector<TensorType> same_as_input0(const InferContext& ctx);
// Shape rule: inputs broadcast together; dtype of input 0; all inputs must share it.
std::vector<TensorType> broadcast_inputs(const InferContext& ctx);
// Errors unless `t` is a floating-point type.
void require_float(const TensorType& t, const std::string& what);
// The values of input i if it is a constant integer tensor, else nullopt.
std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, size_t i);
// A dim's extent where it is static.
inline std::optional<int64_t> static_extent(const Dim& d) {
  return d.is_static() ? std::optional<int64_t>(d.value) : std::nullopt;
}
// Shape rules: the constant index input `i` (known at import) checked against `extent(k)`,
// the static extent the k-th index value selects along (nullopt: not static, unchecked).
// ONNX makes an index out of range an error when the node runs, so a node whose constant
// index is out of range is refused at import (InvalidNode) rather than written back.
void require_constant_indices(const InferContext& ctx, size_t i, const std::function<std::optional<int64_t>(size_t)>& extent,
                              std::string_view op);
// Reads an integer input as a vector (evaluation time).
std::vector<int64_t> ints_of(const Tensor& t);

// Pieces of canonical_attrs hooks: write out a default; make an axis attribute
// non-negative for an input of `rank` (left alone when out of range: the shape rule
// reports that).
void set_default(Attributes& attrs, const std::string& name, AttrValue value);
void canonical_axis(Attributes& attrs, const std::string& name, int64_t dflt, int64_t rank);
// Rank of input i when known, else -1.
int64_t input_rank(std::span<const TensorType> inputs, size_t i);
// canonical_attrs of operators whose only defaulted attribute is an axis of input 0.
template <int64_t Default>
Attributes canonical_axis_of_input0(const Attributes& attrs, std::span<const TensorType> inputs) {
  Attributes a = attrs;
  canonical_axis(a, "axis", Default, input_rank(inputs, 0));
  return a;
}

}  // namespace isomer::ops
