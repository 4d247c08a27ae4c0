// Differential checking of a transformation on a graph (evaluating the fuzz opaque
// nodes too), and the minimizer that shrinks a failing graph. See random_graph.h.
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "fuzz/random_graph.h"
#include "ir/error.h"
#include "ops/op.h"

namespace isomer::fuzz {

namespace {

// Graph inputs nobody reads are dropped (cutting leaves some behind).
Graph drop_unused_inputs(const Graph& g) {
  std::unordered_set<const Node*> used;
  for (const NodePtr& n : g.topo_order())
    for (const Value& v : n->inputs()) used.insert(v.node.get());
  for (const Value& v : g.outputs()) used.insert(v.node.get());
  std::vector<NodePtr> inputs;
  for (const NodePtr& in : g.inputs())
    if (used.count(in.get())) inputs.push_back(in);
  return Graph(inputs, g.outputs(), g.output_names(), g.info());
}

// `g` with the outputs of `target` replaced by fresh graph inputs, or (bypass) by
// its input `bypass_input`, which must have the output's type.
Graph cut(const Graph& g, const Node* target, int bypass_input = -1) {
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<const Node*, std::vector<Value>> map;
  for (const NodePtr& in : g.inputs()) map[in.get()] = {b.input(in->name(), in->output_types()[0])};
  auto mapped = [&](const Value& v) { return v.present() ? map.at(v.node.get()).at(v.index) : Value{}; };
  int cuts = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (map.count(n.get())) continue;
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) ins.push_back(mapped(v));
    if (n.get() == target && bypass_input >= 0) {
      map[n.get()] = {ins.at(static_cast<size_t>(bypass_input))};
    } else if (n.get() == target) {
      for (const TensorType& t : n->output_types())
        map[n.get()].push_back(b.input("cut" + std::to_string(cuts++), t));
    } else if (n->kind() == NodeKind::Constant) {
      map[n.get()] = {b.constant(*n->value(), n->name())};
    } else if (n->kind() == NodeKind::Opaque) {
      map[n.get()] = b.opaque(*n->opaque(), ins, n->output_types(), n->name());
    } else {
      map[n.get()] = b.op(n->op_type(), ins, n->attrs(), n->num_outputs(), n->name());
    }
  }
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(mapped(v));
  return drop_unused_inputs(b.finish(outs, g.output_names(), g.info()));
}

bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (is_float(t.dtype()))
      for (double x : t.to_f64())
        if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

std::vector<Tensor> evaluate_with_opaque(const Graph& g, const std::vector<Tensor>& inputs) {
  require(inputs.size() == g.inputs().size(), "wrong number of inputs");
  std::unordered_map<const Node*, std::vector<Tensor>> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i].get()] = {inputs[i]};
  for (const NodePtr& n : g.topo_order()) {
    if (values.count(n.get())) continue;
    if (n->kind() == NodeKind::Constant) {
      values[n.get()] = {*n->value()};
      continue;
    }
    require(n->kind() != NodeKind::Input, "input '" + n->name() + "' is not a graph input");
    std::vector<Tensor> args;
    for (const Value& v : n->inputs()) args.push_back(v.present() ? values.at(v.node.get()).at(v.index) : Tensor());
    if (n->kind() == NodeKind::Opaque) {
      const std::string& type = n->op_type();
      require((type == "Asinh" || type == "Atan") && args.size() == 1, describe(*n) + " is not a fuzz opaque node");
      std::vector<double> x = args[0].to_f64();
      for (double& e : x) e = type == "Asinh" ? std::asinh(e) : std::atan(e);
      values[n.get()] = {Tensor::from_f64(args[0].dtype(), args[0].dims(), x)};
      continue;
    }
    EvalContext ctx{n->attrs(), args, n->num_outputs()};
    try {
      values[n.get()] = n->op()->eval(ctx);
    } catch (const Error& e) {
      throw Error("evaluating " + describe(*n) + ": " + e.what());
    }
    require(values[n.get()].size() == n->num_outputs(), describe(*n) + " returned the wrong number of outputs");
  }
  std::vector<Tensor> out;
  for (const Value& v : g.outputs()) out.push_back(values.at(v.node.get()).at(v.index));
  return out;
}

Mismatch differential_check(const Graph& g, const Transform& transform, uint64_t seed, double tolerance) {
  std::vector<Tensor> inputs = random_inputs(g, seed);
  std::vector<Tensor> want;
  try {
    want = evaluate_with_opaque(g, inputs);
  } catch (const Error&) {
    return {};  // not a model we can judge
  }
  if (!all_finite(want)) return {};
  Mismatch m;
  m.judged = true;
  m.found = true;
  Graph h;
  try {
    h = transform(g);
  } catch (const Error& e) {
    m.what = std::string("transform threw: ") + e.what();
    return m;
  }
  if (h.inputs().size() != g.inputs().size() || h.outputs().size() != g.outputs().size()) {
    m.what = "transform changed the graph interface";
    return m;
  }
  std::vector<Tensor> got;
  try {
    got = evaluate_with_opaque(h, inputs);
  } catch (const Error& e) {
    m.what = std::string("evaluating the transformed graph threw: ") + e.what();
    return m;
  }
  CheckResult r = compare_outputs(want, got, g.output_names(), tolerance);
  m.found = r.status == CheckResult::Status::Failed;  // all-NaN outputs (Skipped) show nothing
  if (!m.found) return m;
  m.what = r.reason.empty() ? "outputs differ" : r.reason;
  return m;
}

Graph minimize(const Graph& g, const std::function<bool(const Graph&)>& still_fails) {
  Graph best = g;
  if (best.outputs().size() > 1)
    for (size_t i = 0; i < best.outputs().size(); ++i) {
      Graph one = drop_unused_inputs(Graph(best.inputs(), {best.outputs()[i]}, {best.output_names()[i]}, best.info()));
      if (still_fails(one)) {
        best = one;
        break;
      }
    }
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<NodePtr> order = best.topo_order();
    for (auto it = order.rbegin(); it != order.rend() && !progress; ++it) {
      const Node& n = **it;
      if (n.kind() != NodeKind::Op && n.kind() != NodeKind::Opaque) continue;
      // Ways to remove n: cut it off (its outputs become inputs), or pass one of its
      // inputs of the same type through in its place.
      std::vector<int> ways{-1};
      for (size_t i = 0; n.num_outputs() == 1 && i < n.inputs().size(); ++i)
        if (n.inputs()[i].present() && n.inputs()[i].type() == n.output_types()[0]) ways.push_back(static_cast<int>(i));
      for (int way : ways) {
        Graph smaller;
        try {
          smaller = cut(best, &n, way);
        } catch (const Error&) {
          continue;  // e.g. a Reshape whose shape was computed by the node cut off
        }
        if (smaller.num_ops() < best.num_ops() && still_fails(smaller)) {
          best = smaller;
          progress = true;
          break;
        }
      }
    }
  }
  return best;
}

}  // namespace isomer::fuzz
