#pragma once
// Helpers shared by import and export: TypeProto <-> TensorType, external data,
// names a subgraph reads from enclosing scopes. Private to the onnx component (the
// public entry points are in onnx_io.h).
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"

namespace isomer::onnx_detail {

// Reads the bytes an external-data TensorProto points at (`expected_size` of them
// unless it states a length). `base_dir` is the model's directory ("" if there is none:
// refused); a location that is absolute or leads out of the directory (through "..",
// or a symbolic link), and an offset or length past the file's end, are refused with
// the tensor's name.
std::string read_external_data(const onnx::TensorProto& t, const std::string& base_dir, size_t expected_size);

// Why the data stored inside `t` (raw_data, or the typed field of its element type)
// disagrees with its dims and element type, or "" when it agrees (or lives in external
// data, or is of a type this build keeps verbatim). libonnx's shape inference copies
// such data without checking its size: a tensor that fails here must not reach it.
std::string inline_data_mismatch(const onnx::TensorProto& t);

// Whether isomer's Tensor holds ONNX element type `code` (the DType numbering, 1 to 16).
// Other types (float8, int4, ... and any later one) are kept verbatim in opaque nodes.
bool known_element_type(int32_t code);

// `t` with its data inline: external data (relative to `base_dir`) read into raw_data.
// For tensors isomer keeps verbatim, so that they do not depend on the model's directory.
onnx::TensorProto inline_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir);
// The same for every tensor in `node`'s attributes and subgraphs.
void inline_external_data(onnx::NodeProto* node, const std::string& base_dir);

// The value of an ONNX Constant node (external data relative to `base_dir`), or
// nullopt with the reason for a form kept opaque: sparse, or of an element type
// isomer does not compute with. Throws Error naming the node for a malformed one.
std::optional<Tensor> constant_node_value(const onnx::NodeProto& node, const std::string& base_dir,
                                          std::string* reason);

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

// An attribute's kind; old models may leave AttributeProto.type unset, and then the
// field that is filled says it.
onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a);

// "node 'name' (Op)", or "node (Op) -> 'first output'" for an unnamed node.
std::string describe_proto(const onnx::NodeProto& node);

// Messages from libonnx span several lines; an Error is one line.
std::string one_line(std::string message);

}  // namespace isomer::onnx_detail
