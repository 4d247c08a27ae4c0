#pragma once
// ONNX's own rules for one node, checked at import against libonnx's schema of the
// operator version the model means: what ONNX Runtime refuses when it loads a model,
// isomer refuses too, whether it runs the node natively or keeps it opaque (an opaque
// node would otherwise pass through `optimize` unchecked, to fail wherever it runs).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace isomer::onnx_detail {

// Why `node` (of the default domain, in a model importing `opset` of it) breaks its
// operator's schema, or "" when it does not or libonnx has no schema to judge it by:
//  - its number of inputs and outputs, its attributes' names, types and presence
//    (OpSchema::Verify; deprecated operators, which ONNX Runtime still runs, are not
//    judged);
//  - the element types of its inputs (`input_types`, one per input, nullopt where not
//    known) against the operator's type constraints, when libonnx's schema is the very
//    version the model means (a later version may allow more types).
std::string schema_violation(const onnx::NodeProto& node, int64_t opset,
                             const std::vector<std::optional<onnx::TypeProto>>& input_types);

// Why `node` names no operator of its domain at the opset `model` imports of that
// domain, or "" when it does (or isomer cannot tell: vendor domains, functions the
// model defines). A domain of ONNX's lists every operator it has at every opset, so
// a node of one it lacks there is no operator at all (ONNX Runtime refuses it); in
// the default domain, the experimental operators of ONNX's first releases, which
// are in no opset yet ONNX Runtime still runs, are not judged.
std::string missing_operator(const onnx::NodeProto& node, const onnx::ModelProto& model);
// The same for a node of a graph (a function's body) with these imports, in a model
// with these functions.
std::string missing_operator(const onnx::NodeProto& node,
                             const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports,
                             const google::protobuf::RepeatedPtrField<onnx::FunctionProto>& functions);

}  // namespace isomer::onnx_detail
