#include "search/enode_cost.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ops/op.h"

namespace isomer {
namespace {

using eg::ClassId;
using eg::ENode;
using eg::ENodeKind;
using Clock = std::chrono::steady_clock;


bool is_contraction(const OpDef* op) { return op && (op->name == "Conv" || op->name == "MatMul" || op->name == "Gemm"); }

// Integer constant data up to this many elements is part of a signature (shapes,
// axes and scalars change what an operator does; weights only by their type).
constexpr int64_t kSignatureConstant = 64;
// Constants up to this many elements are materialized for pricing alone; larger
// ones (weights) are zeros of their type.
constexpr int64_t kMaterialize = 4096;
// Distinct signatures per operator priced alone to calibrate it.
constexpr size_t kCalibrationSamples = 6;

// The name a runtime step gives a node (runtime/compiler.h's node_key): its first
// named output, else its own name.
std::string step_key(const Node& n) {
  for (const std::string& o : n.output_names())
    if (!o.empty()) return o;
  return n.name();
}

// "conv1 (part 2/3)" -> "conv1".
std::string strip_part(const std::string& label) {
  auto p = label.rfind(" (part ");
  return p == std::string::npos ? label : label.substr(0, p);
}

// `g` with a distinct name for every operator node and its outputs (the runtime's
// steps say which node they compute by name; graphs built in code leave names empty).
Graph uniquely_named(const Graph& g) {
  std::unordered_map<const Node*, NodePtr> now;
  auto value = [&](const Value& v) { return v.present() ? Value{now.at(v.node.get()), v.index} : v; };
  size_t k = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) {
      now[n.get()] = n;
      continue;
    }
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) ins.push_back(value(v));
    const std::string name = "isomer.priced." + std::to_string(k++);
    std::vector<std::string> outs;
    for (size_t i = 0; i < n->num_outputs(); ++i) outs.push_back(name + ":" + std::to_string(i));
    now[n.get()] = n->with_inputs(std::move(ins))->renamed(name, outs);
  }
  std::vector<NodePtr> inputs;
  for (const NodePtr& in : g.inputs()) inputs.push_back(now.at(in.get()));
  std::vector<Value> outputs;
  for (const Value& v : g.outputs()) outputs.push_back(value(v));
  return Graph(inputs, outputs, g.output_names());
}

// Whether every step of `g`'s plan can be told by name which node it computes: each
// operator named, and no name or first output name (runtime/compiler.h's node_key)
// shared by two nodes or by a node and a graph input. A model from ONNX is priced
// as it is, under the plan key the pricing of the same graph before kept (its
// plan is reused, not compiled again: ResNeXt-50's took 0.3 s); a graph built in
// code is renamed first.
bool steps_name_their_nodes(const Graph& g) {
  std::unordered_map<std::string, const Node*> owner;
  auto claim = [&](const std::string& key, const Node* n) { return owner.emplace(key, n).first->second == n; };
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
    if (n->name().empty() || !claim(n->name(), n.get()) || !claim(step_key(*n), n.get())) return false;
  }
  for (const NodePtr& in : g.inputs())
    if (owner.count(in->name())) return false;
  return true;
}

}  // namespace


ENodePricer::ENodePricer(cost::CostModel& model, Progress progress)
    : model_(model), progress_(std::move(progress)) {}

std::string ENodePricer::signature(eg::EGraph& eg, const ENode& n) {
  std::string s;
  switch (n.kind) {
    case ENodeKind::Op:
      s.append(n.op->name).append("#").append(std::to_string(eg.attrs(n.attrs).hash()));
      break;
    case ENodeKind::Opaque: s.append("opaque:").append(eg.leaf_node(n.leaf)->op_type()); break;
    default: return "leaf";
  }
  s.append("/").append(std::to_string(n.num_outputs));
  for (ClassId c : n.children) {
    if (c == eg::kNoClass) {
      s.append("|_");
      continue;
    }
    const eg::EClass& k = eg.cls(c);
    s.append("|").append(to_string(k.types.at(0))).append(k.constant ? "c" : "v");
    // Only shapes, axes, indices and scalars: a weight's or a bias's data
    // (materialized or not, concatenated by a merge or not) does not change what
    // the runtime does with it.
    const std::optional<int64_t> elements = num_elements(k.types.at(0).shape);
    const bool data_matters = elements && (*elements <= 1 || (is_integer(k.types.at(0).dtype) && *elements <= kSignatureConstant));
    if (k.constant && data_matters)
      if (const Tensor* v = eg.constant_value(c, kSignatureConstant)) s.append(std::to_string(v->hash()));
  }
  return s;
}

