#pragma once
// Model-local functions (ModelProto.functions) held to ONNX's rules before anything
// expands them: libonnx's shape inference follows a function that calls itself until
// the stack overflows, and isomer writes functions back verbatim, so a broken one
// would otherwise pass through `optimize` to fail wherever the model runs (onnx.checker
// and ONNX Runtime refuse each case below). Messages name the function and the node.
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace isomer::onnx_detail {

// Checks:
//  - a function is defined once per (domain, name, overload);
//  - no function calls itself, directly or through others;
//  - each node of a body is of a domain the function imports (by its exact name, as
//    ONNX Runtime and onnx.checker match it) and names an operator that domain has at
//    that opset (schema_check.h);
//  - every call (a node of the main graph, of a subgraph or of a body that names a
//    function) is of a domain its graph imports (the model's, or the calling
//    function's), gives no more inputs and outputs than the function declares, and
//    every input the body reads.
// Throws Error with one line naming the function or node and the reason.
void check_model_functions(const onnx::ModelProto& model);

// IR 10's overload a function is defined with, and the one a call asks for ("" for none);
// this libonnx parses both as unknown fields.
std::string function_overload(const onnx::FunctionProto& f);
std::string call_overload(const onnx::NodeProto& n);
// IR 9's default attribute values of a function (attribute_proto, unknown fields too).
std::vector<onnx::AttributeProto> attribute_defaults(const onnx::FunctionProto& f);

}  // namespace isomer::onnx_detail
