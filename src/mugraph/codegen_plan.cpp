#include "mugraph/codegen_plan.h"

#include <algorithm>

#include "mugraph/cost.h"

namespace isomer::mugraph {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class Planner {
 public:
  Planner(const Program& p, const BlockGraph& g) : p_(p), g_(g) {
    k_.p = &p;
    k_.g = &g;
    k_.one_chunk = g.loop_atom >= 0 && g.num_chunks(p) == 1;
  }

  KernelPlan run() {
    storage();
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const BOp& op = g_.ops[i];
      const int id = static_cast<int>(i);
      if (op.kind == BKind::Matmul) k_.matmuls[id] = matmul(id);
      if (op.kind == BKind::Reduce) k_.reduce_vector[id] = sum_vector(op.reduce, {op.args[0]});
    }
    for (auto& [id, m] : k_.matmuls) fold_operand_scales(id);
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const BOp& op = g_.ops[i];
      const int id = static_cast<int>(i);
      if (op.kind == BKind::Elementwise && k_.acc[i].where != Access::Where::Inline && id != g_.stab_exp &&
          !k_.folded.count(id))
        k_.pointwise[id] = pointwise(k_.layout(id), op.phase, id, true, &k_.acc[i]);
    }
    if (g_.stab_exp >= 0) stab();
    for (auto& [id, m] : k_.matmuls) fold_row_divisor(id);
    for (auto& [id, m] : k_.matmuls) hoist_pack(id);
    outputs();
    return std::move(k_);
  }

 private:
  const Program& p_;
  const BlockGraph& g_;
  KernelPlan k_;

  size_t alloc(size_t floats) {
    size_t off = k_.scratch;
    k_.scratch += (floats + 15) / 16 * 16;
    return off;
  }
  void scratch_tile(size_t i, std::vector<int> order) {
    Access& a = k_.acc[i];
    a.where = Access::Where::Scratch;
    a.order = order;
    int64_t s = 1;
    for (size_t k = order.size(); k-- > 0;) {
      a.stride[order[k]] = s;
      s *= k_.max_extent(order[k], g_.ops[i].phase);
    }
    a.offset = alloc(static_cast<size_t>(s));
    a.base = "(scratch + " + std::to_string(a.offset) + ")";
  }

  Roles roles(size_t i, const std::vector<int>& c_order) const {
    const BOp& op = g_.ops[i];
    Roles r;
    if (op.reduce.size() != 1) return r;
    r.k = op.reduce[0];
    const BOp &x = g_.ops[op.args[0]], &y = g_.ops[op.args[1]];
    for (size_t q = c_order.size(); q-- > 0 && r.n < 0;) {
      int at = c_order[q];
      bool in_x = contains(x.axes, at), in_y = contains(y.axes, at);
      if (in_x && !in_y) r.n = at, r.a = op.args[1], r.b = op.args[0];
      else if (in_y && !in_x) r.n = at, r.a = op.args[0], r.b = op.args[1];
    }
    if (r.n < 0) return Roles{};
    const BOp& A = g_.ops[r.a];
    const BOp& B = g_.ops[r.b];
    // m: the atom of A's rows with the most of them in a tile (innermost among
    // equals), so one call runs the most rows against B: the 32 query rows of a
    // tile per query head rather than the 4 heads of a GQA group per query row.
    int64_t most = 0;
    for (size_t q = c_order.size(); q-- > 0;) {
      const int at = c_order[q];
      if (!contains(A.axes, at) || contains(B.axes, at)) continue;
      const int64_t e = k_.max_extent(at, op.phase);
      if (e > most) r.m = at, most = e;
    }
    return r;
  }

  // The atom an op's data is unit-stride along where it comes from: an input's
  // unit-stride atom, or that of an elementwise op's input of the same axes; -1 if none.
  int unit_atom(int i) const {
    const BOp& op = g_.ops[i];
    if (op.kind == BKind::Input) {
      const IoTensor& io = p_.inputs[p_.stmts[op.stmt].input];
      for (int a : op.axes)
        if (io.stride(p_.atoms, a) == 1) return a;
      return -1;
    }
    if (op.kind != BKind::Elementwise) return -1;
    for (int x : op.args)
      if (g_.ops[x].axes == op.axes)
        if (int u = unit_atom(x); u >= 0) return u;
    return -1;
  }

  // Where every op's tile lives, and the scratch it takes.
  void storage() {
    const size_t n = g_.ops.size();
    // Global atom order: the first output's dims, then the other outputs', then the rest.
    for (const IoTensor& o : p_.outputs)
      for (const auto& l : o.dim_atoms)
        for (int a : l)
          if (!contains(k_.order, a)) k_.order.push_back(a);
    for (size_t a = 0; a < p_.atoms.size(); ++a)
      if (!contains(k_.order, static_cast<int>(a))) k_.order.push_back(static_cast<int>(a));
    k_.rows = k_.ordered(row_atoms(p_, g_));
    k_.acc.assign(n, {});
    k_.users.assign(n, {});
    k_.output_of.assign(n, -1);
    k_.fused_into.assign(n, -1);
    for (size_t i = 0; i < n; ++i)
      for (int a : g_.ops[i].args) k_.users[a].push_back(static_cast<int>(i));
    for (const auto& [o, k] : g_.outputs) k_.output_of[o] = k;
    // Accumulators fed by one contraction or reduction take it directly.
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g_.ops[i];
      if (op.kind != BKind::Accum) continue;
      int a = op.args[0];
      const BOp& src = g_.ops[a];
      if ((src.kind == BKind::Matmul || src.kind == BKind::Reduce) && k_.users[a].size() == 1 && k_.output_of[a] < 0)
        k_.fused_into[a] = static_cast<int>(i);
    }
    // Requirements matmuls put on their operands' layouts.
    std::map<int, std::vector<int>> want_order;  // op -> order it should be stored in
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g_.ops[i];
      if (op.kind != BKind::Matmul) continue;
      Roles r = roles(i, k_.ordered(op.axes));
      if (r.k < 0) continue;
      auto with_inner = [&](int opi, std::vector<int> inner) {
        std::vector<int> ord;
        for (int a : k_.ordered(g_.ops[opi].axes))
          if (!contains(inner, a)) ord.push_back(a);
        ord.insert(ord.end(), inner.begin(), inner.end());
        if (!want_order.count(opi)) want_order[opi] = ord;
      };
      with_inner(r.a, {r.k});
      // B stored k-innermost (dot products, read in place) where its data is unit-stride
      // along k, not n (Kᵀ in Q·Kᵀ): a transposed copy costs more than the product.
      const int unit = unit_atom(r.b);
      if (unit == r.k) with_inner(r.b, {r.n, r.k});
      else with_inner(r.b, {r.k, r.n});
    }
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g_.ops[i];
      Access& a = k_.acc[i];
      switch (op.kind) {
        case BKind::Const: a.where = Access::Where::Const; break;
        case BKind::Input: {
          const IoTensor& io = p_.inputs[p_.stmts[op.stmt].input];
          a.is_bool = io.dtype == DType::Bool;
          for (int at : op.axes) a.stride[at] = io.stride(p_.atoms, at);
          a.where = Access::Where::View;
          a.base = "v" + std::to_string(i);
          // A view serves if the wanted innermost atom is unit-stride there; else the
          // tile is packed into scratch.
          auto it = want_order.find(static_cast<int>(i));
          if (it != want_order.end() && !a.is_bool) {
            const std::vector<int>& ord = it->second;
            if (ord.empty() || a.stride[ord.back()] != 1) {
              a.stride.clear();
              scratch_tile(i, ord);
            }
          }
          break;
        }
        default: {
          bool inline_ok = op.kind == BKind::Elementwise && static_cast<int>(i) != g_.stab_exp &&
                           k_.output_of[i] < 0 && k_.users[i].size() == 1 && !want_order.count(static_cast<int>(i));
          if (inline_ok) {
            const BOp& u = g_.ops[k_.users[i][0]];
            bool u_ok = (u.kind == BKind::Elementwise && k_.users[i][0] != g_.stab_exp && u.axes == op.axes) ||
                        (u.kind == BKind::Reduce && k_.fused_into[k_.users[i][0]] < 0) || (u.kind == BKind::Accum);
            inline_ok = u_ok && (u.phase == op.phase || u.kind == BKind::Accum);
          }
          // An output nothing else reads is computed in the loop that writes the output.
          const Phase out_phase = g_.loop_atom >= 0 ? Phase::Post : Phase::Pre;
          if (op.kind == BKind::Elementwise && static_cast<int>(i) != g_.stab_exp && k_.output_of[i] >= 0 &&
              k_.users[i].empty() && op.phase == out_phase && !want_order.count(static_cast<int>(i)))
            inline_ok = true;
          if (inline_ok) {
            a.where = Access::Where::Inline;
            break;
          }
          if (k_.fused_into[i] >= 0) break;  // shares its accumulator's storage (set below)
          auto it = want_order.find(static_cast<int>(i));
          scratch_tile(i, it != want_order.end() ? it->second : k_.ordered(op.axes));
        }
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (k_.fused_into[i] >= 0) k_.acc[i] = k_.acc[k_.fused_into[i]];
    k_.stab.sum = sum_in_exp();
    if (g_.stab_exp >= 0) {
      int64_t s = 1;
      for (int a : g_.stab_axes) s *= k_.max_extent(a, g_.ops[g_.stab_exp].phase);
      k_.m_off = alloc(static_cast<size_t>(s));
      k_.fac_off = alloc(static_cast<size_t>(s));
      k_.cm_off = alloc(static_cast<size_t>(s));
    }
  }

  // A sum of the stabilized exponentials over exactly the atoms the shift does not
  // vary along, in the same phase, stored apart from them.
  int sum_in_exp() const {
    const int e = g_.stab_exp;
    if (e < 0) return -1;
    std::vector<int> rest;
    for (int a : g_.ops[e].axes)
      if (!contains(g_.stab_axes, a)) rest.push_back(a);
    for (int u : k_.users[e]) {
      const BOp& r = g_.ops[u];
      if (r.kind != BKind::Reduce || r.phase != g_.ops[e].phase || r.reduce != rest || r.axes != g_.stab_axes) continue;
      if (k_.acc[u].where != Access::Where::Scratch) continue;
      return u;
    }
    return -1;
  }

  // --- vectorization --------------------------------------------------------------
  static bool vec_op(Op op, bool* fn) {
    switch (op) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Neg: return true;
      case Op::Exp:
      case Op::Erf:
      case Op::Tanh:
      case Op::Sigmoid: *fn = true; return true;
      default: return false;
    }
  }
  // Whether op y's value can be read as vector lanes along `in`: invariant (hoisted), a
  // constant, unit-stride storage, or an inlined vectorizable expression. `fn`: set
  // where the expression calls a transcendental.
  bool vec_ok(int y, int in, const std::vector<int>& inv, bool* fn) const {
    if (contains(inv, y)) return true;
    const Access& a = k_.acc[y];
    switch (a.where) {
      case Access::Where::Const: return true;
      case Access::Where::Inline: return vec_expr_ok(y, in, inv, fn);
      case Access::Where::Scratch:
      case Access::Where::View:
      case Access::Where::Output: return a.unit_along(in);
      default: return false;
    }
  }
  bool vec_expr_ok(int i, int in, const std::vector<int>& inv, bool* fn) const {
    const BOp& op = g_.ops[i];
    if (op.kind != BKind::Elementwise || !vec_op(op.op, fn)) return false;
    for (int y : op.args)
      if (!vec_ok(y, in, inv, fn)) return false;
    return true;
  }
  // A row sum of the product of `terms` over `red` in four vector accumulators: one
  // accumulator's add latency bounds a row's sum to a vector per 3 cycles.
  bool sum_vector(const std::vector<int>& red, const std::vector<int>& terms) const {
    bool fn = false;
    bool vec = red.size() == 1 && !terms.empty();
    for (int t : terms) vec = vec && vec_ok(t, red[0], {}, &fn);
    return vec;
  }

  // Operands of op i's expression (through inlined ops) that do not vary along
  // `inner`: loaded (or computed) once above the innermost loop.
  void invariants(int i, int inner, std::vector<int>* inv) const {
    for (int y : g_.ops[i].args) {
      if (k_.acc[y].where == Access::Where::Const || contains(*inv, y)) continue;
      if (!contains(g_.ops[y].axes, inner)) inv->push_back(y);
      else if (k_.acc[y].where == Access::Where::Inline) invariants(y, inner, inv);
    }
  }
  void divisors(int i, const std::vector<int>& inv, std::vector<int>* out) const {
    const BOp& op = g_.ops[i];
    if (op.kind == BKind::Elementwise && op.op == Op::Div && contains(inv, op.args[1]) && !contains(*out, op.args[1]))
      out->push_back(op.args[1]);
    for (int y : op.args)
      if (k_.acc[y].where == Access::Where::Inline && !contains(inv, y)) divisors(y, inv, out);
  }

  // The operands invariant in the innermost loop (a row's mean or scale) hoisted
  // above it, divisions by them turned into multiplications by one reciprocal;
  // transcendental chains on unit-stride rows as vector code.
  PointwisePlan pointwise(const std::vector<int>& atoms, Phase ph, int root, bool own, const Access* dst) {
    PointwisePlan w;
    w.atoms = atoms;
    w.phase = ph;
    w.root = root;
    w.own = own;
    const bool expr_root =
        g_.ops[root].kind == BKind::Elementwise && (k_.acc[root].where == Access::Where::Inline || own);
    if (!atoms.empty() && expr_root) {
      invariants(root, atoms.back(), &w.hoisted);
      divisors(root, w.hoisted, &w.recips);
    }
    bool fn = false;
    const int in = atoms.empty() ? -1 : atoms.back();
    const bool lanes = in >= 0 && dst && dst->unit_along(in) &&
                       (own ? vec_expr_ok(root, in, w.hoisted, &fn) : vec_ok(root, in, w.hoisted, &fn));
    if (lanes && own) row_sums(&w);
    w.vector = lanes && (fn || !w.sums.empty());
    w.unroll = w.vector && (!w.sums.empty() || machine().avx512) ? 4 : 2;
    return w;
  }

  // Users of a computed op that sum its value (or its square) over the loop's
  // innermost atom in the same phase: taken into the op's own vector loop.
  void row_sums(PointwisePlan* w) {
    const int i = w->root;
    for (int u : k_.users[i]) {
      const BOp& r = g_.ops[u];
      if (r.phase != w->phase || r.reduce != std::vector<int>{w->atoms.back()} || u == k_.stab.sum) continue;
      int power = 0;
      if (r.kind == BKind::Reduce) power = 1;
      if (r.kind == BKind::Matmul && r.args[0] == i && r.args[1] == i &&
          k_.matmuls.at(u).kernel == MatmulPlan::Kernel::Generic)
        power = 2;
      if (power == 0 || k_.summed_in.count(u)) continue;
      w->sums.emplace_back(u, power);
      k_.summed_in[u] = i;
    }
  }

  MatmulPlan matmul(int i) const {
    MatmulPlan m;
    m.order = k_.layout(i);
    const Roles r = roles(static_cast<size_t>(i), m.order);
    m.roles = r;
    const Phase ph = g_.ops[i].phase;
    if (r.k >= 0 && k_.acc[r.a].materialized() && k_.acc[r.b].materialized() && !k_.acc[r.a].is_bool &&
        !k_.acc[r.b].is_bool) {
      auto st = [&](int opi, int atom) { return k_.stride(opi, atom); };
      for (int a : m.order)
        if (a != r.m && a != r.n) m.outer.push_back(a);
      if (st(r.b, r.n) == 1 && st(i, r.n) == 1 && st(r.a, r.k) == 1) m.kernel = MatmulPlan::Kernel::Gemm;
      else if (st(r.a, r.k) == 1 && st(r.b, r.k) == 1) m.kernel = MatmulPlan::Kernel::Dot;
      if (m.kernel != MatmulPlan::Kernel::Generic && r.m >= 0) {
        int64_t span = k_.max_extent(r.m, ph);
        for (size_t q = m.outer.size(); q-- > 0;) {
          const int o = m.outer[q];
          if (contains(g_.ops[r.b].axes, o) || st(r.a, o) != st(r.a, r.m) * span || st(i, o) != st(i, r.m) * span)
            break;
          m.merged.push_back(o);
          if (k_.variable_extent(o, ph)) break;  // a partial tile of o: no further atom continues it
          span *= k_.max_extent(o, ph);
        }
      }
    }
    if (m.kernel == MatmulPlan::Kernel::Generic) {
      const BOp& op = g_.ops[i];
      m.sum_vector = sum_vector(op.reduce, {op.args[0], op.args[1]});
    }
    return m;
  }

  // --- the contractions' stores (mg_epi) ------------------------------------------
  // A micro-kernel call that overwrites its output (no accumulator to rescale). The
  // power of exp(-m) an op carries is the stored value's; a factor in the store
  // leaves it as it is.
  bool plain_store(int i) const {
    const MatmulPlan& m = k_.matmuls.at(i);
    return m.kernel != MatmulPlan::Kernel::Generic && (k_.fused_into[i] < 0 || k_.one_chunk) &&
           !k_.summed_in.count(i);
  }

  // An operand that is another op times a scalar constant, read by this contraction
  // alone: (A c) B = c (A B), so the contraction reads the other op in place and
  // multiplies its output by c as it stores it (no pass over the operand). Kept only
  // where the micro-kernel still applies to the unscaled op's layout.
  void fold_operand_scales(int i) {
    if (!plain_store(i)) return;
    MatmulPlan& m = k_.matmuls.at(i);
    const BOp& op = g_.ops[i];
    for (int x : {m.roles.a, m.roles.b}) {
      const BOp& xo = g_.ops[x];
      if (xo.kind != BKind::Elementwise || xo.op != Op::Mul || x == g_.stab_exp || k_.users[x].size() != 1 ||
          k_.output_of[x] >= 0 || k_.acc[x].where != Access::Where::Scratch || xo.phase != op.phase ||
          xo.args.size() != 2 || k_.folded.count(x))
        continue;
      int c = -1, y = -1;
      for (int q = 0; q < 2; ++q)
        if (k_.acc[xo.args[q]].where == Access::Where::Const) c = xo.args[q], y = xo.args[1 - q];
      if (c < 0 || y < 0 || k_.acc[y].where == Access::Where::Const || !k_.acc[y].materialized() ||
          k_.acc[y].is_bool || g_.ops[y].axes != xo.axes || g_.ops[y].phase != op.phase)
        continue;
      // The other op must be complete before x would be (emitted in index order).
      if (y > x) continue;
      const Access saved = k_.acc[x];
      k_.acc[x] = k_.acc[y];
      MatmulPlan t = matmul(i);
      if (t.kernel != m.kernel || t.roles.a != m.roles.a || t.roles.b != m.roles.b) {
        k_.acc[x] = saved;
        continue;
      }
      t.alpha = m.alpha * static_cast<float>(g_.ops[c].value);
      m = t;
      k_.folded[x] = y;
    }
  }

  // A contraction whose one use is an output dividing it by a row value that does
  // not vary along n (softmax's 1/sum after P·V): the micro-kernel writes the output
  // itself, each row multiplied by 1/divisor as it is stored (no pass over the
  // product).
  void fold_row_divisor(int i) {
    if (!plain_store(i) || k_.users[i].size() != 1 || k_.output_of[i] >= 0) return;
    MatmulPlan& m = k_.matmuls.at(i);
    const BOp& op = g_.ops[i];
    const int o = k_.users[i][0];
    const BOp& oo = g_.ops[o];
    const Phase out_phase = g_.loop_atom >= 0 ? Phase::Post : Phase::Pre;
    if (oo.kind != BKind::Elementwise || oo.op != Op::Div || oo.args.size() != 2 || oo.args[0] != i ||
        oo.args[1] == i || k_.output_of[o] < 0 || !k_.users[o].empty() || k_.acc[o].where != Access::Where::Inline ||
        oo.scale != 0 || oo.axes != op.axes || op.phase != out_phase || oo.phase != out_phase)
      return;
    const int d = oo.args[1];
    const BOp& dv = g_.ops[d];
    if (k_.acc[d].where != Access::Where::Scratch || contains(dv.axes, m.roles.n) || contains(dv.axes, m.roles.k))
      return;
    for (int a : dv.axes)
      if (!contains(op.axes, a)) return;
    // The contraction is emitted after every other op of its phase (nothing else
    // reads it), so a divisor of that phase or before is ready.
    if (k_.fused_into[d] >= 0 || (dv.phase != out_phase && dv.phase != Phase::Pre)) return;
    // The output's strides for the contraction's C.
    const int out = k_.output_of[o];
    const IoTensor& io = p_.outputs[out];
    Access dst;
    dst.where = Access::Where::Output;
    for (int a : op.axes) dst.stride[a] = io.stride(p_.atoms, a);
    const Access saved = k_.acc[i];
    k_.acc[i] = dst;
    MatmulPlan t = matmul(i);
    // Rows merged into one call must continue the divisor's row stride too.
    bool rows_ok = t.kernel == m.kernel && t.roles.a == m.roles.a && t.roles.b == m.roles.b;
    if (rows_ok && !t.merged.empty()) {
      int64_t span = k_.max_extent(t.roles.m, op.phase);
      for (int a : t.merged) {
        rows_ok = rows_ok && k_.stride(d, a) == k_.stride(d, t.roles.m) * span;
        span *= k_.max_extent(a, op.phase);
      }
    }
    if (!rows_ok) {
      k_.acc[i] = saved;
      return;
    }
    t.alpha = m.alpha;
    t.divisor = d;
    t.output = out;
    m = t;
  }

  // Packs Bᵀ of a Dot (Kᵀ, read in place or scaled) once for all the calls that
  // read the same slice of B: the rows of A in one call times the calls over the
  // outer atoms B lacks (GQA's query heads, query rows run one at a time). mg_dot
  // packs per call, and only at 16 rows or more; below, it read Kᵀ in place by dot
  // products, each summed across lanes.
  void hoist_pack(int i) {
    MatmulPlan& m = k_.matmuls.at(i);
    const Roles& r = m.roles;
    const Phase ph = g_.ops[i].phase;
    if (m.kernel != MatmulPlan::Kernel::Dot || k_.stride(i, r.n) != 1) return;
    const int64_t n = k_.max_extent(r.n, ph), kk = k_.max_extent(r.k, ph);
    // A panel that stays in L1/L2 while the rows pass (mg_dot packs 64 columns).
    if (n * kk > 16384) return;
    int64_t rows = r.m >= 0 ? k_.max_extent(r.m, ph) : 1;
    std::vector<int> shared;
    for (int a : m.outer) {
      if (contains(g_.ops[r.b].axes, a)) shared.push_back(a);
      else if (!k_.is_row(a)) rows *= k_.max_extent(a, ph);
    }
    if (rows < 16) return;
    m.shared = shared;
    m.pack = static_cast<int64_t>(alloc(static_cast<size_t>(n * kk)));
  }

  void stab() {
    StabPlan& s = k_.stab;
    const int e = g_.stab_exp;
    const int x = g_.ops[e].args[0];
    s.shift = k_.ordered(g_.stab_axes);
    for (int a : k_.layout(x))
      if (!contains(s.shift, a)) s.rest.push_back(a);
    bool fn = false;
    s.vector_max = s.rest.size() == 1 && vec_ok(x, s.rest[0], {}, &fn);
    {
      const Access& a = k_.acc[x];
      s.max_helper = s.vector_max && (a.where == Access::Where::Scratch || a.where == Access::Where::View) &&
                     a.unit_along(s.rest[0]);
    }
    s.layout = k_.layout(e);
    s.hoist = !s.layout.empty() && !contains(g_.stab_axes, s.layout.back());
    // The sum goes with the exponentials only where the shift is hoisted.
    if (!s.hoist) s.sum = -1;
    if (s.sum < 0) return;
    for (int a : s.layout)
      if (!contains(s.shift, a)) s.inner.push_back(a);
    auto unit = [&](int opi) {
      const Access& a = k_.acc[opi];
      auto it = a.stride.find(s.inner.back());
      const bool mat = a.where == Access::Where::Scratch || a.where == Access::Where::View;
      return mat && !a.is_bool && it != a.stride.end() && it->second == 1;
    };
    s.shift_sum_helper = s.inner.size() == 1 && unit(x) && unit(e);
  }

  // Outputs: written by a pointwise loop in their own stride order (not vectorized
  // where the online-softmax rule left a power of exp(-m) to unscale).
  void outputs() {
    for (const auto& [oi, k] : g_.outputs) {
      const BOp& op = g_.ops[oi];
      const IoTensor& io = p_.outputs[k];
      OutputPlan o;
      o.op = oi;
      o.k = k;
      o.dst.where = Access::Where::Output;
      for (int a : op.axes) o.dst.stride[a] = io.stride(p_.atoms, a);
      std::vector<int> ord = op.axes;
      std::stable_sort(ord.begin(), ord.end(), [&](int x, int y) { return o.dst.stride[x] > o.dst.stride[y]; });
      const Phase ph = g_.loop_atom >= 0 ? Phase::Post : Phase::Pre;
      for (const auto& [mi, m] : k_.matmuls)
        if (m.output == k && m.divisor >= 0 && k_.users[mi].size() == 1 && k_.users[mi][0] == oi) o.by_matmul = mi;
      if (o.by_matmul < 0) o.loop = pointwise(ord, ph, oi, false, op.scale == 0 ? &o.dst : nullptr);
      k_.outputs.push_back(std::move(o));
    }
  }
};

}  // namespace

