#include "mugraph/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "ir/error.h"
#include "mugraph/codegen_prelude.h"
#include "mugraph/vmath_text.h"

namespace isomer::mugraph {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string flt(double v) {
  if (v == INFINITY) return "INFINITY";
  if (v == -INFINITY) return "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return std::string("(") + buf + ")";
}

// How generated code reaches an op's tile.
struct Access {
  enum class Where { None, Scratch, View, Output, Inline, Const } where = Where::None;
  std::string base;                  // pointer expression (Scratch, View, Output)
  std::vector<int> order;            // atoms, outer to inner (Scratch layout)
  std::map<int, int64_t> stride;     // per atom of the tile
  size_t offset = 0;                 // Scratch: floats into the thread's scratch
  bool is_bool = false;              // a bool input (uint8)
};

class Gen {
 public:
  Gen(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip) : p_(p), g_(g), skip_(skip) {}

  std::string run() {
    plan();
    ind_ = 6;
    body();
    const std::string body_text = o_.str();
    std::ostringstream s;
    s << "// isomer μGraph kernel (generated)\n";
    // Kernels without micro-kernel calls: GCC's instruction scheduling (off by default
    // on x86) and unrolling interleave the long dependency chains of exp/erf across
    // iterations (softmax 16x128 0.30 -> 0.27 ms, LayerNorm+GELU 0.178 -> 0.162 ms);
    // the register blocks lose by them (ViT attention 1.29 -> 1.51 ms: spills).
    if (body_text.find("mg_gemm(") == std::string::npos && body_text.find("mg_dot(") == std::string::npos)
      s << "#pragma GCC optimize(\"unroll-loops\", \"schedule-insns\", \"sched-pressure\")\n";
    s << "#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <omp.h>\n\n";
    s << kVmathText << "\n";
    s << "namespace vm = isomer::kernels::vm;\nnamespace vm8 = isomer::kernels::vm8;\n";
    s << kMicroKernels << "\n";
    s << "/* block graph\n" << g_.to_text(p_) << "*/\n";
    if (!skip_.empty()) {
      s << "static const char mg_skip[] = \"";
      for (uint8_t b : skip_) s << (b ? '1' : '0');
      s << "\";\n";
    }
    s << "extern \"C\" void isomer_mugraph_run(const void* const* in_, void* const* out_, int threads) {\n";
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      if (p_.inputs[k].dtype == DType::Bool)
        s << "  const uint8_t* in" << k << " = static_cast<const uint8_t*>(in_[" << k << "]);\n";
      else
        s << "  const float* in" << k << " = static_cast<const float*>(in_[" << k << "]);\n";
    }
    for (size_t k = 0; k < p_.outputs.size(); ++k)
      s << "  float* out" << k << " = static_cast<float*>(out_[" << k << "]);\n";
    s << "  const int team = threads > 0 ? threads : omp_get_max_threads();\n";
    s << "#pragma omp parallel num_threads(team)\n  {\n";
    s << "    float* scratch = static_cast<float*>(std::aligned_alloc(64, " << std::max<size_t>(scratch_, 16) * 4
      << "));\n";
    s << "#pragma omp for schedule(dynamic, 1)\n";
    s << "    for (int64_t tile = 0; tile < " << g_.num_tiles(p_) << "; ++tile) {\n";
    s << body_text;
    s << "    }\n    std::free(scratch);\n  }\n}\n";
    return s.str();
  }

 private:
  // --- planning -------------------------------------------------------------------
  std::vector<int> global_order_;
  // Row atoms: independent output atoms no contraction reuses an operand along, run
  // one index at a time inside a tile, so every intermediate is one row (in L1)
  // while the grid keeps tiles coarse enough for the scheduler.
  std::vector<int> rows_;
  std::vector<Access> acc_;
  std::vector<std::vector<int>> users_;
  std::vector<int> output_of_;  // op -> program output it is written to (-1)
  std::vector<int> fused_into_;  // Matmul/Reduce op -> the Accum it accumulates into (-1)
  size_t scratch_ = 0;
  size_t m_off_ = 0, fac_off_ = 0, cm_off_ = 0;

  int64_t max_extent(int atom, Phase ph) const { return is_row(atom) ? 1 : g_.tile_extent(p_, atom, ph); }
  bool is_row(int atom) const { return contains(rows_, atom); }
  std::string ext(int atom, Phase ph) const {
    if (is_row(atom)) return "1";
    if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "e" + std::to_string(atom);
    if (atom == g_.loop_atom && ph == Phase::Loop && g_.chunk < p_.extent(atom)) return "ec";
    return std::to_string(max_extent(atom, ph));
  }
  std::string origin(int atom, Phase ph) const {
    if (is_row(atom)) return "o" + std::to_string(atom);
    if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "o" + std::to_string(atom);
    if (atom == g_.loop_atom && ph == Phase::Loop) return "oc";
    return "0";
  }
  std::vector<int> ordered(const std::vector<int>& atoms) const {
    std::vector<int> r;
    for (int a : global_order_)
      if (contains(atoms, a)) r.push_back(a);
    return r;
  }
  size_t alloc(size_t floats) {
    size_t off = scratch_;
    scratch_ += (floats + 15) / 16 * 16;
    return off;
  }
  void scratch_tile(size_t i, std::vector<int> order) {
    Access& a = acc_[i];
    a.where = Access::Where::Scratch;
    a.order = order;
    int64_t s = 1;
    for (size_t k = order.size(); k-- > 0;) {
      a.stride[order[k]] = s;
      s *= max_extent(order[k], g_.ops[i].phase == Phase::Post ? Phase::Post : g_.ops[i].phase);
    }
    a.offset = alloc(static_cast<size_t>(s));
    a.base = "(scratch + " + std::to_string(a.offset) + ")";
  }

