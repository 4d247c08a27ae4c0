#include "egraph/ematch.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ops/op.h"
#include "rules/binding.h"
#include "rules/variadic.h"

namespace isomer::eg {
namespace {

// Expressions over an e-graph binding: types from the class analyses, data from the
// classes' constant values.
class EGraphEnv : public ExprEnv {
 public:
  EGraphEnv(EGraph& g, const Pattern& side, const EMatch& m, const std::vector<std::vector<ClassId>>* target = nullptr)
      : g_(g), side_(side), m_(m), target_(target) {}

  const TensorType* type_of(const ExprRef& r) const override {
    auto [c, out] = where(r);
    if (c == kNoClass) return nullptr;
    const EClass& k = g_.cls(c);
    return out < k.types.size() ? &k.types[out] : nullptr;
  }
  const Tensor* constant_of(const ExprRef& r) const override {
    auto [c, out] = where(r);
    if (c == kNoClass || g_.cls(c).tuple()) return nullptr;
    return g_.constant_value(c);
  }
  const AttrValue* attr_of(const ExprRef& r) const override {
    const auto& a = m_.attrs.at(static_cast<size_t>(r.index));
    return a ? &*a : nullptr;
  }
  const Attributes* attrs_of(const ExprRef& r) const override {
    const auto& a = m_.attr_sets.at(static_cast<size_t>(r.index));
    return a ? &*a : nullptr;
  }

 private:
  // The class (tuple class and output for a multi-output node) a reference names.
  std::pair<ClassId, uint32_t> where(const ExprRef& r) const {
    switch (r.kind) {
      case ExprRef::Kind::Operand: return {m_.operands.at(static_cast<size_t>(r.index)), 0};
      case ExprRef::Kind::SourceValue: {
        ClassId c = m_.node_classes.at(static_cast<size_t>(r.index));
        const PatternNode& n = side_.nodes.at(static_cast<size_t>(r.index));
        return {c, n.num_outputs > 1 ? r.output : 0};
      }
      case ExprRef::Kind::TargetValue: {
        if (!target_ || static_cast<size_t>(r.index) >= target_->size() || (*target_)[r.index].empty())
          return {kNoClass, 0};
        return {(*target_)[r.index][0], r.output};
      }
      default: return {kNoClass, 0};
    }
  }
  EGraph& g_;
  const Pattern& side_;
  const EMatch& m_;
  const std::vector<std::vector<ClassId>>* target_;
};

// A non-owning reference to a callable (no allocation, unlike std::function): the
// continuation of the backtracking matcher.
class Continuation {
 public:
  template <class F>
  Continuation(F& f) : obj_(&f), call_([](void* o) { (*static_cast<F*>(o))(); }) {}  // NOLINT: implicit by design
  void operator()() const { call_(obj_); }

 private:
  void* obj_;
  void (*call_)(void*);
};

// Backtracking e-matcher over one binding that is extended and undone in place (a
// trail of what each step bound), so that a candidate costs nothing until it matches
// completely; then the binding is copied out.
class Matcher {
 public:
  Matcher(EGraph& g, const Rule& rule, size_t budget) : g_(g), rule_(rule), p_(rule.source), budget_(budget) {
    state_ = empty();
    literal_attrs_.assign(p_.nodes.size(), kUnknown);
  }

  EMatch empty() const {
    EMatch m;
    m.operands.assign(rule_.vars.size(), kNoClass);
    m.attrs.resize(rule_.vars.size());
    m.attr_sets.resize(rule_.vars.size());
    m.node_classes.assign(p_.nodes.size(), kNoClass);
    return m;
  }

  // Every match of `root` at class `c`, appended to `out` (with the root class).
  // state_ is empty here: matching undoes every binding it makes on the way back (made
  // afresh for every candidate class, it was a tenth of SqueezeNet 1.1's saturation).
  void match_root(const PatternRef& root, ClassId c, std::vector<EMatch>& out) {
    auto done = [&] {
      if (out.size() > budget_) return;
      out.push_back(state_);
      out.back().roots.push_back(g_.find(c));
    };
    match(root, c, done);
  }

