#include "egraph/egraph.h"

#include <algorithm>
#include <set>

#include "ir/error.h"
#include "ops/fold_cost.h"
#include "ops/op.h"

namespace isomer::eg {
namespace {

void mix(size_t& h, size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

// The id of `a` in `table` (appended if new), through `index` (hash -> ids).
uint32_t intern(std::vector<Attributes>& table, std::unordered_map<size_t, std::vector<uint32_t>>& index,
                const Attributes& a) {
  std::vector<uint32_t>& bucket = index[a.hash()];
  for (uint32_t id : bucket)
    if (table[id] == a) return id;
  table.push_back(a);
  bucket.push_back(static_cast<uint32_t>(table.size() - 1));
  return bucket.back();
}

}  // namespace

size_t ENodeHash::operator()(const ENode& n) const {
  size_t h = static_cast<size_t>(n.kind);
  mix(h, std::hash<const void*>{}(n.op));
  mix(h, n.attrs);
  mix(h, n.leaf);
  mix(h, n.num_outputs);
  for (ClassId c : n.children) mix(h, c);
  return h;
}

ClassId EGraph::find(ClassId c) const {
  while (parent_[c] != c) {
    parent_[c] = parent_[parent_[c]];
    c = parent_[c];
  }
  return c;
}

ENode EGraph::canonical(ENode n) const {
  for (ClassId& c : n.children)
    if (c != kNoClass) c = find(c);
  return n;
}

uint32_t EGraph::intern_attrs(const Attributes& a) { return intern(attrs_, attrs_index_, a); }

uint32_t EGraph::intern_pattern_attrs(const Attributes& a) { return intern(pattern_attrs_, pattern_attrs_index_, a); }

bool EGraph::canonical_attrs_equal(const OpDef& op, uint32_t pattern, std::span<const ClassId> inputs,
                                   uint32_t host) {
  size_t h = std::hash<const void*>{}(&op);
  mix(h, pattern);
  for (ClassId c : inputs) mix(h, c);
  std::vector<CanonicalAttrs>& bucket = canonical_attrs_[h];
  auto it = std::find_if(bucket.begin(), bucket.end(), [&](const CanonicalAttrs& e) {
    return e.op == &op && e.pattern == pattern &&
           std::equal(e.inputs.begin(), e.inputs.end(), inputs.begin(), inputs.end());
  });
  if (it == bucket.end()) {
    CanonicalAttrs e{&op, pattern, {inputs.begin(), inputs.end()}, pattern_attrs_.at(pattern), kNoAttrs, 0};
    if (op.canonical_attrs) {
      std::vector<TensorType> types;
      for (ClassId c : inputs) types.push_back(c == kNoClass ? TensorType{} : type(c));
      e.canonical = op.canonical_attrs(e.canonical, types);
    }
    bucket.push_back(std::move(e));
    it = bucket.end() - 1;
  }
  if (it->id == kNoAttrs && it->seen != attrs_.size()) {
    it->seen = attrs_.size();
    auto found = attrs_index_.find(it->canonical.hash());
    if (found != attrs_index_.end())
      for (uint32_t id : found->second)
        if (attrs_[id] == it->canonical) it->id = id;
  }
  return it->id == host;
}

bool EGraph::node_is_constant(const ENode& n) const {
  switch (n.kind) {
    case ENodeKind::Constant: return true;
    case ENodeKind::Proj: return classes_[find(n.children[0])].constant;
    case ENodeKind::Op:
      if (!n.op->props.deterministic) return false;
      for (ClassId c : n.children)
        if (c != kNoClass && !classes_[find(c)].constant) return false;
      return true;
    default: return false;
  }
}

std::vector<TensorType> EGraph::infer_types(const ENode& n) {
  switch (n.kind) {
    case ENodeKind::Input:
    case ENodeKind::Opaque: return leaves_.at(n.leaf)->output_types();
    case ENodeKind::Constant: return {tensors_.at(n.leaf).type()};
    case ENodeKind::Proj: {
      const EClass& t = classes_[find(n.children[0])];
      require(n.leaf < t.types.size(), "projection of an output the tuple does not have");
      return {t.types[n.leaf]};
    }
    case ENodeKind::Op: break;
  }
  const OpDef& op = *n.op;
  const int argc = static_cast<int>(n.children.size());
  require(argc >= op.min_inputs && (op.max_inputs < 0 || argc <= op.max_inputs),
          std::string(op.name) + " takes " + std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs) +
              " inputs, got " + std::to_string(argc));
  std::vector<TensorType> types;
  std::vector<const Tensor*> constants;
  for (ClassId c : n.children) {
    if (c == kNoClass) {
      types.emplace_back();
      constants.push_back(nullptr);
      continue;
    }
    const EClass& k = classes_[find(c)];
    require(!k.tuple(), std::string(op.name) + ": an input is a tuple, not a tensor");
    types.push_back(k.types[0]);
    constants.push_back(k.constant ? constant_value(c, kInferConstantLimit) : nullptr);
  }
  InferContext ctx{attrs_.at(n.attrs), types, constants, n.num_outputs};
  std::vector<TensorType> out = op.infer(ctx);
  require(out.size() == n.num_outputs, std::string(op.name) + " gives " + std::to_string(out.size()) +
                                           " outputs, the e-node asks for " + std::to_string(n.num_outputs));
  return out;
}

ClassId EGraph::add(ENode n) {
  n = canonical(std::move(n));
  if (auto it = memo_.find(n); it != memo_.end()) return find(it->second);
  n.origin = origin_;
  std::vector<TensorType> types = infer_types(n);  // throws before anything changes
  const ClassId id = static_cast<ClassId>(classes_.size());
  parent_.push_back(id);
  EClass c;
  c.types = std::move(types);
  c.constant = node_is_constant(n);
  c.nodes.push_back(n);
  classes_.push_back(std::move(c));
  std::set<ClassId> seen;
  for (ClassId child : n.children)
    if (child != kNoClass && seen.insert(child).second) classes_[child].parents.emplace_back(n, id);
  memo_.emplace(std::move(n), id);
  ++num_classes_;
  ++num_nodes_;
  return id;
}

ClassId EGraph::add_input(NodePtr input) {
  leaves_.push_back(std::move(input));
  return add(ENode{ENodeKind::Input, nullptr, 0, static_cast<uint32_t>(leaves_.size() - 1), 1, {}});
}

ClassId EGraph::add_constant(const Tensor& t) {
  std::vector<uint32_t>& bucket = tensor_index_[t.hash()];
  uint32_t id = UINT32_MAX;
  for (uint32_t k : bucket)
    if (tensors_[k].same_as(t)) id = k;
  if (id == UINT32_MAX) {
    tensors_.push_back(t);
    id = static_cast<uint32_t>(tensors_.size() - 1);
    bucket.push_back(id);
  }
  ClassId c = add(ENode{ENodeKind::Constant, nullptr, 0, id, 1, {}});
  if (!classes_[find(c)].value) classes_[find(c)].value = std::make_shared<const Tensor>(t);
  return c;
}

ClassId EGraph::add_opaque(NodePtr node, std::vector<ClassId> inputs) {
  const uint32_t k = static_cast<uint32_t>(node->num_outputs());
  leaves_.push_back(std::move(node));
  return add(ENode{ENodeKind::Opaque, nullptr, 0, static_cast<uint32_t>(leaves_.size() - 1), k, std::move(inputs)});
}

ClassId EGraph::add_op(const OpDef& op, std::vector<ClassId> inputs, const Attributes& attrs, uint32_t num_outputs) {
  Attributes canon = attrs;
  if (op.canonical_attrs) {
    std::vector<TensorType> types;
    for (ClassId c : inputs) types.push_back(c == kNoClass ? TensorType{} : type(c));
    canon = op.canonical_attrs(attrs, types);
  }
  return add(ENode{ENodeKind::Op, &op, intern_attrs(canon), 0, num_outputs, std::move(inputs)});
}

ClassId EGraph::add_proj(ClassId tuple, uint32_t i) { return add(ENode{ENodeKind::Proj, nullptr, 0, i, 1, {tuple}}); }

bool EGraph::merge(ClassId a, ClassId b) {
  a = find(a);
  b = find(b);
  if (a == b) return false;
  if (classes_[a].types != classes_[b].types) {
    std::string ta, tb;
    for (const TensorType& t : classes_[a].types) ta += to_string(t) + " ";
    for (const TensorType& t : classes_[b].types) tb += to_string(t) + " ";
    throw Error("e-graph: unsound merge of classes of types " + ta + "and " + tb);
  }
  if (classes_[a].nodes.size() + classes_[a].parents.size() < classes_[b].nodes.size() + classes_[b].parents.size())
    std::swap(a, b);
  parent_[b] = a;
  EClass& into = classes_[a];
  EClass& from = classes_[b];
  into.nodes.insert(into.nodes.end(), from.nodes.begin(), from.nodes.end());
  into.parents.insert(into.parents.end(), from.parents.begin(), from.parents.end());
  if (!into.value && from.value) into.value = from.value;
  into.constant = into.constant || from.constant;
  from = EClass{};
  pending_.push_back(a);
  ++merges_;
  --num_classes_;
  return true;
}

void EGraph::rebuild() {
  while (!pending_.empty()) {
    std::vector<ClassId> todo;
    for (ClassId c : pending_) todo.push_back(find(c));
    pending_.clear();
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
    for (ClassId c : todo) {
      c = find(c);
      std::vector<std::pair<ENode, ClassId>> parents = std::move(classes_[c].parents);
      classes_[c].parents.clear();
      std::unordered_map<ENode, ClassId, ENodeHash> fresh;
      for (auto& [node, cls] : parents) {
        memo_.erase(node);
        ENode canon = canonical(node);
        ClassId pc = find(cls);
        if (auto it = fresh.find(canon); it != fresh.end()) {
          merge(it->second, pc);  // congruent: the same operator of the same classes
          pc = find(pc);
        }
        if (auto it = memo_.find(canon); it != memo_.end() && find(it->second) != pc) {
          merge(it->second, pc);
          pc = find(pc);
        }
        memo_[canon] = pc;
        fresh[canon] = pc;
        // A parent whose inputs all became constant is constant too.
        if (!classes_[pc].constant && node_is_constant(canon)) {
          classes_[pc].constant = true;
          pending_.push_back(pc);
        }
      }
      ClassId now = find(c);
      for (auto& [node, cls] : fresh) classes_[now].parents.emplace_back(node, find(cls));
    }
  }
  // Canonical, duplicate-free e-nodes in every class.
  num_nodes_ = 0;
  for (ClassId id = 0; id < classes_.size(); ++id) {
    if (parent_[id] != id) continue;
    std::vector<ENode>& nodes = classes_[id].nodes;
    for (ENode& n : nodes) n = canonical(std::move(n));
    std::sort(nodes.begin(), nodes.end(), [](const ENode& x, const ENode& y) {
      if (x.kind != y.kind) return x.kind < y.kind;
      if (x.op != y.op) return std::less<const OpDef*>()(x.op, y.op);
      if (x.attrs != y.attrs) return x.attrs < y.attrs;
      if (x.leaf != y.leaf) return x.leaf < y.leaf;
      if (x.num_outputs != y.num_outputs) return x.num_outputs < y.num_outputs;
      return x.children < y.children;
    });
    // Equal e-nodes are one; it keeps the earliest origin (the input graph's, if any).
    std::vector<ENode> unique;
    for (ENode& n : nodes) {
      if (!unique.empty() && unique.back() == n) {
        unique.back().origin = std::min(unique.back().origin, n.origin);
        continue;
      }
      unique.push_back(std::move(n));
    }
    nodes = std::move(unique);
    num_nodes_ += nodes.size();
  }
}

std::vector<ClassId> EGraph::class_ids() const {
  std::vector<ClassId> out;
  for (ClassId id = 0; id < classes_.size(); ++id)
    if (parent_[id] == id) out.push_back(id);
  return out;
}

const Tensor* EGraph::constant_value(ClassId c, int64_t max_elements) {
  c = find(c);
  EClass& k = classes_[c];
  if (k.value) return k.value.get();
  if (!k.constant || k.tuple()) return nullptr;
  std::optional<int64_t> numel = num_elements(k.types[0].shape);
  if (!numel || *numel > std::min(max_elements, kEvaluateConstantLimit) || !is_numeric(k.types[0].dtype)) return nullptr;
  // Evaluate a constant e-node of the class (children first).
  for (const ENode& n : std::vector<ENode>(k.nodes)) {
    const ENode* op_node = &n;
    uint32_t out = 0;
    ENode tuple_node;
    if (n.kind == ENodeKind::Proj) {
      const EClass& t = classes_[find(n.children[0])];
      auto it = std::find_if(t.nodes.begin(), t.nodes.end(), [&](const ENode& x) { return node_is_constant(x); });
      if (it == t.nodes.end()) continue;
      tuple_node = *it;
      op_node = &tuple_node;
      out = n.leaf;
    }
    if (op_node->kind != ENodeKind::Op || !node_is_constant(*op_node)) continue;
    std::vector<Tensor> args;
    bool ok = true;
    for (ClassId child : op_node->children) {
      if (child == kNoClass) {
        args.emplace_back();
        continue;
      }
      if (find(child) == c) {
        ok = false;  // the class computed from itself (x = Identity(x)): another e-node will do
        break;
      }
      const Tensor* t = constant_value(child, INT64_MAX);
      if (!t) {
        ok = false;
        break;
      }
      args.push_back(*t);
    }
    if (!ok) continue;
    const TensorType out_type = classes_[find(c)].types[0];
    std::vector<TensorType> in_types;
    for (const Tensor& t : args) in_types.push_back({t.dtype(), Shape(t.dims().begin(), t.dims().end())});
    const std::optional<double> flops =
        fold_flops(op_node->op->name, attrs_.at(op_node->attrs), in_types, std::span(&out_type, 1));
    if (!flops || *flops > kEvaluateFlopsLimit) continue;
    try {
      EvalContext ctx{attrs_.at(op_node->attrs), args, op_node->num_outputs};
      std::vector<Tensor> results = op_node->op->eval(ctx);
      if (out >= results.size()) continue;
      classes_[find(c)].value = std::make_shared<const Tensor>(std::move(results[out]));
      return classes_[find(c)].value.get();
    } catch (const Error&) {
      continue;
    }
  }
  return nullptr;
}

}  // namespace isomer::eg