bool Access::unit_along(int atom) const {
  auto it = stride.find(atom);
  return it != stride.end() && it->second == 1 && !is_bool;
}

bool KernelPlan::is_row(int atom) const { return contains(rows, atom); }

int64_t KernelPlan::max_extent(int atom, Phase ph) const { return is_row(atom) ? 1 : g->tile_extent(*p, atom, ph); }

bool KernelPlan::variable_extent(int atom, Phase ph) const {
  if (is_row(atom)) return false;
  if (g->grid_dim(atom) && g->grid_dim(atom)->tile < p->extent(atom)) return true;
  return atom == g->loop_atom && ph == Phase::Loop && g->chunk < p->extent(atom);
}

std::vector<int> KernelPlan::ordered(const std::vector<int>& atoms) const {
  std::vector<int> r;
  for (int a : order)
    if (contains(atoms, a)) r.push_back(a);
  return r;
}

std::vector<int> KernelPlan::layout(int i) const {
  const Access& a = acc[i];
  if (!a.order.empty()) return a.order;
  // Views and outputs: by decreasing stride.
  std::vector<int> ord = g->ops[i].axes;
  std::stable_sort(ord.begin(), ord.end(), [&](int x, int y) { return a.stride.at(x) > a.stride.at(y); });
  return ord;
}

int64_t KernelPlan::stride(int i, int atom) const {
  if (atom < 0) return 0;
  auto it = acc[i].stride.find(atom);
  return it == acc[i].stride.end() ? 0 : it->second;
}

KernelPlan plan_kernel(const Program& p, const BlockGraph& g) { return Planner(p, g).run(); }

}  // namespace isomer::mugraph
