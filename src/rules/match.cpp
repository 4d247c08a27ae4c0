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

// Matching state for one candidate assignment of roots. Within one root the pattern
// determines the graph nodes uniquely, so only the choice of root values (and the
// order of commutative operands) backtracks.
struct MatchState {
  std::vector<const Node*> nodes;  // pattern node -> graph node (nullptr: not matched yet)
  Binding binding;
  std::vector<std::pair<const AttrPattern*, AttrValue>> attrs;  // computed attributes to check
  std::vector<std::pair<int, Value>> consts;  // computed constants / folds to compare
};

class Matcher {
 public:
  Matcher(const Rule& rule, const std::map<std::string, std::vector<NodePtr>>* by_type)
      : rule_(rule), p_(rule.source), by_type_(by_type) {}

  void run(size_t limit, std::vector<Match>& out, const Node* only_root = nullptr) {
    MatchState s;
    s.nodes.assign(p_.nodes.size(), nullptr);
    s.binding = Binding(rule_.vars.size());
    s.binding.source_values.resize(p_.nodes.size());
    limit_ = limit;
    only_root_ = only_root;
    match_root(0, s, out);
  }

 private:
  void match_root(size_t k, const MatchState& s, std::vector<Match>& out) {
    if (out.size() >= limit_) return;
    if (k == p_.outputs.size()) {
      finish(s, out);
      return;
    }
    const PatternRef& pr = p_.outputs[k];
    const PatternNode& pn = p_.nodes[static_cast<size_t>(pr.node)];
    auto try_node = [&](const Node& n) {
      if (pr.output >= n.num_outputs()) return;
      // Distinct source outputs replace distinct values (a value merged with itself
      // would be a pointless rewrite).
      for (size_t j = 0; j < k; ++j) {
        const PatternRef& prev = p_.outputs[j];
        if (s.nodes[static_cast<size_t>(prev.node)] == &n && prev.output == pr.output) return;
      }
      MatchState next = s;
      if (match_value(pr, n.output(pr.output), next)) match_root(k + 1, next, out);
    };
    if (only_root_ && k == 0) {
      try_node(*only_root_);
      return;
    }
    auto it = by_type_->find(std::string(pn.op->name));
    if (it == by_type_->end()) return;
    for (const NodePtr& n : it->second) {
      try_node(*n);
      if (out.size() >= limit_) return;
    }
  }

  void finish(const MatchState& s, std::vector<Match>& out) {
    BindingEnv env(s.binding);
    try {
      for (const auto& [attr, host] : s.attrs)
        if (!same_attr_value(eval_expr(attr->expr, env), host)) return;
      for (const auto& [node, host] : s.consts) {
        const PatternNode& pn = p_.nodes[static_cast<size_t>(node)];
        AttrValue v;
        if (pn.kind == PatternNode::Kind::Fold) {
          v = eval_expr(pn.fold, env);
        } else {
          std::vector<double> values;
          for (const Expr& e : pn.elements) {
            AttrValue x = eval_expr(e, env);
            if (const auto* i = std::get_if<int64_t>(&x)) values.push_back(static_cast<double>(*i));
            else if (const auto* d = std::get_if<double>(&x)) values.push_back(*d);
            else return;
          }
          std::vector<int64_t> dims = static_dims(pn.const_type.shape, "constant");
          v = Tensor::from_f64(pn.const_type.dtype, dims, values);
        }
        const auto* t = std::get_if<Tensor>(&v);
        if (!t || !same_tensor(*t, *host.constant())) return;
      }
    } catch (const NotApplicable&) {
      return;
    } catch (const Error&) {
      return;
    }
    if (!guards_hold(rule_, s.binding)) return;
    Match m;
    m.binding = s.binding;
    for (const PatternRef& pr : p_.outputs) m.roots.push_back(s.nodes[static_cast<size_t>(pr.node)]->output(pr.output));
    for (size_t i = 0; i < p_.nodes.size(); ++i)
      if (p_.nodes[i].kind == PatternNode::Kind::Op && s.nodes[i]) m.nodes.push_back(s.nodes[i]->shared_from_this());
    std::sort(m.nodes.begin(), m.nodes.end());
    m.nodes.erase(std::unique(m.nodes.begin(), m.nodes.end()), m.nodes.end());
    out.push_back(std::move(m));
  }

