// The CUDA back end (mugraph/codegen_cuda.h): GPU tilings of the structures the
// search finds are valid block graphs that pass the field verifier and match the
// target in floats (the interpreter runs them tile by tile as the kernel does),
// and the emitted .cu text compiles with nvcc for sm_90 where nvcc is found
// (skipped otherwise: CI has no CUDA toolkit). Running the kernels needs a GPU:
// scripts/cuda_gpu_check.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "mugraph/codegen_cuda.h"
#include "mugraph/cost.h"
#include "mugraph/cuda_emit.h"
#include "mugraph/interpreter.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"
#include "mugraph_test_util.h"

namespace isomer::mugraph {
namespace {

std::string rmsnorm_body(int m, int n) {
  std::string t = "graph rms(%x: f32[1," + std::to_string(m) + "," + std::to_string(n) + "], %g: f32[" +
                  std::to_string(n) + "]) {\n";
  t += "  %two = const f32[] {2}\n  %eps = const f32[] {9.9999999747524271e-07}\n";
  t += "  %p = Pow(%x, %two)\n  %mean = ReduceMean(%p) {axes=[-1], keepdims=1}\n  %a = Add(%mean, %eps)\n";
  t += "  %s = Sqrt(%a)\n  %r = Reciprocal(%s)\n  %xn = Mul(%x, %r)\n  %y = Mul(%g, %xn)\n  return %y\n}\n";
  return t;
}

// Scaled, masked softmax as the corpus writes it (the scale a Mul, an additive mask).
std::string masked_softmax_body(int heads, int s) {
  std::string d = std::to_string(s);
  std::string t = "graph sm(%x: f32[1," + std::to_string(heads) + "," + d + "," + d + "], %mask: f32[1,1," + d + "," +
                  d + "]) {\n";
  t += "  %c = const f32[] {0.125}\n  %xs = Mul(%x, %c)\n  %xm = Add(%xs, %mask)\n  %y = Softmax(%xm) {axis=-1}\n";
  return t + "  return %y\n}\n";
}

// GQA decode: one query row per head against t cached positions, no mask.
std::string decode_body(int heads, int kv, int t, int d) {
  int rep = heads / kv;
  auto s = [](int v) { return std::to_string(v); };
  std::string b = "graph dec(%q: f32[1," + s(heads) + ",1," + s(d) + "], %k: f32[1," + s(kv) + "," + s(t) + "," + s(d) +
                  "], %v: f32[1," + s(kv) + "," + s(t) + "," + s(d) + "]) {\n";
  b += "  %c = const f32[] {0.35355339059327379}\n  %ax2 = const i64[1] {2}\n";
  b += "  %ek = const i64[5] {1," + s(kv) + "," + s(rep) + "," + s(t) + "," + s(d) + "}\n";
  b += "  %rk = const i64[4] {1," + s(heads) + "," + s(t) + "," + s(d) + "}\n";
  b += "  %k1 = Unsqueeze(%k, %ax2)\n  %k2 = Expand(%k1, %ek)\n  %k3 = Reshape(%k2, %rk)\n";
  b += "  %v1 = Unsqueeze(%v, %ax2)\n  %v2 = Expand(%v1, %ek)\n  %v3 = Reshape(%v2, %rk)\n";
  b += "  %qs = Mul(%q, %c)\n  %kt = Transpose(%k3) {perm=[0, 1, 3, 2]}\n  %ks = Mul(%kt, %c)\n";
  b += "  %sc = MatMul(%qs, %ks)\n  %p = Softmax(%sc) {axis=-1}\n  %o = MatMul(%p, %v3)\n  return %o\n}\n";
  return b;
}

// Attention without a mask, a KV head a query head (ViT, BERT).
std::string mha_body(int heads, int s, int d) {
  auto n = [](int v) { return std::to_string(v); };
  const std::string dims = "f32[1," + n(heads) + "," + n(s) + "," + n(d) + "]";
  std::string b = "graph mha(%q: " + dims + ", %k: " + dims + ", %v: " + dims + ") {\n";
  b += "  %c = const f32[] {0.35355339059327379}\n  %qs = Mul(%q, %c)\n  %kt = Transpose(%k) {perm=[0, 1, 3, 2]}\n";
  b += "  %ks = Mul(%kt, %c)\n  %s = MatMul(%qs, %ks)\n  %p = Softmax(%s) {axis=-1}\n  %o = MatMul(%p, %v)\n";
  return b + "  return %o\n}\n";
}

std::vector<float> causal(int s) {
  std::vector<float> m(static_cast<size_t>(s) * s);
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < s; ++j) m[static_cast<size_t>(i) * s + j] = j <= i ? 0.0f : -INFINITY;
  return m;
}

struct Case {
  std::string what, body;
  std::vector<std::vector<float>> constants;
};

std::vector<Case> cases() {
  return {{"rmsnorm", rmsnorm_body(6, 96), {{}, {}}},
          {"layernorm_gelu", testing::layernorm_gelu_body(5, 72), {}},
          {"softmax", masked_softmax_body(3, 40), {{}, causal(40)}},
          {"attention", testing::gqa_attention_body(4, 2, 80, 16), {{}, {}, {}, causal(80)}},
          {"decode", decode_body(4, 2, 150, 16), {}}};
}

// The GPU tilings of every structure found (at most `limit` a case), verified.
std::vector<std::pair<std::string, BlockGraph>> gpu_graphs(const Program& p, const Case& c, size_t limit) {
  SearchOptions o;
  o.max_seconds = 2;
  std::vector<BlockGraph> found = search_structures(p, o, nullptr);
  found.insert(found.begin(), direct_translation(p));
  std::vector<std::pair<std::string, BlockGraph>> out;
  for (const BlockGraph& s : found) {
    if (out.size() >= limit) break;
    BlockGraph g = cuda_tiling(p, s);
    out.emplace_back(c.what, g);
  }
  return out;
}

double rel_diff(const Buffers<double>& a, const Buffers<double>& b) {
  double worst = 0;
  for (size_t o = 0; o < a.size(); ++o) {
    double mag = 1e-30;
    for (double x : b[o]) mag = std::max(mag, std::abs(x));
    for (size_t e = 0; e < a[o].size(); ++e) {
      if (!std::isfinite(a[o][e]) && std::isfinite(b[o][e])) return INFINITY;
      worst = std::max(worst, std::abs(a[o][e] - b[o][e]) / mag);
    }
  }
  return worst;
}

// Output rows a block: the product of the grid's tiles.
int64_t rows_of(const BlockGraph& g) {
  int64_t rows = 1;
  for (const GridDim& d : g.grid) rows *= d.tile;
  return rows;
}

// The search's structure that loops over the longest atom (attention's key
// positions: the online-softmax one), or fails.
BlockGraph loop_structure(const Program& p) {
  SearchOptions o;
  o.max_seconds = 5;
  BlockGraph best = direct_translation(p);
  for (const BlockGraph& f : search_structures(p, o, nullptr))
    if (f.loop_atom >= 0 && (best.loop_atom < 0 || p.extent(f.loop_atom) > p.extent(best.loop_atom))) best = f;
  EXPECT_GE(best.loop_atom, 0) << "no structure with a loop found";
  return best;
}

Buffers<double> random_inputs(const Program& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  Buffers<double> in;
  for (const IoTensor& t : p.inputs) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = u(rng);
    in.push_back(v);
  }
  return in;
}