std::string ENodePricer::context_key(eg::EGraph& eg, const ENode& n) {
  std::string key = signature(eg, n);
  // An elementwise operator reading a convolution or product runs as its post-op
  // (its plan share is 0), one reading anything else as a pass of its own: priced
  // by one mean, NasNet-A's Adds of two pooled values left after its sums of
  // convolutions merged cost a third of what they do.
  if (n.kind == ENodeKind::Op && n.op->props.elementwise)
    for (ClassId c : n.children)
      if (c != eg::kNoClass && !eg.cls(c).constant &&
          std::any_of(eg.cls(c).nodes.begin(), eg.cls(c).nodes.end(), [](const ENode& p) {
            return p.kind == ENodeKind::Op && p.num_outputs == 1 && is_contraction(p.op);
          }))
        return key.append("|after-contraction");
  return key;
}

double ENodePricer::learn(const Graph& original) {
  const Graph g = steps_name_their_nodes(original) ? original : uniquely_named(original);
  if (progress_) progress_("eqsat: pricing the input graph as the runtime runs it (new steps are timed once)");
  cost::GraphCost plan = model_.graph_cost(g);
  std::unordered_map<std::string, const Node*> by_name;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op || n->kind() == NodeKind::Opaque) {
      by_name.emplace(n->name(), n.get());
      by_name.emplace(step_key(*n), n.get());
    }
  // A graph input converted to another layout (not at the boundary: for the
  // operator reading it) belongs to its first reader.
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op || n->kind() == NodeKind::Opaque)
      for (const Value& v : n->inputs())
        if (v.present() && v.node->kind() == NodeKind::Input) by_name.emplace(v.node->name(), n.get());
  std::unordered_map<const Node*, double> share;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op || n->kind() == NodeKind::Opaque) share[n.get()] = 0;
  unattributed_ms_ += plan.io_ms;
  for (const cost::StepCost& s : plan.steps)
    if (!s.step.boundary && s.step.flops > 0 && s.ms > 0) flops_per_ms_ = std::max(flops_per_ms_, s.step.flops / s.ms);
  for (const cost::StepCost& s : plan.steps) {
    const Node* owner = nullptr;
    if (!s.step.boundary) {
      // A fused step belongs to its head (the first node it names); a step naming
      // no node (a reorder, a copy) to the node whose value it converts, or, for a
      // graph input's, to the node reading it.
      for (const std::string& k : s.step.nodes)
        if (auto it = by_name.find(k); it != by_name.end() && !owner) owner = it->second;
      if (!owner)
        if (auto it = by_name.find(strip_part(s.step.label)); it != by_name.end()) owner = it->second;
    }
    if (owner) share[owner] += s.ms;
    else unattributed_ms_ += s.ms;
  }
  eg::EGraph e;
  std::unordered_map<const Node*, ClassId> classes;
  eg::load_graph(e, g, &classes);
  // In the graph's order, not the map's (node addresses): the sums of equal
  // signatures come out the same to the last bit in every process.
  for (const NodePtr& n : g.topo_order()) {
    auto it = share.find(n.get());
    if (it == share.end()) continue;
    const double ms = it->second;
    const eg::EClass& k = e.cls(classes.at(n.get()));
    // Two equal nodes are one e-node: the first one's signature stands for both.
    PlanShare& p = context_[context_key(e, k.nodes.at(0))];
    p.ms += ms;
    p.nodes += 1;
  }
  calibrate(g);
  return plan.total_ms;
}

void ENodePricer::calibrate(const Graph& g) {
  // Per operator, a few distinct signatures of the input graph, to be priced alone
  // against their context prices when an e-node of that operator first needs it
  // (pricing them up front compiled VGG-19's largest products alone for nothing).
  // Elementwise operators are left out: alone, one that the plan fused costs a pass
  // over memory and in context nothing, and e-nodes of them are priced fused where
  // they can be (see fused()).
  plan_ = std::make_unique<eg::EGraph>();
  std::unordered_map<const Node*, ClassId> classes;
  eg::load_graph(*plan_, g, &classes);
  std::unordered_map<std::string, bool> seen;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op || n->op()->props.elementwise) continue;
    const ENode& en = plan_->cls(classes.at(n.get())).nodes.at(0);
    if (std::all_of(en.children.begin(), en.children.end(),
                    [&](ClassId c) { return c == eg::kNoClass || plan_->cls(c).constant; }))
      continue;
    std::string sig = signature(*plan_, en);
    if (seen[sig]) continue;
    seen[sig] = true;
    std::vector<ENode>& mine = samples_[n->op_type()];
    if (mine.size() < kCalibrationSamples) mine.push_back(en);
  }
}

