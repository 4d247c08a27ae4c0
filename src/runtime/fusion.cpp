#include "runtime/fusion.h"

#include "kernels/pointwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace isomer::runtime {

std::string EltwiseSpec::text() const {
  std::ostringstream s;
  s << "elt" << static_cast<int>(alg) << "(" << alpha << "," << beta << ")";
  return s.str();
}

namespace {

using alg = dnnl::algorithm;

std::optional<double> scalar_of(Compiler& c, const Value& v) {
  if (!v.present()) return std::nullopt;
  const Tensor* t = c.peek_known(v);
  if (!t || t->numel() != 1 || !is_numeric(t->dtype())) return std::nullopt;
  return t->f64_at(0);
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::fabs(b); }

}  // namespace

std::optional<EltwiseSpec> eltwise_of(Compiler& c, const Node& n, const Value& x, size_t x_rank) {
  if (n.kind() != NodeKind::Op || !n.op()->emit_pointwise || n.num_outputs() != 1 ||
      n.output_types()[0].dtype != DType::Float32)
    return std::nullopt;
  // The node's pointwise form with x in register 0 and every other input a
  // scalar constant; one instruction of it maps to a oneDNN eltwise algorithm.
  const auto& in = n.inputs();
  kernels::PwProgram p;
  p.num_inputs = p.num_regs = static_cast<int>(in.size());
  std::vector<int> regs;
  std::vector<const Tensor*> consts;
  std::vector<std::optional<float>> scalar(in.size());
  bool reads_x = false;
  for (size_t i = 0; i < in.size(); ++i) {
    regs.push_back(in[i].present() ? static_cast<int>(i) : -1);
    consts.push_back(nullptr);
    if (!in[i].present()) continue;
    if (in[i] == x) {
      reads_x = true;
      continue;
    }
    const Tensor* t = c.peek_known(in[i]);
    if (!t || t->numel() != 1 || !is_numeric(t->dtype()) || static_cast<size_t>(t->rank()) > x_rank) return std::nullopt;
    consts.back() = t;
    scalar[i] = static_cast<float>(t->f64_at(0));
  }
  if (!reads_x || n.op()->emit_pointwise(p, n.attrs(), regs, consts) < 0 || p.code.size() != 1) return std::nullopt;
  const kernels::PwInstr& ins = p.code[0];
  auto is_x = [&](int r) { return r < static_cast<int>(in.size()) && in[static_cast<size_t>(r)] == x; };
  auto konst = [&](int r) -> std::optional<float> {
    return r < static_cast<int>(in.size()) ? scalar[static_cast<size_t>(r)] : std::nullopt;
  };
  using kernels::PwOp;
  const float al = ins.alpha, be = ins.beta;
  if (kernels::pw_arity(ins.op) == 1) {
    if (!is_x(ins.a)) return std::nullopt;
    switch (ins.op) {
      case PwOp::Relu: return EltwiseSpec{alg::eltwise_relu, 0, 0};
      case PwOp::LeakyRelu: return EltwiseSpec{alg::eltwise_relu, al, 0};
      case PwOp::Sigmoid: return EltwiseSpec{alg::eltwise_logistic, 0, 0};
      case PwOp::Tanh: return EltwiseSpec{alg::eltwise_tanh, 0, 0};
      case PwOp::GeluErf: return EltwiseSpec{alg::eltwise_gelu_erf, 0, 0};
      case PwOp::GeluTanh: return EltwiseSpec{alg::eltwise_gelu_tanh, 0, 0};
      case PwOp::Exp: return EltwiseSpec{alg::eltwise_exp, 0, 0};
      case PwOp::Log: return EltwiseSpec{alg::eltwise_log, 0, 0};
      case PwOp::Sqrt: return EltwiseSpec{alg::eltwise_sqrt, 0, 0};
      case PwOp::Abs: return EltwiseSpec{alg::eltwise_abs, 0, 0};
      case PwOp::Neg: return EltwiseSpec{alg::eltwise_linear, -1, 0};
      case PwOp::Reciprocal: return EltwiseSpec{alg::eltwise_pow, 1, -1};
      case PwOp::Rsqrt: return EltwiseSpec{alg::eltwise_pow, 1, -0.5f};
      case PwOp::Square: return EltwiseSpec{alg::eltwise_square, 0, 0};
      case PwOp::PowConst: return EltwiseSpec{alg::eltwise_pow, 1, al};
      case PwOp::HardSwish: return EltwiseSpec{alg::eltwise_hardswish, 0, 0};
      case PwOp::Clip: return EltwiseSpec{alg::eltwise_clip_v2, al, be};
      case PwOp::Affine: return EltwiseSpec{alg::eltwise_linear, al, be};
      case PwOp::Silu: return EltwiseSpec{alg::eltwise_swish, 1, 0};
      case PwOp::Elu: return EltwiseSpec{alg::eltwise_elu, al, 0};
      default: return std::nullopt;
    }
  }
  if (kernels::pw_arity(ins.op) != 2) return std::nullopt;
  if (is_x(ins.a) && is_x(ins.b)) {
    if (ins.op == PwOp::Mul) return EltwiseSpec{alg::eltwise_square, 0, 0};
    return std::nullopt;
  }
  const bool x_first = is_x(ins.a);
  auto k = konst(x_first ? ins.b : ins.a);
  if (!k || !(x_first || is_x(ins.b))) return std::nullopt;
  switch (ins.op) {
    case PwOp::Add: return EltwiseSpec{alg::eltwise_linear, 1, *k};
    case PwOp::Mul: return EltwiseSpec{alg::eltwise_linear, *k, 0};
    case PwOp::Sub: return x_first ? EltwiseSpec{alg::eltwise_linear, 1, -*k} : EltwiseSpec{alg::eltwise_linear, -1, *k};
    case PwOp::Div:
      if (x_first && *k != 0) return EltwiseSpec{alg::eltwise_linear, 1 / *k, 0};
      return std::nullopt;
    case PwOp::Pow:
      if (x_first) return EltwiseSpec{alg::eltwise_pow, 1, *k};
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<GeluMatch> match_gelu(Compiler& c, const Value& x) {
  if (c.is_output(x)) return std::nullopt;
  const auto& cons = c.consumers(x);
  if (cons.size() != 2) return std::nullopt;
  auto binary_with = [&](const Node* n, const std::string& op, const Value& v) -> std::optional<double> {
    if (!n || n->op_type() != op || n->inputs().size() != 2) return std::nullopt;
    if (n->inputs()[0] == v) return scalar_of(c, n->inputs()[1]);
    if (n->inputs()[1] == v && op != "Div") return scalar_of(c, n->inputs()[0]);
    return std::nullopt;
  };
  for (int first = 0; first < 2; ++first) {
    const Node* d = cons[first].first;
    const Node* m = cons[1 - first].first;
    auto dk = binary_with(d, "Div", x);
    auto mk = binary_with(d, "Mul", x);
    if (!((dk && near(*dk, std::sqrt(2.0))) || (mk && near(*mk, std::sqrt(0.5))))) continue;
    const Node* e = c.sole_consumer(d->output(0));
    if (!e || e->op_type() != "Erf") continue;
    const Node* a = c.sole_consumer(e->output(0));
    auto one = binary_with(a, "Add", e->output(0));
    if (!one || *one != 1.0) continue;
    // m = x * (1 + erf(..)), then * 0.5.
    if (c.sole_consumer(a->output(0)) != m || m->op_type() != "Mul") continue;
    const auto& mi = m->inputs();
    if (!((mi[0] == x && mi[1] == a->output(0)) || (mi[1] == x && mi[0] == a->output(0)))) continue;
    const Node* h = c.sole_consumer(m->output(0));
    auto half = binary_with(h, "Mul", m->output(0));
    if (!half || *half != 0.5) continue;
    return GeluMatch{{d, e, a, m, h}, h->output(0)};
  }
  return std::nullopt;
}

Fusion plan_fusion(Compiler& c, const Value& v, const std::vector<int64_t>& dims, bool allow_add) {
  Fusion f;
  f.last = v;
  if (!c.opts().fuse) return f;
  bool added = false;
  for (;;) {
    Value cur = f.last;
    if (auto g = match_gelu(c, cur)) {
      f.ops.push_back({EltwiseSpec{alg::eltwise_gelu_erf, 0, 0}, Value()});
      f.nodes.insert(f.nodes.end(), g->nodes.begin(), g->nodes.end());
      f.last = g->out;
      continue;
    }
    const Node* n = c.sole_consumer(cur);
    if (!n || c.lowered(*n) || n->num_outputs() != 1 || n->output_types()[0].dtype != DType::Float32) break;
    if (auto e = eltwise_of(c, *n, cur, dims.size())) {
      f.ops.push_back({*e, Value()});
      f.nodes.push_back(n);
      f.last = n->output(0);
      continue;
    }
    if (allow_add && !added && n->op_type() == "Add" && n->inputs().size() == 2 &&
        n->inputs()[0] != n->inputs()[1]) {
      const Value& other = n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0];
      if (!c.depends_on_pending(other) && c.dims(other) == dims && c.dtype(other) == DType::Float32) {
        f.ops.push_back({std::nullopt, other});
        f.nodes.push_back(n);
        f.last = n->output(0);
        added = true;
        continue;
      }
    }
    break;
  }
  return f;
}

dnnl::primitive_attr eltwise_attr(const Fusion& f) {
  dnnl::post_ops po;
  for (const PostOp& p : f.ops)
    if (p.eltwise) po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

namespace {

// A buffer holding `addend` in layout `md` that the fused primitive may overwrite.
int accumulator(Compiler& c, const Fusion& f, const Value& addend, const md_t& md) {
  int id = c.id(addend);
  int a = c.as_layout(id, md);
  const RtValue& v = c.val(a);
  bool others_done = !c.is_output(addend);
  for (const auto& [n, k] : c.consumers(addend))
    others_done = others_done && (c.lowered(*n) || std::find(f.nodes.begin(), f.nodes.end(), n) != f.nodes.end());
  int root = v.alias_of >= 0 ? v.alias_of : a;
  const RtValue& r = c.val(root);
  if (others_done && (v.alias_of < 0 || v.accumulated) && !r.known && !r.storage && !c.is_input(root) &&
      !c.has_views(root)) {
    if (a != id) c.forget_layout(id, md);  // later consumers get their own reorder
    return a;
  }
  return c.copy_of(a);
}

}  // namespace

dnnl::primitive_attr fusion_attr(Compiler& c, const Fusion& f, const md_t& dst, int& accumulate, std::string& sig) {
  dnnl::post_ops po;
  accumulate = -1;
  for (const PostOp& p : f.ops) {
    if (p.eltwise) {
      po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
      sig += " +" + p.eltwise->text();
    } else {
      accumulate = accumulator(c, f, p.addend, dst);
      po.append_sum(1.f);
      sig += " +sum";
    }
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

void finish_fusion(Compiler& c, const Fusion& f, int dst) {
  c.bind(f.last, dst);
  for (const Node* n : f.nodes) c.mark_done(*n);
}

std::vector<std::string> fusion_ops(const std::string& head, const std::vector<const Node*>& extra, const Fusion& f) {
  std::vector<std::string> ops{head};
  for (const Node* n : extra) ops.push_back(n->op_type());
  for (const Node* n : f.nodes) ops.push_back(n->op_type());
  return ops;
}

std::vector<std::string> fusion_nodes(const Node& head, const Fusion& f) {
  std::vector<std::string> keys{node_key(head)};
  for (const Node* n : f.nodes) keys.push_back(node_key(*n));
  return keys;
}

}  // namespace isomer::runtime