  // Attributes of `p` against the graph node `h` (see match.h).
  static bool match_attrs(const PatternNode& p, const Node& h, MatchState& s) {
    std::vector<TensorType> types;
    for (const Value& v : h.inputs()) types.push_back(v.present() ? v.type() : TensorType{});
    if (p.attrs.empty() && p.spread < 0 && h.attrs().empty()) return true;
    return match_attributes(p, canonical_attributes(h), types, s.binding.attrs, s.binding.attr_sets, s.attrs);
  }

  bool match_value(const PatternRef& pr, const Value& hv, MatchState& s) const {
    if (!pr.present() || !hv.present()) return pr.present() == hv.present();
    const size_t pi = static_cast<size_t>(pr.node);
    const PatternNode& p = p_.nodes[pi];
    const Node& h = *hv.node;
    switch (p.kind) {
      case PatternNode::Kind::Var: {
        const RuleVar& var = rule_.vars[static_cast<size_t>(p.var)];
        if (var.const_only && h.kind() != NodeKind::Constant) return false;
        Value& slot = s.binding.operands[static_cast<size_t>(p.var)];
        if (slot.present()) return slot == hv;
        slot = hv;
        s.binding.source_values[pi] = {hv};
        return true;
      }
      case PatternNode::Kind::Const:
      case PatternNode::Kind::Fold:
        if (h.kind() != NodeKind::Constant) return false;
        s.binding.source_values[pi] = {hv};
        if (p.literal) return same_tensor(*p.literal, *h.value());
        s.consts.emplace_back(pr.node, hv);
        return true;
      case PatternNode::Kind::Op: break;
    }
    if (h.kind() != NodeKind::Op || pr.output != hv.index || p.op != h.op() || p.num_outputs != h.num_outputs() ||
        p.inputs.size() != h.inputs().size())
      return false;
    if (s.nodes[pi]) return s.nodes[pi] == &h;
    if (!match_attrs(p, h, s)) return false;
    // A commutative binary operator also matches with its operands swapped (Add(b, m)
    // as exporters write a bias add, against a rule's Add(m, b)); the first order
    // that matches this far is kept.
    const bool commutes = p.op->props.commutative && p.inputs.size() == 2;
    MatchState before = commutes ? s : MatchState{};
    s.nodes[pi] = &h;
    s.binding.source_values[pi].clear();
    for (uint32_t o = 0; o < h.num_outputs(); ++o) s.binding.source_values[pi].push_back(h.output(o));
    bool ok = true;
    for (size_t i = 0; ok && i < p.inputs.size(); ++i) ok = match_value(p.inputs[i], h.inputs()[i], s);
    if (ok || !commutes) return ok;
    s = std::move(before);
    s.nodes[pi] = &h;
    for (uint32_t o = 0; o < h.num_outputs(); ++o) s.binding.source_values[pi].push_back(h.output(o));
    return match_value(p.inputs[0], h.inputs()[1], s) && match_value(p.inputs[1], h.inputs()[0], s);
  }

  const Rule& rule_;
  const Pattern& p_;
  const std::map<std::string, std::vector<NodePtr>>* by_type_;
  size_t limit_ = SIZE_MAX;
  const Node* only_root_ = nullptr;
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
  Matcher(rule, &index.by_type).run(limit, out);
  if (counts) (*counts)[rule.name].matches += out.size();
  return out;
}

std::optional<Match> match_at(const Rule& rule, const Value& root) {
  if (rule.source.outputs.size() != 1 || !root.present() || root.node->kind() != NodeKind::Op) return std::nullopt;
  std::vector<Match> out;
  Matcher(rule, nullptr).run(1, out, root.node.get());
  if (out.empty() || out[0].roots[0] != root) return std::nullopt;
  return std::move(out[0]);
}

std::optional<std::vector<Value>> build_target_at(const Rule& rule, const Binding& bind, GraphBuilder& b,
                                                  std::string* why) {
  try {
    return build_side(rule, rule.target, bind, b);
  } catch (const std::exception& e) {
    if (why) *why = "rule '" + rule.name + "': target does not build: " + e.what();
    return std::nullopt;
  }
}

