#include "ir/node.h"

#include <functional>

#include "ir/error.h"
#include "ir/invalid_node.h"
#include "ir/shape_overflow.h"
#include "ops/op.h"

namespace isomer {

namespace {
const TensorType kAbsentType{};

size_t mix(size_t h, size_t x) { return (h ^ (x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))); }
}  // namespace

const TensorType& Value::type() const { return node ? node->output_types().at(index) : kAbsentType; }

const Tensor* Value::constant() const {
  return node && node->kind() == NodeKind::Constant ? node->value() : nullptr;
}

Value Node::output(uint32_t i) const {
  if (i >= output_types_.size()) throw Error(describe(*this) + " has no output " + std::to_string(i));
  return Value{shared_from_this(), i};
}

Node::~Node() {
  std::vector<NodePtr> pending;
  for (Value& v : inputs_)
    if (v.node) pending.push_back(std::move(v.node));
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
    // The last owner: take its inputs before it goes, so that its destructor finds none.
    if (n.use_count() == 1)
      for (Value& v : const_cast<Node&>(*n).inputs_)
        if (v.node) pending.push_back(std::move(v.node));
  }
}

void Node::finalize() {
  size_t h = static_cast<size_t>(kind_);
  h = mix(h, std::hash<std::string>{}(op_type_));
  h = mix(h, attrs_.hash());
  for (const Value& v : inputs_) h = mix(h, ValueHash{}(v));
  if (value_) h = mix(h, value_->hash());
  if (opaque_) h = mix(h, std::hash<uint64_t>{}(opaque_->uid));
  if (kind_ == NodeKind::Input) h = mix(h, std::hash<std::string>{}(name_));
  hash_ = h;
}

bool Node::same_structure(const Node& o) const {
  if (this == &o) return true;
  if (hash_ != o.hash_ || kind_ != o.kind_ || op_type_ != o.op_type_ || inputs_ != o.inputs_) return false;
  switch (kind_) {
    case NodeKind::Input: return name_ == o.name_ && output_types_ == o.output_types_;
    case NodeKind::Constant: return value_->same_as(*o.value_);
    case NodeKind::Opaque: return opaque_->uid == o.opaque_->uid;
    case NodeKind::Op:
      return op_->props.deterministic && attrs_ == o.attrs_ && output_types_.size() == o.output_types_.size();
  }
  return false;
}

NodePtr Node::make_input(std::string name, TensorType type, std::optional<std::string> onnx_type) {
  require(!name.empty(), "a graph input needs a name");
  std::vector<int64_t> dims;
  for (const Dim& d : type.shape)
    if (d.is_static()) dims.push_back(d.value);
  checked_num_bytes(dims, dtype_size(type.dtype), "graph input '" + name + "' shape");
  std::shared_ptr<Node> n(new Node());
  n->kind_ = NodeKind::Input;
  n->op_type_ = "Input";
  n->name_ = std::move(name);
  n->output_types_ = {std::move(type)};
  n->onnx_type_ = std::move(onnx_type);
  n->finalize();
  return n;
}

NodePtr Node::make_constant(Tensor value, std::string name) {
  std::shared_ptr<Node> n(new Node());
  n->kind_ = NodeKind::Constant;
  n->op_type_ = "Constant";
  n->name_ = std::move(name);
  n->output_types_ = {value.type()};
  n->value_ = std::move(value);
  n->finalize();
  return n;
}

