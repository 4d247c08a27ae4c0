#pragma once
// Helpers shared by the layout operators (ops/layout.cpp: axis relabelling and
// permutation; ops/layout_copy.cpp: operators that copy selected elements).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/layout_kernels.h"

namespace isomer::ops {

// The values themselves (shapes' printing writes a negative extent as "?").
inline std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// An axis attribute normalized against rank (rank 0 has no axis); without a
// default the attribute is required.
inline int64_t axis_of(const Attributes& attrs, std::optional<int64_t> dflt, int64_t rank, const std::string& op) {
  const int64_t axis = dflt ? attrs.get_int("axis", *dflt) : attrs.get_int("axis");
  require(rank > 0, op + " needs an input of rank >= 1");
  require(axis >= -rank && axis < rank,
          op + " axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Length of a 1-D operand (shape, axes, split, ...) if it is known.
inline std::optional<int64_t> operand_length(const InferContext& ctx, size_t i, const std::string& what) {
  const TensorType& t = ctx.in(i);
  require(t.rank() == 1, what + " must be a 1-D tensor, got " + to_string(t));
  require(t.dtype == DType::Int64 || t.dtype == DType::Int32, what + " must be int64 (or int32), got " + to_string(t));
  return t.shape[0].is_static() ? std::optional<int64_t>(t.shape[0].value) : std::nullopt;
}

inline Shape unknown_dims(int64_t rank) { return Shape(static_cast<size_t>(rank), Dim::unknown()); }

// Product of dims [begin, end): static, a lone symbol (times 1), or unknown.
inline Dim product_dim(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  const Dim* lone = nullptr;
  int dynamic = 0;
  for (size_t i = begin; i < end; ++i) {
    if (s[i].is_static()) {
      p *= s[i].value;
    } else {
      ++dynamic;
      lone = &s[i];
    }
  }
  if (dynamic == 0 || p == 0) return p;
  return dynamic == 1 && p == 1 ? *lone : Dim::unknown();
}

// Common value of two dims that must be equal: the more specific of the two
// (static, then named); errors if both are static and different.
inline Dim merge_dim(const Dim& a, const Dim& b, const std::string& error) {
  if (a == b) return a;
  require(!(a.is_static() && b.is_static()), error);
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  if (a.symbol.empty()) return b;
  if (b.symbol.empty()) return a;
  return Dim::unknown();  // two different names: either may be right
}

// An OpDef with what every layout operator shares: shape_only, linear in input 0.

inline OpDef layout_op(std::string_view name, int min_inputs, int max_inputs, int min_opset) {
  OpDef d;
  d.name = name;
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.min_opset = min_opset;
  d.props.shape_only = true;
  d.props.linear_in = {0};
  return d;
}

template <class Op>
inline void set_semantics(OpDef& d) {
  d.eval = eval_layout<Op>;
  d.eval_field = exact_layout<Op, Fp>;
  d.eval_sym = exact_layout<Op, Sym>;
}

template <class Op>
inline void set_view_semantics(OpDef& d) {
  d.eval = eval_view<Op>;
  d.eval_field = exact_view<Op, Fp>;
  d.eval_sym = exact_view<Op, Sym>;
}

// One axis of an ONNX Slice: the first element, the step and how many elements
// (also what the runtime's zero-copy view of a slice is made from).
struct AxisSlice {
  int64_t start = 0, step = 1, count = 0;
};
AxisSlice slice_axis(int64_t start, int64_t end, int64_t step, int64_t extent);

}  // namespace isomer::ops
