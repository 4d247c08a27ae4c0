#include "search/eqsat.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "egraph/ematch.h"
#include "egraph/extract.h"
#include "egraph/runner.h"
#include "ir/error.h"
#include "ops/op.h"

namespace isomer {
namespace {

using eg::ClassId;
using eg::ENode;
using eg::ENodeKind;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool is_contraction(const OpDef* op) { return op && (op->name == "Conv" || op->name == "MatMul" || op->name == "Gemm"); }

// Prices e-nodes on isomer's runtime (see eqsat.h, step 3), memoized by what a price
// depends on: operator, attributes, input types, which inputs are constants.
class NodeCoster {
 public:
  NodeCoster(eg::EGraph& g, cost::CostModel& model) : g_(g), model_(model) {}

  eg::CostTable table() {
    eg::CostTable t;
    for (ClassId c : g_.class_ids()) {
      std::vector<double>& row = t[c];
      for (const ENode& n : g_.cls(c).nodes) row.push_back(cost(n));
    }
    return t;
  }

 private:
  double cost(const ENode& n) {
    switch (n.kind) {
      case ENodeKind::Input:
      case ENodeKind::Constant:
      case ENodeKind::Proj: return 0;
      case ENodeKind::Opaque: return 1;  // the only way to compute its class
      case ENodeKind::Op: break;
    }
    if (n.op->props.deterministic &&
        std::all_of(n.children.begin(), n.children.end(),
                    [&](ClassId c) { return c == eg::kNoClass || g_.cls(c).constant; }))
      return 0;  // folded at optimization time
    if (std::optional<double> fused = fused_cost(n)) return *fused;
    std::string key = signature(n);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (std::getenv("ISOMER_DEBUG_COST")) std::fprintf(stderr, "price %s\n", key.c_str());
    double ms;
    try {
      GraphBuilder b;
      std::vector<Value> ins = synthetic_inputs(n, b);
      std::vector<Value> outs = b.op(n.op->name, ins, g_.attrs(n.attrs), n.num_outputs);
      ms = model_.op_ms(*outs[0].node);
    } catch (const std::exception&) {
      ms = fallback(n);
    }
    return memo_[key] = ms;
  }

  // What an elementwise operator after a convolution or product adds when the runtime
  // fuses it into that one as a post-op: the pair priced as one graph, minus the
  // contraction alone. nullopt where it does not apply.
  std::optional<double> fused_cost(const ENode& n) {
    if (!n.op->props.elementwise || n.num_outputs != 1 || n.children.empty() || n.children.size() > 2) return std::nullopt;
    for (size_t k = 0; k < n.children.size(); ++k) {
      const ClassId c = n.children[k];
      if (c == eg::kNoClass || g_.cls(c).constant) continue;
      for (const ENode& producer : g_.cls(c).nodes) {
        if (producer.kind != ENodeKind::Op || producer.num_outputs != 1 || !is_contraction(producer.op)) continue;
        std::string key = "fused:" + signature(producer) + "|" + signature(n) + "|" + std::to_string(k);
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        double ms;
        try {
          GraphBuilder b;
          Value contraction =
              b.op(producer.op->name, synthetic_inputs(producer, b), g_.attrs(producer.attrs), 1).at(0);
          std::vector<Value> ins = synthetic_inputs(n, b);
          ins[k] = contraction;
          Value post = b.op(n.op->name, ins, g_.attrs(n.attrs), 1).at(0);
          std::vector<NodePtr> inputs = b.inputs();
          Graph pair(inputs, {post}, {"y"});
          Graph alone(inputs, {contraction}, {"y"});
          cost::GraphCost both = model_.graph_cost(pair), one = model_.graph_cost(alone);
          ms = std::max(0.0, (both.total_ms - both.io_ms) - (one.total_ms - one.io_ms));
        } catch (const std::exception&) {
          return std::nullopt;
        }
        return memo_[key] = ms;
      }
    }
    return std::nullopt;
  }

