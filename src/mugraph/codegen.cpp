// Writes the C++ of a kernel plan (codegen_plan.h): the function frame and its
// thread team, each tile's grid coordinates and row loops, then every op in its
// phase as loop nests, micro-kernel calls, vector row sums and maxima, and the
// online-softmax rule's rescales, then the outputs. Every choice is the plan's; this
// file only spells it (values through ExprWriter, codegen_expr.h).
#include "mugraph/codegen.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "mugraph/codegen_expr.h"
#include "mugraph/codegen_plan.h"
#include "mugraph/codegen_prelude.h"
#include "mugraph/vmath_text.h"

namespace isomer::mugraph {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class Emitter {
 public:
  Emitter(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip)
      : p_(p), g_(g), skip_(skip), k_(plan_kernel(p, g)), x_(k_) {}

  std::string run() {
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
    s << "    float* scratch = static_cast<float*>(std::aligned_alloc(64, " << std::max<size_t>(k_.scratch, 16) * 4
      << "));\n";
    s << "#pragma omp for schedule(dynamic, 1)\n";
    s << "    for (int64_t tile = 0; tile < " << g_.num_tiles(p_) << "; ++tile) {\n";
    s << body_text;
    s << "    }\n    std::free(scratch);\n  }\n}\n";
    return s.str();
  }

 private:
  const Program& p_;
  const BlockGraph& g_;
  const std::vector<uint8_t>& skip_;
  const KernelPlan k_;
  ExprWriter x_;
  std::ostringstream o_;
  int ind_ = 0;

  void line(const std::string& s) { o_ << std::string(static_cast<size_t>(ind_), ' ') << s << "\n"; }

