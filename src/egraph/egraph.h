#pragma once
// An e-graph over the operator table (egg's design: Willsey et al., POPL 2021):
// e-nodes are hash-consed into e-classes of equal values, kept in a union-find;
// rebuild() restores congruence (two e-nodes with the same operator, attributes and
// child classes are in one class) after merges.
//
// Multi-output operators are native: an operator e-node with k > 1 outputs lives in a
// tuple class (its value is the k outputs), and a projection e-node Proj(i, tuple)
// stands for output i. Split and merged convolutions or products are ordinary e-nodes,
// with any number of outputs.
//
// The e-class analysis is the value's type (element type and shape; one per output for
// a tuple class) and whether it is a constant: computable at optimization time from
// constants by deterministic operators. Constant data is materialized only when a
// guard, a fold or a shape rule asks for it (and then kept); extraction leaves
// constant computations for the template passes to fold. Merging two classes of
// different types is a bug in a rule application and throws at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace isomer {
struct OpDef;
}

namespace isomer::eg {

using ClassId = uint32_t;
constexpr ClassId kNoClass = UINT32_MAX;

enum class ENodeKind : uint8_t {
  Input,     // a graph input (leaf = its index)
  Constant,  // constant data (leaf = interned tensor)
  Op,        // an operator of the table
  Opaque,    // an operator isomer does not understand (leaf = its original node): never rewritten
  Proj,      // output `leaf` of the tuple class children[0]
};

struct ENode {
  ENodeKind kind = ENodeKind::Op;
  const OpDef* op = nullptr;      // Op
  uint32_t attrs = 0;             // Op: interned canonical attributes
  uint32_t leaf = 0;              // see ENodeKind
  uint32_t num_outputs = 1;       // Op, Opaque
  std::vector<ClassId> children;  // inputs (kNoClass: an omitted optional input)
  // Who made it: 0 = the input graph, k = the rewrite the saturation labelled k (see
  // EGraph::set_origin). Not part of its identity.
  uint32_t origin = 0;

  bool operator==(const ENode& o) const {
    return kind == o.kind && op == o.op && attrs == o.attrs && leaf == o.leaf && num_outputs == o.num_outputs &&
           children == o.children;
  }
};

struct ENodeHash {
  size_t operator()(const ENode& n) const;
};

struct EClass {
  std::vector<ENode> nodes;
  std::vector<std::pair<ENode, ClassId>> parents;  // e-nodes that have this class as a child
  std::vector<TensorType> types;                   // one per output
  bool constant = false;                           // computable from constants
  std::shared_ptr<const Tensor> value;             // materialized constant data (lazily)

  bool tuple() const { return types.size() != 1; }
};

class EGraph {
 public:
  // Constant data is materialized for a shape rule only up to this many elements.
  static constexpr int64_t kInferConstantLimit = 1 << 16;
  // No constant is evaluated (for a match, or as the operand of one) past this many
  // elements, nor past this much arithmetic (passes/passes.h, fold_flops): a scalar
  // expanded to 10^9 elements under a ReduceSum, or a product of two 4096x4096 weights,
  // is left to the runtime as the optimizer's folding leaves it.
  static constexpr int64_t kEvaluateConstantLimit = 16 << 20;
  static constexpr double kEvaluateFlopsLimit = 4e9;

  EGraph() = default;
  EGraph(const EGraph&) = delete;
  EGraph& operator=(const EGraph&) = delete;

  // Adds `n` (children canonicalized): the class of an equal e-node if there is one,
  // else a new class. Throws Error if the operator's shape rule rejects the inputs.
  ClassId add(ENode n);
  ClassId add_input(NodePtr input);
  ClassId add_constant(const Tensor& t);
  ClassId add_opaque(NodePtr node, std::vector<ClassId> inputs);
  // An operator with canonical `attrs`: its class (a tuple class when num_outputs > 1).
  ClassId add_op(const OpDef& op, std::vector<ClassId> inputs, const Attributes& attrs, uint32_t num_outputs = 1);
  // The class of output i of a tuple class.
  ClassId add_proj(ClassId tuple, uint32_t i);

