#include "cli/split_run.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "onnx/onnx_io.h"
#include "passes/passes.h"

namespace isomer {

namespace {

bool is_operator(const Node& n) { return n.kind() == NodeKind::Op || n.kind() == NodeKind::Opaque; }

// Every output's type known, with static dims (an opaque node's output may have no
// type at all: its TensorType is then a placeholder).
bool static_outputs(const Node& n) {
  for (uint32_t i = 0; i < n.num_outputs(); ++i)
    if (type_unknown(n.output(i)) || !is_static(n.output_types()[i].shape)) return false;
  return true;
}

}  // namespace

Graph fold_constants_only(const Graph& g) {
  PassOptions opts;
  for (const std::string& name : template_rule_names())
    if (name != "fold-constants" && name != "fold-shape" && name != "dce") opts.disabled.push_back(name);
  return simplify(g, opts);
}

std::optional<SplitModel> split_at_dynamic_shapes(const Graph& g) {
  const std::vector<NodePtr> order = g.topo_order();
  // The head: operator nodes of static output shapes whose operands are the head's,
  // the model's inputs or constants.
  std::unordered_set<const Node*> head;
  SplitModel s;
  for (const NodePtr& n : order) {
    if (!is_operator(*n)) continue;
    bool in_head = static_outputs(*n);
    for (const Value& v : n->inputs())
      if (v.present() && is_operator(*v.node) && !head.count(v.node.get())) in_head = false;
    if (in_head) {
      head.insert(n.get());
      ++s.head_nodes;
    } else {
      if (s.tail_nodes++ == 0) s.first_tail_node = describe(*n);
    }
  }
  if (s.head_nodes == 0 || s.tail_nodes == 0) return std::nullopt;

  // The head's values the tail reads, each a tail input named as the model names it.
  std::set<std::string> taken;
  for (const NodePtr& in : g.inputs()) taken.insert(in->name());
  std::vector<Value> boundary;
  std::vector<std::string> boundary_names;
  std::unordered_map<Value, size_t, ValueHash> boundary_index;
  auto cross = [&](const Value& v) {
    if (!v.present() || !head.count(v.node.get()) || boundary_index.count(v)) return;
    const std::vector<std::string>& names = v.node->output_names();
    std::string name = v.index < names.size() ? names[v.index] : "";
    if (name.empty()) name = v.node->name() + "_output_" + std::to_string(v.index);
    for (int k = 1; taken.count(name); ++k) name += "_" + std::to_string(k);
    taken.insert(name);
    boundary_index[v] = boundary.size();
    boundary.push_back(v);
    boundary_names.push_back(name);
  };
  for (const NodePtr& n : order)
    if (is_operator(*n) && !head.count(n.get()))
      for (const Value& v : n->inputs()) cross(v);
  // The model's outputs the head makes come out of the head as they are.
  for (const Value& v : g.outputs()) cross(v);
  s.head = Graph(g.inputs(), boundary, boundary_names, g.info());

  // The tail: the model's inputs and the head's values in, the other outputs out.
  GraphBuilder b(/*dedupe=*/false);
  std::vector<NodePtr> tail_inputs = g.inputs();
  std::unordered_map<const Node*, std::vector<Value>> map;
  for (const NodePtr& n : order) {
    std::vector<Value> outs;
    if (head.count(n.get())) {
      outs.assign(n->num_outputs(), Value{});
      for (uint32_t i = 0; i < n->num_outputs(); ++i) {
        auto it = boundary_index.find(n->output(i));
        if (it == boundary_index.end()) continue;
        outs[i] = b.input(boundary_names[it->second], n->output_types()[i]);
        tail_inputs.push_back(outs[i].node);
      }
    } else if (is_operator(*n)) {
      std::vector<Value> ins;
      for (const Value& v : n->inputs()) ins.push_back(v.present() ? map.at(v.node.get()).at(v.index) : v);
      NodePtr kept = b.intern(ins == n->inputs() ? n : n->with_inputs(ins));
      for (uint32_t i = 0; i < kept->num_outputs(); ++i) outs.push_back(kept->output(i));
    } else {
      outs.push_back(b.intern(n)->output(0));
    }
    map[n.get()] = std::move(outs);
  }
  std::vector<Value> tail_outputs;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value& v = g.outputs()[i];
    s.from_head.push_back(head.count(v.node.get()) ? static_cast<int>(boundary_index.at(v)) : -1);
    if (head.count(v.node.get())) continue;
    tail_outputs.push_back(map.at(v.node.get()).at(v.index));
    s.tail_outputs.push_back(g.output_names()[i]);
  }
  if (tail_outputs.empty()) return std::nullopt;
  s.tail = export_onnx_bytes(Graph(tail_inputs, tail_outputs, s.tail_outputs, g.info()));
  return s;
}

}  // namespace isomer
