#pragma once
// Types of values after vendor operators, as ONNX Runtime infers them.
//
// ONNX's shape inference has no schemas for vendor domains: after com.microsoft's
// QLinearAdd or QLinearGlobalAveragePool (which ONNX Runtime's quantizer writes
// without value_info), every value stays untyped, and each node reading one would
// be kept opaque too (a whole quantized MobileNet run node by node on ONNX
// Runtime). ONNX Runtime knows its own operators; its inference fills the gaps.
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

namespace isomer {

// The types ONNX Runtime infers for `names` in `model` (a copy for inference:
// initializers without their data become inputs of their type). Only the names it
// types with a known element type and a rank come back; none at all where ONNX
// Runtime is unavailable or refuses the model (the caller keeps them untyped).
std::unordered_map<std::string, onnx::TypeProto> onnxruntime_types(onnx::ModelProto model,
                                                                   const std::vector<std::string>& names);

// The operators ONNX Runtime defines in a vendor `domain` (com.microsoft's contrib
// operators), each with the opset it came in; nullopt where ONNX Runtime is unavailable.
std::optional<std::map<std::string, int>> onnxruntime_operators(const std::string& domain);

}  // namespace isomer