  ClassId find(ClassId c) const;
  // Unions two classes; false if they were one already. Throws Error if their types
  // differ (an unsound rewrite). Call rebuild() before searching again.
  bool merge(ClassId a, ClassId b);
  // Restores congruence and deduplicates e-nodes (egg's rebuild).
  void rebuild();

  const EClass& cls(ClassId c) const { return classes_.at(find(c)); }
  // Ids of every canonical class.
  std::vector<ClassId> class_ids() const;
  size_t num_classes() const { return num_classes_; }
  size_t num_nodes() const { return num_nodes_; }
  size_t merges() const { return merges_; }  // merges that joined two classes, ever

  // New e-nodes are labelled with `origin` (provenance: which rule made them).
  void set_origin(uint32_t origin) { origin_ = origin; }

  const Attributes& attrs(uint32_t id) const { return attrs_.at(id); }
  uint32_t intern_attrs(const Attributes& a);
  // A pattern's attributes (a rule's literal ones), interned apart from the e-nodes'
  // so that matching leaves the ids of attrs() as they were.
  uint32_t intern_pattern_attrs(const Attributes& a);
  // True if `op`'s canonical form of the pattern attributes `pattern` (an id of
  // intern_pattern_attrs), on inputs of the classes `inputs`, is the e-node attribute
  // set `host` (an id of attrs()). Canonicalizing is most of what matching costs; a
  // class's type never changes, so the answer for each (op, pattern, inputs) is kept
  // and every later e-node is compared by id.
  bool canonical_attrs_equal(const OpDef& op, uint32_t pattern, std::span<const ClassId> inputs, uint32_t host);
  const Tensor& tensor(uint32_t id) const { return tensors_.at(id); }
  const NodePtr& leaf_node(uint32_t id) const { return leaves_.at(id); }

  // The constant's data (nullptr if the class is not constant, the value is larger
  // than `max_elements` or, evaluated, past the limits above, or evaluating it fails).
  // Kept once computed.
  const Tensor* constant_value(ClassId c, int64_t max_elements = INT64_MAX);
  // The value's type: output `output` of the class.
  const TensorType& type(ClassId c, uint32_t output = 0) const { return cls(c).types.at(output); }

 private:
  ENode canonical(ENode n) const;
  void compute_analysis(ClassId id, const ENode& n);
  std::vector<TensorType> infer_types(const ENode& n);
  bool node_is_constant(const ENode& n) const;

  mutable std::vector<ClassId> parent_;  // union-find (path halving in find)
  std::vector<EClass> classes_;          // by id; only canonical ids are live
  std::unordered_map<ENode, ClassId, ENodeHash> memo_;
  std::vector<ClassId> pending_;         // classes merged since the last rebuild
  std::vector<Attributes> attrs_;
  std::unordered_map<size_t, std::vector<uint32_t>> attrs_index_;
  std::vector<Attributes> pattern_attrs_;
  std::unordered_map<size_t, std::vector<uint32_t>> pattern_attrs_index_;
  // canonical_attrs_equal's answers: the canonical form's id in attrs_ (kNoAttrs
  // while no e-node has it, looked up again once attrs_ has grown past `seen`).
  static constexpr uint32_t kNoAttrs = UINT32_MAX;
  struct CanonicalAttrs {
    const OpDef* op;
    uint32_t pattern;
    std::vector<ClassId> inputs;
    Attributes canonical;
    uint32_t id;
    size_t seen;
  };
  std::unordered_map<size_t, std::vector<CanonicalAttrs>> canonical_attrs_;
  std::vector<Tensor> tensors_;
  std::unordered_map<size_t, std::vector<uint32_t>> tensor_index_;
  std::vector<NodePtr> leaves_;
  size_t num_classes_ = 0, num_nodes_ = 0, merges_ = 0;
  uint32_t origin_ = 0;
};

// Adds every value of `g` to `eg`: the class of each graph output, in order. The
// graph's inputs become the first Input leaves, numbered like g.inputs().
// `node_classes`, if given, gets the class of every node (a tuple class for a node
// of several outputs).
std::vector<ClassId> load_graph(EGraph& eg, const Graph& g,
                                std::unordered_map<const Node*, ClassId>* node_classes = nullptr);

}  // namespace isomer::eg
