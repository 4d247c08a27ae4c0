// A rule's two sides built as graphs at a verify-shapes instantiation (rules/binding.h).
#include <algorithm>
#include <cmath>

#include "eval/field.h"
#include "eval/sym.h"
#include "ir/error.h"
#include "rules/binding.h"
#include "rules/fold.h"

namespace isomer {
namespace {

// "line N: why" -> "line N: side: why"; otherwise "side: why".
Error side_error(const char* side, const std::exception& e) {
  std::string msg = e.what();
  if (msg.starts_with("line ")) {
    size_t colon = msg.find(": ");
    if (colon != std::string::npos) return Error(msg.substr(0, colon + 2) + side + ": " + msg.substr(colon + 2));
  }
  return Error(std::string(side) + ": " + msg);
}

// True if the fold node reads an operand that is an input at this instantiation or a
// fold that is one: it cannot be computed to a number, so it becomes an input.
bool reads_inputs(const PatternNode& fold, const RuleInstance& inst, const std::vector<bool>& node_is_input) {
  std::vector<const ExprRef*> refs;
  fold.fold.collect_data_refs(refs);
  for (const ExprRef* r : refs) {
    if (r->kind == ExprRef::Kind::Operand &&
        std::find(inst.input_vars.begin(), inst.input_vars.end(), r->index) != inst.input_vars.end())
      return true;
    if (r->kind == ExprRef::Kind::TargetValue && node_is_input[static_cast<size_t>(r->index)]) return true;
  }
  return false;
}

template <class T>
Array<T> array_of(const Tensor& t) {
  Array<T> a;
  a.dims = t.dims();
  for (double x : t.to_f64()) {
    if constexpr (std::is_same_v<T, Fp>) {
      if (x != std::floor(x)) throw NotApplicable("a non-integer constant has no field value");
      a.data.push_back(Fp::from_signed(static_cast<int64_t>(x)));
    } else {
      a.data.push_back(T(x));
    }
  }
  return a;
}

}  // namespace

RuleInstance instantiate(const Rule& rule, size_t k) {
  const VerifyBinding& vb = rule.verify.at(k);
  RuleInstance inst;
  inst.binding = Binding(rule.vars.size());
  GraphBuilder b(/*dedupe=*/false);
  std::vector<NodePtr> inputs;
  for (size_t v = 0; v < rule.vars.size(); ++v) {
    const RuleVar& var = rule.vars[v];
    if (var.kind == RuleVar::Kind::Attr) {
      inst.binding.attrs[v] = vb.attrs[v];
    } else if (var.kind == RuleVar::Kind::Attrs) {
      inst.binding.attr_sets[v] = vb.attr_sets[v];
    } else if (vb.constants[v]) {
      inst.binding.operands[v] = b.constant(*vb.constants[v], var.name);
    } else {
      inst.binding.operands[v] = b.input(var.name, vb.types[v]);
      inputs.push_back(inst.binding.operands[v].node);
      inst.input_vars.push_back(static_cast<int>(v));
    }
  }
  std::vector<Value> src;
  try {
    src = build_side(rule, rule.source, inst.binding, b, nullptr, &inst.source_values);
  } catch (const std::exception& e) {
    throw side_error("source", e);
  }
  inst.binding.source_values = inst.source_values;
  std::string failed;
  if (!guards_hold(rule, inst.binding, &failed)) throw Error("guard '" + failed + "' does not hold");

  std::vector<bool> node_is_input(rule.target.nodes.size(), false);
  std::vector<NodePtr> target_inputs = inputs;
  FoldHook hook = [&](int node, const PatternNode& fold, GraphBuilder& gb,
                      const std::vector<std::vector<Value>>& built) -> std::optional<Value> {
    if (!reads_inputs(fold, inst, node_is_input)) return std::nullopt;
    // Its type: the fold run on ones of the inputs' shapes (folds check shapes, not values).
    BindingEnv env(inst.binding, &built);
    DType dtype = DType::Undefined;
    std::vector<Array<double>> done;
    TensorLeafFn<double> leaf = [&](const ExprRef& r, DType* dt) -> Array<double> {
      if (r.kind == ExprRef::Kind::TargetValue) {
        const Value& v = built.at(static_cast<size_t>(r.index)).at(r.output);
        if (dt) *dt = v.type().dtype;
        if (const Tensor* t = v.constant()) return array_of<double>(*t);
        return Array<double>(static_dims(v.type().shape), 1.0);
      }
      const Value& v = inst.binding.operands.at(static_cast<size_t>(r.index));
      if (dt) *dt = v.type().dtype;
      if (const Tensor* t = v.constant()) return array_of<double>(*t);
      return Array<double>(static_dims(v.type().shape), 1.0);
    };
    Array<double> shape = eval_tensor_fold<double>(fold.fold, env, leaf, &dtype);
    Value in = gb.input("fold:" + fold.label, TensorType{dtype, make_shape(shape.dims)});
    target_inputs.push_back(in.node);
    node_is_input[static_cast<size_t>(node)] = true;
    inst.fold_nodes.push_back(node);
    return in;
  };
  std::vector<Value> tgt;
  try {
    std::vector<std::vector<Value>> built;
    tgt = build_side(rule, rule.target, inst.binding, b, hook, &built);
    inst.target_values = std::move(built);
  } catch (const std::exception& e) {
    throw side_error("target", e);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < src.size(); ++i) names.push_back("out" + std::to_string(i));
  inst.source = Graph(inputs, src, names);
  inst.target = Graph(target_inputs, tgt, names);
  return inst;
}

template <class T>
std::vector<Array<T>> fold_inputs(const Rule& rule, const RuleInstance& inst, const std::vector<Array<T>>& inputs) {
  BindingEnv env(inst.binding, &inst.target_values);
  std::vector<Array<T>> node_values(rule.target.nodes.size());
  std::vector<Array<T>> out;
  for (int node : inst.fold_nodes) {
    TensorLeafFn<T> leaf = [&](const ExprRef& r, DType* dt) -> Array<T> {
      if (r.kind == ExprRef::Kind::TargetValue) {
        const Value& v = inst.target_values.at(static_cast<size_t>(r.index)).at(r.output);
        if (dt) *dt = v.type().dtype;
        if (std::find(inst.fold_nodes.begin(), inst.fold_nodes.end(), r.index) != inst.fold_nodes.end())
          return node_values[static_cast<size_t>(r.index)];
        if (const Tensor* t = v.constant()) return array_of<T>(*t);
        throw Error("fold reads a target value that is not a constant");
      }
      const Value& v = inst.binding.operands.at(static_cast<size_t>(r.index));
      if (dt) *dt = v.type().dtype;
      auto it = std::find(inst.input_vars.begin(), inst.input_vars.end(), r.index);
      if (it != inst.input_vars.end()) return inputs.at(static_cast<size_t>(it - inst.input_vars.begin()));
      if (const Tensor* t = v.constant()) return array_of<T>(*t);
      throw Error("fold reads %" + r.name + ", which is neither an input nor a constant");
    };
    node_values[static_cast<size_t>(node)] =
        eval_tensor_fold<T>(rule.target.nodes[static_cast<size_t>(node)].fold, env, leaf, nullptr);
    out.push_back(node_values[static_cast<size_t>(node)]);
  }
  return out;
}

template std::vector<Array<double>> fold_inputs<double>(const Rule&, const RuleInstance&,
                                                        const std::vector<Array<double>>&);
template std::vector<Array<Fp>> fold_inputs<Fp>(const Rule&, const RuleInstance&, const std::vector<Array<Fp>>&);
template std::vector<Array<Sym>> fold_inputs<Sym>(const Rule&, const RuleInstance&, const std::vector<Array<Sym>>&);

}  // namespace isomer
