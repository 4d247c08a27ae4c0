// Subgraph scoping and message helpers shared by import and export.
#include "onnx/proto_util.h"

#include <unordered_set>

#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer::onnx_detail {
namespace {

void append_subgraph_free_names(const onnx::GraphProto& g, std::vector<std::string>& out,
                                std::unordered_set<std::string>& seen);

// Appends the names `node`'s subgraphs read from outside themselves.
void append_node_free_names(const onnx::NodeProto& node, std::vector<std::string>& out,
                            std::unordered_set<std::string>& seen) {
  for (const auto& attr : node.attribute()) {
    if (attr.has_g()) append_subgraph_free_names(attr.g(), out, seen);
    for (const auto& g : attr.graphs()) append_subgraph_free_names(g, out, seen);
  }
}

// A subgraph's free names: what its nodes (and nested subgraphs) read that it does
// not define itself (as an input, initializer or node output).
void append_subgraph_free_names(const onnx::GraphProto& g, std::vector<std::string>& out,
                                std::unordered_set<std::string>& seen) {
  std::unordered_set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& t : g.sparse_initializer()) defined.insert(t.values().name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) use(in);
    std::vector<std::string> nested;
    std::unordered_set<std::string> nested_seen;
    append_node_free_names(n, nested, nested_seen);
    for (const auto& name : nested) use(name);
  }
  for (const auto& o : g.output()) use(o.name());
}

}  // namespace

std::vector<std::string> outer_scope_names(const onnx::NodeProto& node) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  append_node_free_names(node, out, seen);
  return out;
}

onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a) {
  using A = onnx::AttributeProto;
  if (a.type() != A::UNDEFINED) return a.type();
  if (a.has_f()) return A::FLOAT;
  if (a.has_i()) return A::INT;
  if (a.has_s()) return A::STRING;
  if (a.has_t()) return A::TENSOR;
  if (a.has_g()) return A::GRAPH;
  if (a.has_sparse_tensor()) return A::SPARSE_TENSOR;
  if (a.has_tp()) return A::TYPE_PROTO;
  if (a.floats_size()) return A::FLOATS;
  if (a.ints_size()) return A::INTS;
  if (a.strings_size()) return A::STRINGS;
  if (a.tensors_size()) return A::TENSORS;
  if (a.graphs_size()) return A::GRAPHS;
  return A::UNDEFINED;
}

std::string describe_proto(const onnx::NodeProto& node) {
  if (!node.name().empty()) return "node '" + node.name() + "' (" + node.op_type() + ")";
  for (const auto& o : node.output())
    if (!o.empty()) return "node (" + node.op_type() + ") -> '" + o + "'";
  return "node (" + node.op_type() + ")";
}

std::string one_line(std::string message) {
  std::string out;
  bool space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::optional<Tensor> constant_node_value(const onnx::NodeProto& node, const std::string& base_dir,
                                          std::string* reason) {
  require(node.attribute_size() == 1, describe_proto(node) + " needs exactly one value attribute");
  const auto& a = node.attribute(0);
  try {
    const std::string& kind = a.name();
    if (kind == "value" && !known_element_type(a.t().data_type())) {
      *reason = "element type " + std::to_string(a.t().data_type()) + " is not one isomer computes with";
      return std::nullopt;
    }
    if (kind == "value") return tensor_from_proto(a.t(), base_dir);
    if (kind == "value_float") return Tensor::scalar_f32(a.f());
    if (kind == "value_floats") {
      std::vector<double> v(a.floats().begin(), a.floats().end());
      return Tensor::from_f64(DType::Float32, {static_cast<int64_t>(v.size())}, v);
    }
    if (kind == "value_int") return Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{a.i()});
    if (kind == "value_ints") return Tensor::vector_i64(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    if (kind == "value_string" || kind == "value_strings") {
      onnx::TensorProto t;
      t.set_data_type(onnx::TensorProto::STRING);
      if (kind == "value_string") {
        t.add_string_data(a.s());
      } else {
        t.add_dims(a.strings_size());
        *t.mutable_string_data() = a.strings();
      }
      return tensor_from_proto(t, base_dir);
    }
  } catch (const Error& e) {
    throw Error(describe_proto(node) + ": " + e.what());
  }
  *reason = "a sparse constant";
  return std::nullopt;
}

}  // namespace isomer::onnx_detail