  // Deferred checks and guards; true if `m` is a match.
  bool finish(EMatch& m) {
    EGraphEnv env(g_, p_, m);
    try {
      for (const auto& [attr, host] : m.deferred)
        if (!same_attr_value(eval_expr(attr->expr, env), host)) return false;
      for (const auto& [node, c] : m.deferred_consts) {
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
            else return false;
          }
          v = Tensor::from_f64(pn.const_type.dtype, static_dims(pn.const_type.shape, "constant"), values);
        }
        const auto* t = std::get_if<Tensor>(&v);
        const Tensor* host = g_.constant_value(c);
        if (!t || !host || !t->same_as(*host)) return false;
      }
      for (const Guard& guard : rule_.guards)
        if (!eval_guard(guard.expr, env)) return false;
    } catch (const NotApplicable&) {
      return false;
    } catch (const Error&) {
      return false;
    }
    return true;
  }

 private:
  // Matches `r` against class `c` in every way, calling `k` for each (state_ extended).
  void match(const PatternRef& r, ClassId c, Continuation k) {
    if (stopped()) return;
    if (!r.present() || c == kNoClass) {
      if (r.present() == (c != kNoClass)) k();
      return;
    }
    c = g_.find(c);
    const size_t pi = static_cast<size_t>(r.node);
    const PatternNode& p = p_.nodes[pi];
    switch (p.kind) {
      case PatternNode::Kind::Var: {
        const size_t v = static_cast<size_t>(p.var);
        if (state_.operands[v] != kNoClass) {
          if (g_.find(state_.operands[v]) == c) k();
          return;
        }
        const EClass& cls = g_.cls(c);
        if (cls.tuple() || (rule_.vars[v].const_only && !cls.constant)) return;
        state_.operands[v] = c;
        state_.node_classes[pi] = c;
        k();
        state_.operands[v] = kNoClass;
        state_.node_classes[pi] = kNoClass;
        return;
      }
      case PatternNode::Kind::Const:
      case PatternNode::Kind::Fold: {
        const EClass& cls = g_.cls(c);
        if (!cls.constant || cls.tuple()) return;
        if (state_.node_classes[pi] != kNoClass) {
          if (g_.find(state_.node_classes[pi]) == c) k();
          return;
        }
        if (p.literal) {
          const Tensor* t = g_.constant_value(c, p.literal->numel());
          if (!t || !t->same_as(*p.literal)) return;
        }
        state_.node_classes[pi] = c;
        if (!p.literal) state_.deferred_consts.emplace_back(r.node, c);
        k();
        if (!p.literal) state_.deferred_consts.pop_back();
        state_.node_classes[pi] = kNoClass;
        return;
      }
      case PatternNode::Kind::Op: break;
    }
    if (p.num_outputs == 1) {
      if (state_.node_classes[pi] != kNoClass) {
        if (g_.find(state_.node_classes[pi]) == c) k();
        return;
      }
      // Matching adds nothing to the e-graph, so the class's e-nodes stay where they are.
      for (const ENode& n : g_.cls(c).nodes)
        if (n.kind == ENodeKind::Op && n.op == p.op && n.num_outputs == 1) match_node(pi, n, c, k);
      return;
    }
    // Output r.output of a multi-output operator: a projection of its tuple class.
    for (const ENode& proj : g_.cls(c).nodes) {
      if (proj.kind != ENodeKind::Proj || proj.leaf != r.output) continue;
      const ClassId t = g_.find(proj.children[0]);
      if (state_.node_classes[pi] != kNoClass) {
        if (g_.find(state_.node_classes[pi]) == t) k();
        continue;
      }
      for (const ENode& n : g_.cls(t).nodes)
        if (n.kind == ENodeKind::Op && n.op == p.op && n.num_outputs == p.num_outputs) match_node(pi, n, t, k);
    }
  }

