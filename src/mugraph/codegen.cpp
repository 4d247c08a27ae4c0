// Writes the C++ of a kernel plan (codegen_plan.h): the function frame and its
// thread team, each tile's grid coordinates and row loops, then every op in its
// phase as loop nests and pointwise loops (contractions, row sums and the
// online-softmax rule in codegen_reductions.cpp), then the outputs. Every choice is
// the plan's; the emitter (codegen_emitter.h) only spells it.
#include "mugraph/codegen.h"

#include <algorithm>
#include <cstdlib>

#include "ir/error.h"
#include "mugraph/codegen_emitter.h"
#include "mugraph/codegen_prelude.h"
#include "mugraph/vmath_text.h"

namespace isomer::mugraph {

std::string Emitter::run() {
  ind_ = 4;
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
  s << "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <omp.h>\n\n";
  s << kVmathText << "\n";
  s << kMicroKernels << "\n";
  s << kVectorMath << "\n";
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
  // One tile as a lambda, run by a plain loop on one thread and by an OpenMP team
  // otherwise. A team of one still cost the region's start and a dynamic grab per
  // tile; grabbing tiles in chunks keeps about 16 grabs a thread for the balance a
  // busy machine needs (RMSNorm 128x1024's kernel, 128 tiles of a row, 1 thread:
  // 21.1 us a call, 18.8 with chunks of 16, 17.8 on the plain loop).
  const int64_t tiles = g_.num_tiles(p_);
  const std::string scratch_bytes = std::to_string(std::max<size_t>(k_.scratch, 16) * 4);
  const std::string alloc = "std::aligned_alloc(64, " + scratch_bytes + ")";
  s << "  auto mg_tile = [&](const int64_t tile, float* const scratch) {\n";
  s << body_text;
  s << "  };\n";
  s << "  const int team = threads > 0 ? threads : omp_get_max_threads();\n";
  s << "  if (team == 1) {\n";
  s << "    float* scratch = static_cast<float*>(" << alloc << ");\n";
  s << "    for (int64_t tile = 0; tile < " << tiles << "; ++tile) mg_tile(tile, scratch);\n";
  s << "    std::free(scratch);\n    return;\n  }\n";
  s << "  const int64_t chunk = std::max<int64_t>(1, " << tiles << " / (16 * static_cast<int64_t>(team)));\n";
  s << "#pragma omp parallel num_threads(team)\n  {\n";
  s << "    float* scratch = static_cast<float*>(" << alloc << ");\n";
  s << "#pragma omp for schedule(dynamic, chunk)\n";
  s << "    for (int64_t tile = 0; tile < " << tiles << "; ++tile) mg_tile(tile, scratch);\n";
  s << "    std::free(scratch);\n  }\n}\n";
  return s.str();
}

std::string Emitter::ext(int atom, Phase ph) const {
  if (k_.is_row(atom)) return "1";
  if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "e" + std::to_string(atom);
  if (atom == g_.loop_atom && ph == Phase::Loop && g_.chunk < p_.extent(atom)) return "ec";
  return std::to_string(k_.max_extent(atom, ph));
}

std::string Emitter::origin(int atom, Phase ph) const {
  if (k_.is_row(atom)) return "o" + std::to_string(atom);
  if (g_.grid_dim(atom) && g_.grid_dim(atom)->tile < p_.extent(atom)) return "o" + std::to_string(atom);
  if (atom == g_.loop_atom && ph == Phase::Loop) return "oc";
  return "0";
}

void Emitter::loops(const std::vector<int>& atoms, Phase ph, bool simd, const std::function<void()>& inner,
                    const std::function<void()>& before_inner) {
  pragma_loops(atoms, ph, simd ? "#pragma omp simd" : "", inner, before_inner);
}

void Emitter::pragma_loops(const std::vector<int>& atoms, Phase ph, const std::string& pragma,
                           const std::function<void()>& inner, const std::function<void()>& before_inner) {
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

void Emitter::zero(int i) {
  loops(k_.layout(i), g_.ops[i].phase, true, [&] { line(elem(i) + " = 0.0f;"); });
}

bool Emitter::stored_once(int i) const {
  if (!straight()) return false;
  const int a = g_.ops[i].args[0];
  if (k_.fused_into[a] != i) return true;
  const auto m = k_.matmuls.find(a);
  return m != k_.matmuls.end() && m->second.kernel != MatmulPlan::Kernel::Generic && !k_.summed_in.count(a);
}

void Emitter::pointwise(const PointwisePlan& w, const std::function<void()>& stmt, const Access* dst,
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
        line("mgv::vf " + sum(r, 0) + " = mgv::splat(0.0f), " + sum(r, 1) + " = " + sum(r, 0) + ", " + sum(r, 2) +
             " = " + sum(r, 0) + ", " + sum(r, 3) + " = " + sum(r, 0) + ";");
      line("int64_t " + i + " = 0;");
      auto vstmt = [&](const std::string& lane, const std::string& name) {
        x_.set_lane(in, lane);
        const std::string v = w.own ? x_.vexpr(w.root, w.hoisted) : x_.vat(w.root, w.hoisted);
        line("const mgv::vf " + name + " = " + v + ";");
        x_.clear_lane();
        return "(" + dst->base + " + " + x_.offset_lane(*dst, *dst_axes, in, lane) + ")";
      };
      const std::string step = std::to_string(w.unroll) + " * mgv::lanes";
      line("for (; " + i + " + " + step + " <= " + e + "; " + i + " += " + step + ") {");
      ind_ += 2;
      std::vector<std::string> dsts;
      for (int u = 0; u < w.unroll; ++u)
        dsts.push_back(vstmt(u ? "(" + i + " + " + std::to_string(u) + " * mgv::lanes)" : i, "r" + std::to_string(u)));
      for (int u = 0; u < w.unroll; ++u) line("mgv::store(" + dsts[u] + ", r" + std::to_string(u) + ");");
      for (const auto& [r, power] : w.sums)
        for (int u = 0; u < 4; ++u) line(sum(r, u) + " += " + term("r" + std::to_string(u), power) + ";");
      ind_ -= 2;
      line("}");
      line("for (; " + i + " + mgv::lanes <= " + e + "; " + i + " += mgv::lanes) {");
      ind_ += 2;
      const std::string d = vstmt(i, "r0");
      line("mgv::store(" + d + ", r0);");
      for (const auto& [r, power] : w.sums) line(sum(r, 0) + " += " + term("r0", power) + ";");
      ind_ -= 2;
      line("}");
      for (const auto& [r, power] : w.sums) {
        const std::string s = "s" + std::to_string(r);
        line("float " + s + " = mgv::hsum((" + sum(r, 0) + " + " + sum(r, 1) + ") + (" + sum(r, 2) + " + " +
             sum(r, 3) + "));");
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

void Emitter::view_bases(Phase ph) {
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

void Emitter::emit_op(int i) {
  const BOp& op = g_.ops[i];
  switch (op.kind) {
    case BKind::Input:
    case BKind::Const: return;
    case BKind::Matmul:
      if (!k_.summed_in.count(i) && k_.matmuls.at(i).divisor < 0) emit_matmul(i);
      return;
    case BKind::Reduce:
      if (i != k_.stab.sum && !k_.summed_in.count(i)) emit_reduce(i);
      return;
    case BKind::Accum: {
      int a = op.args[0];
      if (k_.fused_into[a] == i) return;  // the contraction accumulated in place
      const std::string op_as = k_.one_chunk ? " = " : " += ";  // one chunk: its only addend
      loops(k_.layout(i), Phase::Post, true, [&] { line(elem(i) + op_as + x_.at(a) + ";"); });
      return;
    }
    case BKind::Elementwise: {
      // Inlined, or a scaled operand its contraction reads unscaled (the factor in its store).
      if (k_.acc[i].where == Access::Where::Inline || k_.folded.count(i)) return;
      if (i == g_.stab_exp) {
        emit_stab_exp(i);
        return;
      }
      pointwise(k_.pointwise.at(i), [&] { line(elem(i) + " = " + x_.expr(i) + ";"); }, &k_.acc[i], &op.axes);
      return;
    }
  }
}

void Emitter::tile_frame() {
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

void Emitter::for_loop() {
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].kind == BKind::Accum && !stored_once(static_cast<int>(i))) zero(static_cast<int>(i));
  if (g_.stab_exp >= 0 && g_.ops[g_.stab_exp].phase == Phase::Loop && !straight())
    loops(k_.stab.shift, Phase::Loop, true, [&] { line(stab(k_.m_off) + " = -INFINITY;"); });
  const int64_t chunks = g_.num_chunks(p_), E = p_.extent(g_.loop_atom);
  if (chunks == 1)
    line("{ const int64_t c = 0;");  // one chunk: a block, not a loop
  else
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
  stores_into_outputs(Phase::Post);
}

void Emitter::stores_into_outputs(Phase ph) {
  for (const auto& [i, m] : k_.matmuls)
    if (m.divisor >= 0 && g_.ops[i].phase == ph) emit_matmul(i);
}

std::string Emitter::output_base(int k, int i) const {
  const IoTensor& io = p_.outputs[k];
  std::string off;
  for (int a : g_.ops[i].axes) {
    std::string org = origin(a, Phase::Post);
    if (org != "0") off += " + " + org + " * " + std::to_string(io.stride(p_.atoms, a));
  }
  return "(out" + std::to_string(k) + off + ")";
}

void Emitter::write_output(const OutputPlan& out) {
  if (out.by_matmul >= 0) return;  // stored by its contraction
  const BOp& op = g_.ops[out.op];
  Access dst = out.dst;
  dst.base = output_base(out.k, out.op);
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

void Emitter::body() {
  tile_frame();
  view_bases(Phase::Pre);
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].phase == Phase::Pre) emit_op(static_cast<int>(i));
  if (g_.loop_atom < 0) stores_into_outputs(Phase::Pre);
  if (g_.loop_atom >= 0) for_loop();
  for (const OutputPlan& out : k_.outputs) write_output(out);
  for (size_t k = 0; k < k_.rows.size(); ++k) {
    ind_ -= 2;
    line("}");
  }
}

std::string generate_source(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip) {
  require(g.splits == 1, "μGraph codegen: the CPU kernels run a loop whole (a split loop is the GPU's)");
  return Emitter(p, g, skip).run();
}

}  // namespace isomer::mugraph
