#pragma once
// Types of values after vendor operators, as ONNX Runtime infers them.
//
// ONNX's shape inference has no schemas for vendor domains: after com.microsoft's
// QLinearAdd or QLinearGlobalAveragePool (which ONNX Runtime's quantizer writes
// without value_info), every value stays untyped, and each node reading one would
// be kept opaque too (a whole quantized MobileNet run node by node on ONNX
// Runtime). ONNX Runtime knows its own operators; its inference fills the gaps.
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

}  // namespace isomer