  // Pattern operator `pi` against e-node `n` of class `c`, then its operands in order
  // (both orders for a commutative operator).
  void match_node(size_t pi, const ENode& n, ClassId c, Continuation k) {
    const PatternNode& p = p_.nodes[pi];
    if (n.children.size() != p.inputs.size()) return;
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (p.inputs[i].present() != (n.children[i] != kNoClass)) return;
    // Attributes: literal ones compared by id; the others bind, and the slots they
    // touch are restored after.
    const bool has_attrs = !(p.attrs.empty() && p.spread < 0 && g_.attrs(n.attrs).empty());
    const bool binds = has_attrs && literal_attrs(pi) == kNotLiteral;
    if (has_attrs && !binds && !g_.canonical_attrs_equal(*p.op, literal_attrs_[pi], n.children, n.attrs)) return;
    std::vector<std::pair<size_t, std::optional<AttrValue>>> saved_attrs;
    std::optional<Attributes> saved_set;
    const size_t deferred_before = state_.deferred.size();
    auto restore = [&] {
      for (auto it = saved_attrs.rbegin(); it != saved_attrs.rend(); ++it)
        state_.attrs[it->first] = std::move(it->second);
      if (p.spread >= 0) state_.attr_sets[static_cast<size_t>(p.spread)] = std::move(saved_set);
      state_.deferred.resize(deferred_before);
    };
    if (binds) {
      for (const AttrPattern& a : p.attrs)
        if (a.kind == AttrPattern::Kind::Var)
          saved_attrs.emplace_back(static_cast<size_t>(a.var), state_.attrs[static_cast<size_t>(a.var)]);
      if (p.spread >= 0) saved_set = state_.attr_sets[static_cast<size_t>(p.spread)];
      // Assigned into the types of an earlier e-node, whose shapes' storage is reused
      // (copied afresh, they were a seventh of SqueezeNet 1.1's saturation); only read
      // by match_attributes, before anything below matches.
      types_.resize(n.children.size());
      for (size_t i = 0; i < n.children.size(); ++i) {
        if (n.children[i] == kNoClass) types_[i] = TensorType{};
        else types_[i] = g_.type(n.children[i]);
      }
      if (!match_attributes(p, g_.attrs(n.attrs), types_, state_.attrs, state_.attr_sets, state_.deferred)) {
        restore();
        return;
      }
    }
    state_.node_classes[pi] = c;
    // Operand i against order[i], then the rest, then `k`.
    auto operands_in = [&](const ClassId* order) {
      const size_t arity = p.inputs.size();
      struct Rest {
        Matcher* self;
        const PatternNode* p;
        const ClassId* order;
        size_t i, arity;
        Continuation k;
        void operator()() {
          if (i == arity) {
            k();
            return;
          }
          Rest next{self, p, order, i + 1, arity, k};
          self->match(p->inputs[i], order[i], next);
        }
      };
      Rest first{this, &p, order, 0, arity, k};
      first();
    };
    operands_in(n.children.data());
    if (p.op->props.commutative && n.children.size() == 2 && n.children[0] != n.children[1]) {
      const ClassId swapped[2] = {n.children[1], n.children[0]};
      operands_in(swapped);
    }
    state_.node_classes[pi] = kNoClass;
    if (binds) restore();
  }

  // A pattern operator whose attributes are all literal binds nothing: it matches an
  // e-node whose attributes are its literals' canonical form, compared by id. The id
  // of pattern node `pi`'s literals, or kNotLiteral; made when first asked for (most
  // rules' nodes never meet a candidate).
  uint32_t literal_attrs(size_t pi) {
    uint32_t& id = literal_attrs_[pi];
    if (id != kUnknown) return id;
    const PatternNode& n = p_.nodes[pi];
    id = kNotLiteral;
    if (n.spread >= 0) return id;
    Attributes literals;
    for (const AttrPattern& a : n.attrs) {
      if (a.kind != AttrPattern::Kind::Literal) return id;
      literals.set(a.name, a.literal);
    }
    return id = g_.intern_pattern_attrs(literals);
  }

  bool stopped() const { return false; }  // the budget is checked where matches are stored

  EGraph& g_;
  const Rule& rule_;
  const Pattern& p_;
  size_t budget_;
  EMatch state_;
  std::vector<TensorType> types_;  // match_node's input types of the e-node it tries
  // Per pattern node: its literal attributes' id (EGraph::intern_pattern_attrs),
  // kNotLiteral where they bind variables, kUnknown until asked for.
  static constexpr uint32_t kNotLiteral = UINT32_MAX, kUnknown = UINT32_MAX - 1;
  std::vector<uint32_t> literal_attrs_;
};

// The variables and pattern nodes under each source output.
std::vector<std::set<int>> reach(const Pattern& p) {
  std::vector<std::set<int>> out;
  for (const PatternRef& root : p.outputs) {
    std::set<int> seen;
    std::vector<int> stack{root.node};
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (n < 0 || !seen.insert(n).second) continue;
      for (const PatternRef& in : p.nodes[static_cast<size_t>(n)].inputs) stack.push_back(in.node);
    }
    out.push_back(std::move(seen));
  }
  return out;
}