Graph apply_rules(const Graph& g, const std::vector<std::pair<const Rule*, const Match*>>& matches,
                  ApplyInfo* info, bool merge_equal) {
  ApplyInfo local;
  ApplyInfo& out_info = info ? *info : local;
  out_info = ApplyInfo{};
  std::vector<bool> applied(matches.size(), false);
  std::unordered_map<const Node*, std::vector<size_t>> roots_at;  // graph node -> matches rooted there
  for (size_t i = 0; i < matches.size(); ++i)
    for (const Value& r : matches[i].second->roots) {
      auto& list = roots_at[r.node.get()];
      if (std::find(list.begin(), list.end(), i) == list.end()) list.push_back(i);
    }
  std::unordered_map<const Node*, std::vector<Value>> memo;  // graph node -> its outputs in the new graph
  std::unordered_set<const Node*> in_progress;
  std::vector<std::optional<std::vector<Value>>> replacement(matches.size());
  std::vector<bool> tried(matches.size(), false);
  GraphBuilder* builder = nullptr;
  std::string last_error;

  std::function<std::vector<Value>(const Node&)> outputs_of = [&](const Node& node) -> std::vector<Value> {
    if (auto it = memo.find(&node); it != memo.end()) return it->second;
    if (!in_progress.insert(&node).second) throw Error("a variable depends on a value the rewrite replaces");
    GraphBuilder& b = *builder;
    std::vector<Value> outs;
    if (node.kind() == NodeKind::Input || node.kind() == NodeKind::Constant) {
      outs = {b.intern(node.shared_from_this())->output(0)};
    } else {
      std::vector<Value> ins;
      for (const Value& in : node.inputs()) ins.push_back(in.present() ? outputs_of(*in.node).at(in.index) : in);
      NodePtr kept = ins == node.inputs() ? node.shared_from_this() : node.with_inputs(std::move(ins));
      if (merge_equal) {
        NodePtr merged = b.intern(kept);
        if (merged != kept) ++out_info.merged;
        kept = merged;
      }
      out_info.kept[&node] = kept;
      for (uint32_t i = 0; i < kept->num_outputs(); ++i) outs.push_back(kept->output(i));
    }
    if (auto it = roots_at.find(&node); it != roots_at.end()) {
      for (size_t mi : it->second) {
        const Rule& rule = *matches[mi].first;
        const Match& m = *matches[mi].second;
        if (!tried[mi]) {
          tried[mi] = true;
          try {
            Binding bind = m.binding;
            for (Value& v : bind.operands)
              if (v.present()) v = outputs_of(*v.node).at(v.index);
            std::vector<Value> r = build_side(rule, rule.target, bind, b);
            bool types_ok = r.size() == m.roots.size();
            for (size_t k = 0; types_ok && k < r.size(); ++k) types_ok = r[k].type() == m.roots[k].type();
            if (types_ok) replacement[mi] = std::move(r);
          } catch (const std::exception& e) {
            // The target does not build at these values (or would depend on itself): skip.
            std::string msg = e.what();
            last_error = msg.find("depends on a value") != std::string::npos ? msg : "target does not build: " + msg;
          }
        }
        if (!replacement[mi]) continue;
        applied[mi] = true;
        for (size_t k = 0; k < m.roots.size(); ++k)
          if (m.roots[k].node.get() == &node) outs[m.roots[k].index] = (*replacement[mi])[k];
      }
    }
    in_progress.erase(&node);
    memo[&node] = outs;
    return outs;
  };

  Graph out = rebuild(g, [&](const Node& node, const std::vector<Value>&, GraphBuilder& b) {
    builder = &b;
    return outputs_of(node);
  });
  out_info.applied = std::move(applied);
  out_info.error = last_error;
  return out;
}

Graph apply_rule(const Graph& g, const Rule& rule, const Match& m, RuleCounts* counts, bool* applied,
                 std::string* why) {
  if (applied) *applied = false;
  ApplyInfo info;
  Graph out;
  try {
    out = apply_rules(g, {{&rule, &m}}, &info);
  } catch (const Error& e) {
    if (why) *why = e.what();
    return g;
  }
  const std::string& error = info.error;
  if (info.applied.empty() || !info.applied[0]) {
    if (why)
      *why = !error.empty() ? "rule '" + rule.name + "': " + error
                            : "rule '" + rule.name + "': the target's types differ from the values it replaces, or "
                              "its roots are not in the graph";
    return g;
  }
  if (applied) *applied = true;
  if (counts) ++(*counts)[rule.name].applications;
  return out;
}

}  // namespace isomer
