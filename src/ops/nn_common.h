#pragma once
// Pieces shared by the neural-network operator families (linear.cpp, pool.cpp,
// reduce.cpp): sliding-window geometry for Conv and the pools, and division by an
// element count, written once per element type so that averages have field
// semantics (multiplication by the inverse of the count in F_p).
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "eval/field.h"
#include "ir/attributes.h"
#include "ir/shape.h"

namespace isomer::ops {

// A sliding window over the spatial axes of an [N, C, spatial...] tensor, as
// Conv, MaxPool and AveragePool describe it in their attributes.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER or VALID
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  int64_t extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Reads strides, dilations, pads, auto_pad and ceil_mode for a window with the
// given kernel extents, checking lengths and ranges.
Window read_window(const Attributes& attrs, std::vector<int64_t> kernel);

// One spatial axis of a window laid over a static input: where window o starts
// (o * stride - pad_begin) and how far it reaches.
struct WindowAxis {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, dilation = 1, pad_begin = 0;
};

// The window over static spatial extents `in`, auto_pad resolved. Throws Error if
// no window fits along some axis.
std::vector<WindowAxis> plan_window(const Window& w, const std::vector<int64_t>& in);
WindowAxis plan_window_axis(const Window& w, size_t i, int64_t in);
// Output extent along axis i for a possibly symbolic input extent: passes a symbol
// through where the window maps every extent to itself (stride 1, "same" padding),
// else Dim::unknown().
Dim window_output_dim(const Window& w, size_t i, const Dim& in);
// Explicit (begin, end) pads along axis i for static input extent `in`.
std::pair<int64_t, int64_t> resolved_pads(const Window& w, size_t i, int64_t in);
// ONNX import: replaces auto_pad by explicit pads when every spatial extent is
// static (ceil_mode is dropped with it: auto_pad output extents ignore it).
void resolve_auto_pad(Attributes& attrs, const Window& w, const Shape& spatial);
// canonical_attrs for Conv and the pools (see OpDef): strides, dilations, ceil_mode
// and (without auto_pad) pads written out; for Conv, group written out and
// kernel_shape dropped, since the weight's shape determines it.
Attributes canonical_window_attrs(const Attributes& attrs, std::span<const TensorType> inputs, bool conv);

// ConvTranspose's geometry along one axis, auto_pad and output_shape resolved:
// out = stride (in - 1) + out_pad + (kernel - 1) dilation + 1 - pad_begin - pad_end.
// With output_shape the pads are what gives it, and may be negative.
struct DeconvAxis {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0, out_pad = 0;
};
std::vector<DeconvAxis> plan_deconv(const Attributes& attrs, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& in);

// sum / count in the element type's arithmetic: true division for double,
// truncating for int64_t, multiplication by the inverse of count in F_p. Caches
// inverses, which cost a modular exponentiation each.
template <class T>
struct CountDivider {
  T operator()(T sum, int64_t count) { return count == 0 ? T() : sum / static_cast<T>(count); }
};

template <>
struct CountDivider<double> {
  double operator()(double sum, int64_t count) const { return sum / static_cast<double>(count); }
};

template <>
struct CountDivider<Fp> {
  std::vector<std::pair<int64_t, Fp>> inverses;
  Fp operator()(Fp sum, int64_t count) {
    for (const auto& [n, inv] : inverses)
      if (n == count) return sum * inv;
    Fp inv = Fp(static_cast<uint64_t>(count)).inverse();
    inverses.emplace_back(count, inv);
    return sum * inv;
  }
};

}  // namespace isomer::ops
