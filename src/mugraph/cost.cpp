#include "mugraph/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "ir/graph.h"
#include "ir/text.h"
#include "mugraph/codegen.h"
#include "mugraph/codegen_plan.h"
#include "mugraph/interpreter.h"
#include "mugraph/kernel_cache.h"
#include "mugraph/search.h"
#include "runtime/clock.h"
#include "runtime/runtime.h"

namespace isomer::mugraph {

namespace {

int64_t read_cache_size(int index) {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(in >> s) || s.empty()) return 0;
  int64_t v = std::atoll(s.c_str());
  if (s.back() == 'K') v <<= 10;
  else if (s.back() == 'M') v <<= 20;
  return v;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

std::filesystem::path cache_dir() {
  const char* x = std::getenv("XDG_CACHE_HOME");
  if (x && *x) return std::filesystem::path(x) / "isomer";
  const char* h = std::getenv("HOME");
  return std::filesystem::path(h && *h ? h : "/tmp") / ".cache" / "isomer";
}

// Processor time of the calling thread, in seconds: the measurements below run on
// this thread, so preemption by other processes on a busy machine does not count.
double thread_s() { return runtime::clock_ms(runtime::StepClock::thread) * 1e-3; }

void measure(Machine& m) {
  // Matmul rate: what the runtime's own matmul step (oneDNN's brgemm, one thread)
  // reaches on a projection-like shape, best of 7 in processor time. The generated
  // kernels' GEMM reaches 0.92-0.96 of it, and the weight products a region is
  // priced against run on it. (oneDNN's sgemm read about half of this rate here,
  // and a rate clamped to the FMA peak at the base clock missed the turbo clock.)
  const int64_t M = 128, K = 512, N = 512;
  GraphBuilder b;
  std::vector<double> w(static_cast<size_t>(K * N), 0.01);
  Value x = b.input("x", TensorType{DType::Float32, make_shape({M, K})});
  Value y = b.op("MatMul", {x, b.constant(Tensor::from_f64(DType::Float32, {K, N}, w))}, {}, 1)[0];
  runtime::RuntimeOptions ro;
  ro.threads = 1;
  auto exe = runtime::compile(b.finish({y}, {"y"}), ro);
  std::vector<Tensor> in{Tensor::from_f64(DType::Float32, {M, K}, std::vector<double>(static_cast<size_t>(M * K), 1.0))};
  exe->run(in);
  double best = 1e9;
  for (int r = 0; r < 7; ++r) {
    const double t0 = thread_s();
    exe->run(in);
    best = std::min(best, thread_s() - t0);
  }
  m.gflops_core = 2.0 * static_cast<double>(M * K * N) / std::max(best, 1e-9) / 1e9;
  // Pointwise rate, in op_flops units: the runtime's fused pointwise step over
  // cache-resident data (Tanh, Mul, Add: 16 + 1 + 1 per element), best of 7.
  {
    GraphBuilder pb;
    Value px = pb.input("x", TensorType{DType::Float32, make_shape({M, K})});
    Value t = pb.op("Tanh", {px}, {}, 1)[0];
    Value o = pb.op("Add", {pb.op("Mul", {t, px}, {}, 1)[0], px}, {}, 1)[0];
    auto pe = runtime::compile(pb.finish({o}, {"o"}), ro);
    pe->run(in);
    double pbest = 1e9;
    for (int r = 0; r < 7; ++r) {
      const double t0 = thread_s();
      for (int k = 0; k < 4; ++k) pe->run(in);
      pbest = std::min(pbest, (thread_s() - t0) / 4);
    }
    m.vec_gflops = 18.0 * static_cast<double>(M * K) / std::max(pbest, 1e-9) / 1e9;
  }
  // Read bandwidth, one core: seconds to read `words` 64-bit words `passes` times,
  // xor-ed into eight independent lanes (a float sum, or one xor chain, is bound by
  // its latency: 28-34 GB/s from DRAM and L2 alike here, against 36 and 114), best of 5.
  auto read_s = [](size_t words, int passes) {
    std::vector<uint64_t> v(words, 1u);
    volatile uint64_t sink = 0;
    double best_s = 1e9;
    for (int r = 0; r < 5; ++r) {
      const double t0 = thread_s();
      uint64_t lane[8] = {};
      for (int p = 0; p < passes; ++p)
        for (size_t i = 0; i + 7 < v.size(); i += 8)
          for (int k = 0; k < 8; ++k) lane[k] ^= v[i + static_cast<size_t>(k)];
      for (uint64_t x : lane) sink = sink ^ x;
      best_s = std::min(best_s, thread_s() - t0);
    }
    return std::max(best_s, 1e-9);
  };
  const size_t big = 8 << 20, small = static_cast<size_t>(m.l2 / 2 / 8);  // 64 MB; half of L2
  m.dram_gbps = static_cast<double>(big * 8) / read_s(big, 1) / 1e9;
  // The same over data a step finds in cache.
  m.cache_gbps = 64.0 * static_cast<double>(small * 8) / read_s(small, 64) / 1e9;
}

// The generated kernels' exponential (mg_exp, about a third of the runtime's
// vm::exp and far below the Tanh step above): a generated Exp kernel over a tile in
// L2, elements a second, best of 7; 0 where no compiler builds it. Generating the
// kernel reads machine(), so this runs after machine()'s measurement, not inside it.
double measure_exp_gps() {
  const int64_t rows = 64, cols = 1024;
  const Program p = from_body(parse_graph("graph e(%x: f32[" + std::to_string(rows) + "," + std::to_string(cols) +
                                          "]) {\n  %y = Exp(%x)\n  return %y\n}\n"));
  std::string why;
  if (auto k = kernel_compiler().empty() ? nullptr : load_kernel(generate_source(p, direct_translation(p), {}), &why)) {
    std::vector<float> x(static_cast<size_t>(rows * cols), -0.5f), y(x.size());
    const void* in[] = {x.data()};
    void* out[] = {y.data()};
    k->run(in, out, 1);
    double ebest = 1e9;
    for (int r = 0; r < 7; ++r) {
      const double t0 = thread_s();
      for (int q = 0; q < 8; ++q) k->run(in, out, 1);
      ebest = std::min(ebest, (thread_s() - t0) / 8);
    }
    return static_cast<double>(rows * cols) / std::max(ebest, 1e-9) / 1e9;
  }
  return 0;
}

std::string machine_key(const Machine& m) { return "v6 " + m.isa() + " " + read_line("/proc/sys/kernel/hostname"); }

}  // namespace

std::string Machine::describe() const {
  std::ostringstream o;
  o << isa() << ", L1 " << (l1 >> 10) << " KiB, L2 " << (l2 >> 10) << " KiB, L3 " << (l3 >> 20) << " MiB, "
    << gflops_core << " GFLOP/s per core (matmul), " << vec_gflops << " (pointwise), " << dram_gbps << " GB/s (one core), " << cache_gbps << " GB/s from L2, " << exp_gps
    << " G exp/s (generated)";
  return o.str();
}

const Machine& machine() {
  static Machine m;
  static std::once_flag once;
  std::call_once(once, [] {
    if (int64_t v = read_cache_size(0)) m.l1 = read_line("/sys/devices/system/cpu/cpu0/cache/index0/type") == "Data" ? v : m.l1;
    for (int i = 1; i < 5; ++i) {
      std::string level = read_line("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/level");
      int64_t v = read_cache_size(i);
      if (!v) continue;
      if (level == "2") m.l2 = v;
      if (level == "3") m.l3 = v;
    }
    __builtin_cpu_init();
    m.avx2 = __builtin_cpu_supports("avx2");
    m.fma = __builtin_cpu_supports("fma");
    m.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    m.vector_floats = m.avx512 ? 16 : m.avx2 ? 8 : 4;
    const char* nomeasure = std::getenv("ISOMER_MUGRAPH_NO_MEASURE");
    if (nomeasure && *nomeasure == '1') {
      m.gflops_core = m.avx512 ? 100 : m.avx2 ? 50 : 15;
      m.vec_gflops = m.gflops_core / 4;
      m.dram_gbps = 10;
      m.cache_gbps = 40;
      return;
    }
    std::filesystem::path f = cache_dir() / "mugraph-machine.txt";
    const std::string key = machine_key(m);
    {
      std::ifstream in(f);
      std::string k;
      double g = 0, b = 0, v = 0, c = 0, e = 0;
      if (std::getline(in, k) && k == key && (in >> g >> b >> v >> c >> e) && g > 0 && b > 0 && v > 0 && c > 0 && e >= 0) {
        m.gflops_core = g;
        m.dram_gbps = b;
        m.vec_gflops = v;
        m.cache_gbps = c;
        m.exp_gps = e;
        return;
      }
    }
    measure(m);
    m.exp_gps = -1;  // measured below, once machine() can answer the code generator
  });
  // The exp kernel's generation reads machine() on this thread: that call takes the
  // rates as they are (the generator reads only the instruction set).
  static std::once_flag exp_once;
  static thread_local bool generating = false;
  if (m.exp_gps < 0 && !generating)
    std::call_once(exp_once, [] {
      generating = true;
      const double e = measure_exp_gps();
      generating = false;
      m.exp_gps = e;
      std::filesystem::path f = cache_dir() / "mugraph-machine.txt";
      std::error_code ec;
      std::filesystem::create_directories(f.parent_path(), ec);
      std::ofstream out(f);
      out << machine_key(m) << "\n" << m.gflops_core << " " << m.dram_gbps << " " << m.vec_gflops << " "
          << m.cache_gbps << " " << m.exp_gps << "\n";
    });
  return m;
}

namespace {

double op_flops(Op op) {
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Neg:
    case Op::Max:
    case Op::Min:
    case Op::Relu:
    case Op::Where: return 1;
    case Op::Div:
    case Op::Sqrt: return 4;
    default: return 16;  // exp, erf, tanh, sigmoid, log
  }
}

// Seconds of contraction `i` for one row of its tile (`flops` of it), as the
// generated code calls it (the kernel plan): mg_gemm on its register blocks; mg_dot
// packing Bᵀ first where enough rows of A share it, else sums of 8-lane products
// across lanes; the generic loop nest far below both.
double contraction_s(const Machine& m, const KernelPlan& plan, int i, double flops) {
  const double peak = m.gflops_core * 1e9;
  const auto it = plan.matmuls.find(i);
  if (it == plan.matmuls.end() || it->second.kernel == MatmulPlan::Kernel::Generic) return flops / (peak * 0.05);
  const MatmulPlan& mp = it->second;
  const Phase ph = plan.g->ops[i].phase;
  double M = mp.roles.m >= 0 ? static_cast<double>(plan.max_extent(mp.roles.m, ph)) : 1;
  for (int a : mp.merged) M *= static_cast<double>(plan.max_extent(a, ph));
  const double N = static_cast<double>(plan.max_extent(mp.roles.n, ph));
  const double K = static_cast<double>(plan.max_extent(mp.roles.k, ph));
  double t = flops / (peak * 0.9 * gemm_efficiency(m, M, N, K));
  if (mp.kernel == MatmulPlan::Kernel::Dot) {
    const double calls = flops / (2 * M * N * K);
    if (mp.pack >= 0 || M >= 16) {
      // The transposed copy: once per call, or once for every call sharing the panel.
      const double packs = mp.pack >= 0 ? 1 : calls;
      t += packs * N * K * 8 / (m.cache_gbps * 1e9);
    } else {
      // Dot products on 8 lanes, then summed across them per output.
      t = flops / (peak * 0.9 * 0.5 * K / (K + 24));
    }
  }
  return t;
}

}  // namespace

