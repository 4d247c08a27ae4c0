// CudaPlan and CudaWriter (codegen_cuda_writer.h): the block's shared-memory plan
// and the text of its kernels.
#include "mugraph/codegen_cuda_writer.h"

#include <cmath>

#include "ir/error.h"
#include "mugraph/codegen_expr.h"

namespace isomer::mugraph::cuda_detail {

CudaPlan::CudaPlan(const Program& prog, const BlockGraph& graph) : p(prog), g(graph) {
  const size_t n = g.ops.size();
  users.resize(n);
  for (size_t i = 0; i < n; ++i)
    for (int a : g.ops[i].args) users[static_cast<size_t>(a)].push_back(static_cast<int>(i));
  lay.resize(n);
  stab_loop = g.stab_exp >= 0 && g.ops[static_cast<size_t>(g.stab_exp)].phase == Phase::Loop;
  // A transcendental in the inlined expression: worth a tile rather than recomputing it per use.
  std::vector<bool> costly(n, false);
  for (size_t i = 0; i < n; ++i) {
    const BOp& op = g.ops[i];
    if (op.kind == BKind::Matmul || op.kind == BKind::Reduce || op.kind == BKind::Accum) {
      lay[i].smem = true;
    } else if (op.kind == BKind::Elementwise) {
      bool c = op.op == Op::Exp || op.op == Op::Erf || op.op == Op::Tanh || op.op == Op::Sigmoid ||
               op.op == Op::Sqrt || op.op == Op::Log;
      for (int a : op.args) c = c || (!lay[static_cast<size_t>(a)].smem && costly[static_cast<size_t>(a)]);
      costly[i] = c;
      bool matmul_user = false;
      for (int u : users[i]) matmul_user = matmul_user || g.ops[static_cast<size_t>(u)].kind == BKind::Matmul;
      lay[i].smem = static_cast<int>(i) == g.stab_exp || (c && (matmul_user || users[i].size() >= 2));
    }
  }
  into_acc.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const BOp& op = g.ops[i];
    if (op.kind != BKind::Accum) continue;
    const int a = op.args[0];
    const BOp& src = g.ops[static_cast<size_t>(a)];
    if ((src.kind == BKind::Matmul || src.kind == BKind::Reduce) && src.phase == Phase::Loop &&
        users[static_cast<size_t>(a)].size() == 1 && src.axes == op.axes) {
      into_acc[static_cast<size_t>(a)] = static_cast<int>(i);
      lay[static_cast<size_t>(a)].smem = false;
    }
  }
  if (stab_loop) {
    std::vector<int> red;
    for (int a : g.ops[static_cast<size_t>(g.stab_exp)].axes)
      if (!has(g.stab_axes, a)) red.push_back(a);
    for (size_t i = 0; i < n; ++i) {
      const BOp& op = g.ops[i];
      if (op.kind == BKind::Reduce && op.args[0] == g.stab_exp && into_acc[i] >= 0 && op.axes == g.stab_axes &&
          op.reduce == red)
        row_sum = static_cast<int>(i);
    }
  }
  // Inputs a contraction reads (through inlined elementwise ops) are staged in
  // shared memory with coalesced loads: each element is read by many threads.
  std::function<void(int)> stage = [&](int x) {
    const BOp& op = g.ops[static_cast<size_t>(x)];
    if (op.kind == BKind::Input) lay[static_cast<size_t>(x)].smem = true;
    if (op.kind == BKind::Elementwise && !lay[static_cast<size_t>(x)].smem)
      for (int a : op.args) stage(a);
  };
  for (size_t i = 0; i < n; ++i)
    if (g.ops[i].kind == BKind::Matmul)
      for (int a : g.ops[i].args) stage(a);
  auto align = [](size_t v) { return (v + 3) & ~size_t{3}; };
  for (size_t i = 0; i < n; ++i) {
    if (!lay[i].smem) continue;
    const BOp& op = g.ops[i];
    const size_t k = op.axes.size();
    // An input tile keeps its tensor's axis order (staged by straight, coalesced
    // copies); other tiles their op's.
    std::vector<size_t> order(k);
    for (size_t j = 0; j < k; ++j) order[j] = j;
    if (op.kind == BKind::Input) {
      const IoTensor& io = p.inputs[static_cast<size_t>(p.stmts[static_cast<size_t>(op.stmt)].input)];
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return io.stride(p.atoms, op.axes[a]) > io.stride(p.atoms, op.axes[b]);
      });
    }
    lay[i].stride.assign(k, 1);
    int64_t size = 1;
    for (size_t j = k; j-- > 0;) {
      int64_t e = g.tile_extent(p, op.axes[order[j]], op.phase);
      // Rows of a 2-D tile: a multiple of 4 floats (float4 loads along them), an
      // odd one (rows of 8 consecutive indices fall in different banks).
      if (j + 1 == k && k >= 2 && e >= 4) e = ((e + 3) / 4 % 2 == 0) ? (e + 3) / 4 * 4 + 4 : (e + 3) / 4 * 4;
      lay[i].stride[order[j]] = size;
      size *= e;
    }
    lay[i].offset = total;
    total = align(total + static_cast<size_t>(size));
  }
  int64_t sn = 1;
  for (int a : g.stab_axes) stab_ext.push_back(g.tile_extent(p, a, Phase::Pre)), sn *= stab_ext.back();
  if (g.stab_exp >= 0) {
    m_off = total, total = align(total + static_cast<size_t>(sn));
    fac_off = total, total = align(total + static_cast<size_t>(sn));
  }
  red_off = total, total = align(total + 32);
}

