#include "onnx/model_checks.h"

#include <functional>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "onnx/libonnx_inference.h"
#include "onnx/proto_util.h"

namespace isomer::onnx_detail {
namespace {

std::string dims_text(const std::vector<std::string>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ",";
    text += dims[i];
  }
  return text + "]";
}

// An initializer that is also a graph input is the input's default value: its type
// must be the one the input declares, or the model computes with one type when the
// input is not given and another when it is (ONNX Runtime refuses it).
void require_initializer_fits_input(const onnx::GraphProto& graph, const onnx::TensorProto& t) {
  for (const auto& in : graph.input()) {
    if (in.name() != t.name() || !in.type().has_tensor_type()) continue;
    const auto& tt = in.type().tensor_type();
    std::vector<std::string> dims;
    for (int64_t d : t.dims()) dims.push_back(std::to_string(d));
    const std::string what = "graph input '" + in.name() + "' is declared ";
    const std::string initializer = ", but its initializer is " + element_type_name(t.data_type()) + dims_text(dims);
    require(tt.elem_type() == 0 || tt.elem_type() == t.data_type(), what + element_type_name(tt.elem_type()) + initializer);
    if (!tt.has_shape()) return;
    bool fits = tt.shape().dim_size() == t.dims_size();
    for (int i = 0; fits && i < t.dims_size(); ++i)
      fits = !tt.shape().dim(i).has_dim_value() || tt.shape().dim(i).dim_value() == t.dims(i);
    if (fits) return;
    std::vector<std::string> declared;
    for (const auto& d : tt.shape().dim())
      declared.push_back(d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param().empty() ? "?" : d.dim_param());
    throw Error(what + "with shape " + dims_text(declared) + initializer);
  }
}

}  // namespace

std::string element_type_name(int32_t code) {
  return known_element_type(code) ? std::string(dtype_name(static_cast<DType>(code)))
                                  : "element type " + std::to_string(code);
}

std::string value_kind(const onnx::TypeProto& t) {
  return t.has_tensor_type() ? "a tensor" : t.has_sequence_type() ? "a sequence" : t.has_optional_type() ? "an optional"
         : t.has_map_type() ? "a map" : t.has_sparse_tensor_type() ? "a sparse tensor" : "an unknown type";
}

std::string type_kind(const onnx::TypeProto& t) {
  if (t.has_sequence_type()) return "a sequence";
  if (t.has_optional_type()) return "an optional";
  if (t.has_map_type()) return "a map";
  if (t.has_sparse_tensor_type()) return "a sparse tensor";
  if (t.has_tensor_type() && !t.tensor_type().has_shape()) return "a tensor of unknown rank";
  if (t.has_tensor_type()) return "a tensor of unknown element type";
  return "an unknown type";
}

void check_graph_names(const onnx::GraphProto& graph) {
  std::unordered_set<std::string> outer;  // graph inputs and initializers
  std::unordered_set<std::string> inputs;
  for (const auto& in : graph.input()) {
    require(inputs.insert(in.name()).second, "graph input '" + in.name() + "' is declared twice");
    outer.insert(in.name());
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    int64_t elements = 1;
    for (const auto& d : in.type().tensor_type().shape().dim()) {
      require(!d.has_dim_value() || d.dim_value() >= 0,
              "graph input '" + in.name() + "' has a negative dimension " + std::to_string(d.dim_value()));
      require(!d.has_dim_value() || !__builtin_mul_overflow(elements, d.dim_value(), &elements),
              "graph input '" + in.name() + "' declares more elements than fit in 64 bits");
    }
  }
  for (const auto& t : graph.initializer()) {
    outer.insert(t.name());
    if (inputs.count(t.name())) require_initializer_fits_input(graph, t);
  }
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    for (const auto& o : node.output()) {
      if (o.empty()) continue;
      require(!outer.count(o), describe_proto(node) + ": output '" + o + "' has the name of a graph input or initializer");
      auto [it, fresh] = producer.emplace(o, i);
      require(fresh, describe_proto(node) + ": output '" + o + "' is also produced by " +
                         describe_proto(graph.node(it->second)));
    }
  }
  for (const auto& node : graph.node())
    for (const auto& i : node.input())
      require(i.empty() || outer.count(i) || producer.count(i),
              describe_proto(node) + " reads '" + i + "', which nothing defines");
}

