#pragma once
// What a model holds beyond what isomer's IR models, kept so that export can put it
// back: fields this libonnx does not know (newer IRs' node, graph, value and tensor
// metadata_props, node device configurations, the model's configuration, and any
// later addition), which protobuf parses as unknown fields, and the doc strings and
// quantization annotations of the graph, its nodes, values and initializers.
//
// It also holds the declared types of graph outputs, for export to declare the dims
// isomer cannot tell as the source did (add_to_value), and the default values of
// overridable inputs (initializers listed as graph inputs, onnx_io.h), whole, as
// initializers of the shell: the IR has no place for either.
//
// Import collects them into a ModelProto "shell" (ModelInfo::onnx_extras) that holds
// only these; export adds each part to the thing it belongs to where that is still
// there: the model and graph always, a native node that keeps its source name (or,
// unnamed, its first output's name) and operator, a value or initializer that keeps
// its name. Opaque nodes keep their whole NodeProto and need none of this.
#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace isomer::onnx_detail {

// The shell of `model` (serialized), or "" when the model has nothing to keep.
std::string collect_extras(const onnx::ModelProto& model);
// `shell` (serialized, or "") with `defaults` added as its initializers' values, each
// replacing the entry of its name.
std::string add_input_defaults(const std::string& shell, std::vector<onnx::TensorProto> defaults);

class ModelExtras {
 public:
  explicit ModelExtras(const std::string& serialized);

  void add_to_model(onnx::ModelProto* m) const;
  // Graph-level fields; quantization annotations only for tensors `has_value` names.
  template <class HasValue>
  void add_to_graph(onnx::GraphProto* g, const HasValue& has_value) const {
    add_graph_fields(g);
    for (const auto& q : shell_.graph().quantization_annotation())
      if (has_value(q.tensor_name())) *g->add_quantization_annotation() = q;
  }
  // A native node as export wrote it (name, op_type, outputs set).
  void add_to_node(onnx::NodeProto* n) const;
  // A graph input, output or value_info entry, by name.
  void add_to_value(onnx::ValueInfoProto* v) const;
  // Whether a value of this name had a value_info entry with something to keep: export
  // writes value_info for it so that the metadata survives.
  bool value_has_extras(const std::string& name) const { return values_.count(name) > 0; }
  void add_to_initializer(onnx::TensorProto* t) const;
  // The default value of the overridable input `name`, or null.
  const onnx::TensorProto* input_default(const std::string& name) const;

 private:
  void add_graph_fields(onnx::GraphProto* g) const;

  onnx::ModelProto shell_;
  std::unordered_map<std::string, const onnx::NodeProto*> nodes_by_name_;
  std::unordered_map<std::string, const onnx::NodeProto*> nodes_by_output_;
  std::unordered_map<std::string, const onnx::ValueInfoProto*> values_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
};

}  // namespace isomer::onnx_detail