const char* kernel_suffix(Part part) {
  switch (part) {
    case Part::Runs: return "_runs";
    case Part::Combine: return "_combine";
    default: return "_kernel";
  }
}

std::string CudaWriter::kernel(const std::string& name, Part part) {
  std::ostringstream head;
  head << "extern \"C\" __global__ void __launch_bounds__(" << kCudaThreads << ") " << name << kernel_suffix(part)
       << "(";
  for (size_t i = 0; i < p_.inputs.size(); ++i)
    head << (i ? ", " : "") << (p_.inputs[i].dtype == DType::Bool ? "const unsigned char" : "const float")
         << "* __restrict__ in" << i;
  for (size_t i = 0; i < p_.outputs.size(); ++i) head << ", float* __restrict__ out" << i;
  head << ") {\n";
  line("extern __shared__ float4 mg_smem4[];");
  line("float* const mg_smem = reinterpret_cast<float*>(mg_smem4);");
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (k_.lay[i].smem) line("float* const S" + str(static_cast<int64_t>(i)) + " = mg_smem + " + str(static_cast<int64_t>(k_.lay[i].offset)) + ";");
  if (g_.stab_exp >= 0) {
    line("float* const MGm = mg_smem + " + str(static_cast<int64_t>(k_.m_off)) + ";");
    line("float* const MGfac = mg_smem + " + str(static_cast<int64_t>(k_.fac_off)) + ";");
  }
  line("float* const MGred = mg_smem + " + str(static_cast<int64_t>(k_.red_off)) + ";");
  line("(void)MGred;");
  if (g_.stab_exp >= 0) line("(void)MGfac;");
  // The grid tile: row-major over the grid dims (the interpreter's and the skip
  // table's order); the runs kernel's blocks are (tile, split), split fastest.
  if (part == Part::Runs) {
    line("const int mg_tile = blockIdx.x / " + str(g_.splits) + ", mg_split = blockIdx.x % " + str(g_.splits) + ";");
  } else {
    line("const int mg_tile = blockIdx.x;");
  }
  line("int mg_rest = mg_tile;");
  for (size_t d = g_.grid.size(); d-- > 0;) {
    const GridDim& gd = g_.grid[d];
    const std::string a = str(gd.atom);
    const int64_t ext = p_.extent(gd.atom), nt = (ext + gd.tile - 1) / gd.tile;
    line("const int t" + a + " = mg_rest % " + str(nt) + "; mg_rest /= " + str(nt) + ";");
    line("const int o" + a + " = t" + a + " * " + str(gd.tile) + ";");
    line("const int n" + a + " = min(" + str(gd.tile) + ", " + str(ext) + " - o" + a + "); (void)n" + a + ";");
  }
  auto run_phase = [&](Phase ph) {
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].phase == ph && g_.ops[i].kind != BKind::Accum) compute(static_cast<int>(i));
  };
  run_phase(Phase::Pre);
  if (part == Part::Combine) {
    combine(name);
    run_phase(Phase::Post);
  } else if (g_.loop_atom >= 0) {
    loop(name, part);
    if (part == Part::Runs) return head.str() + body_.str() + "}\n";
    run_phase(Phase::Post);
  }
  // Outputs, unscaled: times exp(m)^scale.
  for (const auto& [o, kk] : g_.outputs) {
    const BOp& op = g_.ops[static_cast<size_t>(o)];
    const IoTensor& io = p_.outputs[static_cast<size_t>(kk)];
    std::string off;
    for (int a : op.axes) {
      const int64_t s = io.stride(p_.atoms, a);
      if (s) off += (off.empty() ? "" : " + ") + gidx(a, op.phase) + (s == 1 ? "" : " * " + str(s));
    }
    if (off.empty()) off = "0";
    for_each({}, by_stride(op.axes, io), op.phase, [&] {
      std::string v = val(o);
      if (op.scale != 0) v = "(" + v + " * " + power("expf(MGm[" + stab_off() + "])", op.scale) + ")";
      line("out" + str(kk) + "[" + off + "] = " + v + ";");
    }, false);
  }
  return head.str() + body_.str() + "}\n";
}

