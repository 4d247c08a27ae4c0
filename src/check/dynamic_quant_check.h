#pragma once
// Checking a dynamically quantized model's outputs against ONNX Runtime's when a
// rounding flip has carried them apart.
//
// DynamicQuantizeLinear takes its scale from the data and rounds every element. Where
// isomer's float arithmetic before it lands on the other side of a rounding tie than
// ONNX Runtime's (a 1.4e-7 relative difference in a Qwen3 attention output did), one
// element moves a step, and the layers after it carry the step further than any float
// tolerance (1.8% on that model's logits), while ONNX Runtime agrees with itself
// exactly: its configurations' spread (check/quant_check.h) is then zero. Such a model
// is checked layer by layer instead:
//   - isomer's runtime runs it with every DynamicQuantizeLinear's three outputs as
//     extra outputs;
//   - ONNX Runtime runs the model cut at those nodes, fed isomer's quantized values,
//     scales and zero points, and gives the model's outputs and each
//     DynamicQuantizeLinear's input as it computes them from those;
//   - isomer's outputs must match ONNX Runtime's within the float tolerance (what
//     follows the last quantization, and each layer's float arithmetic), and each of
//     isomer's quantizations must be DynamicQuantizeLinear of ONNX Runtime's input:
//     the scale within kScaleSlack relative, the zero point equal, every element equal
//     or one step apart where ONNX Runtime's value lies within kTieSlack (relative to
//     the input's largest magnitude) of the rounding tie between the two.
// A wrong kernel before a quantization moves its input away from what isomer quantized
// by far more than a tie's slack; after the last one, it moves the outputs: both fail.
// ONNX Runtime's DynamicQuantizeLSTM quantizes inside (its input and every step's h;
// isomer's runtime does the same, runtime/lower_quant_lstm.cpp): its outputs are fed
// too, and must match ONNX Runtime's LSTM on the same inputs within one uint8 step
// of their scale (a flip of h moves the steps after it by a fraction of one).
#include <string>
#include <vector>

#include "check/compare.h"
#include "check/engines.h"
#include "ir/graph.h"

namespace isomer {

inline constexpr double kTieSlack = 1e-5;
inline constexpr double kScaleSlack = 1e-5;

// True if `g` has a DynamicQuantizeLinear or a com.microsoft DynamicQuantizeLSTM.
bool quantizes_dynamically(const Graph& g);

// The check above: `got` are isomer's outputs of `g` on `inputs`; isomer's runtime and
// ONNX Runtime (all optimizations: its integer kernels, as deployed) are prepared
// through `engines`. Passed with the count of quantized elements a tie apart in the
// reason, Failed with the first quantization or output that differs, Skipped (with
// why) when either engine cannot run its part.
CheckResult check_fed_dynamic_quantization(Engines& engines, const Graph& g, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& got, double tolerance);

}  // namespace isomer
