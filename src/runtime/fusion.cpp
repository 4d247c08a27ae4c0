#include "runtime/fusion.h"

#include "kernels/pointwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

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

// The oneDNN eltwise algorithm of a unary pointwise instruction, if it has one.
std::optional<EltwiseSpec> unary_eltwise(const kernels::PwInstr& ins) {
  using kernels::PwOp;
  const float al = ins.alpha, be = ins.beta;
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
    case PwOp::Softplus: return EltwiseSpec{alg::eltwise_soft_relu, 0, 0};
    case PwOp::Mish: return EltwiseSpec{alg::eltwise_mish, 0, 0};
    default: return std::nullopt;
  }
}

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
  if (kernels::pw_arity(ins.op) == 1) {
    if (!is_x(ins.a)) return std::nullopt;
    return unary_eltwise(ins);
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

namespace {

std::optional<ActivationMatch> match_gelu(Compiler& c, const Value& x) {
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
    return ActivationMatch{{alg::eltwise_gelu_erf, 0, 0}, {d, e, a, m, h}, h->output(0)};
  }
  return std::nullopt;
}

// x * sigmoid(x) or x * sigmoid(a * x), the product in either operand order.
std::optional<ActivationMatch> match_swish(Compiler& c, const Value& x) {
  if (c.is_output(x)) return std::nullopt;
  const auto& cons = c.consumers(x);
  if (cons.size() != 2) return std::nullopt;
  for (int first = 0; first < 2; ++first) {
    const Node* s = cons[first].first;
    const Node* m = cons[1 - first].first;
    std::vector<const Node*> nodes;
    double a = 1.0;
    Value gate_in = x;
    if (s->op_type() == "Mul" && s->inputs().size() == 2 && s != m) {  // a * x first
      const auto& si = s->inputs();
      std::optional<double> k = si[0] == x ? scalar_of(c, si[1]) : si[1] == x ? scalar_of(c, si[0]) : std::nullopt;
      if (!k || c.is_output(s->output(0))) continue;
      a = *k;
      nodes.push_back(s);
      gate_in = s->output(0);
      s = c.sole_consumer(gate_in);
      if (!s) continue;
    }
    if (s->op_type() != "Sigmoid" || s->inputs().size() != 1 || s->inputs()[0] != gate_in) continue;
    if (c.sole_consumer(s->output(0)) != m || m->op_type() != "Mul" || m->inputs().size() != 2 ||
        m->output_types()[0].dtype != DType::Float32)
      continue;
    const auto& mi = m->inputs();
    if (!((mi[0] == x && mi[1] == s->output(0)) || (mi[1] == x && mi[0] == s->output(0)))) continue;
    nodes.push_back(s);
    nodes.push_back(m);
    return ActivationMatch{{alg::eltwise_swish, static_cast<float>(a), 0}, nodes, m->output(0)};
  }
  return std::nullopt;
}


// Any other single-input activation an exporter writes as several nodes (the tanh
// GELU of GPT-2, halved first or last; SiLU or the erf GELU in an order
// match_gelu does not know): the elementwise nodes that read only x, each other
// and scalar constants, as one pointwise program that kernels::specialize
// reduces to one instruction oneDNN has as an eltwise algorithm. The longest such
// chain from x wins; every node in it but the last is read only inside it.
std::optional<ActivationMatch> match_specialized(Compiler& c, const Value& x) {
  constexpr size_t kMaxNodes = 12;
  if (c.is_output(x) || x.type().dtype != DType::Float32 || !is_static(x.type().shape)) return std::nullopt;
  const std::vector<int64_t> xd = static_dims(x.type().shape);
  // The candidates in topological order: a node joins once every input is x, a
  // candidate's output or a scalar constant.
  std::vector<const Node*> cand;
  std::unordered_set<Value, ValueHash> inside = {x};
  std::vector<Value> frontier = {x};
  while (!frontier.empty() && cand.size() < kMaxNodes) {
    std::vector<Value> next;
    for (const Value& v : frontier)
      for (const auto& [m, k] : c.consumers(v)) {
        if (cand.size() >= kMaxNodes) break;
        if (std::find(cand.begin(), cand.end(), m) != cand.end() || c.lowered(*m) || c.is_pending(*m) ||
            m->kind() != NodeKind::Op ||
            !m->op()->emit_pointwise || m->num_outputs() != 1 || m->output_types()[0].dtype != DType::Float32 ||
            !is_static(m->output_types()[0].shape) || static_dims(m->output_types()[0].shape) != xd)
          continue;
        bool ready = true;
        for (const Value& in : m->inputs()) {
          if (!in.present() || inside.count(in)) continue;
          const Tensor* t = c.peek_known(in);
          ready = ready && t && t->numel() == 1 && is_float(t->dtype()) && static_cast<size_t>(t->rank()) <= xd.size();
        }
        if (!ready) continue;
        cand.push_back(m);
        inside.insert(m->output(0));
        next.push_back(m->output(0));
      }
    frontier = std::move(next);
  }
  if (cand.size() < 2) return std::nullopt;
  std::optional<ActivationMatch> best;
  for (size_t last = 1; last < cand.size(); ++last) {
    // The nodes `last` needs, from its inputs back.
    std::vector<bool> need(cand.size(), false);
    need[last] = true;
    for (size_t i = last + 1; i-- > 0;)
      if (need[i])
        for (const Value& in : cand[i]->inputs())
          for (size_t j = 0; j < i; ++j)
            if (in.present() && cand[j]->output(0) == in) need[j] = true;
    std::vector<const Node*> nodes;
    for (size_t i = 0; i <= last; ++i)
      if (need[i]) nodes.push_back(cand[i]);
    auto member = [&](const Node* n) { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); };
    bool closed = true;
    for (const auto& [m, k] : c.consumers(x)) closed = closed && member(m);
    for (size_t i = 0; closed && i + 1 < nodes.size(); ++i) {
      closed = !c.is_output(nodes[i]->output(0));
      for (const auto& [m, k] : c.consumers(nodes[i]->output(0))) closed = closed && member(m);
    }
    if (!closed) continue;
    // The program: x in register 0, then the scalar constants, then the nodes.
    kernels::PwProgram p;
    std::unordered_map<Value, int, ValueHash> reg = {{x, 0}};
    std::vector<std::optional<float>> known = {std::nullopt};
    for (const Node* n : nodes)
      for (const Value& in : n->inputs())
        if (in.present() && !inside.count(in) && !reg.count(in)) {
          reg[in] = static_cast<int>(known.size());
          known.push_back(static_cast<float>(c.peek_known(in)->f64_at(0)));
        }
    p.num_inputs = p.num_regs = static_cast<int>(known.size());
    bool ok = true;
    for (const Node* n : nodes) {
      std::vector<int> r;
      std::vector<const Tensor*> consts;
      for (const Value& in : n->inputs()) {
        r.push_back(in.present() ? reg.at(in) : -1);
        consts.push_back(in.present() && !inside.count(in) ? c.peek_known(in) : nullptr);
      }
      const int out = n->op()->emit_pointwise(p, n->attrs(), r, consts);
      if (out < 0) {
        ok = false;
        break;
      }
      reg[n->output(0)] = out;
    }
    if (!ok) continue;
    p.results = {reg.at(nodes.back()->output(0))};
    const kernels::SpecializedProgram sp = kernels::specialize(p, known);
    const kernels::PwProgram& q = sp.program;
    if (q.code.size() != 1 || q.num_inputs != 1 || sp.operands != std::vector<int>{0} ||
        kernels::pw_arity(q.code[0].op) != 1 || q.code[0].a != 0)
      continue;
    if (auto e = unary_eltwise(q.code[0])) best = ActivationMatch{*e, nodes, nodes.back()->output(0)};
  }
  return best;
}
}  // namespace

