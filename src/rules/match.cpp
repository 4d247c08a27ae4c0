#include "rules/match.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/text.h"
#include "ops/op.h"

namespace isomer {
namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.bytes() == b.bytes();
}

// Attributes equal up to what the operator defaults: a pattern Conv written without
// strides matches a model's Conv with strides=[1,1] (see OpDef::canonical_attrs).
bool same_attributes(const Node& pattern, const Node& node) {
  return pattern.attrs() == node.attrs() || canonical_attributes(pattern) == canonical_attributes(node);
}

// Matching state for one candidate assignment of roots (distinct roots bind distinct
// values; other pattern nodes may share a graph node, as hash-consing merges them).
// Within one root the pattern
// determines the graph nodes uniquely, so only the choice of root values backtracks.
struct MatchState {
  std::unordered_map<const Node*, const Node*> nodes;  // pattern node -> graph node
  std::vector<Value> vars;
};

class Matcher {
 public:
  Matcher(const GraphIndex& index, const Rule& rule) : rule_(rule), by_type_(index.by_type) {
    const Graph& p = rule.source_pattern;
    for (size_t i = 0; i < p.inputs().size(); ++i) var_index_[p.inputs()[i].get()] = i;
  }

  void run(size_t limit, std::vector<Match>& out) {
    MatchState s;
    s.vars.resize(rule_.vars.size());
    limit_ = limit;
    match_root(0, s, out);
  }

 private:
  void match_root(size_t k, const MatchState& s, std::vector<Match>& out) {
    if (out.size() >= limit_) return;
    const auto& outputs = rule_.source_pattern.outputs();
    if (k == outputs.size()) {
      finish(s, out);
      return;
    }
    const Value& pv = outputs[k];
    if (pv.node->kind() != NodeKind::Op) return;  // a source output must be computed by an operator
    auto it = by_type_.find(pv.node->op_type());
    if (it == by_type_.end()) return;
    for (const NodePtr& n : it->second) {
      if (pv.index >= n->num_outputs()) continue;
      // Distinct source outputs replace distinct values (a value merged with itself
      // would be a pointless rewrite).
      bool taken = false;
      for (size_t j = 0; j < k; ++j)
        taken = taken || (s.nodes.at(outputs[j].node.get()) == n.get() && outputs[j].index == pv.index);
      if (taken) continue;
      MatchState next = s;
      if (match_value(pv, n->output(pv.index), next)) match_root(k + 1, next, out);
      if (out.size() >= limit_) return;
    }
  }

  void finish(const MatchState& s, std::vector<Match>& out) {
    std::vector<TensorType> types;
    for (const Value& v : s.vars) types.push_back(v.type());
    if (!rule_.guards_hold(types)) return;
    Match m;
    m.vars = s.vars;
    for (const Value& pv : rule_.source_pattern.outputs()) {
      const Node* host = s.nodes.at(pv.node.get());
      m.roots.push_back(host->output(pv.index));
    }
    for (const auto& [pat, host] : s.nodes) m.nodes.push_back(host->shared_from_this());
    std::sort(m.nodes.begin(), m.nodes.end());
    m.nodes.erase(std::unique(m.nodes.begin(), m.nodes.end()), m.nodes.end());
    out.push_back(std::move(m));
  }

  bool match_value(const Value& pv, const Value& hv, MatchState& s) const {
    if (!pv.present() || !hv.present()) return pv.present() == hv.present();
    const Node& p = *pv.node;
    const Node& h = *hv.node;
    switch (p.kind()) {
      case NodeKind::Input: {
        size_t k = var_index_.at(&p);
        if (rule_.vars[k].const_only && h.kind() != NodeKind::Constant) return false;
        if (s.vars[k].present()) return s.vars[k] == hv;
        s.vars[k] = hv;
        return true;
      }
      case NodeKind::Constant:
        return h.kind() == NodeKind::Constant && same_tensor(*p.value(), *h.value());
      case NodeKind::Opaque:
        return false;
      case NodeKind::Op:
        break;
    }
    if (h.kind() != NodeKind::Op || pv.index != hv.index || p.op_type() != h.op_type() ||
        p.num_outputs() != h.num_outputs() || p.inputs().size() != h.inputs().size() || !same_attributes(p, h))
      return false;
    if (auto it = s.nodes.find(&p); it != s.nodes.end()) return it->second == &h;
    // A commutative binary operator also matches with its operands swapped (Add(b, m)
    // as exporters write a bias add, against a rule's Add(m, b)); the first order
    // that matches this far is kept.
    bool commutes = p.op()->props.commutative && p.inputs().size() == 2;
    MatchState before = commutes ? s : MatchState{};
    s.nodes[&p] = &h;
    if (match_value(p.inputs()[0], h.inputs()[0], s) && (p.inputs().size() < 2 || match_inputs_from(1, p, h, s)))
      return true;
    if (!commutes) return false;
    s = std::move(before);
    s.nodes[&p] = &h;
    return match_value(p.inputs()[0], h.inputs()[1], s) && match_value(p.inputs()[1], h.inputs()[0], s);
  }

  bool match_inputs_from(size_t first, const Node& p, const Node& h, MatchState& s) const {
    for (size_t i = first; i < p.inputs().size(); ++i)
      if (!match_value(p.inputs()[i], h.inputs()[i], s)) return false;
    return true;
  }

  const Rule& rule_;
  std::unordered_map<const Node*, size_t> var_index_;
  const std::map<std::string, std::vector<NodePtr>>& by_type_;
  size_t limit_ = SIZE_MAX;
};

}  // namespace

