#include "onnx/body_model.h"

#include <string>
#include <unordered_set>

#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "onnx/proto_util.h"

namespace isomer {

using namespace onnx_detail;

namespace {

onnx::NodeProto parse_node(const std::string& node_proto) {
  onnx::NodeProto node;
  require(node.ParseFromString(node_proto), "a control-flow node's stored NodeProto does not parse");
  return node;
}

const onnx::GraphProto& body_of(const onnx::NodeProto& node, const std::string& attribute) {
  for (const auto& a : node.attribute())
    if (a.name() == attribute && a.has_g()) return a.g();
  throw Error(describe_proto(node) + " has no graph attribute '" + attribute + "'");
}

// A value's declared type with the element type kept and the shape dropped: the body
// is compiled at concrete types, and what an exporter declared (symbolic dims, or
// dims of the shapes it traced with) must not contradict them.
void drop_shape(onnx::ValueInfoProto* v) {
  if (v->type().has_tensor_type()) v->mutable_type()->mutable_tensor_type()->clear_shape();
}

}  // namespace

std::vector<std::string> body_outer_names(const std::string& node_proto) {
  return outer_scope_names(parse_node(node_proto));
}

std::optional<std::vector<int64_t>> declared_input_dims(const std::string& node_proto, const std::string& attribute,
                                                        int index) {
  const onnx::NodeProto node = parse_node(node_proto);
  const onnx::GraphProto& body = body_of(node, attribute);
  if (index >= body.input_size() || !body.input(index).type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : body.input(index).type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

std::optional<int64_t> node_int_attribute(const std::string& node_proto, const std::string& name) {
  const onnx::NodeProto node = parse_node(node_proto);
  for (const auto& a : node.attribute())
    if (a.name() == name && attribute_type(a) == onnx::AttributeProto::INT) return a.i();
  return std::nullopt;
}

std::vector<int64_t> node_ints_attribute(const std::string& node_proto, const std::string& name) {
  const onnx::NodeProto node = parse_node(node_proto);
  for (const auto& a : node.attribute())
    if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  return {};
}

bool is_tensor_type(const std::string& type_proto) {
  onnx::TypeProto t;
  if (type_proto.empty() || !t.ParseFromString(type_proto)) return true;
  return t.value_case() == onnx::TypeProto::VALUE_NOT_SET || t.has_tensor_type();
}

Graph import_body(const std::string& node_proto, const std::string& attribute, const ModelInfo& info,
                  const std::vector<TensorType>& formal, const std::vector<OuterValue>& outer) {
  const onnx::NodeProto node = parse_node(node_proto);
  const std::string where = describe_proto(node) + " " + attribute;
  const std::vector<std::string> names = outer_scope_names(node);
  require(names.size() == outer.size(), where + ": " + std::to_string(outer.size()) + " outer values for " +
                                            std::to_string(names.size()) + " outer-scope names");
  onnx::ModelProto model;
  // Initializers need not be graph inputs from IR version 4 on.
  model.set_ir_version(std::max<int64_t>(info.ir_version, 4));
  for (const auto& [domain, version] : info.opset_imports) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  for (const std::string& f : info.functions) {
    onnx::FunctionProto fn;
    if (fn.ParseFromString(f)) *model.add_functions() = std::move(fn);
  }
  onnx::GraphProto* g = model.mutable_graph();
  *g = body_of(node, attribute);
  g->set_name(attribute);
  require(g->input_size() == static_cast<int>(formal.size()),
          where + " takes " + std::to_string(g->input_size()) + " inputs, the runtime gives it " +
              std::to_string(formal.size()));
  for (int i = 0; i < g->input_size(); ++i) {
    g->mutable_input(i)->clear_type();
    tensor_type_to_proto(formal[i], g->mutable_input(i)->mutable_type());
  }
  // The node's outer names are those of all its bodies: one body may define a name
  // (an initializer that shadows the outer value) another reads from outside. There the
  // body's own definition stands; the outer value, where it is an input, keeps its place
  // under a name the body does not use.
  std::unordered_set<std::string> own;
  for (const auto& in : g->input()) own.insert(in.name());
  for (const auto& t : g->initializer()) own.insert(t.name());
  for (const auto& sp : g->sparse_initializer()) own.insert(sp.values().name());
  for (const auto& n : g->node()) own.insert(n.output().begin(), n.output().end());
  for (size_t k = 0; k < names.size(); ++k) {
    if (own.count(names[k])) {
      if (outer[k].known) continue;
      std::string unused = "outer " + std::to_string(k);
      while (own.count(unused)) unused += "'";
      onnx::ValueInfoProto* in = g->add_input();
      in->set_name(unused);
      tensor_type_to_proto(outer[k].type, in->mutable_type());
      continue;
    }
    if (outer[k].known) {
      onnx::TensorProto* t = g->add_initializer();
      tensor_to_proto(*outer[k].known, t);
      t->set_name(names[k]);
    } else {
      onnx::ValueInfoProto* in = g->add_input();
      in->set_name(names[k]);
      tensor_type_to_proto(outer[k].type, in->mutable_type());
    }
  }
  for (auto& o : *g->mutable_output()) drop_shape(&o);
  g->clear_value_info();
  try {
    return import_onnx_bytes(model.SerializeAsString(), "");
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace isomer
