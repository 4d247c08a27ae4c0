#pragma once
// MuGraph nodes in ONNX: a call of a model-local function (FunctionProto) in domain
// ai.isomer.mugraph whose body is the original subgraph, so ONNX Runtime and every
// other runtime inline it and compute the same outputs. The call carries the
// μGraph as a string attribute `kernel` (declared by the function); the function's
// doc_string holds the body in isomer's graph text, so isomer reads back exactly
// the region it wrote (and falls back to the function body when that text is
// missing or does not fit the call).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer::mugraph {

// Turns `call` (already holding n's inputs and outputs) into a function call and
// adds the function and the domain's opset import to `model` once.
void export_fused_call(const Node& n, onnx::NodeProto* call, onnx::ModelProto* model, int64_t opset);

// The MuGraph node for a call of one of `model`'s ai.isomer.mugraph functions, or
// nullptr with `reason` set (the call then stays opaque and runs on ONNX Runtime).
NodePtr import_fused_call(const onnx::NodeProto& call, const std::vector<Value>& inputs,
                          const onnx::ModelProto& model, std::string* reason);

}  // namespace isomer::mugraph