std::string CudaWriter::scratch_text(const std::string& name) const {
  if (g_.splits <= 1) return "";
  const int64_t blocks = g_.num_tiles(p_) * g_.splits;
  std::string s;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].kind == BKind::Accum)
      s += "__device__ float " + name + "_acc" + str(static_cast<int64_t>(i)) + "[" + str(blocks * smem_size(static_cast<int>(i))) + "];\n";
  if (k_.stab_loop) s += "__device__ float " + name + "_m[" + str(blocks * stab_size()) + "];\n";
  return s;
}

void CudaWriter::loop(const std::string& name, Part part) {
  const int la = g_.loop_atom;
  const std::string a = str(la);
  const int64_t chunks = g_.num_chunks(p_);
  if (k_.stab_loop) {
    for_each({}, g_.stab_axes, Phase::Pre, [&] { line("MGm[" + stab_off() + "] = -INFINITY;"); }, true);
  }
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].kind == BKind::Accum)
      for_each({}, g_.ops[i].axes, g_.ops[i].phase, [&] { line(smem_ref(static_cast<int>(i)) + " = 0.f;"); }, true);
  line("__syncthreads();");
  if (part == Part::Runs) {
    const int64_t per = g_.chunks_per_split(p_);
    line("for (int c = mg_split * " + str(per) + "; c < min(" + str(chunks) + ", (mg_split + 1) * " + str(per) + "); ++c) {");
  } else {
    line("for (int c = 0; c < " + str(chunks) + "; ++c) {");
  }
  ++depth_;
  if (!skip_.empty()) line("if (" + name + "_skip[mg_tile * " + str(chunks) + " + c]) continue;");
  line("const int o" + a + " = c * " + str(g_.chunk) + ";");
  line("const int n" + a + " = min(" + str(g_.chunk) + ", " + str(p_.extent(la)) + " - o" + a + "); (void)n" + a + ";");
  // The chunk's input tiles first, behind one barrier; then the ops, the
  // accumulators no contraction adds to in its store last. Every step ends with a
  // barrier, so the next chunk may overwrite the tiles.
  bool staged = false;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].phase == Phase::Loop && g_.ops[i].kind == BKind::Input && k_.lay[i].smem)
      stage(static_cast<int>(i), false), staged = true;
  if (staged) line("__syncthreads();");
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].phase == Phase::Loop && g_.ops[i].kind != BKind::Accum && g_.ops[i].kind != BKind::Input)
      compute(static_cast<int>(i));
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const BOp& op = g_.ops[i];
    if (op.kind != BKind::Accum || k_.into_acc[static_cast<size_t>(op.args[0])] >= 0) continue;
    for_each({}, op.axes, op.phase, [&] {
      const std::string r = smem_ref(static_cast<int>(i));
      line(r + " = " + r + acc_factor(static_cast<int>(i)) + " + " + val(op.args[0]) + ";");
    }, true);
  }
  --depth_;
  line("}");
  if (part != Part::Runs) return;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (g_.ops[i].kind == BKind::Accum)
      for_each({}, g_.ops[i].axes, g_.ops[i].phase, [&] {
        line(name + "_acc" + str(static_cast<int64_t>(i)) + "[blockIdx.x * " + str(smem_size(static_cast<int>(i))) + " + " +
             smem_off(static_cast<int>(i)) + "] = " + smem_ref(static_cast<int>(i)) + ";");
      }, false);
  if (k_.stab_loop)
    for_each({}, g_.stab_axes, Phase::Pre, [&] {
      line(name + "_m[blockIdx.x * " + str(stab_size()) + " + " + stab_off() + "] = MGm[" + stab_off() + "];");
    }, false);
}