std::optional<ActivationMatch> match_activation(Compiler& c, const Value& x) {
  // Only nodes no other kernel has lowered or claimed (see Compiler::set_pending).
  auto free = [&](std::optional<ActivationMatch> m) {
    if (m)
      for (const Node* n : m->nodes)
        if (c.lowered(*n) || c.is_pending(*n)) return std::optional<ActivationMatch>();
    return m;
  };
  if (auto g = free(match_gelu(c, x))) return g;
  if (auto g = free(match_swish(c, x))) return g;
  return match_specialized(c, x);
}

namespace {

// The oneDNN binary algorithm node `n` applies to x and one other operand that
// broadcasts to dims, and that operand: from the entry's pointwise form.
std::optional<std::pair<alg, Value>> binary_of(Compiler& c, const Node& n, const Value& x, const std::vector<int64_t>& dims,
                                               bool full) {
  if (n.kind() != NodeKind::Op || !n.op()->emit_pointwise || n.num_outputs() != 1 || n.inputs().size() != 2 ||
      n.output_types()[0].dtype != DType::Float32)
    return std::nullopt;
  const Value& a = n.inputs()[0];
  const Value& b = n.inputs()[1];
  if (a == b || (a != x && b != x)) return std::nullopt;
  const Value& other = a == x ? b : a;
  if (!other.present() || c.depends_on_pending(other) || c.dtype(other) != DType::Float32) return std::nullopt;
  const std::vector<int64_t>& od = c.dims(other);
  if (od.size() > dims.size()) return std::nullopt;
  for (size_t i = 0; i < od.size(); ++i)
    if (od[i] != 1 && od[i] != dims[dims.size() - od.size() + i]) return std::nullopt;
  if (!full && num_elements(od) == num_elements(dims)) return std::nullopt;
  kernels::PwProgram p;
  p.num_inputs = p.num_regs = 2;
  std::vector<int> regs = {0, 1};
  std::vector<const Tensor*> consts = {nullptr, nullptr};
  if (n.op()->emit_pointwise(p, n.attrs(), regs, consts) < 0 || p.code.size() != 1) return std::nullopt;
  const kernels::PwInstr& ins = p.code[0];
  const bool x_first = a == x;
  if (ins.a != 0 || ins.b != 1) return std::nullopt;
  using kernels::PwOp;
  switch (ins.op) {
    case PwOp::Add: return std::pair{alg::binary_add, other};
    case PwOp::Mul: return std::pair{alg::binary_mul, other};
    case PwOp::Max: return std::pair{alg::binary_max, other};
    case PwOp::Min: return std::pair{alg::binary_min, other};
    case PwOp::Sub: return x_first ? std::optional(std::pair{alg::binary_sub, other}) : std::nullopt;
    case PwOp::Div: return x_first ? std::optional(std::pair{alg::binary_div, other}) : std::nullopt;
    default: return std::nullopt;
  }
}

}  // namespace

