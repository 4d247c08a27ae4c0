#pragma once
// What "the same outputs" means for a quantized model.
//
// A model with QuantizeLinear (or DynamicQuantizeLinear, or the QLinear operators)
// is defined only up to rounding: its float arithmetic between DequantizeLinear and
// QuantizeLinear may be summed in any order (ONNX Runtime with its optimizations on
// and isomer's runtime sum integer products exactly, ONNX Runtime without them sums
// floats), and where two orders land on either side of a rounding boundary, a
// quantized value moves by one step; that step then travels through the layers
// after it. Such differences are the model's own, not a rewrite's.
//
// So an output read off a quantized tensor (a DequantizeLinear with a constant
// per-tensor scale s, through views; or an 8-bit output itself, s = 1) is compared
// in steps of s. It matches when
//   - no element is more than kMaxSteps steps off,
//   - the differences have no direction: |mean(got - want)| <= kMaxBias + 2/sqrt(n)
//     steps over its n elements,
//   - and no trend with the value: the least-squares slope of got - want on want
//     (both in steps) is within kMaxSlope plus four standard errors (a wrong scale
//     of 1% is a slope of 0.01; the drift below measured at most 0.0013, standard
//     error 0.001, on 1000 logits);
//   - at most kMaxOffFraction of its elements are off by a step or more, unless they
//     are at most two steps off and the output is large enough (kMinForTrend
//     elements) for the trend to be told: a deep network's flips spread (below).
// Rounding flips are few steps, and as often up as down: through ResNet-18's 21
// quantized layers, ONNX Runtime with and without its optimizations differ by one
// step in 18% of the logits, and never by two; through MobileNetV3-large's 62 convolutions
// (QDQ, random weights, logits 163 steps wide) isomer and ONNX Runtime without its
// optimizations differ by a step or two in 33-53% of the logits, without a direction
// or a trend, from a few flips per million in each layer. A wrong zero point moves every
// element the same way, a wrong scale or axis moves many elements by many steps:
// those fail. Other outputs of a quantized graph keep the float tolerance. The
// check's report line states the bound it applied.
#include <optional>
#include <string>
#include <vector>

#include "check/compare.h"
#include "ir/graph.h"

namespace isomer {

inline constexpr double kMaxSteps = 4;
inline constexpr double kMaxOffFraction = 0.5;
inline constexpr double kMaxBias = 0.1;
inline constexpr double kMaxSlope = 0.002;
inline constexpr double kMinForTrend = 64;

// True if the graph quantizes a value (its outputs are then defined up to rounding).
bool quantizes(const Graph& g);

// Each output's quantization step (see above), nullopt for outputs not read off a
// quantized tensor.
std::vector<std::optional<double>> output_quant_steps(const Graph& g);

// A dynamically quantized model (DynamicQuantizeLinear: the scale is computed from
// the data) has float outputs with no constant step, and its rounding flips move
// them by a fraction of a percent: ONNX Runtime with and without its optimizations
// differ by 0.4% on a 4-layer BERT quantized by quantize_dynamic. Such outputs are
// held to the larger of `tolerance` and kSpreadFactor times the relative difference
// between two references the engine produced in two valid summation orders
// (`a`, `b`: ONNX Runtime with its optimizations on and off). Returns that bound.
inline constexpr double kSpreadFactor = 2;
double rounding_spread_tolerance(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                                 const std::vector<std::string>& names, double tolerance);

// The bounds an output with a step is held to (the defaults above, or wider: see
// compare_quantized_with_references).
struct StepBounds {
  double off_fraction = kMaxOffFraction;
  double max_steps = kMaxSteps;
};

// compare_outputs, with the outputs that have a step compared in steps, each held to
// its bounds (the defaults where `bounds` has none).
CheckResult compare_quantized_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                                      const std::vector<std::string>& names, double tolerance,
                                      const std::vector<std::optional<double>>& steps,
                                      const std::vector<StepBounds>& bounds = {});

// compare_quantized_outputs against two references that are both valid roundings of
// the model: ONNX Runtime with its optimizations on (`deployed`: integer kernels)
// and off (`as_written`: float between Dequantize and Quantize). Through a deep
// network they drift apart (MobileNetV3-large quantized QDQ with random weights:
// 43-51% of the logits a step apart, some by three), past the default bounds. So the
// bounds on the fraction of elements off and on the steps widen to kSpreadFactor
// times what the two references differ by (the bias bound stays: a wrong zero point
// still fails), and `got` matches when it is within them of either reference.
// *against_as_written says whether it matched only the one as written; the reason
// then names the other's differences too.
CheckResult compare_quantized_with_references(const std::vector<Tensor>& deployed,
                                              const std::vector<Tensor>& as_written,
                                              const std::vector<Tensor>& got, const std::vector<std::string>& names,
                                              double tolerance, const std::vector<std::optional<double>>& steps,
                                              bool* against_as_written);

}  // namespace isomer