NodePtr Node::make_op(const OpDef& op, std::vector<Value> inputs, Attributes attrs, size_t num_outputs,
                      std::string name, std::vector<std::string> output_names) {
  std::string who = name.empty() ? std::string(op.name) : "'" + name + "' (" + std::string(op.name) + ")";
  int n_in = static_cast<int>(inputs.size());
  while (n_in > 0 && !inputs[n_in - 1].present()) --n_in;  // trailing omitted optionals
  inputs.resize(n_in);
  require(n_in >= op.min_inputs && (op.max_inputs < 0 || n_in <= op.max_inputs),
          "node " + who + " has " + std::to_string(n_in) + " inputs, expected " + std::to_string(op.min_inputs) +
              (op.max_inputs < 0 ? " or more" : op.max_inputs == op.min_inputs ? "" : " to " + std::to_string(op.max_inputs)));
  std::vector<TensorType> in_types;
  std::vector<const Tensor*> constants;
  for (const Value& v : inputs) {
    in_types.push_back(v.type());
    constants.push_back(v.constant());
  }
  InferContext ctx{attrs, in_types, constants, num_outputs};
  std::vector<TensorType> out;
  try {
    out = op.infer(ctx);
  } catch (const InvalidNode& e) {
    throw InvalidNode("node " + who + ": " + e.what());
  } catch (const ShapeOverflow& e) {
    throw ShapeOverflow("node " + who + ": " + e.what());
  } catch (const Error& e) {
    throw Error("node " + who + ": " + e.what());
  }
  // A shape rule computes output extents from attributes and constants a model chose:
  // every static output shape must have non-negative dims whose product fits 64 bits,
  // so no later element count wraps around.
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<int64_t> dims;
    for (const Dim& d : out[i].shape)
      if (d.is_static()) dims.push_back(d.value);
    const std::string what = "node " + who + ": output " + std::to_string(i) + " shape";
    checked_num_bytes(dims, dtype_size(out[i].dtype), what);
  }
  require(num_outputs == 0 || out.size() == num_outputs,
          "node " + who + " produces " + std::to_string(out.size()) + " outputs, " + std::to_string(num_outputs) +
              " requested");
  std::shared_ptr<Node> n(new Node());
  n->kind_ = NodeKind::Op;
  n->op_ = &op;
  n->op_type_ = std::string(op.name);
  n->attrs_ = std::move(attrs);
  n->inputs_ = std::move(inputs);
  n->output_types_ = std::move(out);
  n->name_ = std::move(name);
  n->output_names_ = std::move(output_names);
  n->finalize();
  return n;
}

NodePtr Node::make_opaque(OpaqueInfo info, std::vector<Value> inputs, std::vector<TensorType> output_types,
                          std::string name, std::vector<std::string> output_names) {
  std::shared_ptr<Node> n(new Node());
  n->kind_ = NodeKind::Opaque;
  n->op_type_ = info.op_type;
  n->opaque_ = std::make_shared<const OpaqueInfo>(std::move(info));
  n->inputs_ = std::move(inputs);
  n->output_types_ = std::move(output_types);
  n->name_ = std::move(name);
  n->output_names_ = std::move(output_names);
  n->finalize();
  return n;
}

NodePtr Node::renamed(std::string name, std::vector<std::string> output_names) const {
  std::shared_ptr<Node> n(new Node(*this));
  n->name_ = std::move(name);
  n->output_names_ = std::move(output_names);
  n->finalize();
  return n;
}

NodePtr Node::with_inputs(std::vector<Value> inputs) const {
  switch (kind_) {
    case NodeKind::Op: return make_op(*op_, std::move(inputs), attrs_, output_types_.size(), name_, output_names_);
    case NodeKind::Opaque: {
      std::shared_ptr<Node> n(new Node(*this));
      n->inputs_ = std::move(inputs);
      n->finalize();
      return n;
    }
    default: return shared_from_this();
  }
}

const std::string* onnx_type_of(const Value& v) {
  if (!v.present()) return nullptr;
  if (v.node->kind() == NodeKind::Input) return v.node->onnx_type();
  const OpaqueInfo* opaque = v.node->opaque();
  if (opaque && opaque->output_type_unknown(v.index)) return &*opaque->onnx_output_types[v.index];
  return nullptr;
}

std::string describe(const Node& n) {
  std::string out = "node";
  if (!n.name().empty()) out += " '" + n.name() + "'";
  return out + " (" + n.op_type() + ")";
}

std::string describe_opaque(const Node& n) {
  const OpaqueInfo* o = n.opaque();
  if (!o) return describe(n);
  if (o->known_op) return describe(n) + " is kept opaque: " + (o->reason.empty() ? "no reason recorded" : o->reason);
  std::string out = describe(n) + " is an operator isomer does not understand";
  if (!o->reason.empty()) out += " (" + o->reason + ")";
  return out;
}

}  // namespace isomer