// The join key of `m` over the pattern nodes `shared` (their classes, and for
// variables their bindings).
std::vector<uint64_t> join_key(EGraph& g, const Rule& rule, const EMatch& m, const std::vector<int>& shared) {
  std::vector<uint64_t> key;
  for (int n : shared) {
    const PatternNode& pn = rule.source.nodes[static_cast<size_t>(n)];
    ClassId c = pn.kind == PatternNode::Kind::Var ? m.operands[static_cast<size_t>(pn.var)]
                                                  : m.node_classes[static_cast<size_t>(n)];
    key.push_back(c == kNoClass ? UINT64_MAX : g.find(c));
  }
  return key;
}

struct KeyHash {
  size_t operator()(const std::vector<uint64_t>& k) const {
    size_t h = k.size();
    for (uint64_t x : k) h ^= std::hash<uint64_t>{}(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};

// `a` extended with what `b` bound; false if they disagree on an attribute.
bool combine(EGraph& g, EMatch& a, const EMatch& b) {
  for (size_t v = 0; v < a.operands.size(); ++v) {
    if (b.operands[v] != kNoClass) {
      if (a.operands[v] != kNoClass && g.find(a.operands[v]) != g.find(b.operands[v])) return false;
      a.operands[v] = b.operands[v];
    }
    if (b.attrs[v]) {
      if (a.attrs[v] && !same_attr_value(*a.attrs[v], *b.attrs[v])) return false;
      a.attrs[v] = b.attrs[v];
    }
    if (b.attr_sets[v]) {
      if (a.attr_sets[v] && !(*a.attr_sets[v] == *b.attr_sets[v])) return false;
      a.attr_sets[v] = b.attr_sets[v];
    }
  }
  for (size_t n = 0; n < a.node_classes.size(); ++n)
    if (b.node_classes[n] != kNoClass) a.node_classes[n] = b.node_classes[n];
  a.deferred.insert(a.deferred.end(), b.deferred.begin(), b.deferred.end());
  a.deferred_consts.insert(a.deferred_consts.end(), b.deferred_consts.begin(), b.deferred_consts.end());
  return true;
}

}  // namespace

bool roots_are_joined(const Rule& rule) {
  const std::vector<std::set<int>> reached = reach(rule.source);
  std::set<int> vars_before;
  auto vars_of = [&](const std::set<int>& nodes) {
    std::set<int> vars;
    for (int n : nodes)
      if (rule.source.nodes[static_cast<size_t>(n)].kind == PatternNode::Kind::Var)
        vars.insert(rule.source.nodes[static_cast<size_t>(n)].var);
    return vars;
  };
  for (size_t k = 0; k < reached.size(); ++k) {
    std::set<int> vars = vars_of(reached[k]);
    if (k > 0 && std::none_of(vars.begin(), vars.end(), [&](int v) { return vars_before.count(v) > 0; })) return false;
    vars_before.insert(vars.begin(), vars.end());
  }
  return true;
}

OpIndex::OpIndex(const EGraph& g) {
  for (ClassId c : g.class_ids()) {
    const EClass& k = g.cls(c);
    std::set<const OpDef*> seen;
    std::set<std::pair<const OpDef*, uint32_t>> seen_proj;
    for (const ENode& n : k.nodes) {
      if (n.kind == ENodeKind::Op && n.num_outputs == 1 && seen.insert(n.op).second) single[n.op].push_back(c);
      if (n.kind == ENodeKind::Proj)
        for (const ENode& t : g.cls(n.children[0]).nodes)
          if (t.kind == ENodeKind::Op && seen_proj.insert({t.op, t.num_outputs}).second)
            projected[{t.op, t.num_outputs}].push_back(c);
    }
  }
}

std::vector<EMatch> ematch(EGraph& g, const Rule& rule, const OpIndex& index, size_t limit) {
  const Pattern& p = rule.source;
  const size_t budget = limit == SIZE_MAX ? SIZE_MAX : limit * 4 + 16;
  Matcher matcher(g, rule, budget);
  // Each root alone.
  std::vector<std::vector<EMatch>> per_root;
  for (const PatternRef& root : p.outputs) {
    const PatternNode& pn = p.nodes[static_cast<size_t>(root.node)];
    const std::vector<ClassId>* candidates = nullptr;
    if (pn.num_outputs == 1) {
      auto it = index.single.find(pn.op);
      if (it != index.single.end()) candidates = &it->second;
    } else {
      auto it = index.projected.find({pn.op, pn.num_outputs});
      if (it != index.projected.end()) candidates = &it->second;
    }
    std::vector<EMatch> found;
    if (candidates)
      for (ClassId c : *candidates) {
        matcher.match_root(root, c, found);
        if (found.size() > budget) break;
      }
    if (found.empty()) return {};
    per_root.push_back(std::move(found));
  }
  // Join root by root on what they share.
  const std::vector<std::set<int>> reached = reach(p);
  std::vector<EMatch> joined = std::move(per_root[0]);
  std::set<int> bound = reached[0];
  for (size_t k = 1; k < per_root.size() && !joined.empty(); ++k) {
    std::vector<int> shared;
    for (int n : reached[k])
      if (bound.count(n)) shared.push_back(n);
    std::unordered_map<std::vector<uint64_t>, std::vector<size_t>, KeyHash> table;
    for (size_t i = 0; i < per_root[k].size(); ++i)
      table[join_key(g, rule, per_root[k][i], shared)].push_back(i);
    std::vector<EMatch> next;
    for (const EMatch& a : joined) {
      auto it = table.find(join_key(g, rule, a, shared));
      if (it == table.end()) continue;
      for (size_t i : it->second) {
        const EMatch& b = per_root[k][i];
        if (std::find(a.roots.begin(), a.roots.end(), b.roots[0]) != a.roots.end()) continue;  // one value twice
        EMatch m = a;
        if (!combine(g, m, b)) continue;
        m.roots.push_back(b.roots[0]);
        next.push_back(std::move(m));
        if (next.size() > budget) break;
      }
      if (next.size() > budget) break;
    }
    joined = std::move(next);
    bound.insert(reached[k].begin(), reached[k].end());
  }
  std::vector<EMatch> out;
  for (EMatch& m : joined) {
    if (!matcher.finish(m)) continue;
    out.push_back(std::move(m));
    if (out.size() > limit) break;
  }
  return out;
}

ApplyResult apply_ematch(EGraph& g, const Rule& rule, const EMatch& m, std::string* why) {
  const Pattern& t = rule.target;
  std::vector<std::vector<ClassId>> built(t.nodes.size());
  EGraphEnv env(g, rule.source, m, &built);
  auto value_of = [&](const PatternRef& r) -> ClassId {
    if (!r.present()) return kNoClass;
    const PatternNode& n = t.nodes[static_cast<size_t>(r.node)];
    ClassId c = built[static_cast<size_t>(r.node)].at(0);
    return n.kind == PatternNode::Kind::Op && n.num_outputs > 1 ? g.add_proj(c, r.output) : c;
  };
  std::vector<ClassId> outs;
  try {
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      const PatternNode& n = t.nodes[i];
      switch (n.kind) {
        case PatternNode::Kind::Var: built[i] = {m.operands.at(static_cast<size_t>(n.var))}; break;
        case PatternNode::Kind::Const: {
          if (n.literal) {
            built[i] = {g.add_constant(*n.literal)};
            break;
          }
          std::vector<double> values;
          for (const Expr& e : n.elements) {
            AttrValue x = eval_expr(e, env);
            if (const auto* k = std::get_if<int64_t>(&x)) values.push_back(static_cast<double>(*k));
            else if (const auto* d = std::get_if<double>(&x)) values.push_back(*d);
            else throw NotApplicable("a constant element is not a number");
          }
          built[i] = {g.add_constant(Tensor::from_f64(n.const_type.dtype, static_dims(n.const_type.shape), values))};
          break;
        }
        case PatternNode::Kind::Fold: {
          AttrValue v = eval_expr(n.fold, env);
          const auto* tensor = std::get_if<Tensor>(&v);
          if (!tensor) throw NotApplicable("a fold did not give a tensor");
          built[i] = {g.add_constant(*tensor)};
          break;
        }
        case PatternNode::Kind::Op: {
          Attributes attrs;
          if (n.spread >= 0) attrs = *m.attr_sets.at(static_cast<size_t>(n.spread));
          for (const AttrPattern& a : n.attrs) {
            if (a.kind == AttrPattern::Kind::Literal) attrs.set(a.name, a.literal);
            else if (a.kind == AttrPattern::Kind::Var) attrs.set(a.name, *m.attrs.at(static_cast<size_t>(a.var)));
            else attrs.set(a.name, eval_expr(a.expr, env));
          }
          std::vector<ClassId> ins;
          for (const PatternRef& r : n.inputs) ins.push_back(value_of(r));
          built[i] = {g.add_op(*n.op, std::move(ins), attrs, n.num_outputs)};
          break;
        }
      }
    }
    for (const PatternRef& r : t.outputs) outs.push_back(value_of(r));
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return ApplyResult::NotApplicable;
  }
  for (size_t k = 0; k < outs.size(); ++k)
    if (g.cls(outs[k]).types != g.cls(m.roots[k]).types) {
      if (why) *why = "the target's type differs from the value it replaces";
      return ApplyResult::NotApplicable;
    }
  bool changed = false;
  for (size_t k = 0; k < outs.size(); ++k) changed = g.merge(m.roots[k], outs[k]) || changed;
  return changed ? ApplyResult::Applied : ApplyResult::Unchanged;
}

}  // namespace isomer::eg