  // The tile's extent of `atom` (a name where it varies) and its origin in the tensor.
  std::string ext(int atom, Phase ph) const {
    if (k_.is_row(atom)) return "1";
    if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "e" + std::to_string(atom);
    if (atom == g_.loop_atom && ph == Phase::Loop && g_.chunk < p_.extent(atom)) return "ec";
    return std::to_string(k_.max_extent(atom, ph));
  }
  std::string origin(int atom, Phase ph) const {
    if (k_.is_row(atom)) return "o" + std::to_string(atom);
    if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "o" + std::to_string(atom);
    if (atom == g_.loop_atom && ph == Phase::Loop) return "oc";
    return "0";
  }
  std::string elem(int i) const { return k_.acc[i].base + "[" + x_.offset(k_.acc[i], g_.ops[i].axes) + "]"; }

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
      const std::string i = x_.idx(atoms[k]);
      line("for (int64_t " + i + " = 0; " + i + " < " + ext(atoms[k], ph) + "; ++" + i + ") {");
      ind_ += 2;
    }
    inner();
    for (size_t k = 0; k < atoms.size(); ++k) {
      ind_ -= 2;
      line("}");
    }
  }

  void zero(int i) {
    loops(k_.layout(i), g_.ops[i].phase, true, [&] { line(elem(i) + " = 0.0f;"); });
  }

  // A pointwise loop nest whose body is `stmt()`; the vector form stores 8 lanes of
  // the plan's root at `dst`, the plan's number of vectors per iteration (their
  // long exp/erf dependency chains interleaved by GCC's scheduler), then single
  // vectors, the tail scalar; the plan's row sums of the value accumulated on the way.
  void pointwise(const PointwisePlan& w, const std::function<void()>& stmt, const Access* dst,
                 const std::vector<int>* dst_axes) {
    auto hoist = [&] {
      for (int y : w.hoisted) {
        const std::string v = "h" + std::to_string(y);
        line("const float " + v + " = " + x_.at(y) + ";");
        x_.hoisted[y] = v;
      }
      for (int y : w.recips) {
        const std::string v = "q" + std::to_string(y);
        line("const float " + v + " = 1.0f / " + x_.hoisted[y] + ";");
        x_.recips[y] = v;
      }
    };
    if (!w.vector) {
      loops(w.atoms, w.phase, true, [&] { stmt(); }, hoist);
    } else {
      for (const auto& [r, power] : w.sums)
        if (k_.fused_into[r] < 0) zero(r);
      const int in = w.atoms.back();
      std::vector<int> outer(w.atoms.begin(), w.atoms.end() - 1);
      loops(outer, w.phase, false, [&] {
        hoist();
        const std::string i = "i" + std::to_string(in), e = ext(in, w.phase);
        line("{");
        ind_ += 2;
        // Row sums in four vector accumulators each, added up as sum_into does.
        auto sum = [](int r, int u) { return "s" + std::to_string(r) + "_" + std::to_string(u); };
        auto term = [&](const std::string& v, int power) { return power == 2 ? v + " * " + v : v; };
        for (const auto& [r, power] : w.sums)
          line("vm8::v8 " + sum(r, 0) + " = vm8::splat(0.0f), " + sum(r, 1) + " = " + sum(r, 0) + ", " + sum(r, 2) +
               " = " + sum(r, 0) + ", " + sum(r, 3) + " = " + sum(r, 0) + ";");
        line("int64_t " + i + " = 0;");
        auto vstmt = [&](const std::string& lane, const std::string& name) {
          x_.set_lane(in, lane);
          const std::string v = w.own ? x_.vexpr(w.root, w.hoisted) : x_.vat(w.root, w.hoisted);
          line("const vm8::v8 " + name + " = " + v + ";");
          x_.clear_lane();
          return "(" + dst->base + " + " + x_.offset_lane(*dst, *dst_axes, in, lane) + ")";
        };
        const std::string step = std::to_string(8 * w.unroll);
        line("for (; " + i + " + " + step + " <= " + e + "; " + i + " += " + step + ") {");
        ind_ += 2;
        std::vector<std::string> dsts;
        for (int u = 0; u < w.unroll; ++u)
          dsts.push_back(vstmt(u ? "(" + i + " + " + std::to_string(8 * u) + ")" : i, "r" + std::to_string(u)));
        for (int u = 0; u < w.unroll; ++u) line("vm8::store(" + dsts[u] + ", r" + std::to_string(u) + ");");
        for (const auto& [r, power] : w.sums)
          for (int u = 0; u < 4; ++u) line(sum(r, u) + " += " + term("r" + std::to_string(u), power) + ";");
        ind_ -= 2;
        line("}");
        line("for (; " + i + " + 8 <= " + e + "; " + i + " += 8) {");
        ind_ += 2;
        const std::string d = vstmt(i, "r0");
        line("vm8::store(" + d + ", r0);");
        for (const auto& [r, power] : w.sums) line(sum(r, 0) + " += " + term("r0", power) + ";");
        ind_ -= 2;
        line("}");
        for (const auto& [r, power] : w.sums) {
          const std::string st = "st" + std::to_string(r), s = "s" + std::to_string(r);
          line("const vm8::v8 " + st + " = (" + sum(r, 0) + " + " + sum(r, 1) + ") + (" + sum(r, 2) + " + " +
               sum(r, 3) + ");");
          line("float " + s + " = ((" + st + "[0] + " + st + "[1]) + (" + st + "[2] + " + st + "[3])) + ((" + st +
               "[4] + " + st + "[5]) + (" + st + "[6] + " + st + "[7]));");
        }
        line("for (; " + i + " < " + e + "; ++" + i + ") {");
        ind_ += 2;
        stmt();
        for (const auto& [r, power] : w.sums)
          line("s" + std::to_string(r) + " += " + term(elem(w.root), power) + ";");
        ind_ -= 2;
        line("}");
        for (const auto& [r, power] : w.sums) line(elem(r) + " += s" + std::to_string(r) + ";");
        ind_ -= 2;
        line("}");
      });
    }
    x_.hoisted.clear();
    x_.recips.clear();
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
      if (k_.acc[i].where == Access::Where::View) {
        line(type + " v" + std::to_string(i) + " = in" + std::to_string(k) + off + ";");
      } else {
        // Packed copy of the input tile.
        line("{");
        ind_ += 2;
        line("const float* src = in" + std::to_string(k) + off + ";");
        Access src;
        for (int a : op.axes) src.stride[a] = io.stride(p_.atoms, a);
        loops(k_.acc[i].order, ph, true,
              [&] { line(elem(static_cast<int>(i)) + " = src[" + x_.offset(src, op.axes) + "];"); });
        ind_ -= 2;
        line("}");
      }
    }
  }

  void emit_matmul(int i) {
    const BOp& op = g_.ops[i];
    const MatmulPlan& m = k_.matmuls.at(i);
    const Roles& r = m.roles;
    const Phase ph = op.phase;
    if (m.kernel == MatmulPlan::Kernel::Generic) {
      // A dot product per output element, summed in a register.
      if (k_.fused_into[i] < 0) zero(i);
      loops(m.order, ph, false, [&] {
        sum_into(op.reduce, ph, x_.at(op.args[0]) + " * " + x_.at(op.args[1]), elem(i), {op.args[0], op.args[1]},
                 m.sum_vector);
      });
      return;
    }
    // The micro-kernels overwrite C where no accumulator takes it (no zeroing pass).
    const std::string accum = k_.fused_into[i] >= 0 ? "1" : "0";
    auto ptr = [&](int opi, const std::vector<int>& looped) {
      const Access& a = k_.acc[opi];
      std::vector<int> atoms;
      for (int x : g_.ops[opi].axes)
        if (contains(looped, x)) atoms.push_back(x);
      return "(" + a.base + " + " + x_.offset(a, atoms) + ")";
    };
    auto st = [&](int opi, int atom) { return std::to_string(k_.stride(opi, atom)); };
    auto call = [&](const std::vector<int>& looped, const std::string& rows) {
      loops(looped, ph, false, [&] {
        const std::string common = rows + ", " + ext(r.n, ph) + ", " + ext(r.k, ph) + ", " + ptr(r.a, looped) + ", " +
                                   st(r.a, r.m) + ", " + ptr(r.b, looped) + ", ";
        if (m.kernel == MatmulPlan::Kernel::Gemm)
          line("mg_gemm(" + common + st(r.b, r.k) + ", " + ptr(i, looped) + ", " + st(i, r.m) + ", " + accum + ");");
        else
          line("mg_dot(" + common + st(r.b, r.n) + ", " + ptr(i, looped) + ", " + st(i, r.m) + ", " + st(i, r.n) +
               ", " + accum + ");");
      });
    };
    const std::string M = r.m >= 0 ? ext(r.m, ph) : "1";
    if (m.merged.empty()) {
      call(m.outer, M);
      return;
    }
    std::string rows = M;
    for (int o : m.merged) rows = "(" + rows + " * " + ext(o, ph) + ")";
    std::vector<int> rest;
    for (int a : m.outer)
      if (!contains(m.merged, a)) rest.push_back(a);
    if (!k_.variable_extent(r.m, ph)) {
      call(rest, rows);
      return;
    }
    line("if (" + M + " == " + std::to_string(k_.max_extent(r.m, ph)) + ") {");
    ind_ += 2;
    call(rest, rows);
    ind_ -= 2;
    line("} else {");
    ind_ += 2;
    call(m.outer, M);
    ind_ -= 2;
    line("}");
  }

  // dest += the sum of `value` over `red` (innermost loop vectorized, a register
  // accumulator). `vec`: each of `terms` (the ops whose product `value` is) reads
  // as 8 lanes along the one reduced atom: four vector accumulators.
  void sum_into(const std::vector<int>& red, Phase ph, const std::string& value, const std::string& dest,
                const std::vector<int>& terms, bool vec) {
    line("{");
    ind_ += 2;
    if (vec) {
      const int in = red[0];
      const std::string i = "i" + std::to_string(in), e = ext(in, ph);
      auto term = [&](const std::string& lane) {
        x_.set_lane(in, lane);
        std::string v;
        for (int t : terms) v += (v.empty() ? "" : " * ") + x_.vat(t, {});
        x_.clear_lane();
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
    if (k_.fused_into[i] < 0) zero(i);
    loops(k_.layout(i), op.phase, false, [&] {
      sum_into(op.reduce, op.phase, x_.at(op.args[0]), elem(i), {op.args[0]}, k_.reduce_vector.at(i));
    });
  }

  // The stabilizer's per-shift values (shift m, rescale, chunk maximum) in scratch.
  std::string stab(size_t off) const {
    Access m;
    int64_t s = 1;
    for (size_t k = g_.stab_axes.size(); k-- > 0;) {
      m.stride[g_.stab_axes[k]] = s;
      s *= k_.max_extent(g_.stab_axes[k], g_.ops[g_.stab_exp].phase);
    }
    return "scratch[" + std::to_string(off) + " + " + x_.offset(m, g_.stab_axes) + "]";
  }

  // The tile's maximum along the shift's atoms: a register reduction per shift.
  void stab_max(int x, Phase ph) {
    const StabPlan& sp = k_.stab;
    loops(sp.shift, ph, false, [&] {
      line("{");
      ind_ += 2;
      if (sp.vector_max) {
        // Four vector maxima (NaN skipped as below): one is bound by its latency.
        const int in = sp.rest[0];
        const std::string i = "i" + std::to_string(in), e = ext(in, ph);
        auto term = [&](const std::string& lane) {
          x_.set_lane(in, lane);
          std::string v = x_.vat(x, {});
          x_.clear_lane();
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
        line("for (; " + i + " < " + e + "; ++" + i + ") { const float xv = " + x_.at(x) +
             "; mx = xv > mx ? xv : mx; }");
      } else {
        line("float mx = -INFINITY;");
        pragma_loops(sp.rest, ph, "#pragma omp simd reduction(max : mx)", [&] {
          line("const float xv = " + x_.at(x) + ";");
          line("mx = xv > mx ? xv : mx;");
        });
      }
      line(stab(k_.cm_off) + " = mx;");
      ind_ -= 2;
      line("}");
    });
  }

  void emit_stab_exp(int i) {
    const StabPlan& sp = k_.stab;
    const BOp& op = g_.ops[i];
    const Phase ph = op.phase;
    const int x = op.args[0];
    stab_max(x, ph);
    if (ph == Phase::Loop) {
      loops(sp.shift, ph, false, [&] {
        // Neither maximum is NaN (the max reductions skip NaN), so a compare does what
        // fmax does without its libm call; the rescale's exp is mg_exp (vectorized
        // over the rows: vm::exp's scalar form is about three times the work).
        line("const float mo = " + stab(k_.m_off) + ", mc = " + stab(k_.cm_off) + ", mn = mc > mo ? mc : mo;");
        line(stab(k_.fac_off) + " = mn == -INFINITY ? 1.0f : (mo == -INFINITY ? 0.0f : mg_exp(mo - mn));");
        line(stab(k_.m_off) + " = mn;");
      });
      for (size_t a = 0; a < g_.ops.size(); ++a) {
        const BOp& acc = g_.ops[a];
        if (acc.kind != BKind::Accum || acc.scale == 0) continue;
        loops(k_.layout(static_cast<int>(a)), Phase::Post, true, [&] {
          std::string f = stab(k_.fac_off);
          std::string pw = f;
          for (int k = 1; k < std::abs(acc.scale); ++k) pw += " * " + f;
          line(elem(static_cast<int>(a)) + " " + (acc.scale > 0 ? "*=" : "/=") + " " + pw + ";");
        });
      }
    } else {
      loops(sp.shift, ph, true, [&] { line(stab(k_.m_off) + " = " + stab(k_.cm_off) + ";"); });
    }
    // exp evaluated unconditionally, then selected, with the shift loaded outside the
    // vector loop where it is invariant there: a branch or a load GCC cannot hoist
    // past the scratch stores stops vectorization.
    if (sp.sum >= 0) {
      // The sum of the exponentials over the atoms the shift does not vary along,
      // accumulated in the loop that computes them (softmax's denominator).
      const int r = sp.sum;
      if (k_.fused_into[r] < 0) zero(r);
      loops(sp.shift, ph, false, [&] {
        line("{");
        ind_ += 2;
        line("const float m = " + stab(k_.m_off) + ";");
        if (sp.shift_sum_helper) {
          // Unit-stride rows: the 8-lane exp-and-sum helper (four vectors in lockstep).
          auto row = [&](int opi) {
            std::vector<int> ax;
            for (int a : g_.ops[opi].axes)
              if (a != sp.inner[0]) ax.push_back(a);
            return "(" + k_.acc[opi].base + " + " + x_.offset(k_.acc[opi], ax) + ")";
          };
          line(elem(r) + " += mg_exp_shift_sum(" + ext(sp.inner[0], ph) + ", " + row(x) + ", m, " + row(i) + ");");
        } else {
          line("float s = 0.0f;");
          pragma_loops(sp.inner, ph, "#pragma omp simd reduction(+ : s)", [&] {
            line("const float ev = mg_exp(" + x_.at(x) + " - m); const float e = m == -INFINITY ? 0.0f : ev;");
            line(elem(i) + " = e;");
            line("s += e;");
          });
          line(elem(r) + " += s;");
        }
        ind_ -= 2;
        line("}");
      });
      return;
    }
    loops(
        sp.layout, ph, true,
        [&] {
          line(std::string("{ ") + (sp.hoist ? "" : "const float m = " + stab(k_.m_off) + "; ") +
               "const float ev = mg_exp(" + x_.at(x) + " - m); " + elem(i) + " = m == -INFINITY ? 0.0f : ev; }");
        },
        [&] {
          if (sp.hoist) line("const float m = " + stab(k_.m_off) + ";");
        });
  }

  void emit_op(int i) {
    const BOp& op = g_.ops[i];
    switch (op.kind) {
      case BKind::Input:
      case BKind::Const: return;
      case BKind::Matmul:
        if (!k_.summed_in.count(i)) emit_matmul(i);
        return;
      case BKind::Reduce:
        if (i != k_.stab.sum && !k_.summed_in.count(i)) emit_reduce(i);
        return;
      case BKind::Accum: {
        int a = op.args[0];
        if (k_.fused_into[a] == i) return;  // the contraction accumulated in place
        loops(k_.layout(i), Phase::Post, true, [&] { line(elem(i) + " += " + x_.at(a) + ";"); });
        return;
      }
      case BKind::Elementwise: {
        if (k_.acc[i].where == Access::Where::Inline) return;
        if (i == g_.stab_exp) {
          emit_stab_exp(i);
          return;
        }
        pointwise(k_.pointwise.at(i), [&] { line(elem(i) + " = " + x_.expr(i) + ";"); }, &k_.acc[i], &op.axes);
        return;
      }
    }
  }

  // Grid coordinates of the tile, then one loop per row atom.
  void tile_frame() {
    line("int64_t rest = tile;");
    for (size_t k = g_.grid.size(); k-- > 0;) {
      const GridDim& d = g_.grid[k];
      if (d.tile >= p_.extent(d.atom)) continue;
      int64_t n = (p_.extent(d.atom) + d.tile - 1) / d.tile;
      std::string a = std::to_string(d.atom);
      std::string o = (k_.is_row(d.atom) ? "ot" : "o") + a, e = (k_.is_row(d.atom) ? "et" : "e") + a;
      line("const int64_t " + o + " = (rest % " + std::to_string(n) + ") * " + std::to_string(d.tile) + "; rest /= " +
           std::to_string(n) + ";");
      line("const int64_t " + e + " = " + std::to_string(p_.extent(d.atom)) + " - " + o + " < " +
           std::to_string(d.tile) + " ? " + std::to_string(p_.extent(d.atom)) + " - " + o + " : " +
           std::to_string(d.tile) + ";");
    }
    line("(void)rest;");
    for (int r : k_.rows) {
      std::string a = std::to_string(r);
      const bool split = g_.grid_dim(r) && g_.grid_dim(r)->tile < p_.extent(r);
      line("for (int64_t r" + a + " = 0; r" + a + " < " + (split ? "et" + a : std::to_string(p_.extent(r))) + "; ++r" +
           a + ") {");
      ind_ += 2;
      line("const int64_t o" + a + " = " + (split ? "ot" + a + " + " : std::string()) + "r" + a + ";");
    }
  }

  void for_loop() {
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].kind == BKind::Accum) zero(static_cast<int>(i));
    if (g_.stab_exp >= 0 && g_.ops[g_.stab_exp].phase == Phase::Loop)
      loops(k_.stab.shift, Phase::Loop, true, [&] { line(stab(k_.m_off) + " = -INFINITY;"); });
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
  void write_output(const OutputPlan& out) {
    const BOp& op = g_.ops[out.op];
    Access dst = out.dst;
    std::string off;
    for (int a : op.axes) {
      std::string org = origin(a, Phase::Post);
      if (org != "0") off += " + " + org + " * " + std::to_string(dst.stride[a]);
    }
    dst.base = "(out" + std::to_string(out.k) + off + ")";
    pointwise(
        out.loop,
        [&] {
          std::string v = x_.at(out.op);
          if (op.scale != 0) {
            std::string e = "vm::exp(" + stab(k_.m_off) + ")";
            for (int s = 0; s < std::abs(op.scale); ++s) v = "(" + v + (op.scale > 0 ? " * " : " / ") + e + ")";
          }
          line(dst.base + "[" + x_.offset(dst, op.axes) + "] = " + v + ";");
        },
        &dst, &op.axes);
  }

  void body() {
    tile_frame();
    view_bases(Phase::Pre);
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].phase == Phase::Pre) emit_op(static_cast<int>(i));
    if (g_.loop_atom >= 0) for_loop();
    for (const OutputPlan& out : k_.outputs) write_output(out);
    for (size_t k = 0; k < k_.rows.size(); ++k) {
      ind_ -= 2;
      line("}");
    }
  }
};

}  // namespace

std::string generate_source(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip) {
  return Emitter(p, g, skip).run();
}

}  // namespace isomer::mugraph