std::string find_nvcc() {
  if (const char* e = std::getenv("ISOMER_NVCC"); e && *e) return e;
  for (const char* c : {"/usr/local/cuda/bin/nvcc"})
    if (std::filesystem::exists(c)) return c;
  if (std::system("nvcc --version > /dev/null 2>&1") == 0) return "nvcc";
  return "";
}

// nvcc's messages where `source` fails to compile to PTX for sm_90, "" where it
// compiles.
std::string nvcc_errors(const std::string& nvcc, const std::string& source) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("isomer_cuda_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "all.cu") << source;
  std::string cmd = nvcc + " --ptx -arch=sm_90 -std=c++17 -o " + (dir / "all.ptx").string() + " " +
                    (dir / "all.cu").string() + " > " + (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(dir / "log.txt");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  if (rc == 0) {
    fs::remove_all(dir);
    return "";
  }
  return "exit " + std::to_string(rc) + ": " + text + "\nsource: " + (dir / "all.cu").string();
}

class MuGraphCuda : public ::testing::Test {
 protected:
  void SetUp() override { setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0); }
};

// At the GPU tiling every structure is verified over the field and matches the
// program in doubles, its skip table included.
TEST_F(MuGraphCuda, GpuTilingsVerify) {
  for (const Case& c : cases()) {
    Program p = from_body(parse_graph(c.body));
    for (const auto& [what, g] : gpu_graphs(p, c, 4)) {
      FieldVerdict fv = verify_field(p, g, c.constants, 11);
      EXPECT_TRUE(fv.ok) << what << ": " << fv.reason << "\n" << g.to_text(p);
      Buffers<double> in = random_inputs(p, 5);
      for (size_t i = 0; i < c.constants.size(); ++i)
        if (!c.constants[i].empty()) in[i].assign(c.constants[i].begin(), c.constants[i].end());
      Buffers<double> want = evaluate_program(p, in), got;
      for (const auto& w : want) got.emplace_back(w.size(), NAN);
      interpret(p, g, in, got, {}, skip_table(p, g, c.constants));
      EXPECT_LT(rel_diff(got, want), 1e-9) << what << "\n" << g.to_text(p);
      EXPECT_LE(cuda_smem_bytes(p, g), size_t{200} << 10) << what;
    }
  }
}