void CudaWriter::combine(const std::string& name) {
  const std::string first = "mg_tile * " + str(g_.splits);
  if (k_.stab_loop)
    for_each({}, g_.stab_axes, Phase::Pre, [&] {
      line("float mg_mx = -INFINITY;");
      line("for (int s = 0; s < " + str(g_.splits) + "; ++s) mg_mx = fmaxf(mg_mx, " + name + "_m[(" + first + " + s) * " +
           str(stab_size()) + " + " + stab_off() + "]);");
      line("MGm[" + stab_off() + "] = mg_mx;");
    }, true);
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const BOp& op = g_.ops[i];
    if (op.kind != BKind::Accum) continue;
    const std::string part = name + "_acc" + str(static_cast<int64_t>(i)) + "[(" + first + " + s) * " +
                             str(smem_size(static_cast<int>(i))) + " + " + smem_off(static_cast<int>(i)) + "]";
    for_each({}, op.axes, op.phase, [&] {
      line("float mg_s = 0.f;");
      line("for (int s = 0; s < " + str(g_.splits) + "; ++s) {");
      ++depth_;
      if (k_.stab_loop && op.scale != 0) {
        line("const float mg_ms = " + name + "_m[(" + first + " + s) * " + str(stab_size()) + " + " + stab_off() + "];");
        line("if (mg_ms != -INFINITY) mg_s += " + part + " * " + power("expf(mg_ms - MGm[" + stab_off() + "])", op.scale) + ";");
      } else {
        line("mg_s += " + part + ";");
      }
      --depth_;
      line("}");
      line(smem_ref(static_cast<int>(i)) + " = mg_s;");
    }, true);
  }
}

std::string CudaWriter::skip_table_text(const std::string& name) const {
  if (skip_.empty()) return "";
  std::string s = "__device__ const unsigned char " + name + "_skip[" + str(static_cast<int64_t>(skip_.size())) + "] = {";
  for (size_t i = 0; i < skip_.size(); ++i) s += (i % 64 == 0 ? "\n  " : "") + std::string(skip_[i] ? "1," : "0,");
  return s + "\n};\n";
}

std::string CudaWriter::ext_expr(int a, Phase ph) const {
  if (const GridDim* d = g_.grid_dim(a))
    return p_.extent(a) % d->tile == 0 ? str(d->tile) : "n" + str(a);
  if (a == g_.loop_atom && ph == Phase::Loop)
    return p_.extent(a) % g_.chunk == 0 ? str(std::min(g_.chunk, p_.extent(a))) : "n" + str(a);
  return str(p_.extent(a));
}

std::string CudaWriter::gidx(int a, Phase ph) const {
  if (g_.grid_dim(a) || (a == g_.loop_atom && ph == Phase::Loop)) return "(o" + str(a) + " + i" + str(a) + ")";
  return "i" + str(a);
}

std::string CudaWriter::smem_off(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const Layout& l = k_.lay[static_cast<size_t>(i)];
  std::string off;
  for (size_t j = 0; j < op.axes.size(); ++j)
    off += (off.empty() ? "" : " + ") + std::string("i") + str(op.axes[j]) +
           (l.stride[j] == 1 ? "" : " * " + str(l.stride[j]));
  return off.empty() ? "0" : off;
}

int64_t CudaWriter::smem_size(int i) const {
  const Layout& l = k_.lay[static_cast<size_t>(i)];
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  int64_t n = 1;
  for (size_t j = 0; j < op.axes.size(); ++j) n = std::max(n, l.stride[j] * g_.tile_extent(p_, op.axes[j], op.phase));
  return n;
}

int64_t CudaWriter::stab_size() const {
  int64_t n = 1;
  for (int64_t e : k_.stab_ext) n *= e;
  return n;
}

std::string CudaWriter::stab_off() const {
  std::string off;
  int64_t s = 1;
  for (size_t j = g_.stab_axes.size(); j-- > 0;) {
    off = "i" + str(g_.stab_axes[j]) + (s == 1 ? "" : " * " + str(s)) + (off.empty() ? "" : " + " + off);
    s *= k_.stab_ext[j];
  }
  return off.empty() ? "0" : off;
}