void require_default_domain_import(const onnx::ModelProto& model, bool imported) {
  if (imported) return;
  if (model.opset_import_size() == 0)
    require(model.ir_version() < 3, "the model imports no opset (ONNX requires one of ai.onnx from IR version 3)");
  if (model.opset_import_size() == 0) return;  // IR 1 and 2: opset 1 of ai.onnx
  std::function<void(const onnx::GraphProto&)> walk = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      require(!is_default_domain(node.domain()),
              describe_proto(node) + " is an ai.onnx operator, but the model imports no opset of ai.onnx");
      for (const auto& a : node.attribute()) {
        if (a.has_g()) walk(a.g());
        for (const auto& sub : a.graphs()) walk(sub);
      }
    }
  };
  walk(model.graph());
}

void check_inline_tensors(const onnx::GraphProto& g, bool initializers) {
  for (int i = 0; initializers && i < g.initializer_size(); ++i)
    if (std::string why = inline_data_mismatch(g.initializer(i)); !why.empty()) throw Error(why);
  for (const auto& node : g.node()) {
    for (const auto& a : node.attribute()) {
      std::string why = a.has_t() ? inline_data_mismatch(a.t()) : "";
      for (int i = 0; why.empty() && i < a.tensors_size(); ++i) why = inline_data_mismatch(a.tensors(i));
      if (!why.empty()) throw Error(describe_proto(node) + ": attribute '" + a.name() + "': " + why);
      if (a.has_g()) check_inline_tensors(a.g(), true);
      for (const auto& sub : a.graphs()) check_inline_tensors(sub, true);
    }
  }
}

// A value_info's element type is a promise about a value: one that contradicts the
// type isomer computes is a model that lies about it (ONNX Runtime refuses it too).
// Shapes are not held to it: ONNX Runtime only warns, and isomer computes its own.
// value_info describes the values that are neither graph inputs nor graph outputs (ONNX's
// IR); an entry naming one of those is ignored, as onnx.checker and ONNX Runtime ignore it
// (the input's or output's own declaration holds).
void require_value_info_types(const onnx::GraphProto& graph, const std::unordered_map<std::string, Value>& values) {
  std::unordered_set<std::string> declared_elsewhere;
  for (const auto& in : graph.input()) declared_elsewhere.insert(in.name());
  for (const auto& out : graph.output()) declared_elsewhere.insert(out.name());
  for (const auto& vi : graph.value_info()) {
    const int32_t declared = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
    auto it = values.find(vi.name());
    if (declared == 0 || it == values.end() || type_unknown(it->second) || declared_elsewhere.count(vi.name()))
      continue;
    const DType computed = it->second.type().dtype;
    if (computed == DType::Undefined || static_cast<int32_t>(computed) == declared) continue;
    std::string who = "the graph";
    for (const auto& node : graph.node())
      for (const auto& o : node.output())
        if (o == vi.name()) who = describe_proto(node);
    throw Error("value_info declares '" + vi.name() + "' " + element_type_name(declared) + ", but " + who +
                " computes it as " + std::string(dtype_name(computed)));
  }
}

// A declared element type the graph does not compute is a model that lies about
// its outputs: refused rather than silently written back with the computed one.
void require_output_type(const onnx::ValueInfoProto& out, const Value& computed) {
  const int32_t declared = out.type().has_tensor_type() ? out.type().tensor_type().elem_type() : 0;
  if (declared == 0 || !known_element_type(declared) || type_unknown(computed)) return;
  const DType dtype = computed.type().dtype;
  require(dtype == DType::Undefined || dtype == static_cast<DType>(declared),
          "graph output '" + out.name() + "' is declared " + std::string(dtype_name(static_cast<DType>(declared))) +
              " but the graph computes it as " + std::string(dtype_name(dtype)));
}

}  // namespace isomer::onnx_detail