// The tiling's choices: attention's query rows share a block (the K/V chunk is
// read once for them), the loop runs in chunks; RMSNorm's 512-float rows, a block
// of 4096 floats each, 8 rows a block while that leaves blocks for two a
// multiprocessor (here too few rows: one a block).
TEST_F(MuGraphCuda, TilingSharesKvChunksAcrossQueryRows) {
  std::vector<float> mask = causal(256);
  Program p = from_body(parse_graph(testing::gqa_attention_body(8, 2, 256, 64)));
  BlockGraph s = loop_structure(p);
  ASSERT_GE(s.loop_atom, 0);
  BlockGraph g = cuda_tiling(p, s);
  EXPECT_GT(rows_of(g), 1) << g.to_text(p);
  EXPECT_GT(g.chunk, 1);
  EXPECT_TRUE(verify_field(p, g, {{}, {}, {}, mask}, 11).ok) << g.to_text(p);
  Program r = from_body(parse_graph(rmsnorm_body(64, 512)));
  BlockGraph gr = cuda_tiling(r, direct_translation(r));
  EXPECT_EQ(gr.num_tiles(r), 64) << gr.to_text(r);
}

// Decode (too few tiles for the multiprocessors) splits its KV loop: the split
// tiling verifies over the field, matches in doubles, prints and parses back, and
// its text is a runs kernel and a combine kernel; `splits = 1` and a GPU with
// few multiprocessors keep the loop whole.
TEST_F(MuGraphCuda, DecodeSplitsItsLoop) {
  Program p = from_body(parse_graph(decode_body(4, 2, 600, 16)));
  BlockGraph s = loop_structure(p);
  BlockGraph g = cuda_tiling(p, s);
  EXPECT_GT(g.splits, 1) << g.to_text(p);
  EXPECT_EQ(g.chunk, 64) << g.to_text(p);
  EXPECT_LT((g.splits - 1) * g.chunks_per_split(p), g.num_chunks(p));
  FieldVerdict fv = verify_field(p, g, {}, 11);
  EXPECT_TRUE(fv.ok) << fv.reason << "\n" << g.to_text(p);
  Buffers<double> in = random_inputs(p, 3), want = evaluate_program(p, in), got;
  for (const auto& w : want) got.emplace_back(w.size(), NAN);
  interpret(p, g, in, got);
  EXPECT_LT(rel_diff(got, want), 1e-9);
  EXPECT_EQ(parse_block_graph(p, g.to_text(p)).splits, g.splits);
  CudaKernel k = generate_cuda(p, g, {}, "mg_dec");
  EXPECT_NE(k.source.find("mg_dec_runs<<<" + std::to_string(g.num_tiles(p) * g.splits)), std::string::npos);
  EXPECT_NE(k.source.find("mg_dec_combine<<<" + std::to_string(g.num_tiles(p))), std::string::npos);
  CudaTilingOptions whole;
  whole.splits = 1;
  EXPECT_EQ(cuda_tiling(p, s, whole).splits, 1);
  CudaTilingOptions few;
  few.sms = 2;
  EXPECT_EQ(cuda_tiling(p, s, few).splits, 1);
}