std::string CudaWriter::power(const std::string& f, int k) {
  std::string r;
  for (int i = 0; i < std::abs(k); ++i) r += (r.empty() ? "" : " * ") + f;
  return k > 0 ? "(" + r + ")" : "(1.f / (" + r + "))";
}

std::string CudaWriter::global_ptr(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const int in = p_.stmts[static_cast<size_t>(op.stmt)].input;
  const IoTensor& io = p_.inputs[static_cast<size_t>(in)];
  std::string off;
  for (int a : op.axes) {
    const int64_t s = io.stride(p_.atoms, a);
    if (s) off += (off.empty() ? "" : " + ") + gidx(a, op.phase) + (s == 1 ? "" : " * " + str(s));
  }
  return "in" + str(in) + " + " + (off.empty() ? "0" : off);
}

std::string CudaWriter::global(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const std::string e = "__ldg(" + global_ptr(i) + ")";
  return p_.inputs[static_cast<size_t>(p_.stmts[static_cast<size_t>(op.stmt)].input)].dtype == DType::Bool
             ? "static_cast<float>(" + e + ")"
             : e;
}

std::string CudaWriter::val(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  if (k_.lay[static_cast<size_t>(i)].smem) return smem_ref(i);
  if (op.kind == BKind::Input) return global(i);
  if (op.kind == BKind::Const) return float_literal(op.value);
  return expr(i);
}

std::string CudaWriter::expr(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  require(op.kind == BKind::Elementwise, "μGraph CUDA codegen: op " + std::to_string(i) + " has no expression");
  auto arg = [&](size_t k) { return val(op.args[k]); };
  switch (op.op) {
    case Op::Add: return "(" + arg(0) + " + " + arg(1) + ")";
    case Op::Sub: return "(" + arg(0) + " - " + arg(1) + ")";
    case Op::Mul: return "(" + arg(0) + " * " + arg(1) + ")";
    case Op::Div: return "(" + arg(0) + " / " + arg(1) + ")";
    case Op::Max: return "fmaxf(" + arg(0) + ", " + arg(1) + ")";
    case Op::Min: return "fminf(" + arg(0) + ", " + arg(1) + ")";
    case Op::Where: return "(" + arg(0) + " != 0.f ? " + arg(1) + " : " + arg(2) + ")";
    case Op::Neg: return "(-" + arg(0) + ")";
    case Op::Exp: return "expf(" + arg(0) + ")";
    case Op::Sqrt: return "sqrtf(" + arg(0) + ")";
    case Op::Erf: return "erff(" + arg(0) + ")";
    case Op::Tanh: return "tanhf(" + arg(0) + ")";
    case Op::Sigmoid: return "(1.f / (1.f + expf(-" + arg(0) + ")))";
    case Op::Relu: return "fmaxf(" + arg(0) + ", 0.f)";
    case Op::Log: return "logf(" + arg(0) + ")";
    default: throw Error("μGraph CUDA codegen: not an elementwise op");
  }
}

void CudaWriter::decompose(const std::string& e, const std::vector<int>& axes, Phase ph) {
  if (axes.empty()) return;
  line("int mg_r = " + e + ";");
  for (size_t j = axes.size(); j-- > 0;) {
    const std::string a = str(axes[j]), n = ext_expr(axes[j], ph);
    if (j == 0) line("const int i" + a + " = mg_r;");
    else line("const int i" + a + " = mg_r % " + n + "; mg_r /= " + n + ";");
  }
}

std::string CudaWriter::count(const std::vector<int>& axes, Phase ph) const {
  std::string s;
  for (int a : axes) s += (s.empty() ? "" : " * ") + ext_expr(a, ph);
  return s.empty() ? "1" : s;
}

void CudaWriter::for_each(const std::vector<int>& /*unused*/, const std::vector<int>& axes, Phase ph,
              const std::function<void()>& body, bool sync) {
  line("for (int mg_e = threadIdx.x; mg_e < " + count(axes, ph) + "; mg_e += " + str(kCudaThreads) + ") {");
  ++depth_;
  decompose("mg_e", axes, ph);
  body();
  --depth_;
  line("}");
  if (sync) line("__syncthreads();");
}

std::vector<int> CudaWriter::by_stride(std::vector<int> axes, const IoTensor& t) const {
  std::stable_sort(axes.begin(), axes.end(),
                   [&](int a, int b) { return t.stride(p_.atoms, a) > t.stride(p_.atoms, b); });
  return axes;
}

