// The emitter's contractions (micro-kernel calls or dot products), row sums in
// four vector accumulators, and the online-softmax rule: per-shift maxima, the
// rescale of accumulators when the loop moves the shift, the exponentials and
// their sum (codegen_emitter.h).
#include <algorithm>
#include <cstdlib>

#include "mugraph/codegen_emitter.h"

namespace isomer::mugraph {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

void Emitter::emit_matmul(int i) {
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
  // The micro-kernels overwrite C where no accumulator takes it, or where the loop's
  // one chunk makes this the accumulator's only store (no zeroing pass).
  const std::string accum = k_.fused_into[i] >= 0 && !k_.one_chunk ? "1" : "0";
  // C written straight into the program output (a row divisor moved into the store):
  // the output's base at this tile's origin.
  const std::string c_base = m.output >= 0 ? output_base(m.output, i) : k_.acc[i].base;
  // Atoms looped around the calls (the pack's loops), read as well as the calls' own.
  std::vector<int> fixed;
  auto ptr = [&](int opi, const std::vector<int>& looped) {
    const Access& a = k_.acc[opi];
    std::vector<int> atoms;
    for (int x : g_.ops[opi].axes)
      if (contains(looped, x) || contains(fixed, x)) atoms.push_back(x);
    return "(" + (opi == i ? c_base : a.base) + " + " + x_.offset(a, atoms) + ")";
  };
  auto st = [&](int opi, int atom) { return std::to_string(k_.stride(opi, atom)); };
  const std::string packed = "(scratch + " + std::to_string(m.pack) + ")";
  auto call = [&](const std::vector<int>& looped, const std::string& rows) {
    loops(looped, ph, false, [&] {
      std::string epi;
      if (m.alpha != 1.0f || m.divisor >= 0)
        epi = ", mg_epi{1, " + float_literal(m.alpha) + ", " + (m.divisor >= 0 ? ptr(m.divisor, looped) : "nullptr") +
              ", " + (m.divisor >= 0 ? st(m.divisor, r.m) : "0") + "}";
      const std::string common = rows + ", " + ext(r.n, ph) + ", " + ext(r.k, ph) + ", " + ptr(r.a, looped) + ", " +
                                 st(r.a, r.m) + ", ";
      if (m.pack >= 0)
        line("mg_gemm(" + common + packed + ", " + ext(r.n, ph) + ", " + ptr(i, looped) + ", " + st(i, r.m) + ", " +
             accum + epi + ");");
      else if (m.kernel == MatmulPlan::Kernel::Gemm)
        line("mg_gemm(" + common + ptr(r.b, looped) + ", " + st(r.b, r.k) + ", " + ptr(i, looped) + ", " +
             st(i, r.m) + ", " + accum + epi + ");");
      else
        line("mg_dot(" + common + ptr(r.b, looped) + ", " + st(r.b, r.n) + ", " + ptr(i, looped) + ", " +
             st(i, r.m) + ", " + st(i, r.n) + ", " + accum + epi + ");");
    });
  };
  const std::string M = r.m >= 0 ? ext(r.m, ph) : "1";
  // The calls over `outer` less the pack's atoms, their rows merged where they continue m.
  auto calls = [&] {
    std::vector<int> outer, rest;
    for (int a : m.outer)
      if (!contains(m.shared, a)) outer.push_back(a);
    for (int a : outer)
      if (!contains(m.merged, a)) rest.push_back(a);
    if (m.merged.empty()) {
      call(outer, M);
      return;
    }
    std::string rows = M;
    for (int o : m.merged) rows = "(" + rows + " * " + ext(o, ph) + ")";
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
    call(outer, M);
    ind_ -= 2;
    line("}");
  };
  if (m.pack < 0) {
    calls();
    return;
  }
  // Bᵀ packed once per slice of B (n x k, row stride N), shared by every call below.
  loops(m.shared, ph, false, [&] {
    fixed = m.shared;
    const std::string b = ptr(r.b, {}), n = ext(r.n, ph), kk = ext(r.k, ph);
    line("#ifdef MG_AVX2");
    line("mg_pack_t(" + n + ", " + kk + ", " + b + ", " + st(r.b, r.n) + ", " + packed + ", " + n + ");");
    line("#else");
    line("for (int64_t pn = 0; pn < " + n + "; ++pn)");
    line("  for (int64_t pk = 0; pk < " + kk + "; ++pk) " + packed + "[pk * " + n + " + pn] = " + b + "[pn * " +
         st(r.b, r.n) + " + pk];");
    line("#endif");
    calls();
    fixed.clear();
  });
}

void Emitter::sum_into(const std::vector<int>& red, Phase ph, const std::string& value, const std::string& dest,
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
    line("mgv::vf s0 = mgv::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;");
    line("int64_t " + i + " = 0;");
    line("for (; " + i + " + 4 * mgv::lanes <= " + e + "; " + i + " += 4 * mgv::lanes) {");
    line("  s0 += " + term(i) + ";");
    line("  s1 += " + term("(" + i + " + mgv::lanes)") + ";");
    line("  s2 += " + term("(" + i + " + 2 * mgv::lanes)") + ";");
    line("  s3 += " + term("(" + i + " + 3 * mgv::lanes)") + ";");
    line("}");
    line("for (; " + i + " + mgv::lanes <= " + e + "; " + i + " += mgv::lanes) s0 += " + term(i) + ";");
    line("float s = mgv::hsum((s0 + s1) + (s2 + s3));");
    line("for (; " + i + " < " + e + "; ++" + i + ") s += " + value + ";");
  } else {
    line("float s = 0.0f;");
    pragma_loops(red, ph, "#pragma omp simd reduction(+ : s)", [&] { line("s += " + value + ";"); });
  }
  line(dest + " += s;");
  ind_ -= 2;
  line("}");
}