// The rescaled accumulator with the most atoms (attention's P @ V), or -1.
int widest_scaled_accumulator(const BlockGraph& g) {
  int acc = -1;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == BKind::Accum && g.ops[i].scale != 0 &&
        (acc < 0 || g.ops[i].axes.size() > g.ops[static_cast<size_t>(acc)].axes.size()))
      acc = static_cast<int>(i);
  return acc;
}

// The verifier catches a combine that adds the splits' accumulators without
// rescaling them to the common maximum: one chunk a split (the loop itself never
// rescales), and the attention numerator's accumulator marked unscaled (scale 0)
// so only the combine reads the mark. The same mark on the whole loop breaks the
// loop's rescale and is caught too.
TEST_F(MuGraphCuda, VerifierRejectsAnUnscaledCombine) {
  Program p = from_body(parse_graph(decode_body(4, 2, 100, 16)));
  BlockGraph s = loop_structure(p);
  CudaTilingOptions o;
  o.splits = 2;
  BlockGraph g = cuda_tiling(p, s, o);
  ASSERT_EQ(g.splits, 2) << g.to_text(p);
  ASSERT_EQ(g.chunks_per_split(p), 1) << g.to_text(p);
  ASSERT_TRUE(verify_field(p, g, {}, 11).ok);
  const int acc = widest_scaled_accumulator(g);
  ASSERT_GE(acc, 0) << g.to_text(p);
  BlockGraph bad = g;
  bad.ops[static_cast<size_t>(acc)].scale = 0;
  FieldVerdict fv = verify_field(p, bad, {}, 11);
  EXPECT_FALSE(fv.ok) << "an unscaled combine passed: " << fv.reason;
  BlockGraph whole = bad;
  whole.splits = 1;
  EXPECT_FALSE(verify_field(p, whole, {}, 11).ok);
}