int64_t CudaWriter::sstride(int o, int a) const {
  const BOp& op = g_.ops[static_cast<size_t>(o)];
  for (size_t j = 0; j < op.axes.size(); ++j)
    if (op.axes[j] == a) return k_.lay[static_cast<size_t>(o)].stride[j];
  return 0;
}

int64_t CudaWriter::max_count(const CudaPlan& k, const std::vector<int>& axes, Phase ph) {
  int64_t n = 1;
  for (int a : axes) n *= k.g.tile_extent(k.p, a, ph);
  return n;
}

void CudaWriter::reduction(const std::vector<int>& out, const std::vector<int>& red, Phase ph, const std::function<std::string()>& term,
               const std::function<std::string(const std::string&)>& store, bool is_max, const std::string& scale) {
  const int64_t no = max_count(k_, out, ph), nr = max_count(k_, red, ph);
  const std::string init = is_max ? "-INFINITY" : "0.f";
  auto acc = [&](const std::string& s, const std::string& t) {
    return is_max ? s + " = fmaxf(" + s + ", " + t + ");" : s + " += " + t + ";";
  };
  const std::string nred = count(red, ph), nout = count(out, ph);
  // Register blocking: a thread takes up to 4 indices of the innermost output
  // atom and several of the outer ones (up to 16 sums in registers), so that an
  // operand element read for one inner (outer) index serves every outer (inner)
  // index of the thread: attention's K and V chunk elements, its Q and P rows.
  const int inner = out.empty() ? -1 : out.back();
  const int64_t x = inner < 0 ? 0 : g_.tile_extent(p_, inner, ph);
  int64_t ui = 0, xt = 0, groups = 0, per = 0;  // inner indices a thread, threads along inner, outer groups, outer a thread
  if (no >= kCudaThreads && out.size() >= 2 && ext_expr(inner, ph) == str(x))
    for (int64_t u : {4, 2, 1}) {
      if (x % u != 0 || kCudaThreads % (x / u) != 0) continue;
      const int64_t t = x / u, gr = kCudaThreads / t, j = (no / x + gr - 1) / gr;
      if (u * j > 16) continue;
      ui = u, xt = t, groups = gr, per = j;
      break;
    }
  if (ui > 0) {
    const std::vector<int> outer(out.begin(), out.end() - 1);
    auto each = [&](const std::function<void()>& body) {
      thread_tile(outer, inner, ph, per, groups, ui, "mg_x + u * " + str(xt), body);
    };
    line("{");
    ++depth_;
    line("const int mg_x = threadIdx.x % " + str(xt) + ";");
    line("const int mg_g = threadIdx.x / " + str(xt) + ";");
    line("const int mg_ny = " + count(outer, ph) + ";");
    line("float mg_a[" + str(per) + "][" + str(ui) + "];");
    each([&] { line("mg_a[j][u] = " + init + ";"); });
    line("#pragma unroll 8");  // H200, causal attention 1024: 3% faster than 2
    line("for (int mg_k = 0; mg_k < " + nred + "; ++mg_k) {");
    ++depth_;
    decompose("mg_k", red, ph);
    each([&] { line(acc("mg_a[j][u]", term())); });
    --depth_;
    line("}");
    each([&] { line(store(scale + "mg_a[j][u]")); });
    --depth_;
    line("}");
  } else {
    // An output element per thread, per warp or per block: `e` and `k` say where each
    // thread starts and how far it steps; `reduce` combines the lanes' partial sums
    // and `leader` is the thread that stores.
    auto per_element = [&](const std::string& e0, int64_t estep, const std::string& k0, int64_t kstep,
                           const std::string& pragma, const std::string& reduce, const std::string& leader) {
      line("for (int mg_e = " + e0 + "; mg_e < " + nout + "; " +
           (estep == 1 ? std::string("++mg_e") : "mg_e += " + str(estep)) + ") {");
      ++depth_;
      decompose("mg_e", out, ph);
      line("float mg_s = " + init + ";");
      if (!pragma.empty()) line(pragma);
      line("for (int mg_k = " + k0 + "; mg_k < " + nred + "; " +
           (kstep == 1 ? std::string("++mg_k") : "mg_k += " + str(kstep)) + ") {");
      ++depth_;
      line("{");
      decompose("mg_k", red, ph);
      line(acc("mg_s", term()));
      line("}");
      --depth_;
      line("}");
      if (!reduce.empty()) line("mg_s = " + reduce + ";");
      line(leader + store(scale + "mg_s"));
      --depth_;
      line("}");
    };
    if (no >= kCudaThreads || nr <= 16)  // a thread per output element
      per_element("threadIdx.x", kCudaThreads, "0", 1, "#pragma unroll 8", "", "");
    else if (no >= kWarps)  // a warp per output element
      per_element("threadIdx.x >> 5", kWarps, "threadIdx.x & 31", 32, "",
                  std::string(is_max ? "mg_warp_max" : "mg_warp_sum") + "(mg_s)", "if ((threadIdx.x & 31) == 0) ");
    else  // the whole block per output element
      per_element("0", 1, "threadIdx.x", kCudaThreads, "",
                  std::string("mg_block_reduce<") + (is_max ? "true" : "false") + ">(mg_s, MGred)",
                  "if (threadIdx.x == 0) ");
  }
  line("__syncthreads();");
}