Fusion plan_fusion(Compiler& c, const Value& v, const std::vector<int64_t>& dims, bool allow_add, bool full_binary) {
  Fusion f;
  f.first = f.last = v;
  if (!c.opts().fuse) return f;
  bool added = false;
  for (;;) {
    Value cur = f.last;
    if (auto g = match_activation(c, cur)) {
      PostOp p;
      p.eltwise = g->spec;
      p.nodes = g->nodes;
      p.out = g->out;
      f.ops.push_back(p);
      f.nodes.insert(f.nodes.end(), g->nodes.begin(), g->nodes.end());
      f.last = g->out;
      continue;
    }
    const Node* n = c.sole_consumer(cur);
    // A node another kernel has claimed while planning (see Compiler::set_pending)
    // is that kernel's: taking it would leave its value unbound.
    if (!n || c.lowered(*n) || c.is_pending(*n) || n->num_outputs() != 1 ||
        n->output_types()[0].dtype != DType::Float32)
      break;
    PostOp p;
    p.nodes = {n};
    p.out = n->output(0);
    if (auto e = eltwise_of(c, *n, cur, dims.size())) {
      p.eltwise = e;
    } else if (allow_add && !added && !f.has_binary() && n->op_type() == "Add" && n->inputs().size() == 2 &&
               n->inputs()[0] != n->inputs()[1] && !c.depends_on_pending(n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0]) &&
               c.dims(n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0]) == dims &&
               c.dtype(n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0]) == DType::Float32 &&
               !c.peek_known(n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0])) {
      p.addend = n->inputs()[0] == cur ? n->inputs()[1] : n->inputs()[0];
      added = true;
    } else if (auto b = allow_add ? binary_of(c, *n, cur, dims, full_binary) : std::nullopt) {
      p.binary = b->first;
      p.other = b->second;
    } else {
      break;
    }
    f.ops.push_back(p);
    f.nodes.push_back(n);
    f.last = n->output(0);
  }
  f.drop_repeated_eltwise();
  return f;
}