// mg_gemm (codegen_prelude.h) runs columns in blocks of two vectors,
// one, then a masked tail; rows in blocks of MR, then the rest. Each k of a block
// of R rows by V vectors issues R V FMAs on two pipes, waits out one FMA's latency
// (4 cycles) on each accumulator, and loads V vectors and R broadcasts on two load
// ports; each block loads and stores its R V accumulators once.
double gemm_efficiency(const Machine& m, double M, double N, double K) {
  const double lanes = m.vector_floats, mr = m.avx512 ? 8 : 6;
  std::vector<double> cols;  // vectors per column block
  double n = N;
  for (; n >= 2 * lanes; n -= 2 * lanes) cols.push_back(2);
  for (; n > 0; n -= lanes) cols.push_back(1);
  std::vector<double> rows;
  double r = M;
  for (; r >= mr; r -= mr) rows.push_back(mr);
  if (r > 0) rows.push_back(r);
  double cycles = 0;
  for (double v : cols)
    for (double R : rows) cycles += K * std::max({R * v / 2, 4.0, (R + v) / 2}) + R * v + 8;
  const double ideal = M * N * K / lanes / 2;
  return std::clamp(ideal / std::max(cycles, 1.0), 0.01, 1.0);
}

CostEstimate estimate(const Program& p, const BlockGraph& g, int threads, double skipped) {
  const Machine& m = machine();
  CostEstimate c;
  c.tiles = g.num_tiles(p);
  const double chunks = static_cast<double>(g.num_chunks(p)) * (1.0 - skipped);
  // Generated code runs a tile one row (one index of every row atom) at a time:
  // the work below is per row, the working set one row's, times the rows of a tile.
  const std::vector<int> rows = row_atoms(p, g);
  auto is_row = [&](int a) { return std::find(rows.begin(), rows.end(), a) != rows.end(); };
  double rows_per_tile = 1;
  for (int a : rows) rows_per_tile *= static_cast<double>(g.tile_extent(p, a, Phase::Pre));
  auto extent = [&](int a, Phase ph) { return is_row(a) ? 1.0 : static_cast<double>(g.tile_extent(p, a, ph)); };
  auto vol = [&](const std::vector<int>& axes, Phase ph) {
    double v = 1;
    for (int a : axes) v *= extent(a, ph);
    return v;
  };
  const double vec_rate = m.vec_gflops * 1e9;      // elementwise work, op_flops units
  bool contracts = false;
  for (const BOp& op : g.ops) contracts = contracts || op.kind == BKind::Matmul;
  const KernelPlan plan = contracts ? plan_kernel(p, g) : KernelPlan{};
  double per_tile = 0, ws = 0;                     // seconds
  for (const BOp& op : g.ops) {
    double reps = op.phase == Phase::Loop ? chunks : 1;
    double out = vol(op.axes, op.phase);
    ws += out * 4;
    double t = 0;
    switch (op.kind) {
      case BKind::Input: t = out * 4 / (m.cache_gbps * 1e9); break;  // a copy from cache
      case BKind::Const: break;
      case BKind::Elementwise:
        t = op.op == Op::Exp && m.exp_gps > 0 ? out / (m.exp_gps * 1e9) : out * op_flops(op.op) / vec_rate;
        break;
      case BKind::Reduce: t = vol(g.ops[op.args[0]].axes, op.phase) / vec_rate; break;
      case BKind::Accum: t = out / vec_rate; break;
      case BKind::Matmul: {
        double k = 1;
        for (int r : op.reduce) k *= extent(r, op.phase);
        double f = 2 * out * k;
        c.flops += f * reps * rows_per_tile * static_cast<double>(c.tiles);
        t = contraction_s(m, plan, static_cast<int>(&op - g.ops.data()), f);
        break;
      }
    }
    per_tile += t * reps;
  }
  c.working_set = static_cast<int64_t>(ws);
  // Intermediates that spill out of L1 (then L2) are re-read from further away.
  if (ws > static_cast<double>(m.l1)) per_tile *= 1.25;
  if (ws > static_cast<double>(m.l2)) per_tile *= 1.5 + ws / static_cast<double>(m.l2) * 0.25;
  per_tile = per_tile * rows_per_tile + rows_per_tile * chunks * 0.02e-6;  // rows and loop iterations
  per_tile += 0.3e-6;                                                       // the task itself
  // Memory traffic: each input once if it stays in the last-level cache across the
  // tiles that share it, else once per tile that reads it.
  for (const IoTensor& t : p.inputs) {
    double bytes = 4;
    for (int64_t d : t.dims) bytes *= static_cast<double>(d);
    double reread = 1;
    for (const GridDim& d : g.grid) {
      const std::vector<int>& ax = p.stmts[t.stmt].axes;
      if (std::find(ax.begin(), ax.end(), d.atom) == ax.end())
        reread *= static_cast<double>((p.extent(d.atom) + d.tile - 1) / d.tile);
    }
    c.dram_bytes += bytes * (bytes <= static_cast<double>(m.l3) / 2 ? 1 : reread);
  }
  for (const IoTensor& t : p.outputs) {
    double bytes = 4;
    for (int64_t d : t.dims) bytes *= static_cast<double>(d);
    c.dram_bytes += bytes;
  }
  const double team = std::max(1, threads);
  const double tiles = static_cast<double>(c.tiles);
  const double waves = std::ceil(tiles / team);
  const double compute = per_tile * waves;
  const double mem = c.dram_bytes / (m.dram_gbps * 1e9 * std::min(team, 2.0));
  c.ms = std::max(compute, mem) * 1e3 + 0.002;
  return c;
}

