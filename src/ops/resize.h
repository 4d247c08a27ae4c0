#pragma once
// Resize's geometry (ops/resize.cpp), shared by its reference evaluator and the
// runtime's kernels (runtime/lower_resize.cpp), so that both take the same
// source pixels with the same weights: the ONNX rules written once.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/attributes.h"

namespace isomer::ops {

// One axis of a resize: output index o reads `taps` input indices
// index[o * taps + k] (clamped into the input) with weights weight[o * taps + k]
// (summing to 1). outside[o] is set where tf_crop_and_resize maps o out of the
// input: that output element is extrapolation_value.
struct ResizeAxis {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<bool> outside;
  bool identity() const;  // out == in, each output reads its own input with weight 1
};

struct ResizePlan {
  std::vector<ResizeAxis> axes;  // every axis of the input
  double extrapolation = 0.0;
  bool any_outside = false;
  std::vector<int64_t> out_dims() const;
};

// The attributes' one reading, checked: mode, coordinate_transformation_mode,
// nearest_mode, keep_aspect_ratio_policy, cubic_coeff_a, exclude_outside, axes.
// Throws Error naming the bad attribute.
struct ResizeAttrs {
  std::string mode, coord, nearest, policy;
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false, antialias = false;
  std::vector<int64_t> axes;  // normalized; every axis when the attribute is absent
};
ResizeAttrs read_resize_attrs(const Attributes& attrs, int64_t rank);

// Output extents and per-axis scales from the scales or sizes operand (exactly one
// is given: non-empty), roi for tf_crop_and_resize (empty = [0, 1] on every axis).
struct ResizeExtents {
  std::vector<int64_t> out;
  std::vector<double> scales, roi_start, roi_end;
};
ResizeExtents resize_extents(const ResizeAttrs& a, const std::vector<int64_t>& in, const std::vector<double>& roi,
                             const std::vector<double>& scales, const std::vector<int64_t>& sizes);

ResizePlan plan_resize(const ResizeAttrs& a, const std::vector<int64_t>& in, const ResizeExtents& e);

}  // namespace isomer::ops