  // Graph inputs (or constants: the runtime lays weights out at compile time) of the
  // e-node's children's types.
  std::vector<Value> synthetic_inputs(const ENode& n, GraphBuilder& b) {
    std::vector<Value> ins;
    for (size_t i = 0; i < n.children.size(); ++i) {
      const ClassId c = n.children[i];
      if (c == eg::kNoClass) {
        ins.emplace_back();
        continue;
      }
      const TensorType& t = g_.type(c);
      require(is_static(t.shape), "the cost needs static shapes");
      if (g_.cls(c).constant) {
        // Shapes and axes need their values; a weight only its type (its data does not
        // change the price), so merged weights are never materialized for pricing.
        const Tensor* v = g_.cls(c).value ? g_.cls(c).value.get() : g_.constant_value(c, kMaterialize);
        ins.push_back(b.constant(v ? *v : zeros(t)));
        continue;
      }
      ins.push_back(b.input("in" + std::to_string(i), t));
    }
    return ins;
  }

  const Tensor& zeros(const TensorType& t) {
    std::string key = to_string(t);
    auto it = zeros_.find(key);
    if (it == zeros_.end()) {
      std::vector<int64_t> dims = static_dims(t.shape);
      it = zeros_.emplace(key, Tensor(t.dtype, dims, std::string(static_cast<size_t>(num_elements(dims)) *
                                                                     dtype_size(t.dtype), '\0'))).first;
    }
    return it->second;
  }

  std::string signature(const ENode& n) {
    std::string s = std::string(n.op->name) + "#" + std::to_string(n.attrs) + "/" + std::to_string(n.num_outputs);
    for (ClassId c : n.children) {
      if (c == eg::kNoClass) {
        s += "|_";
        continue;
      }
      const eg::EClass& k = g_.cls(c);
      s += "|" + to_string(k.types.at(0)) + (k.constant ? "c" : "v");
      // Small constants (shapes, axes) change what the operator computes.
      if (k.constant)
        if (const Tensor* v = g_.constant_value(c, 64)) s += std::to_string(v->hash());
    }
    return s;
  }

  // A price when the runtime cannot price the e-node (a symbolic shape): its data
  // volume at a nominal rate, so that smaller graphs still win.
  double fallback(const ENode& n) {
    double elements = 0;
    for (ClassId c : n.children)
      if (c != eg::kNoClass)
        if (auto e = num_elements(g_.type(c).shape)) elements += static_cast<double>(*e);
    return 1e-3 + elements * 1e-6;
  }

  static constexpr int64_t kMaterialize = 4096;
  eg::EGraph& g_;
  cost::CostModel& model_;
  std::unordered_map<std::string, double> memo_;
  std::unordered_map<std::string, Tensor> zeros_;
};

// A region as its own graph: boundary values in as inputs, what the rest reads out.
struct Region {
  Graph graph;
  std::vector<Value> inputs;   // per region input: the value of the whole graph it stands for
  std::vector<Value> outputs;  // per region output: the value of the whole graph it computes
  size_t ops = 0;
};

Region make_region(const std::vector<NodePtr>& nodes, const std::unordered_map<Value, size_t, ValueHash>& last_use,
                   const std::unordered_set<Value, ValueHash>& graph_outputs, size_t end_position) {
  Region r;
  r.ops = nodes.size();
  std::unordered_set<const Node*> inside;
  for (const NodePtr& n : nodes) inside.insert(n.get());
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<Value, Value, ValueHash> map;
  std::vector<NodePtr> region_inputs;
  auto mapped = [&](const Value& v) -> Value {
    if (!v.present()) return v;
    if (auto it = map.find(v); it != map.end()) return it->second;
    if (v.node->kind() == NodeKind::Constant) return map[v] = b.intern(v.node)->output(0);
    Value in = b.input("region_in" + std::to_string(r.inputs.size()), v.type());
    region_inputs.push_back(in.node);
    r.inputs.push_back(v);
    return map[v] = in;
  };
  std::vector<Value> outs;
  for (const NodePtr& n : nodes) {
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) ins.push_back(mapped(v));
    NodePtr copy = n->with_inputs(std::move(ins));
    for (uint32_t i = 0; i < n->num_outputs(); ++i) {
      Value orig = n->output(i);
      map[orig] = copy->output(i);
      auto lu = last_use.find(orig);
      if (graph_outputs.count(orig) || (lu != last_use.end() && lu->second >= end_position)) {
        r.outputs.push_back(orig);
        outs.push_back(copy->output(i));
      }
    }
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) names.push_back("region_out" + std::to_string(i));
  r.graph = Graph(region_inputs, outs, names);
  return r;
}

}  // namespace