void CudaWriter::compute(int i) {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  if (!k_.lay[static_cast<size_t>(i)].smem && k_.into_acc[static_cast<size_t>(i)] < 0) return;  // inlined, or read in place
  if (i == k_.row_sum) return;  // summed with the exps (warp_rows_exp)
  switch (op.kind) {
    case BKind::Input: return stage(i, true);
    case BKind::Elementwise:
      if (i == g_.stab_exp) return stabilized_exp(i);
      for_each({}, op.axes, op.phase, [&] { line(smem_ref(i) + " = " + expr(i) + ";"); }, true);
      return;
    case BKind::Matmul:
    case BKind::Reduce: {
      // Constant factors of inlined operands move to the store, out of the
      // inner loop (sum(a * (b * c)) = c * sum(a * b), within rounding; the CPU
      // kernels' store factor).
      double alpha = 1;
      std::vector<int> args;
      for (int a : op.args) {
        while (!k_.lay[static_cast<size_t>(a)].smem && g_.ops[static_cast<size_t>(a)].kind == BKind::Elementwise &&
               g_.ops[static_cast<size_t>(a)].op == Op::Mul) {
          const BOp& m = g_.ops[static_cast<size_t>(a)];
          const int c = g_.ops[static_cast<size_t>(m.args[1])].kind == BKind::Const ? 1
                        : g_.ops[static_cast<size_t>(m.args[0])].kind == BKind::Const ? 0
                                                                                     : -1;
          if (c < 0 || !std::isfinite(g_.ops[static_cast<size_t>(m.args[c])].value)) break;
          alpha *= g_.ops[static_cast<size_t>(m.args[c])].value;
          a = m.args[1 - c];
        }
        args.push_back(a);
      }
      const std::string scale = alpha == 1 ? "" : float_literal(alpha) + " * ";
      // Into its accumulator (rescaled first), or its own tile.
      const int acc = k_.into_acc[static_cast<size_t>(i)];
      auto store = [&](const std::string& v) {
        if (acc < 0) return smem_ref(i) + " = " + v + ";";
        const std::string r = smem_ref(acc);
        return r + " = " + r + acc_factor(acc) + " + " + v + ";";
      };
      if (op.kind == BKind::Matmul && tiled_contraction(i, args, scale, store)) return;
      reduction(
          op.axes, op.reduce, op.phase,
          [&] { return args.size() == 2 ? val(args[0]) + " * " + val(args[1]) : val(args[0]); }, store, false, scale);
      return;
    }
    default: return;
  }
}