double estimate_ms(const Program& p, const BlockGraph& g, int threads,
                   const std::vector<std::vector<float>>& constants) {
  bool has_const = false;
  for (const auto& c : constants) has_const = has_const || !c.empty();
  if (!has_const || g.loop_atom < 0) return estimate(p, g, threads).ms;
  const std::vector<uint8_t> skip = skip_table(p, g, constants);
  if (skip.empty()) return estimate(p, g, threads).ms;
  const double f = static_cast<double>(std::count(skip.begin(), skip.end(), 1)) / static_cast<double>(skip.size());
  return estimate(p, g, threads, f).ms;
}

std::vector<BlockGraph> tilings(const Program& p, const BlockGraph& structure, int threads, size_t limit,
                                const std::vector<std::vector<float>>& constants) {
  // Grid atoms: in every output, reduced by no op.
  std::vector<int> eligible;
  for (size_t a = 0; a < p.atoms.size(); ++a) {
    bool ok = true;
    for (const auto& [o, k] : structure.outputs) {
      const std::vector<int>& ax = structure.ops[o].axes;
      ok = ok && std::find(ax.begin(), ax.end(), static_cast<int>(a)) != ax.end();
    }
    for (const BOp& op : structure.ops)
      ok = ok && std::find(op.reduce.begin(), op.reduce.end(), static_cast<int>(a)) == op.reduce.end();
    if (ok) eligible.push_back(static_cast<int>(a));
  }
  auto choices = [&](int64_t e) {
    std::vector<int64_t> v{1};
    for (int64_t t = 2; t < e && t <= 512; t *= 2) v.push_back(t);
    if (e > 1) v.push_back(e);
    // Divisors that are not powers of two (e.g. 96, 2816 / 11) where the powers do not divide.
    for (int64_t t : {3, 6, 12, 24, 48, 96, 192})
      if (t < e && e % t == 0 && std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
    return v;
  };
  std::vector<int64_t> chunk_choices{0};
  if (structure.loop_atom >= 0) {
    chunk_choices.clear();
    int64_t e = p.extent(structure.loop_atom);
    // A partial sum over the loop atom used inside the loop by anything but an
    // accumulator (a Div of two partial sums) is the whole sum only with one chunk.
    bool partial_used = false;
    for (const BOp& op : structure.ops) {
      if (op.phase != Phase::Loop || op.kind == BKind::Accum) continue;
      for (int a : op.args) {
        const BOp& x = structure.ops[a];
        partial_used = partial_used || (x.phase == Phase::Loop && (x.kind == BKind::Matmul || x.kind == BKind::Reduce) &&
                                        std::find(x.reduce.begin(), x.reduce.end(), structure.loop_atom) != x.reduce.end());
      }
    }
    if (!partial_used)
      for (int64_t c : {8, 16, 32, 64, 128, 256, 512})
        if (c < e) chunk_choices.push_back(c);
    chunk_choices.push_back(e);
  }
  struct Scored {
    double ms;
    BlockGraph g;
  };
  std::vector<Scored> out;
  std::vector<size_t> idx(eligible.size(), 0);
  std::vector<std::vector<int64_t>> ch;
  for (int a : eligible) ch.push_back(choices(p.extent(a)));
  const Machine& m = machine();
  while (true) {
    for (int64_t chunk : chunk_choices) {
      BlockGraph g = structure;
      g.grid.clear();
      for (size_t k = 0; k < eligible.size(); ++k)
        if (ch[k][idx[k]] < p.extent(eligible[k]) || true) g.grid.push_back({eligible[k], ch[k][idx[k]]});
      g.chunk = chunk;
      // Whole-extent grid dims are not split: drop them from the grid (one tile).
      std::vector<GridDim> grid;
      for (const GridDim& d : g.grid)
        if (d.tile < p.extent(d.atom)) grid.push_back(d);
      g.grid = grid;
      CostEstimate c = estimate(p, g, threads);
      if (c.working_set > m.l2 * 2) continue;
      out.push_back({c.ms, std::move(g)});
    }
    size_t k = 0;
    while (k < idx.size() && ++idx[k] == ch[k].size()) idx[k++] = 0;
    if (k == idx.size()) break;
  }
  std::stable_sort(out.begin(), out.end(), [](const Scored& a, const Scored& b) { return a.ms < b.ms; });
  // Iterations a constant (a causal mask) lets the kernel skip: re-rank the best
  // few with what the skip table removes.
  bool has_const = false;
  for (const auto& c : constants) has_const = has_const || !c.empty();
  if (has_const && structure.loop_atom >= 0) {
    size_t n = std::min<size_t>(out.size(), 64);
    for (size_t i = 0; i < n; ++i) {
      stabilize(p, out[i].g);
      out[i].ms = estimate_ms(p, out[i].g, threads, constants);
    }
    std::stable_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n),
                     [](const Scored& a, const Scored& b) { return a.ms < b.ms; });
  }
  // Distinct results only (dropping whole dims makes duplicates).
  std::vector<BlockGraph> r;
  std::vector<std::string> seen;
  for (Scored& s : out) {
    if (r.size() >= limit) break;
    std::string t = s.g.to_text(p);
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    stabilize(p, s.g);
    r.push_back(std::move(s.g));
  }
  return r;
}

}  // namespace isomer::mugraph
