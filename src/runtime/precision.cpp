#include "runtime/precision.h"

#include <unordered_map>

#include "runtime/shared_derived.h"

namespace isomer::runtime {

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

Tensor to_float(const Tensor& t) { return Tensor::from_f64(DType::Float32, t.dims(), t.to_f64()); }

Attributes cast_to(DType t) {
  Attributes a;
  a.set("to", static_cast<int64_t>(t));
  return a;
}

}  // namespace

bool has_half_values(const Graph& g) {
  for (const NodePtr& n : g.topo_order())
    for (const TensorType& t : n->output_types())
      if (is_half(t.dtype)) return true;
  return false;
}

Graph promote_half_to_float(const Graph& g, std::vector<std::shared_ptr<const void>>* keep) {
  if (!has_half_values(g)) return g;
  const std::vector<NodePtr> order = g.topo_order();
  for (const NodePtr& n : order)
    if (n->kind() == NodeKind::Opaque) return g;
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<Value, Value, ValueHash> now;
  // The half value each widening Cast made here reads: an output that wants that
  // half type back is the half value itself, not a second rounding of its widening.
  std::unordered_map<Value, Value, ValueHash> widened_from;
  auto widen = [&](const Value& h, const std::string& name) {
    Value f = b.op1("Cast", {h}, cast_to(DType::Float32), name);
    widened_from[f] = h;
    return f;
  };
  for (const NodePtr& in : g.inputs()) {
    const TensorType& t = in->output_types()[0];
    Value v = b.input(in->name(), t);
    now[in->output(0)] = is_half(t.dtype) ? widen(v, in->name() + "/to_float") : v;
  }
  for (const NodePtr& n : order) {
    if (n->kind() == NodeKind::Input) continue;
    if (n->kind() == NodeKind::Constant) {
      const Tensor& t = *n->value();
      if (!is_half(t.dtype())) {
        now[n->output(0)] = b.constant(t, n->name());
        continue;
      }
      auto widened = shared_derived<Tensor>(t, "float32", [&] { return to_float(t); });
      if (keep) keep->push_back(widened);
      now[n->output(0)] = b.constant(*widened, n->name());
      continue;
    }
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) ins.push_back(v.present() ? now.at(v) : v);
    Attributes attrs = n->attrs();
    const std::string& op = n->op_type();
    if (op == "Cast" && is_half(static_cast<DType>(attrs.get_int("to")))) {
      // Rounded to half as written, then computed on in float32.
      Value h = b.op1("Cast", ins, attrs, n->name());
      now[n->output(0)] = widen(h, n->name() + "/to_float");
      continue;
    }
    if (op == "Cast" && ins[0].type().dtype == static_cast<DType>(attrs.get_int("to"))) {
      now[n->output(0)] = ins[0];  // a Cast of a half value to float32, which it now is
      continue;
    }
    if (op == "ConstantOfShape" && attrs.has("value") && is_half(attrs.get_tensor("value").dtype()))
      attrs.set("value", to_float(attrs.get_tensor("value")));
    std::vector<Value> outs = b.op(op, ins, attrs, n->num_outputs(), n->name());
    for (size_t k = 0; k < outs.size(); ++k) {
      Value v = outs[k];
      // An operator whose output type is its own to choose (a dtype attribute) and
      // still half: computed in half as written, then widened.
      if (is_half(v.type().dtype)) v = widen(v, n->name() + "/to_float");
      now[n->output(static_cast<uint32_t>(k))] = v;
    }
  }
  std::vector<Value> outputs;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value& o = g.outputs()[i];
    Value v = now.at(o);
    const DType want = o.type().dtype;
    auto half = widened_from.find(v);
    if (half != widened_from.end() && half->second.type().dtype == want) outputs.push_back(half->second);
    else outputs.push_back(is_half(want) ? b.op1("Cast", {v}, cast_to(want), g.output_names()[i] + "/to_half") : v);
  }
  return b.finish(outputs, g.output_names(), g.info());
}

}  // namespace isomer::runtime