std::vector<std::vector<NodePtr>> partition_graph(const Graph& g, size_t region_ops) {
  std::vector<NodePtr> ops;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op || n->kind() == NodeKind::Opaque) ops.push_back(n);
  region_ops = std::max<size_t>(region_ops, 2);
  if (ops.size() <= region_ops) return {ops};
  // crossing[p]: values made at or before operator p and read after it.
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < ops.size(); ++i) position[ops[i].get()] = i;
  std::vector<int64_t> delta(ops.size() + 1, 0);
  std::unordered_map<const Node*, size_t> last_reader;
  for (size_t i = 0; i < ops.size(); ++i)
    for (const Value& v : ops[i]->inputs())
      if (v.present() && position.count(v.node.get())) last_reader[v.node.get()] = i;
  for (const auto& [node, last] : last_reader) {
    size_t made = position.at(node);
    if (last > made) {
      delta[made] += 1;
      delta[last] -= 1;
    }
  }
  std::vector<int64_t> crossing(ops.size(), 0);
  int64_t running = 0;
  for (size_t i = 0; i < ops.size(); ++i) crossing[i] = running += delta[i];
  std::vector<std::vector<NodePtr>> regions;
  size_t start = 0;
  while (ops.size() - start > region_ops) {
    size_t lo = start + region_ops / 2, hi = start + region_ops - 1, cut = hi;
    for (size_t p = hi; p + 1 > lo; --p)
      if (crossing[p] < crossing[cut]) cut = p;
    regions.emplace_back(ops.begin() + static_cast<long>(start), ops.begin() + static_cast<long>(cut + 1));
    start = cut + 1;
  }
  regions.emplace_back(ops.begin() + static_cast<long>(start), ops.end());
  return regions;
}

