#pragma once
// Helpers shared by import and export: TypeProto <-> TensorType, external data,
// names a subgraph reads from enclosing scopes. Private to the onnx component (the
// public entry points are in onnx_io.h).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"

namespace isomer::onnx_detail {

// Reads the bytes an external-data TensorProto points at (`expected_size` of them
// unless it states a length). `base_dir` is the model's directory; a location that
// is absolute or leaves the directory is refused.
std::string read_external_data(const onnx::TensorProto& t, const std::string& base_dir, size_t expected_size);

// tensor_from_proto that moves raw_data out of `t` instead of copying it.
Tensor take_tensor_from_proto(onnx::TensorProto* t, const std::string& base_dir);

// TensorType of a tensor TypeProto; returns false (leaving `out` alone) when the
// type is not a tensor with a known element type and rank.
bool tensor_type_from_proto(const onnx::TypeProto& type, TensorType* out);
void tensor_type_to_proto(const TensorType& t, onnx::TypeProto* out);

// Names the subgraph attributes of `node` (If/Loop/Scan bodies, at any depth) read
// from enclosing scopes, in order of first use, without duplicates. They are the
// node's implicit inputs.
std::vector<std::string> outer_scope_names(const onnx::NodeProto& node);

// "node 'name' (Op)", or "node (Op) -> 'first output'" for an unnamed node.
std::string describe_proto(const onnx::NodeProto& node);

// Messages from libonnx span several lines; an Error is one line.
std::string one_line(std::string message);

}  // namespace isomer::onnx_detail