void Emitter::emit_reduce(int i) {
  const BOp& op = g_.ops[i];
  if (k_.fused_into[i] < 0) zero(i);
  loops(k_.layout(i), op.phase, false, [&] {
    sum_into(op.reduce, op.phase, x_.at(op.args[0]), elem(i), {op.args[0]}, k_.reduce_vector.at(i));
  });
}

std::string Emitter::stab(size_t off) const {
  Access m;
  int64_t s = 1;
  for (size_t k = g_.stab_axes.size(); k-- > 0;) {
    m.stride[g_.stab_axes[k]] = s;
    s *= k_.max_extent(g_.stab_axes[k], g_.ops[g_.stab_exp].phase);
  }
  return "scratch[" + std::to_string(off) + " + " + x_.offset(m, g_.stab_axes) + "]";
}

void Emitter::stab_max(int x, Phase ph) {
  const StabPlan& sp = k_.stab;
  loops(sp.shift, ph, false, [&] {
    line("{");
    ind_ += 2;
    if (sp.max_helper) {
      std::vector<int> ax;
      for (int a : g_.ops[x].axes)
        if (a != sp.rest[0]) ax.push_back(a);
      line("const float mx = mg_row_max(" + ext(sp.rest[0], ph) + ", (" + k_.acc[x].base + " + " +
           x_.offset(k_.acc[x], ax) + "));");
    } else if (sp.vector_max) {
      // Four vector maxima (NaN skipped as below): one is bound by its latency.
      const int in = sp.rest[0];
      const std::string i = "i" + std::to_string(in), e = ext(in, ph);
      auto term = [&](const std::string& lane) {
        x_.set_lane(in, lane);
        std::string v = x_.vat(x, {});
        x_.clear_lane();
        return v;
      };
      line("mgv::vf m0 = mgv::splat(-INFINITY), m1 = m0, m2 = m0, m3 = m0;");
      line("int64_t " + i + " = 0;");
      line("for (; " + i + " + 4 * mgv::lanes <= " + e + "; " + i + " += 4 * mgv::lanes) {");
      for (int u = 0; u < 4; ++u) {
        const std::string mu = "m" + std::to_string(u);
        line("  { const mgv::vf v = " + term(u ? "(" + i + " + " + std::to_string(u) + " * mgv::lanes)" : i) + "; " + mu +
             " = v > " + mu + " ? v : " + mu + "; }");
      }
      line("}");
      line("for (; " + i + " + mgv::lanes <= " + e + "; " + i + " += mgv::lanes) { const mgv::vf v = " + term(i) +
           "; m0 = v > m0 ? v : m0; }");
      line("m0 = m1 > m0 ? m1 : m0; m2 = m3 > m2 ? m3 : m2; m0 = m2 > m0 ? m2 : m0;");
      line("float mx = mgv::hmax(m0);");
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

void Emitter::emit_stab_exp(int i) {
  const StabPlan& sp = k_.stab;
  const BOp& op = g_.ops[i];
  const Phase ph = op.phase;
  const int x = op.args[0];
  auto row = [&](int opi, int inner) {
    std::vector<int> ax;
    for (int a : g_.ops[opi].axes)
      if (a != inner) ax.push_back(a);
    return "(" + k_.acc[opi].base + " + " + x_.offset(k_.acc[opi], ax) + ")";
  };
  // A straight loop's chunk sees every value the shift varies over: no rescale.
  const bool fixed_shift = ph != Phase::Loop || straight();
  if (fixed_shift && sp.sum >= 0 && sp.max_helper && sp.shift_sum_helper && sp.inner[0] == sp.rest[0]) {
    // No loop moves the shift: each row's maximum, then its exponentials and their
    // sum, while the row is in L1 (two passes over all rows read them from L2).
    const int r = sp.sum;
    if (k_.fused_into[r] < 0) zero(r);
    loops(sp.shift, ph, false, [&] {
      line("{");
      ind_ += 2;
      const std::string n = ext(sp.inner[0], ph);
      line("const float m = mg_row_max(" + n + ", " + row(x, sp.inner[0]) + ");");
      line(stab(k_.cm_off) + " = m;");
      line(stab(k_.m_off) + " = m;");
      line(elem(r) + " += mg_exp_shift_sum(" + n + ", " + row(x, sp.inner[0]) + ", m, " + row(i, sp.inner[0]) + ");");
      ind_ -= 2;
      line("}");
    });
    return;
  }
  stab_max(x, ph);
  if (!fixed_shift) {
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
        line(elem(r) + " += mg_exp_shift_sum(" + ext(sp.inner[0], ph) + ", " + row(x, sp.inner[0]) + ", m, " +
             row(i, sp.inner[0]) + ");");
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

}  // namespace isomer::mugraph
