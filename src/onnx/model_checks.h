#pragma once
// The model-validation checks of import: what must hold of a ModelProto's graph
// (names defined once and read only where defined, initializers that fit the inputs
// they default, inline tensor data that fits its dims, declared types the graph
// computes) before or after the Importer turns it into a Graph. Each throws Error
// with one line naming the value or node and the reason. Private to the onnx component.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "ir/graph.h"

namespace isomer::onnx_detail {

// "float", "int8", ... for an ONNX element type code; the number where isomer has no name.
std::string element_type_name(int32_t code);
// "a tensor", "a sequence", ... for what a TypeProto holds.
std::string value_kind(const onnx::TypeProto& t);
// Why a TypeProto is no TensorType: "a sequence", "a tensor of unknown rank", ...
std::string type_kind(const onnx::TypeProto& t);

// Every name of `graph` defined once and every name a node reads defined somewhere
// (order is checked later); graph inputs of sane dims; initializers that fit the
// inputs they default. Run before anything (libonnx's shape inference included)
// walks the graph: libonnx crashes on dangling names.
void check_graph_names(const onnx::GraphProto& graph);

// ONNX requires every model from IR version 3 on to import an opset of ai.onnx; a
// node of the default domain means nothing without one. `imported`: whether it does.
void require_default_domain_import(const onnx::ModelProto& model, bool imported);

// Tensors inside `graph`'s nodes (and with `initializers`, its initializers), at any
// depth of subgraphs, whose inline data disagrees with their dims: refused, naming
// the node, before libonnx's inference copies them unchecked.
void check_inline_tensors(const onnx::GraphProto& graph, bool initializers);

// Every value_info of `graph` whose element type contradicts the type isomer computed
// for that value (`values`, by name).
void require_value_info_types(const onnx::GraphProto& graph, const std::unordered_map<std::string, Value>& values);

// Every graph output's declared element type against the computed value (`computed`).
void require_output_type(const onnx::ValueInfoProto& out, const Value& computed);

}  // namespace isomer::onnx_detail
