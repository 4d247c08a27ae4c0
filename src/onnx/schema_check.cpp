#include "onnx/schema_check.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <set>
#include <unordered_map>

#include "onnx/libonnx_inference.h"
#include "onnx/model_checks.h"
#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"

namespace isomer::onnx_detail {

namespace {

// Cast's target: every ONNX element type but the complex ones (and 0, no type), which no
// version of Cast produces; libonnx's schema leaves the attribute to inference.
std::string cast_target_violation(const onnx::NodeProto& node) {
  if (node.op_type() != "Cast" || !is_default_domain(node.domain())) return "";
  for (const auto& a : node.attribute()) {
    if (a.name() != "to") continue;
    const int64_t to = a.i();
    if (to <= 0 || to == onnx::TensorProto::COMPLEX64 || to == onnx::TensorProto::COMPLEX128 || to > 23)
      return "Cast to " + element_type_name(static_cast<int32_t>(to)) + ", which no version of Cast produces";
  }
  return "";
}

}  // namespace

std::string schema_violation(const onnx::NodeProto& node, int64_t opset,
                             const std::vector<std::optional<onnx::TypeProto>>& input_types) {
  if (std::string why = cast_target_violation(node); !why.empty()) return why;
  // Libonnx's schemas stop at an older opset: the table judges a newer version's
  // attribute names (in libonnx's words), so a misspelt or foreign attribute is
  // refused whatever the version.
  std::vector<std::string_view> names;
  for (const auto& a : node.attribute()) names.push_back(a.name());
  if (std::optional<std::string> bad = unknown_attribute(node.domain(), node.op_type(), opset, names))
    return "Unrecognized attribute: " + *bad + " for operator " + node.op_type();
  const onnx::OpSchema* schema = libonnx_schema(node.domain(), node.op_type(), opset);
  if (!schema) return "";
  // A deprecated version (Upsample at 10, Scatter from 11) is no operator of that opset:
  // onnx.checker and ONNX Runtime refuse it.
  if (schema->Deprecated())
    return node.op_type() + " is deprecated since opset " + std::to_string(schema->since_version());
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
    // A type newer than this libonnx (float8, int4) came after this very version of
    // the operator, which therefore does not take it (libonnx would say only "Invalid
    // tensor data type").
    if (!onnx::TensorProto_DataType_IsValid(t->tensor_type().elem_type()))
      return "input '" + node.input(i) + "' is " + element_type_name(t->tensor_type().elem_type()) + ", which " +
             node.op_type() + "-" + std::to_string(schema->since_version()) + " does not take";
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

std::string missing_operator(const onnx::NodeProto& node, const onnx::ModelProto& model) {
  return missing_operator(node, model.opset_import(), model.functions());
}

std::string missing_operator(const onnx::NodeProto& node,
                             const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports,
                             const google::protobuf::RepeatedPtrField<onnx::FunctionProto>& functions) {
  const bool default_domain = is_default_domain(node.domain());
  if (!default_domain && newest_opset(node.domain()) == 0) return "";
  for (const auto& f : functions)
    if (f.domain() == node.domain() && f.name() == node.op_type()) return "";
  // ONNX's experimental operators (onnx/defs/experiments, removed in ONNX 1.5 and later).
  static const std::set<std::string> kRetiredExperimental = {
      "ATen", "Affine", "ConstantFill", "Crop", "DynamicSlice", "GRUUnit", "GivenTensorFill", "ImageScaler",
      "ParametricSoftplus", "Scale", "ScaledTanh"};
  if (default_domain && kRetiredExperimental.count(node.op_type())) return "";
  // ONNX Runtime's contrib SimplifiedLayerNormalization (RMSNorm) and, before ONNX had
  // one (opset 17), LayerNormalization, which it registers in the ONNX domain: its
  // transformer optimizer and onnxscript's ort_fusions write them for every RMSNorm of a
  // Llama-family model and every LayerNorm of a BERT at opsets 12 to 16. Kept opaque
  // (the runtime lowers them itself).
  if (default_domain && (node.op_type() == "SimplifiedLayerNormalization" || node.op_type() == "LayerNormalization"))
    return "";
  int64_t version = 0;
  bool imported = false;
  for (const auto& o : imports) {
    if (is_default_domain(o.domain()) != default_domain || (!default_domain && o.domain() != node.domain())) continue;
    version = o.version();
    imported = true;
  }
  if (default_domain && !imported) version = 1, imported = true;  // IR 1 and 2 without opset_import: opset 1
  if (op_version(node.domain(), node.op_type(), version) != 0) return "";
  const std::string domain = default_domain ? "ai.onnx" : node.domain();
  const std::vector<int> versions = op_versions(node.domain(), node.op_type());
  if (!imported) return "domain '" + domain + "' has no operator " + node.op_type() + " (the model imports no opset of it)";
  std::string why = "domain '" + domain + "' has no operator " + node.op_type() + " at opset " + std::to_string(version);
  if (!versions.empty()) why += " (it has one from opset " + std::to_string(versions.front()) + ")";
  return why;
}

}  // namespace isomer::onnx_detail