  // The matmul's operand roles: (A, B, m atom or -1, n atom, k atom), n innermost in C.
  struct Roles {
    int a = -1, b = -1, m = -1, n = -1, k = -1;
  };
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
    for (size_t q = c_order.size(); q-- > 0 && r.m < 0;)
      if (contains(A.axes, c_order[q]) && !contains(B.axes, c_order[q])) r.m = c_order[q];
    return r;
  }

  void choose_rows() { rows_ = ordered(row_atoms(p_, g_)); }

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

  void plan() {
    const size_t n = g_.ops.size();
    // Global atom order: the first output's dims, then the other outputs', then the rest.
    for (const IoTensor& o : p_.outputs)
      for (const auto& l : o.dim_atoms)
        for (int a : l)
          if (!contains(global_order_, a)) global_order_.push_back(a);
    for (size_t a = 0; a < p_.atoms.size(); ++a)
      if (!contains(global_order_, static_cast<int>(a))) global_order_.push_back(static_cast<int>(a));
    choose_rows();
    acc_.assign(n, {});
    users_.assign(n, {});
    output_of_.assign(n, -1);
    fused_into_.assign(n, -1);
    for (size_t i = 0; i < n; ++i)
      for (int a : g_.ops[i].args) users_[a].push_back(static_cast<int>(i));
    for (const auto& [o, k] : g_.outputs) output_of_[o] = k;
    // Accumulators fed by one contraction or reduction take it directly.
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g_.ops[i];
      if (op.kind != BKind::Accum) continue;
      int a = op.args[0];
      const BOp& src = g_.ops[a];
      if ((src.kind == BKind::Matmul || src.kind == BKind::Reduce) && users_[a].size() == 1 && output_of_[a] < 0)
        fused_into_[a] = static_cast<int>(i);
    }
    // Requirements matmuls put on their operands' layouts.
    std::map<int, std::vector<int>> want_order;  // op -> order it should be stored in
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g_.ops[i];
      if (op.kind != BKind::Matmul) continue;
      Roles r = roles(i, ordered(op.axes));
      if (r.k < 0) continue;
      auto with_inner = [&](int opi, std::vector<int> inner) {
        std::vector<int> ord;
        for (int a : ordered(g_.ops[opi].axes))
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
      Access& a = acc_[i];
      switch (op.kind) {
        case BKind::Const: a.where = Access::Where::Const; break;
        case BKind::Input: {
          const IoTensor& io = p_.inputs[p_.stmts[op.stmt].input];
          a.is_bool = io.dtype == DType::Bool;
          for (int at : op.axes) a.stride[at] = io.stride(p_.atoms, at);
          a.where = Access::Where::View;
          a.base = "v" + std::to_string(i);
          // A view serves if the wanted innermost atoms are unit-stride there.
          auto it = want_order.find(static_cast<int>(i));
          if (it != want_order.end() && !a.is_bool) {
            const std::vector<int>& ord = it->second;
            bool ok = !ord.empty() && a.stride[ord.back()] == 1;
            if (ord.size() >= 2 && it->second.size() >= 2) {
              // B operand: k then n; the leading dimension is free, n must be unit.
            }
            if (!ok) {
              a.stride.clear();
              scratch_tile(i, ord);
              copies_.push_back(static_cast<int>(i));
            }
          }
          break;
        }
        default: {
          bool inline_ok = op.kind == BKind::Elementwise && static_cast<int>(i) != g_.stab_exp && output_of_[i] < 0 &&
                           users_[i].size() == 1 && !want_order.count(static_cast<int>(i));
          if (inline_ok) {
            const BOp& u = g_.ops[users_[i][0]];
            bool u_ok = (u.kind == BKind::Elementwise && users_[i][0] != g_.stab_exp && u.axes == op.axes) ||
                        (u.kind == BKind::Reduce && fused_into_[users_[i][0]] < 0) ||
                        (u.kind == BKind::Accum);
            inline_ok = u_ok && (u.phase == op.phase || u.kind == BKind::Accum);
          }
          // An output nothing else reads is computed in the loop that writes the output.
          const Phase out_phase = g_.loop_atom >= 0 ? Phase::Post : Phase::Pre;
          if (op.kind == BKind::Elementwise && static_cast<int>(i) != g_.stab_exp && output_of_[i] >= 0 &&
              users_[i].empty() && op.phase == out_phase && !want_order.count(static_cast<int>(i)))
            inline_ok = true;
          if (inline_ok) {
            a.where = Access::Where::Inline;
            break;
          }
          if (fused_into_[i] >= 0) break;  // shares its accumulator's storage (set below)
          auto it = want_order.find(static_cast<int>(i));
          scratch_tile(i, it != want_order.end() ? it->second : ordered(op.axes));
        }
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (fused_into_[i] >= 0) acc_[i] = acc_[fused_into_[i]];
    plan_sum_in_exp();
    if (g_.stab_exp >= 0) {
      int64_t s = 1;
      for (int a : g_.stab_axes) s *= max_extent(a, g_.ops[g_.stab_exp].phase);
      m_off_ = alloc(static_cast<size_t>(s));
      fac_off_ = alloc(static_cast<size_t>(s));
      cm_off_ = alloc(static_cast<size_t>(s));
    }
  }
  std::vector<int> copies_;
  int sum_in_exp_ = -1;  // a Reduce computed in the stabilized Exp's loop

  // A sum of the stabilized exponentials over exactly the atoms the shift does not
  // vary along, in the same phase, stored apart from them.
  void plan_sum_in_exp() {
    const int e = g_.stab_exp;
    if (e < 0) return;
    std::vector<int> rest;
    for (int a : g_.ops[e].axes)
      if (!contains(g_.stab_axes, a)) rest.push_back(a);
    for (int u : users_[e]) {
      const BOp& r = g_.ops[u];
      if (r.kind != BKind::Reduce || r.phase != g_.ops[e].phase || r.reduce != rest || r.axes != g_.stab_axes) continue;
      const Access::Where w = acc_[u].where;
      if (w != Access::Where::Scratch) continue;
      sum_in_exp_ = u;
      return;
    }
  }

  // --- emission -------------------------------------------------------------------
  std::ostringstream o_;
  int ind_ = 0;
  std::string pad() const { return std::string(static_cast<size_t>(ind_), ' '); }
  void line(const std::string& s) { o_ << pad() << s << "\n"; }

  std::string idx(int atom) const { return atom == lane_atom_ ? lane_expr_ : "i" + std::to_string(atom); }
  // While emitting a vector statement: the innermost atom's index is the vector's
  // first element.
  int lane_atom_ = -1;
  std::string lane_expr_;

  // Offset of the op's element at the current loop indices.
  std::string offset(const Access& a, const std::vector<int>& atoms) const {
    std::string s;
    for (int at : atoms) {
      auto it = a.stride.find(at);
      if (it == a.stride.end() || it->second == 0) continue;
      if (!s.empty()) s += " + ";
      s += idx(at) + (it->second == 1 ? "" : " * " + std::to_string(it->second));
    }
    return s.empty() ? "0" : s;
  }
  std::string at(int i) const {
    if (auto h = hoisted_.find(i); h != hoisted_.end()) return h->second;
    const Access& a = acc_[i];
    const BOp& op = g_.ops[i];
    switch (a.where) {
      case Access::Where::Const: return flt(op.value);
      case Access::Where::Inline: return expr(i);
      default: {
        std::string e = a.base + "[" + offset(a, op.axes) + "]";
        if (a.is_bool) return "(" + e + " != 0)";
        return e;
      }
    }
  }
  std::string expr(int i) const {
    const BOp& op = g_.ops[i];
    auto arg = [&](size_t k) { return at(op.args[k]); };
    switch (op.op) {
      case Op::Add: return "(" + arg(0) + " + " + arg(1) + ")";
      case Op::Sub: return "(" + arg(0) + " - " + arg(1) + ")";
      case Op::Mul: return "(" + arg(0) + " * " + arg(1) + ")";
      case Op::Div: {
        // By a constant or a hoisted operand: a multiplication by its reciprocal (a
        // division costs several multiplications' time; the result is within an ulp).
        const int d = op.args[1];
        if (auto q = recips_.find(d); q != recips_.end()) return "(" + arg(0) + " * " + q->second + ")";
        if (acc_[d].where == Access::Where::Const && g_.ops[d].value != 0 && std::isfinite(g_.ops[d].value))
          return "(" + arg(0) + " * " + flt(1.0 / static_cast<double>(static_cast<float>(g_.ops[d].value))) + ")";
        return "(" + arg(0) + " / " + arg(1) + ")";
      }
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

  // Operands of op i's expression (through inlined ops) that do not vary along
  // `inner`: loaded (or computed) once above the innermost loop.
  void invariants(int i, int inner, std::vector<int>* inv) const {
    for (int y : g_.ops[i].args) {
      if (acc_[y].where == Access::Where::Const || contains(*inv, y)) continue;
      if (!contains(g_.ops[y].axes, inner)) inv->push_back(y);
      else if (acc_[y].where == Access::Where::Inline) invariants(y, inner, inv);
    }
  }
  void divisors(int i, const std::vector<int>& inv, std::vector<int>* out) const {
    const BOp& op = g_.ops[i];
    if (op.kind == BKind::Elementwise && op.op == Op::Div && contains(inv, op.args[1]) && !contains(*out, op.args[1]))
      out->push_back(op.args[1]);
    for (int y : op.args)
      if (acc_[y].where == Access::Where::Inline && !contains(inv, y)) divisors(y, inv, out);
  }

  // A pointwise loop nest over `atoms` whose body is `stmt()`, an expression of op
  // `root` (an elementwise op, computed or inlined): the operands invariant in the
  // innermost loop (a row's mean or scale) hoisted above it, divisions by them
  // turned into multiplications by one reciprocal.
  void pointwise(const std::vector<int>& atoms, Phase ph, int root, const std::function<void()>& stmt,
                 const Access* dst = nullptr, const std::vector<int>* dst_axes = nullptr) {
    std::vector<int> inv, divs;
    const bool expr_root = g_.ops[root].kind == BKind::Elementwise &&
                           (acc_[root].where == Access::Where::Inline || hoist_root_ == root);
    if (!atoms.empty() && expr_root) {
      invariants(root, atoms.back(), &inv);
      divisors(root, inv, &divs);
    }
    auto hoist = [&] {
      for (int y : inv) {
        const std::string v = "h" + std::to_string(y);
        line("const float " + v + " = " + at(y) + ";");
        hoisted_[y] = v;
      }
      for (int y : divs) {
        const std::string v = "q" + std::to_string(y);
        line("const float " + v + " = 1.0f / " + hoisted_[y] + ";");
        recips_[y] = v;
      }
    };
    bool fn = false;
    const int in = atoms.empty() ? -1 : atoms.back();
    const bool vec = in >= 0 && dst && dst_axes && unit_along(*dst, in) &&
                     (hoist_root_ == root ? vec_expr_ok(root, in, inv, &fn) : vec_ok(root, in, inv, &fn)) && fn;
    if (!vec) {
      loops(atoms, ph, true, [&] { stmt(); }, hoist);
    } else {
      // Transcendental chains on unit-stride rows: 8-lane vector code (vm8's
      // functions), two vectors per iteration that GCC's scheduler interleaves (the
      // exp/erf dependency chains are long), the tail scalar.
      std::vector<int> outer(atoms.begin(), atoms.end() - 1);
      loops(outer, ph, false, [&] {
        hoist();
        const std::string i = "i" + std::to_string(in), e = ext(in, ph);
        line("{");
        ind_ += 2;
        line("int64_t " + i + " = 0;");
        auto vstmt = [&](const std::string& lane, const std::string& name) {
          lane_atom_ = in;
          lane_expr_ = lane;
          const std::string v = hoist_root_ == root ? vexpr(root, inv) : vat(root, inv);
          line("const vm8::v8 " + name + " = " + v + ";");
          lane_atom_ = -1;
          return "(" + dst->base + " + " + offset_lane(*dst, *dst_axes, in, lane) + ")";
        };
        line("for (; " + i + " + 16 <= " + e + "; " + i + " += 16) {");
        ind_ += 2;
        const std::string d0 = vstmt(i, "r0"), d1 = vstmt("(" + i + " + 8)", "r1");
        line("vm8::store(" + d0 + ", r0);");
        line("vm8::store(" + d1 + ", r1);");
        ind_ -= 2;
        line("}");
        line("for (; " + i + " + 8 <= " + e + "; " + i + " += 8) {");
        ind_ += 2;
        const std::string d = vstmt(i, "r0");
        line("vm8::store(" + d + ", r0);");
        ind_ -= 2;
        line("}");
        line("for (; " + i + " < " + e + "; ++" + i + ") {");
        ind_ += 2;
        stmt();
        ind_ -= 2;
        line("}");
        ind_ -= 2;
        line("}");
      });
    }
    hoisted_.clear();
    recips_.clear();
  }

  static bool unit_along(const Access& a, int atom) {
    auto it = a.stride.find(atom);
    return it != a.stride.end() && it->second == 1 && !a.is_bool;
  }
  std::string offset_lane(const Access& a, const std::vector<int>& axes, int atom, const std::string& lane) {
    lane_atom_ = atom;
    lane_expr_ = lane;
    std::string o = offset(a, axes);
    lane_atom_ = -1;
    return o;
  }
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
  // Whether op y's value can be read as 8 lanes along `in`: invariant (hoisted), a
  // constant, unit-stride storage, or an inlined vectorizable expression.
  bool vec_ok(int y, int in, const std::vector<int>& inv, bool* fn) const {
    if (contains(inv, y)) return true;
    const Access& a = acc_[y];
    switch (a.where) {
      case Access::Where::Const: return true;
      case Access::Where::Inline: return vec_expr_ok(y, in, inv, fn);
      case Access::Where::Scratch:
      case Access::Where::View:
      case Access::Where::Output: return unit_along(a, in);
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
  std::string vat(int y, const std::vector<int>& inv) const {
    if (contains(inv, y)) return "vm8::splat(" + hoisted_.at(y) + ")";
    const Access& a = acc_[y];
    if (a.where == Access::Where::Const) return "vm8::splat(" + flt(g_.ops[y].value) + ")";
    if (a.where == Access::Where::Inline) return vexpr(y, inv);
    return "vm8::load(" + a.base + " + " + offset(a, g_.ops[y].axes) + ")";
  }
  std::string vexpr(int i, const std::vector<int>& inv) const {
    const BOp& op = g_.ops[i];
    auto arg = [&](size_t k) { return vat(op.args[k], inv); };
    switch (op.op) {
      case Op::Add: return "(" + arg(0) + " + " + arg(1) + ")";
      case Op::Sub: return "(" + arg(0) + " - " + arg(1) + ")";
      case Op::Mul: return "(" + arg(0) + " * " + arg(1) + ")";
      case Op::Div: {
        const int d = op.args[1];
        if (auto q = recips_.find(d); q != recips_.end()) return "(" + arg(0) + " * vm8::splat(" + q->second + "))";
        if (acc_[d].where == Access::Where::Const && g_.ops[d].value != 0 && std::isfinite(g_.ops[d].value))
          return "(" + arg(0) + " * vm8::splat(" + flt(1.0 / static_cast<double>(static_cast<float>(g_.ops[d].value))) +
                 "))";
        return "(" + arg(0) + " / " + arg(1) + ")";
      }
      case Op::Neg: return "(-" + arg(0) + ")";
      case Op::Exp: return "vm8::exp(" + arg(0) + ")";
      case Op::Erf: return "vm8::erf(" + arg(0) + ")";
      case Op::Tanh: return "vm8::tanh(" + arg(0) + ")";
      case Op::Sigmoid: return "vm8::sigmoid(" + arg(0) + ")";
      default: throw Error("μGraph codegen: not a vector op");
    }
  }
  std::map<int, std::string> hoisted_, recips_;
  int hoist_root_ = -1;

  // Nested loops over `atoms` (in order); body at the innermost. simd on the inner loop.
  // `before_inner`: emitted just outside the innermost loop (loop-invariant loads).
  void loops(const std::vector<int>& atoms, Phase ph, bool simd, const std::function<void()>& inner,
             const std::function<void()>& before_inner = {}) {
    pragma_loops(atoms, ph, simd ? "#pragma omp simd" : "", inner, before_inner);
  }
  // The same with `pragma` (empty: none) on the innermost loop, e.g. a reduction clause.
  void pragma_loops(const std::vector<int>& atoms, Phase ph, const std::string& pragma,
                    const std::function<void()>& inner, const std::function<void()>& before_inner = {}) {
    for (size_t k = 0; k < atoms.size(); ++k) {
      if (k + 1 == atoms.size() && before_inner) before_inner();
      if (!pragma.empty() && k + 1 == atoms.size()) line(pragma);
      line("for (int64_t " + idx(atoms[k]) + " = 0; " + idx(atoms[k]) + " < " + ext(atoms[k], ph) + "; ++" +
           idx(atoms[k]) + ") {");
      ind_ += 2;
    }
    inner();
    for (size_t k = 0; k < atoms.size(); ++k) {
      ind_ -= 2;
      line("}");
    }
  }
  std::vector<int> layout(int i) const {
    const Access& a = acc_[i];
    if (!a.order.empty()) return a.order;
    // Views and outputs: by decreasing stride.
    std::vector<int> ord = g_.ops[i].axes;
    std::stable_sort(ord.begin(), ord.end(), [&](int x, int y) { return a.stride.at(x) > a.stride.at(y); });
    return ord;
  }

  void zero(int i) {
    Phase ph = g_.ops[i].phase;
    loops(layout(i), ph, true, [&] { line(acc_[i].base + "[" + offset(acc_[i], g_.ops[i].axes) + "] = 0.0f;"); });
  }

  void view_bases(Phase ph) {
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const BOp& op = g_.ops[i];
      if (op.kind != BKind::Input || op.phase != ph) continue;
      const IoTensor& io = p_.inputs[p_.stmts[op.stmt].input];
      std::string off;
      for (int a : op.axes) {
        std::string org = origin(a, ph);
        if (org == "0") continue;
        off += " + " + org + " * " + std::to_string(io.stride(p_.atoms, a));
      }
      std::string type = io.dtype == DType::Bool ? "const uint8_t*" : "const float*";
      int k = p_.stmts[op.stmt].input;
      if (acc_[i].where == Access::Where::View) {
        line(type + " v" + std::to_string(i) + " = in" + std::to_string(k) + off + ";");
      } else {
        // Packed copy of the input tile.
        line("{");
        ind_ += 2;
        line("const float* src = in" + std::to_string(k) + off + ";");
        Access src;
        for (int a : op.axes) src.stride[a] = io.stride(p_.atoms, a);
        loops(acc_[i].order, ph, true, [&] {
          line(acc_[i].base + "[" + offset(acc_[i], op.axes) + "] = src[" + offset(src, op.axes) + "];");
        });
        ind_ -= 2;
        line("}");
      }
    }
  }

  void emit_matmul(int i) {
    const BOp& op = g_.ops[i];
    const Access& c = acc_[i];
    std::vector<int> c_order = layout(i);
    Roles r = roles(static_cast<size_t>(i), c_order);
    // The micro-kernels overwrite C where no accumulator takes it (no zeroing pass).
    const std::string accum = fused_into_[i] >= 0 ? "1" : "0";
    auto ptr = [&](int opi, const std::vector<int>& looped) {
      const Access& a = acc_[opi];
      std::vector<int> atoms;
      for (int x : g_.ops[opi].axes)
        if (contains(looped, x)) atoms.push_back(x);
      return "(" + a.base + " + " + offset(a, atoms) + ")";
    };
    auto st = [&](int opi, int atom) -> int64_t {
      if (atom < 0) return 0;
      auto it = acc_[opi].stride.find(atom);
      return it == acc_[opi].stride.end() ? 0 : it->second;
    };
    auto materialized = [&](int opi) {
      Access::Where w = acc_[opi].where;
      return w == Access::Where::Scratch || w == Access::Where::View || w == Access::Where::Output;
    };
    const Phase ph = op.phase;
    if (r.k >= 0 && materialized(r.a) && materialized(r.b) && !acc_[r.a].is_bool && !acc_[r.b].is_bool) {
      std::vector<int> outer;
      for (int a : c_order)
        if (a != r.m && a != r.n) outer.push_back(a);
      std::string M = r.m >= 0 ? ext(r.m, ph) : "1";
      const bool gemm = st(r.b, r.n) == 1 && st(i, r.n) == 1 && st(r.a, r.k) == 1;
      const bool dot = !gemm && st(r.a, r.k) == 1 && st(r.b, r.k) == 1;
      if (!gemm && !dot) goto generic;
      auto call = [&](const std::vector<int>& looped, const std::string& rows) {
        loops(looped, ph, false, [&] {
          if (gemm)
            line("mg_gemm(" + rows + ", " + ext(r.n, ph) + ", " + ext(r.k, ph) + ", " + ptr(r.a, looped) + ", " +
                 std::to_string(st(r.a, r.m)) + ", " + ptr(r.b, looped) + ", " + std::to_string(st(r.b, r.k)) + ", " +
                 ptr(i, looped) + ", " + std::to_string(st(i, r.m)) + ", " + accum + ");");
          else
            line("mg_dot(" + rows + ", " + ext(r.n, ph) + ", " + ext(r.k, ph) + ", " + ptr(r.a, looped) + ", " +
                 std::to_string(st(r.a, r.m)) + ", " + ptr(r.b, looped) + ", " + std::to_string(st(r.b, r.n)) + ", " +
                 ptr(i, looped) + ", " + std::to_string(st(i, r.m)) + ", " + std::to_string(st(i, r.n)) + ", " +
                 accum + ");");
        });
      };
      // Outer atoms B does not have, laid out just outside m in A and C with the
      // strides of a continuation of m (GQA's query heads sharing one K/V head), are
      // more rows of one call: a few rows per call leave the register blocks empty.
      // Valid while m's tile is whole; a partial tile takes the loop.
      std::vector<int> merged;
      std::string rows = M, whole;
      if (r.m >= 0) {
        int64_t span = max_extent(r.m, ph);
        std::string e = ext(r.m, ph);
        if (e != std::to_string(span)) whole = e + " == " + std::to_string(span);
        for (size_t q = outer.size(); q-- > 0;) {
          const int o = outer[q];
          if (contains(g_.ops[r.b].axes, o) || st(r.a, o) != st(r.a, r.m) * span || st(i, o) != st(i, r.m) * span)
            break;
          merged.push_back(o);
          rows = "(" + rows + " * " + ext(o, ph) + ")";
          std::string eo = ext(o, ph);
          const int64_t so = max_extent(o, ph);
          if (eo != std::to_string(so)) break;  // a partial tile of o: no further atom continues it
          span *= so;
        }
      }
      if (merged.empty()) {
        call(outer, M);
        return;
      }
      std::vector<int> rest;
      for (int a : outer)
        if (!contains(merged, a)) rest.push_back(a);
      if (whole.empty()) {
        call(rest, rows);
        return;
      }
      line("if (" + whole + ") {");
      ind_ += 2;
      call(rest, rows);
      ind_ -= 2;
      line("} else {");
      ind_ += 2;
      call(outer, M);
      ind_ -= 2;
      line("}");
      return;
    }
  generic:
    // Generic contraction: a dot product per output element, summed in a register.
    if (fused_into_[i] < 0) zero(i);
    loops(c_order, ph, false, [&] {
      sum_into(op.reduce, ph, at(op.args[0]) + " * " + at(op.args[1]), c.base + "[" + offset(c, op.axes) + "]",
               {op.args[0], op.args[1]});
    });
  }

  // dest += the sum of `value` over `red` (innermost loop vectorized, a register accumulator).
  // `terms`: the ops whose product `value` is; where each reads as 8 lanes along the
  // one reduced atom, four vector accumulators (one accumulator's add latency bounds
  // a row's sum to a vector per 3 cycles: LayerNorm's two row sums were most of it).
  void sum_into(const std::vector<int>& red, Phase ph, const std::string& value, const std::string& dest,
                const std::vector<int>& terms = {}) {
    line("{");
    ind_ += 2;
    bool fn = false;
    bool vec = red.size() == 1 && !terms.empty();
    for (int t : terms) vec = vec && vec_ok(t, red[0], {}, &fn);
    if (vec) {
      const int in = red[0];
      const std::string i = "i" + std::to_string(in), e = ext(in, ph);
      auto term = [&](const std::string& lane) {
        lane_atom_ = in;
        lane_expr_ = lane;
        std::string v;
        for (int t : terms) v += (v.empty() ? "" : " * ") + vat(t, {});
        lane_atom_ = -1;
        return v;
      };
      line("vm8::v8 s0 = vm8::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;");
      line("int64_t " + i + " = 0;");
      line("for (; " + i + " + 32 <= " + e + "; " + i + " += 32) {");
      line("  s0 += " + term(i) + ";");
      line("  s1 += " + term("(" + i + " + 8)") + ";");
      line("  s2 += " + term("(" + i + " + 16)") + ";");
      line("  s3 += " + term("(" + i + " + 24)") + ";");
      line("}");
      line("for (; " + i + " + 8 <= " + e + "; " + i + " += 8) s0 += " + term(i) + ";");
      line("const vm8::v8 st = (s0 + s1) + (s2 + s3);");
      line("float s = ((st[0] + st[1]) + (st[2] + st[3])) + ((st[4] + st[5]) + (st[6] + st[7]));");
      line("for (; " + i + " < " + e + "; ++" + i + ") s += " + value + ";");
    } else {
      line("float s = 0.0f;");
      pragma_loops(red, ph, "#pragma omp simd reduction(+ : s)", [&] { line("s += " + value + ";"); });
    }
    line(dest + " += s;");
    ind_ -= 2;
    line("}");
  }

  void emit_reduce(int i) {
    const BOp& op = g_.ops[i];
    const Access& c = acc_[i];
    if (fused_into_[i] < 0) zero(i);
    const Phase ph = op.phase;
    std::vector<int> outer = layout(i);
    loops(outer, ph, false,
          [&] { sum_into(op.reduce, ph, at(op.args[0]), c.base + "[" + offset(c, op.axes) + "]", {op.args[0]}); });
  }

  std::string m_at(const std::vector<int>& ) const {
    Access m;
    int64_t s = 1;
    for (size_t k = g_.stab_axes.size(); k-- > 0;) {
      m.stride[g_.stab_axes[k]] = s;
      s *= max_extent(g_.stab_axes[k], g_.ops[g_.stab_exp].phase);
    }
    return offset(m, g_.stab_axes);
  }
  std::string stab(size_t off) const { return "scratch[" + std::to_string(off) + " + " + m_at({}) + "]"; }

  void emit_stab_exp(int i) {
    const BOp& op = g_.ops[i];
    const Phase ph = op.phase;
    const int x = op.args[0];
    std::vector<int> sh = ordered(g_.stab_axes);
    // The tile's maximum along the shift's atoms: a register reduction per shift.
    std::vector<int> rest;
    for (int a : layout(x))
      if (!contains(sh, a)) rest.push_back(a);
    loops(sh, ph, false, [&] {
      line("{");
      ind_ += 2;
      bool fn = false;
      if (rest.size() == 1 && vec_ok(x, rest[0], {}, &fn)) {
        // Four vector maxima (NaN skipped as below): one is bound by its latency.
        const int in = rest[0];
        const std::string i = "i" + std::to_string(in), e = ext(in, ph);
        auto term = [&](const std::string& lane) {
          lane_atom_ = in;
          lane_expr_ = lane;
          std::string v = vat(x, {});
          lane_atom_ = -1;
          return v;
        };
        line("vm8::v8 m0 = vm8::splat(-INFINITY), m1 = m0, m2 = m0, m3 = m0;");
        line("int64_t " + i + " = 0;");
        line("for (; " + i + " + 32 <= " + e + "; " + i + " += 32) {");
        for (int u = 0; u < 4; ++u) {
          const std::string mu = "m" + std::to_string(u);
          line("  { const vm8::v8 v = " + term(u ? "(" + i + " + " + std::to_string(8 * u) + ")" : i) + "; " + mu +
               " = v > " + mu + " ? v : " + mu + "; }");
        }
        line("}");
        line("for (; " + i + " + 8 <= " + e + "; " + i + " += 8) { const vm8::v8 v = " + term(i) +
             "; m0 = v > m0 ? v : m0; }");
        line("m0 = m1 > m0 ? m1 : m0; m2 = m3 > m2 ? m3 : m2; m0 = m2 > m0 ? m2 : m0;");
        line("float mx = -INFINITY;");
        line("for (int l = 0; l < 8; ++l) mx = m0[l] > mx ? m0[l] : mx;");
        line("for (; " + i + " < " + e + "; ++" + i + ") { const float xv = " + at(x) + "; mx = xv > mx ? xv : mx; }");
        line(stab(cm_off_) + " = mx;");
        ind_ -= 2;
        line("}");
        return;
      }
      line("float mx = -INFINITY;");
      pragma_loops(rest, ph, "#pragma omp simd reduction(max : mx)", [&] {
        line("const float xv = " + at(x) + ";");
        line("mx = xv > mx ? xv : mx;");
      });
      line(stab(cm_off_) + " = mx;");
      ind_ -= 2;
      line("}");
    });
    if (ph == Phase::Loop) {
      loops(sh, ph, false, [&] {
        // Neither maximum is NaN (the max reductions skip NaN), so a compare does what
        // fmax does without its libm call; the rescale's exp is mg_exp (vectorized
        // over the rows: vm::exp's scalar form is about three times the work).
        line("const float mo = " + stab(m_off_) + ", mc = " + stab(cm_off_) + ", mn = mc > mo ? mc : mo;");
        line(stab(fac_off_) + " = mn == -INFINITY ? 1.0f : (mo == -INFINITY ? 0.0f : mg_exp(mo - mn));");
        line(stab(m_off_) + " = mn;");
      });
      for (size_t a = 0; a < g_.ops.size(); ++a) {
        const BOp& acc = g_.ops[a];
        if (acc.kind != BKind::Accum || acc.scale == 0) continue;
        loops(layout(static_cast<int>(a)), Phase::Post, true, [&] {
          std::string f = stab(fac_off_);
          std::string pw = f;
          for (int k = 1; k < std::abs(acc.scale); ++k) pw += " * " + f;
          line(acc_[a].base + "[" + offset(acc_[a], acc.axes) + "] " + (acc.scale > 0 ? "*=" : "/=") + " " + pw + ";");
        });
      }
    } else {
      loops(sh, ph, true, [&] { line(stab(m_off_) + " = " + stab(cm_off_) + ";"); });
    }
    // exp evaluated unconditionally, then selected, with the shift loaded outside the
    // vector loop where it is invariant there: a branch or a load GCC cannot hoist
    // past the scratch stores stops vectorization.
    std::vector<int> lay = layout(i);
    const bool hoist = !lay.empty() && !contains(g_.stab_axes, lay.back());
    if (sum_in_exp_ >= 0 && hoist) {
      // The sum of the exponentials over the atoms the shift does not vary along,
      // accumulated in the loop that computes them (softmax's denominator).
      const int r = sum_in_exp_;
      if (fused_into_[r] < 0) zero(r);
      std::vector<int> inner;
      for (int a : lay)
        if (!contains(sh, a)) inner.push_back(a);
      loops(sh, ph, false, [&] {
        line("{");
        ind_ += 2;
        line("const float m = " + stab(m_off_) + ";");
        // Unit-stride rows: the 8-lane exp-and-sum helper (four vectors in lockstep).
        auto unit = [&](int opi) {
          const Access& a = acc_[opi];
          auto it = a.stride.find(inner.back());
          const bool mat = a.where == Access::Where::Scratch || a.where == Access::Where::View;
          return mat && !a.is_bool && it != a.stride.end() && it->second == 1;
        };
        if (inner.size() == 1 && unit(x) && unit(i)) {
          auto row = [&](int opi) {
            std::vector<int> ax;
            for (int a : g_.ops[opi].axes)
              if (a != inner[0]) ax.push_back(a);
            return "(" + acc_[opi].base + " + " + offset(acc_[opi], ax) + ")";
          };
          line(acc_[r].base + "[" + offset(acc_[r], g_.ops[r].axes) + "] += mg_exp_shift_sum(" + ext(inner[0], ph) +
               ", " + row(x) + ", m, " + row(i) + ");");
          ind_ -= 2;
          line("}");
          return;
        }
        line("float s = 0.0f;");
        pragma_loops(inner, ph, "#pragma omp simd reduction(+ : s)", [&] {
          line("const float ev = mg_exp(" + at(x) + " - m); const float e = m == -INFINITY ? 0.0f : ev;");
          line(acc_[i].base + "[" + offset(acc_[i], op.axes) + "] = e;");
          line("s += e;");
        });
        line(acc_[r].base + "[" + offset(acc_[r], g_.ops[r].axes) + "] += s;");
        ind_ -= 2;
        line("}");
      });
      return;
    }
    loops(
        lay, ph, true,
        [&] {
          line(std::string("{ ") + (hoist ? "" : "const float m = " + stab(m_off_) + "; ") +
               "const float ev = mg_exp(" + at(x) + " - m); " + acc_[i].base + "[" + offset(acc_[i], op.axes) +
               "] = m == -INFINITY ? 0.0f : ev; }");
        },
        [&] {
          if (hoist) line("const float m = " + stab(m_off_) + ";");
        });
  }

  void emit_op(int i) {
    const BOp& op = g_.ops[i];
    switch (op.kind) {
      case BKind::Input:
      case BKind::Const: return;
      case BKind::Matmul: emit_matmul(i); return;
      case BKind::Reduce:
        if (i != sum_in_exp_) emit_reduce(i);
        return;
      case BKind::Accum: {
        int a = op.args[0];
        if (fused_into_[a] == i) return;  // the contraction accumulated in place
        loops(layout(i), Phase::Post, true, [&] {
          line(acc_[i].base + "[" + offset(acc_[i], op.axes) + "] += " + at(a) + ";");
        });
        return;
      }
      case BKind::Elementwise: {
        if (acc_[i].where == Access::Where::Inline) return;
        if (i == g_.stab_exp) {
          emit_stab_exp(i);
          return;
        }
        hoist_root_ = i;
        pointwise(
            layout(i), op.phase, i,
            [&] { line(acc_[i].base + "[" + offset(acc_[i], op.axes) + "] = " + expr(i) + ";"); }, &acc_[i],
            &op.axes);
        hoist_root_ = -1;
        return;
      }
    }
  }

  void body() {
    // Grid coordinates.
    line("int64_t rest = tile;");
    for (size_t k = g_.grid.size(); k-- > 0;) {
      const GridDim& d = g_.grid[k];
      if (d.tile >= p_.extent(d.atom)) continue;
      int64_t n = (p_.extent(d.atom) + d.tile - 1) / d.tile;
      std::string a = std::to_string(d.atom);
      std::string o = (is_row(d.atom) ? "ot" : "o") + a, e = (is_row(d.atom) ? "et" : "e") + a;
      line("const int64_t " + o + " = (rest % " + std::to_string(n) + ") * " + std::to_string(d.tile) + "; rest /= " +
           std::to_string(n) + ";");
      line("const int64_t " + e + " = " + std::to_string(p_.extent(d.atom)) + " - " + o + " < " +
           std::to_string(d.tile) + " ? " + std::to_string(p_.extent(d.atom)) + " - " + o + " : " +
           std::to_string(d.tile) + ";");
    }
    line("(void)rest;");
    for (int r : rows_) {
      std::string a = std::to_string(r);
      const bool split = g_.grid_dim(r) && g_.grid_dim(r)->tile < p_.extent(r);
      line("for (int64_t r" + a + " = 0; r" + a + " < " + (split ? "et" + a : std::to_string(p_.extent(r))) + "; ++r" +
           a + ") {");
      ind_ += 2;
      line("const int64_t o" + a + " = " + (split ? "ot" + a + " + " : std::string()) + "r" + a + ";");
    }
    view_bases(Phase::Pre);
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].phase == Phase::Pre) emit_op(static_cast<int>(i));
    if (g_.loop_atom >= 0) {
      for (size_t i = 0; i < g_.ops.size(); ++i)
        if (g_.ops[i].kind == BKind::Accum) zero(static_cast<int>(i));
      if (g_.stab_exp >= 0 && g_.ops[g_.stab_exp].phase == Phase::Loop)
        loops(ordered(g_.stab_axes), Phase::Loop, true, [&] { line(stab(m_off_) + " = -INFINITY;"); });
      const int64_t chunks = g_.num_chunks(p_), E = p_.extent(g_.loop_atom);
      line("for (int64_t c = 0; c < " + std::to_string(chunks) + "; ++c) {");
      ind_ += 2;
      if (!skip_.empty()) line("if (mg_skip[tile * " + std::to_string(chunks) + " + c] == '1') continue;");
      line("const int64_t oc = c * " + std::to_string(g_.chunk) + ";");
      if (g_.chunk < E)
        line("const int64_t ec = " + std::to_string(E) + " - oc < " + std::to_string(g_.chunk) + " ? " +
             std::to_string(E) + " - oc : " + std::to_string(g_.chunk) + ";");
      line("(void)oc;");
      view_bases(Phase::Loop);
      for (size_t i = 0; i < g_.ops.size(); ++i)
        if (g_.ops[i].phase == Phase::Loop) emit_op(static_cast<int>(i));
      for (size_t i = 0; i < g_.ops.size(); ++i)
        if (g_.ops[i].kind == BKind::Accum) emit_op(static_cast<int>(i));
      ind_ -= 2;
      line("}");
      for (size_t i = 0; i < g_.ops.size(); ++i)
        if (g_.ops[i].phase == Phase::Post && g_.ops[i].kind != BKind::Accum) emit_op(static_cast<int>(i));
    }
    // Outputs: unscaled where the online-softmax rule left a power of exp(-m).
    for (const auto& [oi, k] : g_.outputs) {
      const BOp& op = g_.ops[oi];
      const IoTensor& io = p_.outputs[k];
      Access dst;
      std::string off;
      for (int a : op.axes) {
        dst.stride[a] = io.stride(p_.atoms, a);
        std::string org = origin(a, Phase::Post);
        if (org != "0") off += " + " + org + " * " + std::to_string(dst.stride[a]);
      }
      dst.base = "(out" + std::to_string(k) + off + ")";
      std::vector<int> ord = op.axes;
      std::stable_sort(ord.begin(), ord.end(), [&](int x, int y) { return dst.stride[x] > dst.stride[y]; });
      Phase ph = g_.loop_atom >= 0 ? Phase::Post : Phase::Pre;
      pointwise(ord, ph, oi, [&] {
        std::string v = at(oi);
        if (op.scale != 0) {
          std::string e = "vm::exp(" + stab(m_off_) + ")";
          for (int s = 0; s < std::abs(op.scale); ++s) v = "(" + v + (op.scale > 0 ? " * " : " / ") + e + ")";
        }
        line(dst.base + "[" + offset(dst, op.axes) + "] = " + v + ";");
      }, op.scale == 0 ? &dst : nullptr, &op.axes);
    }
    for (size_t k = 0; k < rows_.size(); ++k) {
      ind_ -= 2;
      line("}");
    }
  }

  const Program& p_;
  const BlockGraph& g_;
  const std::vector<uint8_t>& skip_;
};

}  // namespace

std::string generate_source(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip) {
  return Gen(p, g, skip).run();
}

}  // namespace isomer::mugraph
