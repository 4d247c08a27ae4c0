#pragma once
// Calls of model-local functions (ModelProto.functions) expanded into the graph before
// import builds it, as ONNX Runtime does when it loads a model: exporters write modules
// as functions (torch.onnx.export(..., export_modules_as_functions=True), onnxscript),
// and a call kept as one node would run on ONNX Runtime and hide its body from the
// optimizer. Calls of ai.isomer.mugraph functions (isomer's own fused kernels,
// mugraph/onnx_function.h) stay calls.
#include <onnx/onnx_pb.h>

#include <set>
#include <string>
#include <utility>

namespace isomer::onnx_detail {

struct InlinedFunctions {
  size_t calls = 0;                                    // calls expanded
  std::set<std::pair<std::string, std::string>> kept;  // (domain, name) of functions still called
  std::string kept_reason;                             // why those calls were not expanded
};

// Replaces each call in `model`'s graph (in subgraphs, and in the bodies it expands, too)
// by the called function's body: its values and nodes renamed apart from every name of the
// model, its formal inputs and outputs bound to the call's names ("" stays absent), each
// attribute reference (ref_attr_name, in subgraphs too) replaced by the call's attribute or
// the function's default, or dropped where neither gives one. A call of a name that the
// domain's opset defines as an operator is that operator (ONNX Runtime resolves it so).
// The model imports the opsets of the bodies it now holds, and keeps only the functions
// still called. Expansion stops at a node budget and at a subgraph depth; the calls left
// are kept, with the reason. Run after check_model_functions (no recursion, bodies
// well-formed).
InlinedFunctions inline_model_functions(onnx::ModelProto* model);

}  // namespace isomer::onnx_detail
