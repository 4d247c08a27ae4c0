#include "onnx/schema_check.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <unordered_map>

#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"

namespace isomer::onnx_detail {

std::string schema_violation(const onnx::NodeProto& node, int64_t opset,
                             const std::vector<std::optional<onnx::TypeProto>>& input_types) {
  const onnx::OpSchema* schema = libonnx_schema(node.domain(), node.op_type(), opset);
  if (!schema || schema->Deprecated()) return "";
  // Verify compares each attribute's declared type with the schema's; models that
  // leave it unset (older exporters) are read by the field they fill, as import does.
  bool untyped = false;
  for (const auto& a : node.attribute()) untyped = untyped || a.type() == onnx::AttributeProto::UNDEFINED;
  onnx::NodeProto typed;
  if (untyped) {
    typed = node;
    for (auto& a : *typed.mutable_attribute()) a.set_type(attribute_type(a));
  }
  try {
    schema->Verify(untyped ? typed : node);
  } catch (const std::exception& e) {
    return one_line(e.what());
  }
  if (schema->since_version() != op_version(node.domain(), node.op_type(), opset)) return "";
  // The type constraints need only the node's inputs and outputs (a shell without
  // its attributes: no copy of a large tensor attribute).
  onnx::NodeProto shell;
  shell.set_op_type(node.op_type());
  shell.set_domain(node.domain());
  *shell.mutable_input() = node.input();
  *shell.mutable_output() = node.output();
  std::vector<onnx::TypeProto> storage;
  storage.reserve(input_types.size());
  std::unordered_map<std::string, onnx::TypeProto*> types;
  for (int i = 0; i < node.input_size() && i < static_cast<int>(input_types.size()); ++i) {
    const auto& t = input_types[static_cast<size_t>(i)];
    if (node.input(i).empty() || !t || !t->has_tensor_type() || t->tensor_type().elem_type() == 0) continue;
    storage.push_back(*t);
    types[node.input(i)] = &storage.back();
  }
  try {
    onnx::shape_inference::InferenceContextImpl ctx(shell, types, {}, {});
    schema->CheckInputOutputType(ctx);
  } catch (const std::exception& e) {
    return one_line(e.what());
  }
  return "";
}

}  // namespace isomer::onnx_detail