GraphIndex::GraphIndex(const Graph& g) {
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op) by_type[n->op_type()].push_back(n);
}

std::vector<Match> find_matches(const Graph& g, const Rule& rule, RuleCounts* counts, size_t limit) {
  return find_matches(GraphIndex(g), rule, counts, limit);
}

std::vector<Match> find_matches(const GraphIndex& index, const Rule& rule, RuleCounts* counts, size_t limit) {
  std::vector<Match> out;
  Matcher(index, rule).run(limit, out);
  if (counts) (*counts)[rule.name].matches += out.size();
  return out;
}

std::optional<std::vector<Value>> build_target_at(const Rule& rule, const std::vector<Value>& var_values,
                                                  GraphBuilder& b, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<std::vector<Value>> {
    if (why) *why = "rule '" + rule.name + "': " + reason;
    return std::nullopt;
  };
  if (var_values.size() != rule.vars.size()) return fail("wrong number of variable values");
  std::vector<TensorType> types;
  for (const Value& v : var_values) types.push_back(v.type());
  std::string failed;
  if (!rule.guards_hold(types, &failed)) return fail("guard '" + failed + "' does not hold");
  try {
    Graph t = rule.build_target(types);
    std::unordered_map<const Node*, std::vector<Value>> map;
    for (size_t i = 0; i < t.inputs().size(); ++i) map[t.inputs()[i].get()] = {var_values[i]};
    auto mapped = [&](const Value& v) { return v.present() ? map.at(v.node.get()).at(v.index) : v; };
    for (const NodePtr& n : t.topo_order()) {
      if (n->kind() == NodeKind::Input) continue;
      NodePtr built;
      if (n->kind() == NodeKind::Constant) {
        built = b.intern(n);
      } else {
        std::vector<Value> ins;
        for (const Value& v : n->inputs()) ins.push_back(mapped(v));
        built = b.intern(n->with_inputs(std::move(ins)));
      }
      for (uint32_t i = 0; i < built->num_outputs(); ++i) map[n.get()].push_back(built->output(i));
    }
    std::vector<Value> outs;
    for (const Value& v : t.outputs()) outs.push_back(mapped(v));
    return outs;
  } catch (const Error& e) {
    return fail(std::string("target does not build: ") + e.what());
  }
}

Graph apply_rule(const Graph& g, const Rule& rule, const Match& m, RuleCounts* counts, bool* applied,
                 std::string* why) {
  if (applied) *applied = false;
  std::unordered_set<const Node*> root_nodes;
  for (const Value& r : m.roots) root_nodes.insert(r.node.get());
  std::unordered_map<const Node*, std::vector<Value>> memo;  // graph node -> its outputs in the new graph
  std::optional<std::vector<Value>> replacement;
  std::string reason;

  auto keep = [&](const Node& node, std::vector<Value> new_inputs, GraphBuilder& b) {
    NodePtr kept = new_inputs == node.inputs() ? node.shared_from_this() : node.with_inputs(std::move(new_inputs));
    kept = b.intern(kept);
    std::vector<Value> outs;
    for (uint32_t i = 0; i < kept->num_outputs(); ++i) outs.push_back(kept->output(i));
    return outs;
  };
  // A variable's value in the new graph. Variables are ancestors of the roots but
  // rebuild may not have reached them yet (multi-output sources), so this maps
  // ancestors on demand, memoized so rebuild later gets the very same nodes.
  std::function<Value(const Value&, GraphBuilder&)> map_value = [&](const Value& v, GraphBuilder& b) -> Value {
    if (!v.present()) return v;
    const Node* n = v.node.get();
    if (auto it = memo.find(n); it != memo.end()) return it->second.at(v.index);
    if (root_nodes.count(n)) throw Error("a variable depends on a value the rewrite replaces");
    std::vector<Value> outs;
    if (n->kind() == NodeKind::Input || n->kind() == NodeKind::Constant) {
      outs = {b.intern(v.node)->output(0)};
    } else {
      std::vector<Value> ins;
      for (const Value& in : n->inputs()) ins.push_back(map_value(in, b));
      outs = keep(*n, std::move(ins), b);
    }
    memo[n] = outs;
    return outs.at(v.index);
  };

  RewriteFn fn = [&](const Node& node, const std::vector<Value>& new_inputs, GraphBuilder& b) -> std::vector<Value> {
    if (auto it = memo.find(&node); it != memo.end()) return it->second;
    std::vector<Value> outs = keep(node, new_inputs, b);
    if (root_nodes.count(&node)) {
      if (!replacement) {
        std::vector<Value> vars;
        for (const Value& v : m.vars) vars.push_back(map_value(v, b));
        replacement = build_target_at(rule, vars, b, &reason);
        if (!replacement) throw Error(reason);
      }
      for (size_t k = 0; k < m.roots.size(); ++k) {
        if (m.roots[k].node.get() != &node) continue;
        const Value& r = (*replacement)[k];
        if (r.type() != m.roots[k].type())
          throw Error("rule '" + rule.name + "': target output " + std::to_string(k) + " is " + print_type(r.type()) +
                      " but the value it replaces is " + print_type(m.roots[k].type()));
        outs[m.roots[k].index] = r;
      }
    }
    memo[&node] = outs;
    return outs;
  };

  try {
    Graph out = rebuild(g, fn);
    if (!replacement) {
      if (why) *why = "rule '" + rule.name + "': the match's roots are not in the graph";
      return g;
    }
    if (applied) *applied = true;
    if (counts) ++(*counts)[rule.name].applications;
    return out;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return g;
  }
}

}  // namespace isomer
