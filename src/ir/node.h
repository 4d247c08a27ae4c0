#pragma once
// Graph nodes: immutable, built only through validating constructors that infer
// and check output types. A node's identity for hash-consing is its kind, operator,
// attributes, inputs (by node identity) and, for constants, its data; names are
// cosmetic and never part of identity.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace isomer {

struct OpDef;
class Node;
using NodePtr = std::shared_ptr<const Node>;

// One output of a node. A Value with a null node stands for an omitted optional
// input (ONNX's empty input name).
struct Value {
  NodePtr node;
  uint32_t index = 0;

  bool present() const { return node != nullptr; }
  const TensorType& type() const;
  // The constant's data if this value is a Constant node's output, else nullptr.
  const Tensor* constant() const;
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

struct ValueHash {
  size_t operator()(const Value& v) const {
    return std::hash<const void*>{}(v.node.get()) * 31 + v.index;
  }
};

enum class NodeKind : uint8_t {
  Input,     // a graph input
  Constant,  // an initializer or Constant node: data known at optimization time
  Op,        // an operator isomer understands (has an OpDef)
  Opaque,    // an operator isomer does not understand: kept verbatim, a rewrite barrier
};

// What isomer keeps of an operator it does not understand: the serialized ONNX
// NodeProto (attributes, subgraphs, domain, everything), so export is verbatim.
struct OpaqueInfo {
  std::string domain;
  std::string op_type;
  std::string node_proto;  // serialized onnx::NodeProto
  uint64_t uid = 0;        // unique per imported node: opaque nodes never merge
  // Why the node is not native, as the importer found it ("the 3 query heads are
  // not a multiple of the 2 key/value heads"); empty where nobody said. Not part
  // of identity, nor of the text form.
  std::string reason;
  // True for an operator isomer implements whose attributes, types or shapes the
  // importer refused; false for one isomer does not know at all.
  bool known_op = false;
  // Per output: the ONNX TypeProto (serialized, possibly empty) of an output whose
  // type a TensorType cannot state (shape or element type not inferred, or not a
  // tensor: sequence, optional, map); nullopt where output_types() is exact. Native
  // operators that read such a value stay opaque too; export writes this type back.
  std::vector<std::optional<std::string>> onnx_output_types;

  bool output_type_unknown(size_t i) const {
    return i < onnx_output_types.size() && onnx_output_types[i].has_value();
  }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  // Frees the inputs only this node holds in a loop, not by recursion: a chain of
  // 10^5 nodes would otherwise take one stack frame per node (and overflow the stack).
  ~Node();
  Node(const Node&) = default;

  NodeKind kind() const { return kind_; }
  // Op: the operator definition; nullptr for other kinds.
  const OpDef* op() const { return op_; }
  // Operator name ("Conv"), the ONNX op_type of an opaque node, or "Input"/"Constant".
  const std::string& op_type() const { return op_type_; }
  const Attributes& attrs() const { return attrs_; }
  const std::vector<Value>& inputs() const { return inputs_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  size_t num_outputs() const { return output_types_.size(); }
  Value output(uint32_t i = 0) const;

  // Input: the graph input's name; Constant: initializer name; others: ONNX node name.
  const std::string& name() const { return name_; }
  // Preferred names of the outputs (from the source model); may be empty.
  const std::vector<std::string>& output_names() const { return output_names_; }
  const Tensor* value() const { return value_ ? &*value_ : nullptr; }
  const OpaqueInfo* opaque() const { return opaque_.get(); }
  // Input only: the serialized ONNX TypeProto of a graph input whose type a
  // TensorType cannot state (sequence, optional, map, tensor of unknown rank or
  // element type); nullptr where output_types() is exact. Consumers of such an
  // input stay opaque; export writes this type back verbatim. Not part of identity.
  const std::string* onnx_type() const { return onnx_type_ ? &*onnx_type_ : nullptr; }

  size_t hash() const { return hash_; }
  // Structural identity (what hash-consing merges on).
  bool same_structure(const Node& o) const;

  // Validating constructors. They check arity, infer output types through the
  // operator's shape rule and throw Error with a clear message on bad input.
  static NodePtr make_input(std::string name, TensorType type, std::optional<std::string> onnx_type = std::nullopt);
  static NodePtr make_constant(Tensor value, std::string name = "");
  static NodePtr make_op(const OpDef& op, std::vector<Value> inputs, Attributes attrs,
                         size_t num_outputs = 0, std::string name = "",
                         std::vector<std::string> output_names = {});
  static NodePtr make_opaque(OpaqueInfo info, std::vector<Value> inputs, std::vector<TensorType> output_types,
                             std::string name = "", std::vector<std::string> output_names = {});

  // Copy of this node with other names (names are cosmetic).
  NodePtr renamed(std::string name, std::vector<std::string> output_names) const;
  // Same node with new inputs, re-validated (op and opaque nodes only).
  NodePtr with_inputs(std::vector<Value> inputs) const;

 private:
  Node() = default;
  void finalize();

  NodeKind kind_ = NodeKind::Op;
  const OpDef* op_ = nullptr;
  std::string op_type_;
  Attributes attrs_;
  std::vector<Value> inputs_;
  std::vector<TensorType> output_types_;
  std::string name_;
  std::vector<std::string> output_names_;
  std::optional<Tensor> value_;
  std::shared_ptr<const OpaqueInfo> opaque_;
  std::optional<std::string> onnx_type_;  // Input only, see onnx_type()
  size_t hash_ = 0;
};

// The serialized ONNX TypeProto of a value whose type its TensorType cannot state
// (an opaque node's output of unknown type, or a graph input with onnx_type());
// nullptr where value.type() is exact. The string may be empty (type not known at all).
const std::string* onnx_type_of(const Value& v);
inline bool type_unknown(const Value& v) { return onnx_type_of(v) != nullptr; }

// "node 'conv1' (Conv)" for error messages.
std::string describe(const Node& n);

// Why opaque node `n` is not native, for messages about it: "node 'attn'
// (Attention) is kept opaque: the 3 query heads are ..." for an operator isomer
// knows, "node 'x' (Foo) is an operator isomer does not understand" for one it
// does not. For a node that is not opaque, describe(n).
std::string describe_opaque(const Node& n);

}  // namespace isomer