std::optional<double> ENodePricer::calibration(const std::string& op) {
  if (auto it = calibration_.find(op); it != calibration_.end()) return it->second;
  auto it = samples_.find(op);
  if (it == samples_.end()) return std::nullopt;
  double ctx = 0, al = 0;
  for (const ENode& en : it->second) {
    ctx += context_.at(context_key(*plan_, en)).mean();
    al += alone(*plan_, en);
  }
  if (al <= 0) return std::nullopt;
  return calibration_[op] = std::clamp(ctx / al, 0.0, 10.0);
}

namespace {

// The classes that class `c`'s value reaches only through projections: those of a
// multi-output e-node's projections, or of the projections of Splits of it (a merged
// product or convolution split back into the values it replaces). Empty where
// anything else reads it.
std::vector<ClassId> served_through_projections(eg::EGraph& eg, ClassId c) {
  std::vector<ClassId> served;
  auto projections_of = [&](ClassId tuple) {
    for (const auto& [p, pc] : eg.cls(tuple).parents) {
      if (p.kind != ENodeKind::Proj) return false;
      served.push_back(eg.find(pc));
    }
    return true;
  };
  if (eg.cls(c).tuple()) {
    if (!projections_of(c)) return {};
  } else {
    for (const auto& [p, pc] : eg.cls(c).parents) {
      const bool split = p.kind == ENodeKind::Op && p.op->name == "Split" && eg.find(p.children.at(0)) == eg.find(c) &&
                         eg.cls(pc).tuple();
      if (!split || !projections_of(eg.find(pc))) return {};
    }
  }
  std::sort(served.begin(), served.end());
  served.erase(std::unique(served.begin(), served.end()), served.end());
  return served;
}

}  // namespace