namespace isomer::eg {

const Rule& VariadicExpansions::of_size(const Rule& rule, size_t n) {
  std::unique_ptr<Rule>& slot = cache_[{&rule, n}];
  if (!slot) slot = std::make_unique<Rule>(expand_variadic(rule, n));
  return *slot;
}

namespace {

// True if some class in `from` is, or reads through any of its e-nodes, a class in
// `targets` (an over-approximation of "depends on": any representation counts).
bool reaches(const EGraph& g, const std::vector<ClassId>& from, const std::unordered_set<ClassId>& targets) {
  std::unordered_set<ClassId> seen;
  std::vector<ClassId> stack;
  for (ClassId c : from)
    if (c != kNoClass) stack.push_back(g.find(c));
  while (!stack.empty()) {
    const ClassId c = stack.back();
    stack.pop_back();
    if (targets.count(c)) return true;
    if (!seen.insert(c).second) continue;
    for (const ENode& n : g.cls(c).nodes)
      for (ClassId ch : n.children)
        if (ch != kNoClass) stack.push_back(g.find(ch));
  }
  return false;
}

// The members (in order) that can be merged together without a cycle: one whose
// operands depend on another member's value (an RNN's h_t W for two steps: h_2 is
// computed from h_1 W) would make the merge read its own output. Such a merge can
// never be extracted, and leaving it out keeps the ILP's cyclic components small.
std::vector<size_t> independent_members(const EGraph& g, const std::vector<EMatch>& elements,
                                        const std::vector<size_t>& members) {
  std::vector<size_t> kept;
  std::vector<ClassId> kept_operands;
  std::unordered_set<ClassId> kept_roots;
  for (size_t i : members) {
    const EMatch& m = elements[i];
    const ClassId root = g.find(m.roots[0]);
    std::unordered_set<ClassId> with_root = kept_roots;
    with_root.insert(root);
    if (reaches(g, m.operands, with_root) || reaches(g, kept_operands, {root})) continue;
    kept.push_back(i);
    kept_roots.insert(root);
    kept_operands.insert(kept_operands.end(), m.operands.begin(), m.operands.end());
  }
  return kept;
}

}  // namespace

std::vector<std::pair<const Rule*, EMatch>> ematch_variadic(EGraph& g, const Rule& rule, const OpIndex& index,
                                                            size_t limit, VariadicExpansions& expansions,
                                                            const std::vector<bool>& merge_origins) {
  const Rule& one = expansions.of_size(rule, 1);
  std::vector<EMatch> elements = ematch(g, one, index, limit == SIZE_MAX ? SIZE_MAX : limit * kMaxElements);
  // A variable of the one-element rule is shared (no list) or the first of a list (`w1`).
  auto list_of = [&](const std::string& var) -> std::string {
    for (const std::string& l : rule.variadic->vars)
      if (var == l + "1") return l;
    return "";
  };
  std::vector<int> shared;
  for (size_t v = 0; v < one.vars.size(); ++v)
    if (list_of(one.vars[v].name).empty()) shared.push_back(static_cast<int>(v));
  // An element that is a merge already (its value is read by a multi-output operator,
  // the Split, that a merge rule made) is left out: grouping it again would merge
  // merges, doubling the operator's size every iteration.
  auto is_merge = [&](const EMatch& m) {
    for (const auto& [parent, cls] : g.cls(m.roots[0]).parents)
      if (parent.kind == ENodeKind::Op && parent.num_outputs > 1 && parent.origin < merge_origins.size() &&
          merge_origins[parent.origin])
        return true;
    return false;
  };
  std::map<std::vector<std::string>, std::vector<size_t>> groups;  // ordered: deterministic
  for (size_t i = 0; i < elements.size(); ++i) {
    if (is_merge(elements[i])) continue;
    std::vector<std::string> key;
    for (int v : shared) {
      const EMatch& m = elements[i];
      const size_t k = static_cast<size_t>(v);
      if (m.operands[k] != kNoClass) key.push_back("c" + std::to_string(g.find(m.operands[k])));
      else if (m.attrs[k]) key.push_back("a" + std::to_string(attr_hash(*m.attrs[k])));
      else if (m.attr_sets[k]) key.push_back("s" + std::to_string(m.attr_sets[k]->hash()));
      else key.push_back("-");
    }
    groups[key].push_back(i);
  }
  // The elements' own operands (the listed variables'), by which a group is ordered:
  // the same inputs come out in the same order in every group, so that merges of
  // different weights stack them into one Concat (which a merge of its readers then
  // shares), not one per order.
  std::vector<int> listed;
  for (size_t v = 0; v < one.vars.size(); ++v)
    if (!list_of(one.vars[v].name).empty()) listed.push_back(static_cast<int>(v));
  auto order_key = [&](size_t i) {
    std::vector<ClassId> k;
    for (int v : listed) {
      const ClassId c = elements[i].operands[static_cast<size_t>(v)];
      k.push_back(c == kNoClass ? kNoClass : g.find(c));
    }
    k.push_back(g.find(elements[i].roots[0]));
    return k;
  };
  std::vector<std::pair<const Rule*, EMatch>> out;
  for (auto& [key, members] : groups) {
    // Distinct values, in the order of their own operands.
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) { return order_key(a) < order_key(b); });
    members.erase(std::unique(members.begin(), members.end(),
                              [&](size_t a, size_t b) {
                                return g.find(elements[a].roots[0]) == g.find(elements[b].roots[0]);
                              }),
                  members.end());
    members = independent_members(g, elements, members);
    if (members.size() < 2) continue;
    if (members.size() > kMaxElements) members.resize(kMaxElements);
    const Rule& expanded = expansions.of_size(rule, members.size());
    EMatch m;
    m.operands.assign(expanded.vars.size(), kNoClass);
    m.attrs.resize(expanded.vars.size());
    m.attr_sets.resize(expanded.vars.size());
    m.node_classes.assign(expanded.source.nodes.size(), kNoClass);
    for (size_t v = 0; v < expanded.vars.size(); ++v) {
      const std::string& name = expanded.vars[v].name;
      // Shared: the same name in the one-element rule; listed: `w3` is element 3's `w1`.
      size_t element = 0;
      std::string one_name = name;
      if (one.var_index(name) < 0 || !list_of(name).empty()) {
        for (const std::string& l : rule.variadic->vars)
          if (name.size() > l.size() && name.compare(0, l.size(), l) == 0 &&
              name.find_first_not_of("0123456789", l.size()) == std::string::npos) {
            element = std::stoul(name.substr(l.size())) - 1;
            one_name = l + "1";
          }
      }
      const int k = one.var_index(one_name);
      if (k < 0 || element >= members.size()) continue;
      const EMatch& e = elements[members[element]];
      m.operands[v] = e.operands[static_cast<size_t>(k)];
      m.attrs[v] = e.attrs[static_cast<size_t>(k)];
      m.attr_sets[v] = e.attr_sets[static_cast<size_t>(k)];
    }
    for (size_t i : members) m.roots.push_back(elements[i].roots[0]);
    out.emplace_back(&expanded, std::move(m));
    if (out.size() > limit) break;
  }
  return out;
}

}  // namespace isomer::eg