namespace isomer::eg {

std::vector<ClassId> load_graph(EGraph& eg, const Graph& g, std::unordered_map<const Node*, ClassId>* node_classes) {
  std::unordered_map<const Node*, std::vector<ClassId>> classes;
  for (const NodePtr& in : g.inputs()) classes[in.get()] = {eg.add_input(in)};
  for (const NodePtr& n : g.topo_order()) {
    if (classes.count(n.get())) continue;
    std::vector<ClassId> ins;
    for (const Value& v : n->inputs()) ins.push_back(v.present() ? classes.at(v.node.get()).at(v.index) : kNoClass);
    ClassId c = kNoClass;
    switch (n->kind()) {
      case NodeKind::Input: c = eg.add_input(n); break;
      case NodeKind::Constant: c = eg.add_constant(*n->value()); break;
      case NodeKind::Op: c = eg.add_op(*n->op(), ins, n->attrs(), static_cast<uint32_t>(n->num_outputs())); break;
      case NodeKind::Opaque: c = eg.add_opaque(n, ins); break;
    }
    if (node_classes) (*node_classes)[n.get()] = c;
    std::vector<ClassId>& outs = classes[n.get()];
    if (n->num_outputs() == 1) {
      outs = {c};
    } else {
      for (uint32_t i = 0; i < n->num_outputs(); ++i) outs.push_back(eg.add_proj(c, i));
    }
  }
  std::vector<ClassId> out;
  for (const Value& v : g.outputs()) out.push_back(classes.at(v.node.get()).at(v.index));
  return out;
}

}  // namespace isomer::eg
