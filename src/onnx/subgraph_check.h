#pragma once
// If/Loop/Scan bodies (every graph attribute, at any depth) held to the rules the main
// graph is held to, before anything walks them (libonnx's shape inference crashes on
// dangling names): isomer keeps such nodes opaque and writes their bodies back
// verbatim, so a broken body would otherwise pass through `optimize` unchecked, to fail
// wherever the model runs. Messages name the path, "node 'loop_0' (Loop) body node
// 'add_3' (Add): ...".
#include <onnx/onnx_pb.h>

#include <cstdint>

namespace isomer::onnx_detail {

// Checks, in every subgraph of `model`'s main graph (opset: the model's ai.onnx opset):
//  - names: each defined once in its graph, no node output that redefines a name of an
//    enclosing graph (ONNX's single-assignment rule), every name a node reads defined
//    in the graph or an enclosing one, every name the graph outputs in the graph itself;
//  - the body's contract with its node: an If branch takes no inputs and yields one
//    output per If output, of the same element types in both branches; a Loop body
//    takes (iteration number, condition, N loop-carried values) and yields (condition,
//    N values, K scan outputs) for a node of N + K outputs, int64 and bool where ONNX
//    says so; a Scan body takes N state and M scan values and yields one per node
//    output; loop-carried values keep their element type;
//  - every node: an operator its domain has (schema_check.h), its operator's schema
//    (arity, attributes, input element types where the body declares them), and where
//    ONNX's inference can tell, the element type the body declares for its outputs.
// Throws Error with one line naming the path and the reason.
void check_subgraphs(const onnx::ModelProto& model, int64_t opset);

}  // namespace isomer::onnx_detail
