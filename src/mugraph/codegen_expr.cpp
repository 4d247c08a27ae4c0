#include "mugraph/codegen_expr.h"

#include <cmath>
#include <algorithm>
#include <cstdio>

#include "ir/error.h"

namespace isomer::mugraph {

std::string float_literal(double v) {
  if (v == INFINITY) return "INFINITY";
  if (v == -INFINITY) return "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return std::string("(") + buf + ")";
}

std::string ExprWriter::idx(int atom) const { return atom == lane_atom_ ? lane_expr_ : "i" + std::to_string(atom); }

std::string ExprWriter::offset(const Access& a, const std::vector<int>& atoms) const {
  std::string s;
  for (int at : atoms) {
    auto it = a.stride.find(at);
    if (it == a.stride.end() || it->second == 0) continue;
    if (!s.empty()) s += " + ";
    s += idx(at) + (it->second == 1 ? "" : " * " + std::to_string(it->second));
  }
  return s.empty() ? "0" : s;
}

std::string ExprWriter::offset_lane(const Access& a, const std::vector<int>& atoms, int atom, const std::string& lane) {
  set_lane(atom, lane);
  std::string o = offset(a, atoms);
  clear_lane();
  return o;
}

std::string ExprWriter::at(int i) const {
  if (auto h = hoisted.find(i); h != hoisted.end()) return h->second;
  const Access& a = k_.acc[i];
  const BOp& op = k_.g->ops[i];
  switch (a.where) {
    case Access::Where::Const: return float_literal(op.value);
    case Access::Where::Inline: return expr(i);
    default: {
      std::string e = a.base + "[" + offset(a, op.axes) + "]";
      if (a.is_bool) return "(" + e + " != 0)";
      return e;
    }
  }
}

std::optional<std::string> ExprWriter::reciprocal(int d) const {
  // By a constant or a hoisted operand: a multiplication by its reciprocal (a
  // division costs several multiplications' time; the result is within an ulp).
  if (auto q = recips.find(d); q != recips.end()) return q->second;
  const BOp& dv = k_.g->ops[d];
  if (k_.acc[d].where == Access::Where::Const && dv.value != 0 && std::isfinite(dv.value))
    return float_literal(1.0 / static_cast<double>(static_cast<float>(dv.value)));
  return std::nullopt;
}

int ExprWriter::gelu_of(int i) const {
  const std::vector<BOp>& ops = k_.g->ops;
  auto is = [&](int y, Op o) {
    return ops[y].kind == BKind::Elementwise && ops[y].op == o && ops[y].args.size() == (o == Op::Erf ? 1u : 2u);
  };
  auto inner = [&](int y) { return k_.acc[y].where == Access::Where::Inline && !hoisted.count(y); };
  auto is_const = [&](int y, double v) {
    return k_.acc[y].where == Access::Where::Const && std::abs(ops[y].value - v) <= 1e-6 * v;
  };
  // The other operand of a binary op one of whose operands is the constant v; -1 if none.
  auto times = [&](int y, double v) {
    for (int q = 0; q < 2; ++q)
      if (is_const(ops[y].args[q], v)) return ops[y].args[1 - q];
    return -1;
  };
  if (!is(i, Op::Mul)) return -1;
  const int m = times(i, 0.5);
  if (m < 0 || !inner(m) || !is(m, Op::Mul)) return -1;
  for (int q = 0; q < 2; ++q) {
    const int x = ops[m].args[q], a = ops[m].args[1 - q];
    if (!inner(a) || !is(a, Op::Add)) continue;
    const int e = times(a, 1.0);
    if (e < 0 || !inner(e) || !is(e, Op::Erf)) continue;
    const int d = ops[e].args[0];
    if (!inner(d)) continue;
    if ((is(d, Op::Mul) && times(d, M_SQRT1_2) == x) ||
        (is(d, Op::Div) && ops[d].args[0] == x && is_const(ops[d].args[1], M_SQRT2)))
      return x;
  }
  return -1;
}

std::string ExprWriter::expr(int i) const {
  const BOp& op = k_.g->ops[i];
  if (int x = gelu_of(i); x >= 0) return "mg_gelu_erf(" + at(x) + ")";
  auto arg = [&](size_t k) { return at(op.args[k]); };
  switch (op.op) {
    case Op::Add: return "(" + arg(0) + " + " + arg(1) + ")";
    case Op::Sub: return "(" + arg(0) + " - " + arg(1) + ")";
    case Op::Mul: return "(" + arg(0) + " * " + arg(1) + ")";
    case Op::Div:
      if (auto r = reciprocal(op.args[1])) return "(" + arg(0) + " * " + *r + ")";
      return "(" + arg(0) + " / " + arg(1) + ")";
    case Op::Max: return "std::fmax(" + arg(0) + ", " + arg(1) + ")";
    case Op::Min: return "std::fmin(" + arg(0) + ", " + arg(1) + ")";
    case Op::Where: return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
    case Op::Neg: return "(-" + arg(0) + ")";
    case Op::Exp: return "mg_exp(" + arg(0) + ")";
    case Op::Sqrt: return "std::sqrt(" + arg(0) + ")";
    case Op::Erf: return "mg_erf(" + arg(0) + ")";
    case Op::Tanh: return "mg_tanh(" + arg(0) + ")";
    case Op::Sigmoid: return "mg_sigmoid(" + arg(0) + ")";
    case Op::Relu: return "std::fmax(" + arg(0) + ", 0.0f)";
    case Op::Log: return "vm::log(" + arg(0) + ")";
    default: throw Error("μGraph codegen: not an elementwise op");
  }
}

std::string ExprWriter::vat(int y, const std::vector<int>& inv) const {
  if (std::find(inv.begin(), inv.end(), y) != inv.end()) return "mgv::splat(" + hoisted.at(y) + ")";
  const Access& a = k_.acc[y];
  if (a.where == Access::Where::Const) return "mgv::splat(" + float_literal(k_.g->ops[y].value) + ")";
  if (a.where == Access::Where::Inline) return vexpr(y, inv);
  return "mgv::load(" + a.base + " + " + offset(a, k_.g->ops[y].axes) + ")";
}

std::string ExprWriter::vexpr(int i, const std::vector<int>& inv) const {
  const BOp& op = k_.g->ops[i];
  if (int x = gelu_of(i); x >= 0) return "mg_gelu_erfv(" + vat(x, inv) + ")";
  auto arg = [&](size_t k) { return vat(op.args[k], inv); };
  switch (op.op) {
    case Op::Add: return "(" + arg(0) + " + " + arg(1) + ")";
    case Op::Sub: return "(" + arg(0) + " - " + arg(1) + ")";
    case Op::Mul: return "(" + arg(0) + " * " + arg(1) + ")";
    case Op::Div:
      if (auto r = reciprocal(op.args[1])) return "(" + arg(0) + " * mgv::splat(" + *r + "))";
      return "(" + arg(0) + " / " + arg(1) + ")";
    case Op::Neg: return "(-" + arg(0) + ")";
    case Op::Exp: return "mgv::exp(" + arg(0) + ")";
    case Op::Erf: return "mg_erfv(" + arg(0) + ")";
    case Op::Tanh: return "mgv::tanh(" + arg(0) + ")";
    case Op::Sigmoid: return "mgv::sigmoid(" + arg(0) + ")";
    default: throw Error("μGraph codegen: not a vector op");
  }
}

}  // namespace isomer::mugraph