eg::CostTable ENodePricer::table(eg::EGraph& eg) {
  eg::CostTable t;
  // The values an e-node reads (constants cost nothing and are left out).
  auto reads = [&](const ENode& n) {
    std::vector<ClassId> v;
    for (ClassId c : n.children)
      if (c != eg::kNoClass && !eg.cls(c).constant) v.push_back(eg.find(c));
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  // What choosing `n` computes anyway: the values it reads, and those that every
  // e-node of one of their classes reads (a merge's Concat of the values it stacks:
  // the products of each of them alone need nothing more than the merge does).
  auto needed = [&](const ENode& n) {
    std::vector<ClassId> v = reads(n);
    const size_t direct = v.size();
    for (size_t k = 0; k < direct; ++k) {
      std::optional<std::vector<ClassId>> common;
      for (const ENode& e : eg.cls(v[k]).nodes) {
        std::vector<ClassId> theirs = reads(e), both;
        if (common)
          std::set_intersection(common->begin(), common->end(), theirs.begin(), theirs.end(), std::back_inserter(both));
        common = common ? std::move(both) : std::move(theirs);
      }
      if (common) v.insert(v.end(), common->begin(), common->end());
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  // Every e-node that needs no timing first, in every class: their prices may make
  // timing the others pointless.
  enum class State : char { Pending, Priced, Bounded };  // Bounded: its row holds a lower bound
  std::vector<std::pair<ClassId, size_t>> later;
  std::unordered_map<ClassId, std::vector<State>> state;
  for (ClassId c : eg.class_ids()) {
    const std::vector<ENode>& nodes = eg.cls(c).nodes;
    std::vector<double>& row = t[c];
    row.assign(nodes.size(), 0);
    std::vector<State>& st = state[c];
    st.assign(nodes.size(), State::Priced);
    for (size_t i = 0; i < nodes.size(); ++i)
      if (needs_timing(eg, nodes[i])) later.emplace_back(c, i), st[i] = State::Pending;
      else row[i] = price(eg, nodes[i]);
  }
  // The cheapest e-node of class `c` but `besides` that reads only values of `mine`
  // (choosing it instead needs nothing more), -1 if there is none. Of the e-node's
  // own class, any priced or bounded; of a class a merge serves, only a true price
  // and not a projection (what that costs is its tuple's).
  auto cheapest_reading = [&](ClassId c, const std::vector<ClassId>& mine, std::optional<size_t> besides,
                              bool own_class) {
    const std::vector<ENode>& nodes = eg.cls(c).nodes;
    double cheapest = -1;
    for (size_t j = 0; j < nodes.size(); ++j) {
      const State sj = state[c][j];
      if (j == besides || sj == State::Pending ||
          (!own_class && (sj == State::Bounded || nodes[j].kind == ENodeKind::Proj)))
        continue;
      const std::vector<ClassId> theirs = reads(nodes[j]);
      // One that reads its own class computes nothing without it (a cycle), whatever
      // `mine` holds.
      if (std::binary_search(theirs.begin(), theirs.end(), eg.find(c))) continue;
      if (std::includes(mine.begin(), mine.end(), theirs.begin(), theirs.end()) && (cheapest < 0 || t[c][j] < cheapest))
        cheapest = t[c][j];
    }
    return cheapest;
  };
  for (const auto& [c, i] : later) {
    const ENode& n = eg.cls(c).nodes[i];
    if (!needs_timing(eg, n)) {  // an e-node of its signature was timed meanwhile
      t[c][i] = price(eg, n);
      state[c][i] = State::Priced;
      continue;
    }
    // Dominated: no extraction is cheaper for choosing it when what it computes
    // costs less another way than its lower bound: another e-node of its class, or,
    // for a merge whose outputs are only projected, each value it serves computed by
    // a priced e-node (ResNeXt-50's two 1x1 convolutions of a block's input, enlarged
    // to 3x3 ones and merged, were timed alone for nothing).
    const std::vector<ClassId> mine = needed(n);
    double cheapest = eg.cls(c).nodes.size() > 1 ? cheapest_reading(c, mine, i, true) : -1;
    const char* instead = "another e-node of its class costs";
    if (cheapest < 0) {
      const std::vector<ClassId> served = served_through_projections(eg, c);
      cheapest = served.empty() ? -1 : 0;
      for (ClassId v : served) {
        const double other = cheapest_reading(v, mine, std::nullopt, false);
        cheapest = other < 0 ? -1 : cheapest + other;
        if (cheapest < 0) break;
      }
      instead = "the values it serves cost, computed otherwise,";
    }
    std::optional<double> bound;
    if (cheapest >= 0) bound = lower_bound(eg, n);
    if (bound && *bound > cheapest) {
      t[c][i] = *bound;
      state[c][i] = State::Bounded;
      ++bounded_;
      if (std::getenv("ISOMER_DEBUG_COST"))
        std::fprintf(stderr, "eqsat: %s priced by its bound %.3f ms (%s %.3f ms)\n", signature(eg, n).c_str(), *bound,
                     instead, cheapest);
    } else {
      t[c][i] = price(eg, n, cheapest);
      state[c][i] = State::Priced;
    }
  }
  return t;
}

bool ENodePricer::needs_timing(eg::EGraph& eg, const ENode& n) {
  if (n.kind != ENodeKind::Op) return false;
  if (n.op->props.deterministic && std::all_of(n.children.begin(), n.children.end(), [&](ClassId c) {
        return c == eg::kNoClass || eg.cls(c).constant;
      }))
    return false;
  const std::string sig = signature(eg, n);
  return !context_.count(context_key(eg, n)) && !alone_.count(sig);
}

std::optional<double> ENodePricer::lower_bound(eg::EGraph& eg, const ENode& n) {
  if (flops_per_ms_ <= 0 || n.kind != ENodeKind::Op || n.op->props.elementwise) return std::nullopt;
  const std::string sig = signature(eg, n);
  auto it = flops_.find(sig);
  if (it == flops_.end()) {
    // The arithmetic of its steps as the runtime compiles it alone (nothing is run).
    double flops = 0;
    try {
      GraphBuilder b;
      std::vector<Value> ins = synthetic_inputs(eg, n, b);
      std::vector<Value> outs = b.op(n.op->name, ins, eg.attrs(n.attrs), n.num_outputs);
      std::vector<NodePtr> inputs = b.inputs();
      std::vector<std::string> names;
      for (size_t i = 0; i < outs.size(); ++i) names.push_back("y" + std::to_string(i));
      // The plan kept from an earlier search on this machine, else compiled (and kept).
      for (const runtime::StepInfo& s : model_.plan(Graph(inputs, outs, names)).steps)
        if (!s.boundary) flops += s.flops;
    } catch (const std::exception&) {
      flops = 0;
    }
    it = flops_.emplace(sig, flops).first;
  }
  if (it->second <= 0) return std::nullopt;
  return it->second / (kRateMargin * flops_per_ms_) * scale(eg, n);
}

double ENodePricer::price(eg::EGraph& eg, const ENode& n, double dominated_above) {
  switch (n.kind) {
    case ENodeKind::Input:
    case ENodeKind::Constant:
    case ENodeKind::Proj: return 0;
    case ENodeKind::Opaque:
    case ENodeKind::Op: break;
  }
  if (n.kind == ENodeKind::Op && n.op->props.deterministic &&
      std::all_of(n.children.begin(), n.children.end(),
                  [&](ClassId c) { return c == eg::kNoClass || eg.cls(c).constant; }))
    return 0;  // folded at optimization time
  const std::string sig = signature(eg, n);
  if (auto it = context_.find(context_key(eg, n)); it != context_.end()) return it->second.mean();
  if (n.kind == ENodeKind::Opaque) return 1;  // the only way to compute its class
  if (std::optional<double> f = fused(eg, n)) return *f;
  const double s = scale(eg, n);
  return alone(eg, n, dominated_above >= 0 && s > 0 ? dominated_above / s : 0) * s;
}

double ENodePricer::scale(eg::EGraph& eg, const ENode& n) {
  // The input graph's operators of this kind that read the same value (the ones a
  // merge of them replaces): their context prices over their prices alone. They
  // run in the same place, with the same layouts around them.
  // Where none reads it and it is a Concat (a merge over stacked operands: a sum of
  // convolutions or products), those that read its parts: NasNet-A's merged sums of
  // 1x1 convolutions, scaled by the operator's calibration over the whole graph
  // (0.76, its depthwise and strided convolutions), were priced 27% under what
  // they cost in the result's plan; the convolutions they replace put them within 6%.
  double ctx = 0, al = 0;
  auto add_readers = [&](ClassId c) {
    for (const auto& [parent, unused] : eg.cls(c).parents) {
      (void)unused;
      if (parent.kind != ENodeKind::Op || parent.op != n.op || parent.origin != 0) continue;
      auto it = context_.find(context_key(eg, parent));
      if (it == context_.end()) continue;
      ctx += it->second.mean();
      al += alone(eg, parent);
    }
  };
  for (ClassId c : n.children) {
    if (c == eg::kNoClass || eg.cls(c).constant) continue;
    add_readers(c);
    if (al <= 0)
      for (const ENode& stack : eg.cls(c).nodes)
        if (stack.kind == ENodeKind::Op && stack.op->name == "Concat") {
          for (ClassId part : stack.children)
            if (part != eg::kNoClass && !eg.cls(part).constant) add_readers(part);
          break;
        }
    if (al > 0) return std::clamp(ctx / al, 0.0, 10.0);
    break;  // the first value read decides
  }
  // Else the operator's calibration over the whole input graph.
  return calibration(std::string(n.op->name)).value_or(1.0);
}

double ENodePricer::alone(eg::EGraph& eg, const ENode& n, double enough_ms) {
  const std::string key = signature(eg, n);
  if (auto it = alone_.find(key); it != alone_.end()) return it->second;
  const auto t0 = Clock::now();
  double ms;
  try {
    GraphBuilder b;
    std::vector<Value> ins = synthetic_inputs(eg, n, b);
    std::vector<Value> outs = b.op(n.op->name, ins, eg.attrs(n.attrs), n.num_outputs);
    ms = model_.op_ms(*outs[0].node, enough_ms);
  } catch (const std::exception&) {
    // Not priceable on the runtime (a symbolic shape): its data volume at a nominal
    // rate, so that smaller graphs still win.
    double elements = 0;
    for (ClassId c : n.children)
      if (c != eg::kNoClass)
        if (auto e = num_elements(eg.type(c).shape)) elements += static_cast<double>(*e);
    ms = 1e-3 + elements * 1e-6;
  }
  const double took = seconds_since(t0);
  seconds_alone_ += took;
  if (std::getenv("ISOMER_DEBUG_COST"))
    std::fprintf(stderr, "eqsat: priced alone %s: %.3f ms in %.3f s (dominated above %.3f ms)\n", key.c_str(), ms, took,
                 enough_ms);
  alone_[key] = ms;
  if (progress_ && alone_.size() >= reported_ + 25) {
    reported_ = alone_.size();
    char line[160];
    std::snprintf(line, sizeof line, "eqsat: %zu operator shapes priced alone (%.1f s)", alone_.size(),
                  seconds_alone_);
    progress_(line);
  }
  return ms;
}

std::optional<double> ENodePricer::fused(eg::EGraph& eg, const ENode& n) {
  // What an elementwise operator after a convolution or product adds when the
  // runtime fuses it into that one as a post-op: the pair priced as one graph,
  // minus the contraction alone.
  if (!n.op->props.elementwise || n.num_outputs != 1 || n.children.empty() || n.children.size() > 2)
    return std::nullopt;
  for (size_t k = 0; k < n.children.size(); ++k) {
    const ClassId c = n.children[k];
    if (c == eg::kNoClass || eg.cls(c).constant) continue;
    for (const ENode& producer : eg.cls(c).nodes) {
      if (producer.kind != ENodeKind::Op || producer.num_outputs != 1 || !is_contraction(producer.op)) continue;
      std::string key = "fused:" + signature(eg, producer) + "|" + signature(eg, n) + "|" + std::to_string(k);
      if (auto it = alone_.find(key); it != alone_.end()) return it->second;
      const auto t0 = Clock::now();
      double ms;
      try {
        GraphBuilder b;
        Value contraction =
            b.op(producer.op->name, synthetic_inputs(eg, producer, b), eg.attrs(producer.attrs), 1).at(0);
        std::vector<Value> ins = synthetic_inputs(eg, n, b);
        ins[k] = contraction;
        Value post = b.op(n.op->name, ins, eg.attrs(n.attrs), 1).at(0);
        std::vector<NodePtr> inputs = b.inputs();
        Graph pair(inputs, {post}, {"y"});
        Graph single(inputs, {contraction}, {"y"});
        cost::GraphCost both = model_.graph_cost(pair), one = model_.graph_cost(single);
        ms = std::max(0.0, (both.total_ms - both.io_ms) - (one.total_ms - one.io_ms));
      } catch (const std::exception&) {
        return std::nullopt;
      }
      const double took = seconds_since(t0);
      seconds_alone_ += took;
      if (std::getenv("ISOMER_DEBUG_COST"))
        std::fprintf(stderr, "eqsat: priced fused %s: %.3f ms in %.3f s\n", key.c_str(), ms, took);
      return alone_[key] = ms;
    }
  }
  return std::nullopt;
}

std::vector<Value> ENodePricer::synthetic_inputs(eg::EGraph& eg, const ENode& n, GraphBuilder& b) {
  // Graph inputs (or constants: the runtime lays weights out at compile time) of the
  // e-node's children's types.
  std::vector<Value> ins;
  for (size_t i = 0; i < n.children.size(); ++i) {
    const ClassId c = n.children[i];
    if (c == eg::kNoClass) {
      ins.emplace_back();
      continue;
    }
    // Symbolic dims (a model's batch) at the extents the runtime gives them when it
    // prices the whole graph (its bindings, else 1): priced alone at a nominal
    // rate instead, every new e-node of such a model looked 10 to 100 times
    // cheaper than the input's own operators, and eqsat chose 3x3 convolutions
    // enlarged from 1x1 ones for nothing.
    TensorType t = eg.type(c);
    for (Dim& d : t.shape)
      if (!d.is_static()) {
        d = Dim(symbolic_extent(d.symbol, model_.runtime_options().bindings));
      }
    require(is_static(t.shape), "the cost needs static shapes");
    if (eg.cls(c).constant) {
      // Shapes and axes need their values; a weight only its type (its data does not
      // change the price), so merged weights are never materialized for pricing.
      const Tensor* v = eg.cls(c).value ? eg.cls(c).value.get() : eg.constant_value(c, kMaterialize);
      ins.push_back(b.constant(v ? *v : zeros(t)));
      continue;
    }
    ins.push_back(b.input("in" + std::to_string(i), t));
  }
  return ins;
}

const Tensor& ENodePricer::zeros(const TensorType& t) {
  std::string key = to_string(t);
  auto it = zeros_.find(key);
  if (it == zeros_.end()) {
    std::vector<int64_t> dims = static_dims(t.shape);
    it = zeros_
             .emplace(key, Tensor(t.dtype, dims,
                                  std::string(static_cast<size_t>(num_elements(dims)) * dtype_size(t.dtype), '\0')))
             .first;
  }
  return it->second;
}

}  // namespace isomer