bool Fusion::drop_binary() {
  size_t k = 0;
  while (k < ops.size() && !ops[k].binary) ++k;
  if (k == ops.size()) return false;
  drop_from(k);
  return true;
}

bool Fusion::drop_full_binary(int64_t numel, Compiler& c) {
  size_t k = 0;
  while (k < ops.size() && !(ops[k].binary && !ops[k].other_const && num_elements(c.dims(ops[k].other)) == numel)) ++k;
  if (k == ops.size()) return false;
  while (k > 0 && ops[k - 1].eltwise && !ops[k - 1].nodes.empty()) --k;
  drop_from(k);
  return true;
}

bool Fusion::drop_repeated_eltwise() {
  for (size_t k = 1; k < ops.size(); ++k) {
    if (!ops[k].eltwise) continue;
    const EltwiseSpec& e = *ops[k].eltwise;
    for (size_t j = 0; j < k; ++j) {
      const std::optional<EltwiseSpec>& d = ops[j].eltwise;
      if (d && d->alg == e.alg && (d->alpha != e.alpha || d->beta != e.beta)) {
        drop_from(k);
        return true;
      }
    }
  }
  return false;
}

void Fusion::drop_from(size_t k) {
  for (size_t j = k; j < ops.size(); ++j)
    for (const Node* n : ops[j].nodes) nodes.erase(std::find(nodes.begin(), nodes.end(), n));
  ops.resize(k);
  last = k ? ops[k - 1].out : first;
}

dnnl::primitive_attr probe_attr(Compiler& c, const Fusion& f, size_t rank, size_t prim_rank, bool with_sum) {
  if (!prim_rank) prim_rank = rank;
  dnnl::post_ops po;
  for (const PostOp& p : f.ops) {
    if (p.eltwise) {
      po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
    } else if (p.binary) {
      std::vector<int64_t> d = p.other_const ? p.other_const->dims() : c.dims(p.other);
      while (d.size() < rank) d.insert(d.begin(), 1);
      while (d.size() > prim_rank) {
        d[1] *= d[0];
        d.erase(d.begin());
      }
      po.append_binary(*p.binary, plain_md(d, dt::f32));
    } else if (with_sum) {
      po.append_sum(1.f);  // oneDNN's jit kernels take a sum only as the first post-op
    }
  }
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
  // A binary post-op of the same primitive that reads the addend must see it as it was.
  for (const PostOp& p : f.ops) others_done = others_done && !(p.binary && p.other == addend);
  others_done = others_done &&
                c.all_read(addend, [&](const Node* n) { return std::find(f.nodes.begin(), f.nodes.end(), n) != f.nodes.end(); });
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

dnnl::primitive_attr fusion_attr(Compiler& c, const Fusion& f, const md_t& dst, int& accumulate, std::string& sig,
                                 std::vector<std::pair<int, int>>& args, const std::vector<int64_t>& prim_dims) {
  dnnl::post_ops po;
  accumulate = -1;
  const auto rank = static_cast<size_t>(dst.data.ndims);
  const size_t prim_rank = prim_dims.empty() ? rank : prim_dims.size();
  for (const PostOp& p : f.ops) {
    if (p.eltwise) {
      po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
      sig += " +" + p.eltwise->text();
    } else if (p.binary) {
      // The operand as a plain tensor of dst's rank (leading 1s).
      int id = p.other_const ? c.constant_value(*p.other_const, "post-op") : c.as_plain(c.id(p.other));
      std::vector<int64_t> d = c.val(id).dims;
      while (d.size() < rank) d.insert(d.begin(), 1);
      while (d.size() > prim_rank) {
        d[1] *= d[0];
        d.erase(d.begin());
      }
      if (d != c.val(id).dims) {
        id = c.alias(id, d, plain_md(d, dt::f32), c.val(id).name);
        c.val(id).step_local = true;
      }
      args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(po.len()) | DNNL_ARG_SRC_1, id});
      po.append_binary(*p.binary, plain_md(d, dt::f32));
      sig += " +bin" + std::to_string(static_cast<int>(*p.binary)) + to_string(d);
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
