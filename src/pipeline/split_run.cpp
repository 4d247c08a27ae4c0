#include "pipeline/split_run.h"

#include <exception>
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

size_t opaque_nodes(const Graph& g) {
  size_t n = 0;
  for (const NodePtr& node : g.topo_order()) n += node->kind() == NodeKind::Opaque;
  return n;
}

}  // namespace

Graph fold_constants_only(const Graph& g) {
  PassOptions opts;
  for (const std::string& name : template_rule_names())
    if (name != "fold-constants" && name != "fold-shape" && name != "dce") opts.disabled.push_back(name);
  Graph folded = simplify(g, opts);
  // The import keeps a node opaque whose shape-deciding operand is computed (a TopK's
  // k, a OneHot's depth); folding may have made that operand a constant, and the node
  // imported again is an operator the runtime plans. Until no more opaque nodes go.
  for (size_t opaque = opaque_nodes(folded); opaque > 0;) {
    Graph again;
    try {
      again = simplify(import_onnx_bytes(export_onnx_bytes(folded), ""), opts);
    } catch (const std::exception&) {
      break;  // it imported once: what no longer does stays as folded
    }
    const size_t left = opaque_nodes(again);
    if (left >= opaque || again.output_names() != folded.output_names()) break;
    folded = std::move(again);
    opaque = left;
  }
  return folded;
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

std::unique_ptr<SplitExecutable> SplitExecutable::make(const Graph& g, const runtime::RuntimeOptions& ro,
                                                       int threads) {
  std::optional<SplitModel> s = split_at_dynamic_shapes(fold_constants_only(g));
  if (!s || !runtime::is_runnable(s->head, nullptr, ro)) return nullptr;
  std::unique_ptr<SplitExecutable> x(new SplitExecutable());
  x->model_ = g;
  x->split_ = std::move(*s);
  x->head_ = runtime::compile(x->split_.head, ro);
  x->ort_ = bridge::OrtBridge::shared();
  x->tail_ = x->ort_->load_bytes(x->split_.tail, {.threads = threads, .optimization = "all", .spinning = true});
  return x;
}

SplitExecutable::~SplitExecutable() {
  if (ort_ && tail_.id >= 0) ort_->free(tail_.id);
}

std::vector<Tensor> SplitExecutable::run(const std::vector<Tensor>& inputs, std::vector<Tensor>* head_out,
                                         bridge::NamedTensors* feeds) {
  std::vector<Tensor> head = head_->run(inputs);
  bridge::NamedTensors tail_in;
  for (const std::string& name : tail_.input_names) {
    for (size_t i = 0; i < model_.inputs().size(); ++i)
      if (model_.inputs()[i]->name() == name) tail_in.emplace_back(name, inputs.at(i));
    for (size_t i = 0; i < split_.head.output_names().size(); ++i)
      if (split_.head.output_names()[i] == name) tail_in.emplace_back(name, head.at(i));
  }
  const bridge::NamedTensors tail_out = ort_->run(tail_.id, tail_in);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < model_.outputs().size(); ++i) {
    if (split_.from_head.at(i) >= 0) {
      outputs.push_back(head.at(static_cast<size_t>(split_.from_head[i])));
      continue;
    }
    for (size_t k = 0; k < split_.tail_outputs.size(); ++k)
      if (split_.tail_outputs[k] == model_.output_names()[i]) outputs.push_back(tail_out.at(k).second);
  }
  require(outputs.size() == model_.outputs().size(), "the split run lost an output");
  if (head_out) *head_out = std::move(head);
  if (feeds) *feeds = std::move(tail_in);
  return outputs;
}

}  // namespace isomer