Graph eqsat_search(const Graph& g, const std::vector<Rule>& rules, cost::CostModel& model,
                   const SearchOptions& options, SearchStats* stats) {
  const auto t0 = Clock::now();
  SearchStats st;
  st.strategy = "eqsat";
  st.extractor = options.extractor;
  st.extraction_optimal = options.extractor == "ilp";
  require(options.extractor == "greedy" || options.extractor == "ilp",
          "unknown extractor '" + options.extractor + "' (choose greedy or ilp)");
  // Operators a variadic rule merges n at a time: two-root rules that merge two of them
  // would only add every subset of a group on top (2^n forms of NasRNN's 8 gates).
  std::set<const OpDef*> merged_by_variadic;
  for (const Rule& r : rules)
    if (r.variadic)
      for (const PatternRef& root : r.source.outputs) merged_by_variadic.insert(r.source.nodes[root.node].op);
  auto pairwise_merge = [&](const Rule& r) {
    if (r.variadic || r.source.outputs.size() < 2) return false;
    for (const PatternRef& root : r.source.outputs)
      if (!merged_by_variadic.count(r.source.nodes[root.node].op)) return false;
    return true;
  };
  std::vector<const Rule*> rule_ptrs;
  for (const Rule& r : rules) {
    const bool reversal = r.name.ends_with("-rev");
    if (reversal && !options.expanding_reversals && r.target.num_ops() > r.source.num_ops()) continue;
    if (pairwise_merge(r) || !eg::roots_are_joined(r)) continue;
    rule_ptrs.push_back(&r);
  }
  st.rules_used = rule_ptrs.size();

  const std::vector<std::vector<NodePtr>> parts = partition_graph(g, options.region_ops);
  st.regions = parts.size();
  // Where each value is last read (position in the operator order), to know what
  // leaves a region.
  std::unordered_map<Value, size_t, ValueHash> last_use;
  std::unordered_set<Value, ValueHash> graph_outputs(g.outputs().begin(), g.outputs().end());
  {
    size_t pos = 0;
    for (const auto& part : parts)
      for (const NodePtr& n : part) {
        for (const Value& v : n->inputs())
          if (v.present()) last_use[v] = pos;
        ++pos;
      }
  }
  size_t total_ops = 0;
  for (const auto& p : parts) total_ops += p.size();

  GraphBuilder out;
  std::unordered_map<Value, Value, ValueHash> now;  // a value of g -> its value in the result
  for (const NodePtr& in : g.inputs()) now[in->output(0)] = out.intern(in)->output(0);
  auto now_of = [&](const Value& v) -> Value {
    if (!v.present()) return v;
    if (auto it = now.find(v); it != now.end()) return it->second;
    require(v.node->kind() == NodeKind::Constant || v.node->kind() == NodeKind::Input, "eqsat: a region reads a value "
                                                                                        "no earlier region made");
    return now[v] = out.intern(v.node)->output(0);
  };
  double greedy_total = 0, ilp_total = 0, worst_gap = -1;
  size_t position = 0, ops_done = 0;
  for (const auto& part : parts) {
    position += part.size();
    Region region = make_region(part, last_use, graph_outputs, position);
    // This region's share of what is left of the budget.
    const double left = std::max(0.0, options.budget_s - seconds_since(t0));
    const double share = left * static_cast<double>(part.size()) / static_cast<double>(total_ops - ops_done);
    ops_done += part.size();

    eg::EGraph egraph;
    std::vector<ClassId> roots = eg::load_graph(egraph, region.graph);
    auto ts = Clock::now();
    eg::Runner runner(egraph, rule_ptrs, {options.iteration_limit, options.node_limit, share},
                      {options.match_limit, options.ban_length});
    eg::RunnerReport rep = runner.run();
    st.saturation_seconds += seconds_since(ts);
    st.iterations += rep.iterations;
    st.egraph_nodes += rep.nodes;
    st.egraph_classes += rep.classes;
    if (rep.stop != eg::StopReason::Saturated) st.stop = rep.stop;  // the last limit any region hit
    for (const auto& [name, c] : rep.rules) {
      st.rules[name].matches += c.matches;
      st.rules[name].applications += c.applications;
    }
    auto te = Clock::now();
    eg::CostTable costs = NodeCoster(egraph, model).table();
    if (std::getenv("ISOMER_DEBUG_COST")) std::fprintf(stderr, "priced in %.2f s\n", seconds_since(te));
    eg::Extraction ex = eg::extract_greedy(egraph, roots, costs);
    greedy_total += ex.cost;
    st.cycles_cut += ex.cycles_cut;
    if (options.extractor == "ilp") {
      const double ilp_left = std::max(0.5, std::min(options.ilp_time_s, options.budget_s - seconds_since(t0)));
      std::optional<eg::Extraction> exact = eg::extract_ilp(egraph, roots, costs, ex, ilp_left);
      if (exact && std::getenv("ISOMER_DEBUG_COST"))
        std::fprintf(stderr, "ilp %.2f s, %zu cycles cut, optimal %d, cost %.3f greedy %.3f note %s\n", exact->seconds,
                     exact->cycles_cut, exact->optimal, exact->cost, ex.cost, exact->note.c_str());
      if (exact) {
        worst_gap = std::max(worst_gap, exact->gap);
        st.extraction_optimal = st.extraction_optimal && exact->optimal;
        st.cycles_cut += exact->cycles_cut;
        if (exact->cost <= ex.cost) ex = std::move(*exact);
      } else {
        st.extraction_optimal = false;
      }
      ilp_total += ex.cost;
    }
    st.extraction_seconds += seconds_since(te);
    // The rules whose e-nodes the extraction chose, once per application: a chosen
    // operator e-node a rule made counts unless a chosen e-node the same rule made reads
    // it (the inner product of a reassociation, the weights and product of a merge).
    std::unordered_set<ClassId> read_by_same_rule;
    for (const auto& [c, i] : ex.choice) {
      const ENode& n = egraph.cls(c).nodes[i];
      for (ClassId ch : n.children) {
        if (ch == eg::kNoClass || n.origin == 0) continue;
        auto it = ex.choice.find(egraph.find(ch));
        if (it != ex.choice.end() && egraph.cls(ch).nodes[it->second].origin == n.origin)
          read_by_same_rule.insert(egraph.find(ch));
      }
    }
    for (const auto& [c, i] : ex.choice) {
      const ENode& n = egraph.cls(c).nodes[i];
      if (n.origin > 0 && n.kind == ENodeKind::Op && !read_by_same_rule.count(egraph.find(c)))
        ++st.rules_applied[rule_ptrs[n.origin - 1]->name];
    }
    GraphBuilder b;
    std::vector<Value> values = eg::build_values(egraph, ex, roots, b, [&](uint32_t leaf) {
      return b.intern(region.graph.inputs().at(leaf))->output(0);
    });
    // Stitch: the region's nodes rebuilt over the result's values.
    std::unordered_map<const Node*, std::vector<Value>> built;
    for (size_t i = 0; i < region.graph.inputs().size(); ++i)
      built[region.graph.inputs()[i].get()] = {now_of(region.inputs[i])};
    std::vector<Value> region_outs;
    Graph extracted(region.graph.inputs(), values, region.graph.output_names());
    for (const NodePtr& n : extracted.topo_order()) {
      if (built.count(n.get())) continue;
      std::vector<Value> outs;
      if (n->kind() == NodeKind::Constant || n->kind() == NodeKind::Input) {
        outs = {out.intern(n)->output(0)};
      } else {
        std::vector<Value> ins;
        for (const Value& v : n->inputs()) ins.push_back(v.present() ? built.at(v.node.get()).at(v.index) : v);
        NodePtr node = out.intern(n->with_inputs(std::move(ins)));
        for (uint32_t k = 0; k < node->num_outputs(); ++k) outs.push_back(node->output(k));
      }
      built[n.get()] = std::move(outs);
    }
    for (size_t k = 0; k < region.outputs.size(); ++k)
      now[region.outputs[k]] = built.at(values[k].node.get()).at(values[k].index);
  }
  std::vector<Value> outputs;
  for (const Value& v : g.outputs()) outputs.push_back(now_of(v));
  Graph result = out.finish(outputs, g.output_names(), g.info());
  // Weights the merges concatenated, Split sizes and the like are constant computations.
  PassStats cleanup;
  result = simplify(result, options.passes, &cleanup);
  for (const auto& [name, n] : cleanup.applied) st.rules_applied[name] += n;

  st.greedy_cost = greedy_total;
  st.ilp_cost = ilp_total;
  st.extraction_gap = options.extractor == "ilp" ? std::max(worst_gap, 0.0) : -1;
  if (options.extractor != "ilp") st.extraction_optimal = false;
  // The result priced whole, as the runtime runs it, against the input (not when the
  // extraction chose the input back: measuring a large model whole takes long).
  if (same_graph(result, g)) {
    st.cost_before = st.cost_after = ilp_total > 0 ? ilp_total : greedy_total;
    st.kept_input = true;
    st.rules_applied.clear();
    st.budget_exhausted = st.stop != eg::StopReason::Saturated;
    st.seconds = seconds_since(t0);
    if (stats) *stats = std::move(st);
    return g;
  }
  try {
    st.cost_before = model.graph_ms(g);
    st.cost_after = model.graph_ms(result);
  } catch (const std::exception&) {
    st.cost_before = st.cost_after = 0;  // not priceable (symbolic shapes): keep what was found
  }
  if (st.cost_after > st.cost_before) {
    st.kept_input = true;
    st.cost_after = st.cost_before;
    st.rules_applied.clear();
    result = g;
  }
  st.budget_exhausted = st.stop != eg::StopReason::Saturated;
  st.seconds = seconds_since(t0);
  if (stats) *stats = std::move(st);
  return result;
}

}  // namespace isomer
