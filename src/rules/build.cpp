// Building a rule side from a binding (rules/binding.h).
#include <algorithm>

#include "ir/error.h"
#include "ops/op.h"
#include "rules/binding.h"

namespace isomer {

const Value* BindingEnv::value(const ExprRef& r) const {
  const std::vector<std::vector<Value>>* nodes = nullptr;
  switch (r.kind) {
    case ExprRef::Kind::Operand: {
      const Value& v = b_.operands.at(static_cast<size_t>(r.index));
      return v.present() ? &v : nullptr;
    }
    case ExprRef::Kind::SourceValue: nodes = &b_.source_values; break;
    case ExprRef::Kind::TargetValue: nodes = built_; break;
    default: return nullptr;
  }
  if (!nodes || r.index < 0 || static_cast<size_t>(r.index) >= nodes->size()) return nullptr;
  const std::vector<Value>& outs = (*nodes)[static_cast<size_t>(r.index)];
  return r.output < outs.size() && outs[r.output].present() ? &outs[r.output] : nullptr;
}

const TensorType* BindingEnv::type_of(const ExprRef& r) const {
  const Value* v = value(r);
  return v ? &v->type() : nullptr;
}

const Tensor* BindingEnv::constant_of(const ExprRef& r) const {
  const Value* v = value(r);
  return v ? v->constant() : nullptr;
}

const AttrValue* BindingEnv::attr_of(const ExprRef& r) const {
  if (r.kind != ExprRef::Kind::Attr) return nullptr;
  const auto& a = b_.attrs.at(static_cast<size_t>(r.index));
  return a ? &*a : nullptr;
}

const Attributes* BindingEnv::attrs_of(const ExprRef& r) const {
  if (r.kind != ExprRef::Kind::Attrs) return nullptr;
  const auto& a = b_.attr_sets.at(static_cast<size_t>(r.index));
  return a ? &*a : nullptr;
}

bool same_attr_value(const AttrValue& a, const AttrValue& b) {
  if (const auto* i = std::get_if<int64_t>(&a))
    if (const auto* d = std::get_if<double>(&b)) return static_cast<double>(*i) == *d;
  if (const auto* d = std::get_if<double>(&a))
    if (const auto* i = std::get_if<int64_t>(&b)) return static_cast<double>(*i) == *d;
  return attr_equal(a, b);
}

bool match_attributes(const PatternNode& p, const Attributes& host_attrs, std::span<const TensorType> input_types,
                      std::vector<std::optional<AttrValue>>& attrs, std::vector<std::optional<Attributes>>& sets,
                      std::vector<std::pair<const AttrPattern*, AttrValue>>& deferred) {
  auto canonical = [&](const Attributes& a) { return p.op->canonical_attrs ? p.op->canonical_attrs(a, input_types) : a; };
  if (p.attrs.empty() && p.spread < 0) return host_attrs == canonical({});
  Attributes host = host_attrs;
  Attributes pat;
  std::vector<std::string> computed;
  for (const AttrPattern& a : p.attrs) {
    switch (a.kind) {
      case AttrPattern::Kind::Literal: pat.set(a.name, a.literal); break;
      case AttrPattern::Kind::Var: {
        const AttrValue* v = host.find(a.name);
        if (!v) return false;
        auto& slot = attrs[static_cast<size_t>(a.var)];
        if (slot && !same_attr_value(*slot, *v)) return false;
        slot = *v;
        pat.set(a.name, *v);
        break;
      }
      case AttrPattern::Kind::Computed: {
        const AttrValue* v = host.find(a.name);
        if (!v) return false;
        deferred.emplace_back(&a, *v);
        computed.push_back(a.name);
        break;
      }
    }
  }
  Attributes canon = canonical(pat);
  if (p.spread < 0) {
    for (const std::string& name : computed) {
      canon.erase(name);
      host.erase(name);
    }
    return canon == host;
  }
  Attributes rest = host;
  for (const AttrPattern& a : p.attrs) {
    if (a.kind != AttrPattern::Kind::Computed) {
      const AttrValue* x = canon.find(a.name);
      const AttrValue* y = host.find(a.name);
      if ((x == nullptr) != (y == nullptr) || (x && !attr_equal(*x, *y))) return false;
    }
    rest.erase(a.name);
  }
  auto& slot = sets[static_cast<size_t>(p.spread)];
  if (slot && !(*slot == rest)) return false;
  slot = std::move(rest);
  return true;
}

bool guards_hold(const Rule& rule, const Binding& b, std::string* failed) {
  BindingEnv env(b);
  for (const Guard& g : rule.guards) {
    if (!eval_guard(g.expr, env)) {
      if (failed) *failed = g.text;
      return false;
    }
  }
  return true;
}

namespace {

// The element values of a computed constant, in its declared type.
Tensor computed_constant(const PatternNode& n, const ExprEnv& env) {
  std::vector<double> values;
  std::vector<int64_t> ints;
  for (const Expr& e : n.elements) {
    AttrValue v = eval_expr(e, env);
    if (const auto* i = std::get_if<int64_t>(&v)) {
      ints.push_back(*i);
      values.push_back(static_cast<double>(*i));
    } else if (const auto* d = std::get_if<double>(&v)) {
      values.push_back(*d);
      ints.push_back(static_cast<int64_t>(*d));
    } else {
      throw Error("a constant element must be a number, got " + expr_value_text(v));
    }
  }
  std::vector<int64_t> dims = static_dims(n.const_type.shape, "constant");
  if (is_integer(n.const_type.dtype) || n.const_type.dtype == DType::Bool)
    return Tensor::from_i64(n.const_type.dtype, dims, ints);
  return Tensor::from_f64(n.const_type.dtype, dims, values);
}

}  // namespace

std::vector<Value> build_side(const Rule& rule, const Pattern& side, const Binding& bind, GraphBuilder& b,
                              const FoldHook& hook, std::vector<std::vector<Value>>* built_out) {
  std::vector<std::vector<Value>> built(side.nodes.size());
  BindingEnv env(bind, &built);
  auto value_of = [&](const PatternRef& r) -> Value {
    if (!r.present()) return Value{};
    return built.at(static_cast<size_t>(r.node)).at(r.output);
  };
  for (size_t i = 0; i < side.nodes.size(); ++i) {
    const PatternNode& n = side.nodes[i];
    try {
    switch (n.kind) {
      case PatternNode::Kind::Var: {
        const Value& v = bind.operands.at(static_cast<size_t>(n.var));
        if (!v.present()) throw Error("rule '" + rule.name + "': %" + n.label + " is not bound");
        built[i] = {v};
        break;
      }
      case PatternNode::Kind::Const:
        built[i] = {b.constant(n.literal ? *n.literal : computed_constant(n, env))};
        break;
      case PatternNode::Kind::Fold: {
        if (hook)
          if (std::optional<Value> v = hook(static_cast<int>(i), n, b, built)) {
            built[i] = {*v};
            break;
          }
        AttrValue v = eval_expr(n.fold, env);
        built[i] = {b.constant(std::get<Tensor>(v))};
        break;
      }
      case PatternNode::Kind::Op: {
        Attributes attrs;
        if (n.spread >= 0) {
          const auto& set = bind.attr_sets.at(static_cast<size_t>(n.spread));
          if (!set) throw Error("rule '" + rule.name + "': attribute set is not bound");
          attrs = *set;
        }
        for (const AttrPattern& a : n.attrs) {
          switch (a.kind) {
            case AttrPattern::Kind::Literal: attrs.set(a.name, a.literal); break;
            case AttrPattern::Kind::Var: {
              const auto& v = bind.attrs.at(static_cast<size_t>(a.var));
              if (!v) throw Error("rule '" + rule.name + "': attribute variable is not bound");
              attrs.set(a.name, *v);
              break;
            }
            case AttrPattern::Kind::Computed: attrs.set(a.name, eval_expr(a.expr, env)); break;
          }
        }
        std::vector<Value> ins;
        for (const PatternRef& r : n.inputs) ins.push_back(value_of(r));
        std::vector<Value> outs = b.op(n.op->name, std::move(ins), std::move(attrs), n.num_outputs);
        built[i] = std::move(outs);
        break;
      }
    }
    } catch (const Error& e) {
      if (n.line <= 0 || std::string_view(e.what()).starts_with("line ")) throw;
      throw Error("line " + std::to_string(n.line) + ": " + e.what());
    }
  }
  std::vector<Value> outs;
  for (const PatternRef& r : side.outputs) outs.push_back(value_of(r));
  if (built_out) *built_out = std::move(built);
  return outs;
}

}  // namespace isomer
