#pragma once
// A graph: ordered inputs, named outputs, and the DAG of immutable nodes reachable
// from them. Graphs are values: passes build new graphs, sharing unchanged nodes.
// GraphBuilder makes nodes through the validating constructors and hash-conses
// them, so structurally equal nodes are one node (common subexpressions merge).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/node.h"

namespace isomer {

// Model-level facts that must survive import -> export unchanged.
struct ModelInfo {
  int64_t ir_version = 8;
  std::vector<std::pair<std::string, int64_t>> opset_imports{{"", 17}};  // domain -> version
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::string graph_name = "isomer";
  std::string graph_doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  // Serialized onnx FunctionProtos and training info, kept verbatim.
  std::vector<std::string> functions;
  // A serialized onnx ModelProto holding what the source model had beyond what the IR
  // models (unknown fields of newer IRs, doc strings and metadata of nodes, values and
  // initializers; see onnx/extras.h); export puts it back. Null if nothing. Shared:
  // it can be megabytes (exporters' per-node metadata), and graphs are copied often.
  std::shared_ptr<const std::string> onnx_extras;

  // Version of the default (ai.onnx) opset; 0 if the model imports none.
  int64_t opset() const;
};

class Graph {
 public:
  Graph() = default;
  Graph(std::vector<NodePtr> inputs, std::vector<Value> outputs, std::vector<std::string> output_names,
        ModelInfo info = {});

  const std::vector<NodePtr>& inputs() const { return inputs_; }
  const std::vector<Value>& outputs() const { return outputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const ModelInfo& info() const { return info_; }
  ModelInfo& mutable_info() { return info_; }

  // Every node reachable from the outputs, plus all inputs, inputs before users.
  // Deterministic: depends only on the graph's structure and input order.
  std::vector<NodePtr> topo_order() const;
  // Operator nodes (Op and Opaque), i.e. what ONNX counts as nodes.
  size_t num_ops() const;
  // op_type -> count over operator nodes.
  std::map<std::string, size_t> op_histogram() const;
  // Total bytes of constant data.
  size_t constant_bytes() const;

  // Same interface (inputs, output names, info), new output values.
  Graph with_outputs(std::vector<Value> outputs) const;

 private:
  std::vector<NodePtr> inputs_;
  std::vector<Value> outputs_;
  std::vector<std::string> output_names_;
  ModelInfo info_;
};

class GraphBuilder {
 public:
  // dedupe=false keeps structurally equal nodes apart (the importer uses it so that
  // the model is taken as written; CSE is then a pass that reports what it merged).
  explicit GraphBuilder(bool dedupe = true) : dedupe_(dedupe) {}

  Value input(std::string name, TensorType type);
  Value constant(Tensor value, std::string name = "");
  // An operator node; returns all its outputs. `num_outputs` 0 = the operator's default.
  std::vector<Value> op(std::string_view op_name, std::vector<Value> inputs, Attributes attrs = {},
                        size_t num_outputs = 0, std::string name = "");
  // Single-output convenience.
  Value op1(std::string_view op_name, std::vector<Value> inputs, Attributes attrs = {}, std::string name = "");
  std::vector<Value> opaque(OpaqueInfo info, std::vector<Value> inputs, std::vector<TensorType> output_types,
                            std::string name = "", std::vector<std::string> output_names = {});
  // Hash-conses an already built node: returns the existing equal node if any.
  NodePtr intern(NodePtr node);

  // Graph inputs in the order they were declared.
  const std::vector<NodePtr>& inputs() const { return inputs_; }
  Graph finish(std::vector<Value> outputs, std::vector<std::string> output_names, ModelInfo info = {}) const;

 private:
  bool dedupe_;
  std::vector<NodePtr> inputs_;
  std::unordered_multimap<size_t, NodePtr> table_;
};

// Rebuilds `g` bottom-up through a fresh deduplicating builder. For each operator
// node (in topological order), `fn` receives the node and its already-rebuilt
// inputs; it returns the values that replace the node's outputs, or an empty
// vector to keep the node (with the new inputs). Inputs and constants are carried
// over. Used by passes; a pass whose fn changes nothing gets an equal graph back.
using RewriteFn = std::function<std::vector<Value>(const Node& node, const std::vector<Value>& new_inputs,
                                                   GraphBuilder& builder)>;
Graph rebuild(const Graph& g, const RewriteFn& fn);

// Structural equality of two graphs (same interface, same DAG); names ignored.
bool same_graph(const Graph& a, const Graph& b);

// A hash of the DAG behind the outputs: operator, canonical attributes, operands in
// order, constant data, graph input names. Unlike Node::hash (which mixes operand
// node addresses, exact only inside one builder), equal graphs built by different
// rewrites hash alike, whatever their node names and build order. For "seen" sets:
// a collision may make a caller skip a graph, so never use it to prove equality.
uint64_t structural_hash(const Graph& g);

}  // namespace isomer