void CudaWriter::stage(int i, bool sync) {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const IoTensor& io = p_.inputs[static_cast<size_t>(p_.stmts[static_cast<size_t>(op.stmt)].input)];
  const std::vector<int> axes = by_stride(op.axes, io);
  const int in = axes.empty() ? -1 : axes.back();
  const int64_t e = in < 0 ? 0 : g_.tile_extent(p_, in, op.phase);
  // float4 copies where the tile's rows along the tensor's unit stride are whole
  // float4s at both ends (the pointers 16-byte aligned).
  bool vec = in >= 0 && io.dtype == DType::Float32 && io.stride(p_.atoms, in) == 1 && sstride(i, in) == 1 &&
             ext_expr(in, op.phase) == str(e) && e % 4 == 0;
  if (const GridDim* d = g_.grid_dim(in); vec && d) vec = d->tile % 4 == 0;
  if (vec && in == g_.loop_atom && op.phase == Phase::Loop) vec = g_.chunk % 4 == 0;
  for (int a : op.axes) vec = vec && (a == in || (io.stride(p_.atoms, a) % 4 == 0 && sstride(i, a) % 4 == 0));
  if (!vec) {
    for_each({}, axes, op.phase, [&] { line(smem_ref(i) + " = " + global(i) + ";"); }, sync);
    return;
  }
  const std::vector<int> outer(axes.begin(), axes.end() - 1);
  line("for (int mg_e = threadIdx.x; mg_e < " + count(outer, op.phase) + " * " + str(e / 4) + "; mg_e += " +
       str(kCudaThreads) + ") {");
  ++depth_;
  line("const int i" + str(in) + " = mg_e % " + str(e / 4) + " * 4;");
  decompose("mg_e / " + str(e / 4), outer, op.phase);
  line("*reinterpret_cast<float4*>(&" + smem_ref(i) + ") = __ldg(reinterpret_cast<const float4*>(" + global_ptr(i) + "));");
  --depth_;
  line("}");
  if (sync) line("__syncthreads();");
}

std::string CudaWriter::acc_factor(int i) const {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  return k_.stab_loop && op.scale != 0 ? " * " + power("MGfac[" + stab_off() + "]", op.scale) : "";
}

void CudaWriter::stabilized_exp(int i) {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const int x = op.args[0];
  const BOp& xo = g_.ops[static_cast<size_t>(x)];
  std::vector<int> red;
  for (int a : xo.axes)
    if (!has(g_.stab_axes, a)) red.push_back(a);
  for (int a : g_.stab_axes)
    require(has(xo.axes, a), "μGraph CUDA codegen: the stabilizer's shift varies along an atom its argument lacks");
  warp_rows_exp(i, red);
}

void CudaWriter::warp_rows_exp(int i, const std::vector<int>& red) {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const int x = op.args[0];
  const std::string nred = count(red, op.phase);
  auto each_lane = [&](const std::function<void()>& body) {
    line("for (int mg_k = threadIdx.x & 31; mg_k < " + nred + "; mg_k += 32) {");
    ++depth_;
    decompose("mg_k", red, op.phase);
    body();
    --depth_;
    line("}");
  };
  line("for (int mg_row = threadIdx.x >> 5; mg_row < " + count(g_.stab_axes, op.phase) + "; mg_row += " + str(kWarps) + ") {");
  ++depth_;
  decompose("mg_row", g_.stab_axes, op.phase);
  line("float mg_cm = -INFINITY;");
  each_lane([&] { line("mg_cm = fmaxf(mg_cm, " + val(x) + ");"); });
  if (k_.stab_loop) {
    line("const float mg_mo = MGm[" + stab_off() + "];");
    line("const float mg_mn = fmaxf(mg_mo, mg_warp_max(mg_cm));");
    line("__syncwarp();");
    line("if ((threadIdx.x & 31) == 0) {");
    line("  MGfac[" + stab_off() + "] = mg_mn == -INFINITY ? 1.f : mg_mo == -INFINITY ? 0.f : expf(mg_mo - mg_mn);");
    line("  MGm[" + stab_off() + "] = mg_mn;");
    line("}");
  } else {
    line("const float mg_mn = mg_warp_max(mg_cm);");
    line("if ((threadIdx.x & 31) == 0) MGm[" + stab_off() + "] = mg_mn;");
  }
  const int sum = k_.row_sum;
  if (sum >= 0) line("float mg_ps = 0.f;");
  each_lane([&] {
    line("const float mg_p = mg_mn == -INFINITY ? 0.f : expf(" + val(x) + " - mg_mn);");
    line(smem_ref(i) + " = mg_p;");
    if (sum >= 0) line("mg_ps += mg_p;");
  });
  if (sum >= 0) {
    const int acc = k_.into_acc[static_cast<size_t>(sum)];
    line("mg_ps = mg_warp_sum(mg_ps);");
    line("if ((threadIdx.x & 31) == 0) " + smem_ref(acc) + " = " + smem_ref(acc) + acc_factor(acc) + " + mg_ps;");
  }
  --depth_;
  line("}");
  line("__syncthreads();");
}

}  // namespace isomer::mugraph::cuda_detail