// Causal GQA attention with a block of 32 query rows: the query heads of a KV
// head (an atom the staged K, V and mask chunks lack) are whole in a block before
// its rows grow; the tiling verifies over the field and matches in doubles; both
// contractions are 2-D register tiles reading float4s from shared memory (Q·Kᵀ
// along the head dimension, P·V along the keys with a scalar tail where a chunk
// is not a multiple of 4), the K and V chunks staged with float4 copies, and the
// text compiles. A denominator that sums the scores, not their exps, is caught.
TEST_F(MuGraphCuda, WideBlocksShareChunksAcrossQueryHeads) {
  for (int seq : {256, 197}) {
    std::vector<float> mask = causal(seq);
    Program p = from_body(parse_graph(testing::gqa_attention_body(8, 2, seq, 64)));
    BlockGraph s = loop_structure(p);
    ASSERT_GE(s.loop_atom, 0);
    CudaTilingOptions o;
    o.min_tiles = 8;
    BlockGraph g = cuda_tiling(p, s, o);
    bool along_mask = false, heads_whole = true;
    for (const GridDim& d : g.grid) {
      bool staged = false;  // a loop input over the atom
      for (const BOp& op : g.ops)
        staged = staged || (op.kind == BKind::Input && op.phase == Phase::Loop &&
                            std::find(op.axes.begin(), op.axes.end(), d.atom) != op.axes.end());
      if (staged) along_mask = along_mask || d.tile > 1;
      else heads_whole = heads_whole && d.tile == p.extent(d.atom);
    }
    EXPECT_EQ(rows_of(g), 32) << g.to_text(p);
    EXPECT_TRUE(along_mask && heads_whole) << g.to_text(p);
    const std::vector<std::vector<float>> constants = {{}, {}, {}, mask};
    FieldVerdict fv = verify_field(p, g, constants, 11);
    EXPECT_TRUE(fv.ok) << fv.reason << "\n" << g.to_text(p);
    Buffers<double> in = random_inputs(p, 7);
    in[3].assign(mask.begin(), mask.end());
    Buffers<double> want = evaluate_program(p, in), got;
    for (const auto& w : want) got.emplace_back(w.size(), NAN);
    interpret(p, g, in, got, {}, skip_table(p, g, constants));
    EXPECT_LT(rel_diff(got, want), 1e-9) << g.to_text(p);
    CudaKernel k = generate_cuda(p, g, skip_table(p, g, constants), "mg_wide");
    size_t tiled = 0;
    for (size_t at = 0; (at = k.source.find("mg_ld<4>(mg_yv[j]", at)) != std::string::npos; ++at) ++tiled;
    EXPECT_EQ(tiled, 2u) << k.source;
    EXPECT_NE(k.source.find("*reinterpret_cast<float4*>(&S"), std::string::npos) << k.source;
    EXPECT_EQ(k.source.find("for (; mg_k < ") != std::string::npos, seq % 4 != 0 || g.chunk % 4 != 0) << k.source;
    if (std::string nvcc = find_nvcc(); !nvcc.empty()) {
      EXPECT_EQ(nvcc_errors(nvcc, k.source), "");
    }
    // The softmax denominator summing the scores rather than their exps.
    int sum = -1;
    for (size_t i = 0; i < g.ops.size(); ++i)
      if (g.ops[i].kind == BKind::Reduce && g.ops[i].args[0] == g.stab_exp) sum = static_cast<int>(i);
    ASSERT_GE(sum, 0) << g.to_text(p);
    BlockGraph bad = g;
    bad.ops[static_cast<size_t>(sum)].args[0] = g.ops[static_cast<size_t>(g.stab_exp)].args[0];
    EXPECT_FALSE(verify_field(p, bad, constants, 11).ok) << "a sum of the scores passed at\n" << bad.to_text(p);
    // P·V's accumulator never rescaled as the running maximum moves. In the causal
    // mask's leading corner every kept row sees only the first chunk of keys, where
    // that is harmless: its last rows against its first keys see several, and catch it.
    const int acc = widest_scaled_accumulator(g);
    ASSERT_GE(acc, 0) << g.to_text(p);
    BlockGraph unscaled = g;
    unscaled.ops[static_cast<size_t>(acc)].scale = 0;
    FieldVerdict uv = verify_field(p, unscaled, constants, 11);
    EXPECT_FALSE(uv.ok) << "an unrescaled accumulator passed at\n" << unscaled.to_text(p);
    // Only there: the leading corner alone passes it (verify_field reports that
    // corner's failure first).
    EXPECT_NE(uv.reason.find("last rows"), std::string::npos) << uv.reason;
  }
}

