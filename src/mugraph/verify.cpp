#include "mugraph/verify.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "ir/error.h"
#include "mugraph/interpreter.h"

namespace isomer::mugraph {

namespace {

// Degree bound of a rational function: numerator and denominator degrees.
struct Deg {
  int64_t n = 0, d = 0;
};
constexpr int64_t kDegCap = int64_t{1} << 50;
int64_t cap(int64_t v) { return std::min(v, kDegCap); }
Deg add(Deg a, Deg b) { return {cap(std::max(a.n + b.d, b.n + a.d)), cap(a.d + b.d)}; }
Deg mul(Deg a, Deg b) { return {cap(a.n + b.n), cap(a.d + b.d)}; }
Deg divide(Deg a, Deg b) { return {cap(a.n + b.d), cap(a.d + b.n)}; }
Deg sum_of(Deg a, int64_t k) {
  if (k <= 1) return a;
  return {cap(a.n + (k - 1) * a.d), cap(k * a.d)};
}
Deg elementwise_deg(Op op, const std::vector<Deg>& a) {
  switch (op) {
    case Op::Add:
    case Op::Sub: return add(a[0], a[1]);
    case Op::Mul: return mul(a[0], a[1]);
    case Op::Div: return divide(a[0], a[1]);
    case Op::Neg: return a[0];
    case Op::Where: return {std::max(a[1].n, a[2].n), std::max(a[1].d, a[2].d)};
    case Op::Sigmoid: return {0, 1};  // 1 / (1 + exp(-x)), exp(-x) one variable
    default: return {1, 0};           // exp and uninterpreted functions: one variable each
  }
}

int64_t extent_product(const Program& p, const std::vector<int>& atoms) {
  int64_t k = 1;
  for (int a : atoms) k = cap(k * p.extent(a));
  return k;
}

std::vector<Deg> program_degrees(const Program& p) {
  std::vector<Deg> d(p.stmts.size());
  for (size_t i = 0; i < p.stmts.size(); ++i) {
    const Stmt& s = p.stmts[i];
    if (s.op == Op::Input) d[i] = {p.inputs[s.input].dtype == DType::Bool ? 0 : 1, 0};
    else if (s.op == Op::Const) d[i] = {0, 0};
    else if (s.op == Op::Sum) d[i] = sum_of(d[s.args[0]], extent_product(p, s.reduce));
    else {
      std::vector<Deg> a;
      for (int x : s.args) a.push_back(d[x]);
      d[i] = elementwise_deg(s.op, a);
    }
  }
  std::vector<Deg> out;
  for (const IoTensor& o : p.outputs) out.push_back(d[o.stmt]);
  return out;
}

std::vector<Deg> graph_degrees(const Program& p, const BlockGraph& g) {
  std::vector<Deg> d(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const BOp& op = g.ops[i];
    auto k_of = [&]() {
      int64_t k = 1;
      for (int a : op.reduce) k = cap(k * g.tile_extent(p, a, op.phase));
      return k;
    };
    switch (op.kind) {
      case BKind::Input: d[i] = {p.inputs[p.stmts[op.stmt].input].dtype == DType::Bool ? 0 : 1, 0}; break;
      case BKind::Const: d[i] = {0, 0}; break;
      case BKind::Matmul: d[i] = sum_of(mul(d[op.args[0]], d[op.args[1]]), k_of()); break;
      case BKind::Reduce: d[i] = sum_of(d[op.args[0]], k_of()); break;
      case BKind::Accum: {
        Deg a = d[op.args[0]];
        // each iteration's rescale factor is one variable, and a split's combine factor another
        a.n = cap(a.n + std::abs(op.scale) * (g.splits > 1 ? 2 : 1));
        d[i] = sum_of(a, g.num_chunks(p));
        break;
      }
      case BKind::Elementwise: {
        std::vector<Deg> a;
        for (int x : op.args) a.push_back(d[x]);
        d[i] = elementwise_deg(op.op, a);
        if (static_cast<int>(i) == g.stab_exp) d[i] = {1, 0};
        break;
      }
    }
  }
  std::vector<Deg> out(p.outputs.size());
  for (const auto& [o, k] : g.outputs) out[k] = {cap(d[o].n + std::abs(g.ops[o].scale)), d[o].d};
  return out;
}

int64_t shrunk_extent(int64_t e, int64_t block) {
  if (block <= 1) return std::min<int64_t>(e, 3);
  return std::min<int64_t>(e, 2 * block + 1);  // two whole blocks and a ragged one
}

}  // namespace

Shrunk shrink(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
              Corner corner) {
  Shrunk s;
  s.program = p;
  s.graph = g;
  Program& q = s.program;
  for (size_t a = 0; a < q.atoms.size(); ++a) {
    int64_t e = p.atoms[a].extent;
    if (const GridDim* d = g.grid_dim(static_cast<int>(a)))
      q.atoms[a].extent = d->tile >= e ? std::min<int64_t>(e, 3) : shrunk_extent(e, d->tile);
    else if (static_cast<int>(a) == g.loop_atom)
      q.atoms[a].extent = shrunk_extent(e, g.chunk);
    else
      q.atoms[a].extent = std::min<int64_t>(e, 3);
  }
  // A split loop: two splits, the first of two chunks (the loop's rescale) and the
  // second of the ragged one (the combine's).
  if (g.splits > 1) {
    s.graph.splits = std::min<int64_t>(2, s.graph.num_chunks(q));
  }
  // A grid tile that covered the whole atom still does.
  for (GridDim& d : s.graph.grid)
    if (d.tile >= p.extent(d.atom)) d.tile = q.extent(d.atom);
  auto redim = [&](IoTensor& t) {
    for (size_t d = 0; d < t.dims.size(); ++d) {
      int64_t n = 1;
      for (int a : t.dim_atoms[d]) n *= q.extent(a);
      t.dims[d] = n;
    }
  };
  for (IoTensor& t : q.inputs) redim(t);
  for (IoTensor& t : q.outputs) redim(t);
  s.constants.resize(constants.size());
  for (size_t k = 0; k < constants.size() && k < p.inputs.size(); ++k) {
    if (constants[k].empty()) continue;
    const IoTensor& full = p.inputs[k];
    const IoTensor& small = q.inputs[k];
    std::vector<int> atoms = p.stmts[full.stmt].axes;
    int64_t n = 1;
    for (int64_t d : small.dims) n *= d;
    std::vector<float> out(static_cast<size_t>(n));
    std::vector<int64_t> idx(atoms.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t rest = e, fo = 0, so = 0;
      for (size_t i = atoms.size(); i-- > 0;) {
        int64_t ext = q.extent(atoms[i]);
        int64_t c = rest % ext;
        rest /= ext;
        const bool last = corner == Corner::Trailing || (corner == Corner::LastRows && atoms[i] != g.loop_atom);
        const int64_t from = last ? p.extent(atoms[i]) - ext : 0;
        fo += (from + c) * full.stride(p.atoms, atoms[i]);
        so += c * small.stride(q.atoms, atoms[i]);
      }
      out[static_cast<size_t>(so)] = constants[k][static_cast<size_t>(fo)];
    }
    s.constants[k] = std::move(out);
  }
  return s;
}

namespace {

constexpr const char* kTargetUndefined = "not checkable over the field: the target has no image";

FieldVerdict verify_instance(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
                             uint64_t seed, Corner corner) {
  FieldVerdict v;
  Shrunk s = shrink(p, g, constants, corner);
  const Program& q = s.program;
  std::vector<uint8_t> skip = skip_table(q, s.graph, s.constants);
  std::vector<Deg> dt = program_degrees(q), dg = graph_degrees(q, s.graph);
  int64_t d = 1;
  for (size_t k = 0; k < dt.size(); ++k) d = std::max(d, cap(std::max(dt[k].n + dg[k].d, dg[k].n + dt[k].d)));
  v.degree = d;
  const double bits_per_point = std::log2(static_cast<double>(kSafeQ)) - std::log2(static_cast<double>(d));
  if (bits_per_point < 1) {
    v.reason = "degree bound " + std::to_string(d) + " too large for the field";
    return v;
  }
  int points = std::max(2, static_cast<int>(std::ceil(60.0 / bits_per_point)));
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  // A bool input that is not a constant (a mask) is drawn anew, with the field values
  // kept, while the target has no image at the point: in the shrunk program a random
  // mask often masks a whole softmax row, whose value the field cannot represent
  // (x - max of -inf). The field values stay uniform and independent of the masks, so
  // the bound holds for the mask each point ends with.
  auto is_const = [&](size_t k) { return k < s.constants.size() && !s.constants[k].empty(); };
  auto draw_bools = [&](Buffers<FieldVal>& in) {
    for (size_t k = 0; k < q.inputs.size(); ++k)
      if (!is_const(k) && q.inputs[k].dtype == DType::Bool)
        for (FieldVal& f : in[k]) f = FieldVal::of_int(static_cast<int64_t>(rng() & 1));
  };
  bool free_bools = false;
  for (size_t k = 0; k < q.inputs.size(); ++k) free_bools = free_bools || (!is_const(k) && q.inputs[k].dtype == DType::Bool);
  auto undefined = [](const Buffers<FieldVal>& want) {
    for (const auto& w : want)
      for (const FieldVal& a : w)
        if (a.kind == FieldVal::Kind::Poison) return true;
    return false;
  };
  for (int pt = 0; pt < points; ++pt) {
    Buffers<FieldVal> in;
    for (size_t k = 0; k < q.inputs.size(); ++k) {
      const IoTensor& t = q.inputs[k];
      int64_t n = 1;
      for (int64_t x : t.dims) n *= x;
      std::vector<FieldVal> buf(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) {
        FieldVal& f = buf[static_cast<size_t>(e)];
        if (is_const(k)) f = field_constant(s.constants[k][static_cast<size_t>(e)]);
        else if (t.dtype != DType::Bool) f = FieldVal{rng() % kSafeP, rng() % kSafeQ, true, FieldVal::Kind::Finite};
      }
      in.push_back(std::move(buf));
    }
    draw_bools(in);
    Buffers<FieldVal> want = evaluate_program(q, in);
    for (int redraw = 0; free_bools && redraw < 64 && undefined(want); ++redraw) {
      draw_bools(in);
      want = evaluate_program(q, in);
    }
    Buffers<FieldVal> got;
    for (const auto& w : want) got.emplace_back(w.size(), FieldVal::poison());
    interpret(q, s.graph, in, got, {}, skip);
    ++v.points;
    for (size_t o = 0; o < want.size(); ++o)
      for (size_t e = 0; e < want[o].size(); ++e) {
        const FieldVal &a = want[o][e], &b = got[o][e];
        if (!a.finite() && a.kind == FieldVal::Kind::Poison) {
          v.reason = std::string(kTargetUndefined) + " at output " + std::to_string(o) +
                     " element " + std::to_string(e);
          return v;
        }
        if (b.kind == FieldVal::Kind::Poison) {
          v.reason = "not checkable over the field: the μGraph has no image at output " + std::to_string(o) +
                     " element " + std::to_string(e) + " (or never writes it)";
          return v;
        }
        if (!(a == b)) {
          v.reason = "differs at output " + std::to_string(o) + " element " + std::to_string(e) + " (point " +
                     std::to_string(pt) + ")";
          return v;
        }
      }
  }
  v.ok = true;
  v.error_log2 = -bits_per_point * points;
  std::ostringstream r;
  r << "equal at " << points << " random points over F_p x F_q, degree bound " << d << ", error < 2^"
    << static_cast<int>(std::floor(v.error_log2));
  v.reason = r.str();
  return v;
}

}  // namespace

FieldVerdict verify_field(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
                          uint64_t seed) {
  FieldVerdict lead = verify_instance(p, g, constants, seed, Corner::Leading);
  bool masked = false;
  for (const auto& c : constants) masked = masked || !c.empty();
  if (!lead.ok || !masked) return lead;
  // A second window of the constants, where rows see several chunks (see the
  // header): the first on which the target is defined everywhere.
  for (Corner c : {Corner::LastRows, Corner::Trailing}) {
    FieldVerdict more = verify_instance(p, g, constants, seed + 1, c);
    if (!more.ok && more.reason.starts_with(kTargetUndefined)) continue;
    const char* where = c == Corner::LastRows ? "the constants' last rows" : "the constants' trailing corner";
    if (!more.ok) {
      more.reason += std::string(" (") + where + ")";
      return more;
    }
    more.points += lead.points;
    more.reason += std::string(", also at ") + where;
    return more;
  }
  return lead;
}

FloatVerdict float_check(const Program& p, const BlockGraph& g, const std::vector<std::vector<float>>& constants,
                         uint64_t seed, double tolerance) {
  FloatVerdict v;
  Shrunk s = shrink(p, g, constants);
  const Program& q = s.program;
  std::vector<uint8_t> skip = skip_table(q, s.graph, s.constants);
  std::mt19937_64 rng(seed + 101);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double scale : {1.0, 16.0}) {  // 16: softmax logits in the hundreds
    Buffers<double> in;
    for (size_t k = 0; k < q.inputs.size(); ++k) {
      const IoTensor& t = q.inputs[k];
      int64_t n = 1;
      for (int64_t x : t.dims) n *= x;
      std::vector<double> buf(static_cast<size_t>(n));
      bool is_const = k < s.constants.size() && !s.constants[k].empty();
      for (int64_t e = 0; e < n; ++e) {
        if (is_const) buf[static_cast<size_t>(e)] = s.constants[k][static_cast<size_t>(e)];
        else if (t.dtype == DType::Bool) buf[static_cast<size_t>(e)] = static_cast<double>(rng() & 1);
        else buf[static_cast<size_t>(e)] = u(rng) * scale;
      }
      in.push_back(std::move(buf));
    }
    Buffers<double> want = evaluate_program(q, in);
    Buffers<double> got;
    for (const auto& w : want) got.emplace_back(w.size(), NAN);
    interpret(q, s.graph, in, got, {}, skip);
    for (size_t o = 0; o < want.size(); ++o) {
      double mag = 0;
      for (double x : want[o])
        if (std::isfinite(x)) mag = std::max(mag, std::abs(x));
      for (size_t e = 0; e < want[o].size(); ++e) {
        double a = want[o][e], b = got[o][e];
        if (!std::isfinite(a)) continue;  // the unstable target overflowed: nothing to compare
        if (!std::isfinite(b)) {
          v.reason = "non-finite output " + std::to_string(o) + " element " + std::to_string(e) + " at input scale " +
                     std::to_string(scale);
          return v;
        }
        double rel = std::abs(a - b) / std::max(mag, 1e-30);
        v.max_rel_error = std::max(v.max_rel_error, rel);
      }
    }
  }
  v.ok = v.max_rel_error <= tolerance;
  if (!v.ok) v.reason = "float error " + std::to_string(v.max_rel_error) + " above " + std::to_string(tolerance);
  return v;
}

}  // namespace isomer::mugraph
