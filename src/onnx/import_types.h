#pragma once
// The types of a model's values as ONNX import takes them, by name.
//
// ONNX's shape inference runs on a copy of the model: graph inputs fixed as
// ImportOptions::input_shapes asks, initializers over 64 KiB without their data
// (inference reads only small, shape-like tensors). Convolutions whose weight's
// dims are not known up front (a weight computed by another node) wait for a later
// pass, which knows the dims the earlier one inferred. A declared shape the
// inference contradicts is overruled, as ONNX Runtime does (declared_shapes.h).
// Values left untyped after vendor operators get isomer's own types for the
// operators it knows (vendor_shapes.h), then ONNX Runtime's (vendor_types.h). The types of opaque nodes' outputs come from here.
#include <cstddef>
#include <string>
#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "onnx/onnx_io.h"

namespace isomer {

// Tensors larger than this reach shape inference without their data (it reads
// data only of small, shape-like tensors).
inline constexpr size_t kInferenceDataLimit = 1 << 16;

// Throws Error where a declared type contradicts the model (a type lie) or an
// initializer's inline data does not match its declared size.
std::unordered_map<std::string, onnx::TypeProto> value_types(const onnx::ModelProto& model,
                                                             const ImportOptions& opts);

}  // namespace isomer