// Rows a block and splits against the multiprocessors (132 unless set): with a
// loop, rows double while a tile is left for every two multiprocessors or, with
// the split, two blocks each; a grid of fewer tiles than multiprocessors splits a
// loop of more than two chunks. The choices verify over the field, match
// in doubles and compile.
TEST_F(MuGraphCuda, RowsAndSplitsFollowTheMultiprocessors) {
  struct Want {
    std::string what, body;
    int seq;
    bool masked;
    CudaTilingOptions opt;
    int64_t rows, tiles, splits;
    bool check;  // verify and compile (the larger shapes only pick)
  };
  CudaTilingOptions dflt, few_sms, short_chunks;
  few_sms.sms = 16;
  short_chunks.chunk = 32;
  const std::vector<Want> wants = {
      // 16 rows leave 128 tiles (32 would leave 64); two chunks stay whole.
      {"gqa 16/4 x 128", testing::gqa_attention_body(16, 4, 128, 64), 128, true, dflt, 16, 128, 1, true},
      // On 16 multiprocessors: 32 rows, 64 tiles, no split.
      {"gqa 16/4 x 128, 16 SMs", testing::gqa_attention_body(16, 4, 128, 64), 128, true, few_sms, 32, 64, 1, false},
      // Four chunks of 32: 128 tiles split in 4.
      {"gqa 16/4 x 128, chunks of 32", testing::gqa_attention_body(16, 4, 128, 64), 128, true, short_chunks, 16, 128, 4,
       false},
      {"gqa 32/8 x 256", testing::gqa_attention_body(32, 8, 256, 64), 256, true, dflt, 32, 256, 1, false},
      // 16 rows leave 13 tiles a head (32 would leave 7); four chunks, split in 4.
      {"vit 6 x 197", mha_body(6, 197, 64), 197, false, dflt, 16, 78, 4, true},
      // 16 rows, 96 tiles (32 would leave 48); two chunks stay whole.
      {"bert 12 x 128", mha_body(12, 128, 64), 128, false, dflt, 16, 96, 1, false},
      // Decode: 32 tiles at a row a block; the query heads of a KV head, 8 tiles
      // split in 64, still two blocks a multiprocessor.
      {"decode 32/8 x 4096", decode_body(32, 8, 4096, 64), 4096, false, dflt, 4, 8, 64, false},
  };
  std::string nvcc = find_nvcc();
  for (const Want& w : wants) {
    Program p = from_body(parse_graph(w.body));
    BlockGraph g = cuda_tiling(p, loop_structure(p), w.opt);
    EXPECT_EQ(rows_of(g), w.rows) << w.what << "\n" << g.to_text(p);
    EXPECT_EQ(g.num_tiles(p), w.tiles) << w.what;
    EXPECT_EQ(g.splits, w.splits) << w.what;
    if (!w.check) continue;
    std::vector<std::vector<float>> constants(p.inputs.size());
    if (w.masked) constants.back() = causal(w.seq);
    FieldVerdict fv = verify_field(p, g, constants, 11);
    EXPECT_TRUE(fv.ok) << w.what << ": " << fv.reason << "\n" << g.to_text(p);
    Buffers<double> in = random_inputs(p, 9);
    if (w.masked) in.back().assign(constants.back().begin(), constants.back().end());
    Buffers<double> want = evaluate_program(p, in), got;
    for (const auto& x : want) got.emplace_back(x.size(), NAN);
    interpret(p, g, in, got, {}, skip_table(p, g, constants));
    EXPECT_LT(rel_diff(got, want), 1e-9) << w.what;
    if (!nvcc.empty()) {
      EXPECT_EQ(nvcc_errors(nvcc, generate_cuda(p, g, skip_table(p, g, constants), "mg_rule").source), "");
    }
  }
}

// The GPU's structure (cuda_structure): attention without a loop stages the whole
// K and V in every block of the few rows that leave two blocks a multiprocessor
// (BERT, 12 heads of 128: 384 blocks of 4 rows), the loop over the key positions
// a chunk at a time for 16 rows (96 blocks), reading 17 elements of q's for 65:
// the loop's is taken, and verifies. A CPU structure that already loops over the
// keys (GQA) or reduces nothing longer than it stages (RMSNorm) is kept; one that
// takes more than 96 KB a block (ViT's 197 keys) gives way whatever it reads.
TEST_F(MuGraphCuda, GpuStructureReadsEachKvChunkForMoreRows) {
  // Global reads of attention q, k, v [1,H,S,D] tiled by `rows` query rows: q
  // once a run, K and V once a tile along the rows.
  auto mha_reads = [](const BlockGraph& g, int64_t hsd, int64_t s) {
    return hsd * (g.splits + 2 * ((s + rows_of(g) - 1) / rows_of(g)));
  };
  Program bert = from_body(parse_graph(mha_body(12, 128, 64)));
  const BlockGraph no_loop = direct_translation(bert), own = cuda_tiling(bert, no_loop);
  ASSERT_LT(no_loop.loop_atom, 0);
  EXPECT_EQ(rows_of(own), 4);
  EXPECT_EQ(cuda_global_reads(bert, own), mha_reads(own, 12 * 128 * 64, 128));
  std::string why;
  BlockGraph g = cuda_structure(bert, no_loop, {}, 5, &why);
  ASSERT_GE(g.loop_atom, 0) << why;
  EXPECT_EQ(bert.extent(g.loop_atom), 128);
  EXPECT_EQ(rows_of(g), 16) << g.to_text(bert);
  EXPECT_EQ(g.num_tiles(bert), 96);
  EXPECT_EQ(cuda_global_reads(bert, g), mha_reads(g, 12 * 128 * 64, 128));
  EXPECT_EQ(why, "a loop over a3: the CPU's reads 6389760 input elements, this 1671168");
  FieldVerdict fv = verify_field(bert, g, {}, 11);
  EXPECT_TRUE(fv.ok) << fv.reason;

  Program gqa = from_body(parse_graph(testing::gqa_attention_body(16, 4, 128, 64)));
  const BlockGraph looped = loop_structure(gqa);
  EXPECT_EQ(cuda_structure(gqa, looped, {}, 5, &why).to_text(gqa), cuda_tiling(gqa, looped).to_text(gqa));
  EXPECT_EQ(why, "the CPU's");

  Program rms = from_body(parse_graph(rmsnorm_body(512, 2048)));
  const BlockGraph rms_own = direct_translation(rms);
  EXPECT_EQ(cuda_structure(rms, rms_own, {}, 5, &why).to_text(rms), cuda_tiling(rms, rms_own).to_text(rms));
  EXPECT_EQ(why, "the CPU's");

  Program vit = from_body(parse_graph(mha_body(6, 197, 64)));
  BlockGraph gv = cuda_structure(vit, direct_translation(vit), {}, 5, &why);
  ASSERT_GE(gv.loop_atom, 0) << why;
  EXPECT_GT(gv.splits, 1);
  EXPECT_EQ(cuda_global_reads(vit, gv), mha_reads(gv, 6 * 197 * 64, 197));
  EXPECT_NE(why.find("KB of shared memory a block"), std::string::npos) << why;
}

// Every region kind's kernels (each structure's GPU tiling, and a split loop's
// pair) in one .cu, compiled to PTX for sm_90 by nvcc.
TEST_F(MuGraphCuda, EmittedKernelsCompileWithNvcc) {
  std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set ISOMER_NVCC): the emitted CUDA is not compiled here";
  std::ostringstream f;
  int n = 0;
  bool prelude = true;
  for (const Case& c : cases()) {
    Program p = from_body(parse_graph(c.body));
    for (const auto& [what, g] : gpu_graphs(p, c, 3)) {
      CudaKernel k = generate_cuda(p, g, skip_table(p, g, c.constants), "mg_" + what + std::to_string(n++));
      EXPECT_NE(k.source.find(k.name + "_launch"), std::string::npos);
      std::string src = k.source;
      // One prelude per translation unit.
      if (!prelude) src = src.substr(src.find("// μGraph:"));
      prelude = false;
      f << src << "\n";
    }
  }
  // A split loop: its runs and combine kernels.
  Program d = from_body(parse_graph(decode_body(4, 2, 600, 16)));
  BlockGraph gd = cuda_tiling(d, loop_structure(d));
  EXPECT_GT(gd.splits, 1);
  const std::string split_src = generate_cuda(d, gd, {}, "mg_split").source;
  f << split_src.substr(split_src.find("// μGraph:")) << "\n";
  ASSERT_GT(n, 5);
  EXPECT_EQ(nvcc_errors(nvcc, f.str()), "");
}

}  // namespace
}  // namespace isomer::mugraph
