// Generated kernels: compiled by the system compiler, cached, loaded, and equal
// to the interpreter. One small compile per test run at most (the rest is cached);
// skipped with a message when no compiler exists.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>

#include "ir/text.h"
#include "mugraph/codegen.h"
#include "mugraph/codegen_plan.h"
#include "mugraph/cost.h"
#include "mugraph/interpreter.h"
#include "mugraph/kernel_cache.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"
#include "mugraph_test_util.h"

namespace isomer::mugraph {
namespace {

// Runs the compiled kernel and the interpreter (`target`: the target program itself,
// which skips nothing) on the same random inputs.
double max_rel_diff(const Program& p, const BlockGraph& g, const CompiledKernel& k, const std::vector<uint8_t>& skip,
                    const std::vector<std::vector<float>>& constants, int threads, bool target = false) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<std::vector<float>> in;
  std::vector<std::vector<unsigned char>> bools;
  Buffers<double> din;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : p.inputs[i].dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    if (p.inputs[i].dtype == DType::Bool)
      for (float& x : v) x = x > 0 ? 1.0f : 0.0f;
    if (i < constants.size() && !constants[i].empty()) v = constants[i];
    in.push_back(v);
    din.emplace_back(v.begin(), v.end());
    // (A bool input reaches the kernel as bytes.)
    if (p.inputs[i].dtype == DType::Bool) bools.emplace_back(v.begin(), v.end());
  }
  std::vector<std::vector<float>> out;
  Buffers<double> dout;
  for (const IoTensor& o : p.outputs) {
    int64_t n = 1;
    for (int64_t d : o.dims) n *= d;
    out.emplace_back(static_cast<size_t>(n), NAN);
    dout.emplace_back(static_cast<size_t>(n), NAN);
  }
  std::vector<const void*> ip;
  size_t b = 0;
  for (size_t i = 0; i < in.size(); ++i)
    ip.push_back(p.inputs[i].dtype == DType::Bool ? static_cast<const void*>(bools[b++].data()) : in[i].data());
  std::vector<void*> op;
  for (auto& v : out) op.push_back(v.data());
  k.run(ip.data(), op.data(), threads);
  if (target) dout = evaluate_program(p, din);
  else interpret(p, g, din, dout, {}, skip);
  double worst = 0;
  for (size_t o = 0; o < out.size(); ++o) {
    double mag = 1e-30;
    for (double x : dout[o]) mag = std::max(mag, std::abs(x));
    for (size_t e = 0; e < out[o].size(); ++e) {
      if (!std::isfinite(out[o][e])) return INFINITY;
      worst = std::max(worst, std::abs(out[o][e] - dout[o][e]) / mag);
    }
  }
  return worst;
}

class MuGraphCodegen : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
    if (kernel_compiler().empty()) GTEST_SKIP() << "no C++ compiler found: generated kernels are not compiled here";
  }
};

// Every tiling the cost model likes for the targets compiles in one library (one
// compiler run) and matches the interpreter.
TEST_F(MuGraphCodegen, TargetsMatchTheInterpreter) {
  struct Case {
    std::string body;
    std::vector<std::vector<float>> constants;
  };
  std::vector<float> mask(24 * 24);
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 24; ++j) mask[static_cast<size_t>(i * 24 + j)] = j <= i ? 0.0f : -INFINITY;
  std::vector<Case> cases = {{testing::softmax_body(7, 40), {}},
                             {testing::swiglu_body(9, 40, 37), {}},
                             {testing::rmsnorm_matmul_body(9, 40, 37), {}},
                             {testing::layernorm_gelu_body(5, 24), {}},
                             // 45 columns: the vector erf loop's 32- (or 16-) and 8-lane blocks and a
                             // scalar tail.
                             {testing::layernorm_gelu_body(3, 45), {}},
                             {testing::gqa_attention_body(4, 2, 24, 8), {{}, {}, {}, mask}}};
  for (const Case& c : cases) {
    Program p = from_body(parse_graph(c.body));
    SearchOptions o;
    o.max_seconds = 2;
    std::vector<BlockGraph> found = search_structures(p, o, nullptr);
    found.insert(found.begin(), direct_translation(p));
    int n = 0;
    for (const BlockGraph& s : found) {
      for (const BlockGraph& g : tilings(p, s, 2, 1, c.constants)) {
        if (++n > 4) break;
        std::vector<uint8_t> skip = skip_table(p, g, c.constants);
        std::string why;
        auto k = load_kernel(generate_source(p, g, skip), &why);
        ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
        for (int threads : {1, 2})
          EXPECT_LT(max_rel_diff(p, g, *k, skip, c.constants, threads), 1e-5) << g.to_text(p);
      }
    }
  }
}

// Factors moved into a contraction's store (mg_epi): a scalar on an operand (the
// scale on q and k^T) and a per-row divisor after it (softmax's 1/sum after P V,
// a row mean dividing a projection). Some kernel of each region takes each path,
// and every kernel tried matches the interpreter.
TEST_F(MuGraphCodegen, StoreFactorsMatchTheInterpreter) {
  const std::string vit =
      "graph vit(%q: f32[1,3,37,16], %k: f32[1,3,37,16], %v: f32[1,3,37,16]) {\n"
      "  %c = const f32[] {0.5}\n"
      "  %qs = Mul(%q, %c)\n  %kt = Transpose(%k) {perm=[0, 1, 3, 2]}\n  %ks = Mul(%kt, %c)\n"
      "  %s = MatMul(%qs, %ks)\n  %p = Softmax(%s) {axis=-1}\n  %o = MatMul(%p, %v)\n  return %o\n}\n";
  const std::string normalized =
      "graph nc(%x: f32[1,21,40], %w: f32[40,37]) {\n"
      "  %one = const f32[] {1}\n  %sq = Mul(%x, %x)\n  %s = ReduceSum(%sq) {axes=[-1], keepdims=1}\n"
      "  %t = Add(%s, %one)\n  %y = MatMul(%x, %w)\n  %z = Div(%y, %t)\n  return %z\n}\n";
  struct Case {
    std::string body;
    bool alpha, divisor;  // a path some kernel must take
  };
  for (const Case& c : {Case{vit, true, true}, Case{normalized, false, true}}) {
    Program p = from_body(parse_graph(c.body));
    SearchOptions o;
    o.max_seconds = 2;
    std::vector<BlockGraph> found = search_structures(p, o, nullptr);
    found.insert(found.begin(), direct_translation(p));
    bool alpha = false, divisor = false;
    int n = 0;
    for (const BlockGraph& s : found) {
      for (const BlockGraph& g : tilings(p, s, 2, 1, {})) {
        if (++n > 12) break;
        const std::string src = generate_source(p, g, {});
        const size_t body = src.find("isomer_mugraph_run");
        for (size_t at = src.find("mg_epi{1, ", body); at != std::string::npos; at = src.find("mg_epi{1, ", at + 1)) {
          const size_t end = src.find('}', at);
          const std::string epi = src.substr(at, end - at);
          alpha = alpha || epi.find("(0x1p+0f)") == std::string::npos;
          divisor = divisor || epi.find("nullptr") == std::string::npos;
        }
        std::string why;
        auto k = load_kernel(src, &why);
        ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
        for (int threads : {1, 2}) EXPECT_LT(max_rel_diff(p, g, *k, {}, {}, threads), 1e-5) << g.to_text(p);
      }
    }
    if (c.alpha) EXPECT_TRUE(alpha) << "no kernel moved the operand's scale into the store\n" << c.body;
    if (c.divisor) EXPECT_TRUE(divisor) << "no kernel moved the row divisor into the store\n" << c.body;
  }
}

// A loop of one chunk (the loop atom's whole extent, as ViT's loop{a3:197}) is
// straight-line code: an accumulator a micro-kernel stores is not zeroed first (its
// one call overwrites it, an operand's scale in that store) and the online softmax
// keeps one shift. Every such kernel of attention at odd shapes, with and without a
// causal mask's skip list, matches the source program.
TEST_F(MuGraphCodegen, OneChunkLoopsStoreTheirAccumulatorsOnce) {
  const std::string vit =
      "graph vit(%q: f32[1,3,37,13], %k: f32[1,3,37,13], %v: f32[1,3,37,13]) {\n"
      "  %c = const f32[] {0.5}\n"
      "  %qs = Mul(%q, %c)\n  %kt = Transpose(%k) {perm=[0, 1, 3, 2]}\n  %ks = Mul(%kt, %c)\n"
      "  %s = MatMul(%qs, %ks)\n  %p = Softmax(%s) {axis=-1}\n  %o = MatMul(%p, %v)\n  return %o\n}\n";
  std::vector<float> mask(19 * 19);
  for (int i = 0; i < 19; ++i)
    for (int j = 0; j < 19; ++j) mask[static_cast<size_t>(i * 19 + j)] = j <= i ? 0.0f : -INFINITY;
  struct Case {
    std::string body;
    std::vector<std::vector<float>> constants;
  };
  for (const Case& c : {Case{vit, {}}, Case{testing::gqa_attention_body(4, 2, 19, 11), {{}, {}, {}, mask}}}) {
    Program p = from_body(parse_graph(c.body));
    SearchOptions o;
    o.max_seconds = 2;
    std::vector<BlockGraph> found = search_structures(p, o, nullptr);
    found.insert(found.begin(), direct_translation(p));
    int n = 0, unzeroed = 0;
    for (const BlockGraph& s : found) {
      for (BlockGraph g : tilings(p, s, 2, 1, c.constants)) {
        if (g.loop_atom < 0 || n >= 6) continue;
        g.chunk = p.extent(g.loop_atom);  // the whole loop in one chunk
        ++n;
        const std::vector<uint8_t> skip = skip_table(p, g, c.constants);
        const std::string src = generate_source(p, g, skip);
        const std::string body = src.substr(src.find("isomer_mugraph_run"));
        EXPECT_EQ(body.find("for (int64_t c = 0;"), std::string::npos) << g.to_text(p);
        if (skip.empty()) {
          // No accumulator a micro-kernel stores into is zeroed, nor the shift reset.
          const KernelPlan k = plan_kernel(p, g);
          for (size_t i = 0; i < g.ops.size(); ++i) {
            if (g.ops[i].kind != BKind::Accum) continue;
            const auto m = k.matmuls.find(g.ops[i].args[0]);
            if (m == k.matmuls.end() || m->second.kernel == MatmulPlan::Kernel::Generic ||
                k.fused_into[m->first] != static_cast<int>(i))
              continue;
            ++unzeroed;
            const std::string acc = k.acc[i].base + "[";
            for (size_t at = body.find(acc); at != std::string::npos; at = body.find(acc, at + 1))
              EXPECT_EQ(body.substr(at, body.find('\n', at) - at).find("= 0.0f;"), std::string::npos)
                  << "accumulator " << i << " zeroed in a one-chunk loop\n" << g.to_text(p);
          }
          EXPECT_EQ(body.find("= -INFINITY;"), std::string::npos) << g.to_text(p);
        }
        std::string why;
        auto kernel = load_kernel(src, &why);
        ASSERT_TRUE(kernel) << why << "\n" << g.to_text(p);
        for (int threads : {1, 2})
          EXPECT_LT(max_rel_diff(p, g, *kernel, skip, c.constants, threads, true), 1e-5) << g.to_text(p);
      }
    }
    EXPECT_GT(n, 0) << "no tiling of a loop\n" << c.body;
    if (c.constants.empty()) EXPECT_GT(unzeroed, 0) << "no micro-kernel accumulated in a loop\n" << c.body;
  }
}

// GELU's chain x * (erf(x / sqrt 2) + 1) * 0.5 is written as one call (mg_gelu_erfv:
// the runtime's piecewise erf on 16 lanes, the chain on mg_erfv on 8), in either
// operand order and with x * sqrt 1/2 for the division; a chain with another
// constant is not. Rows of 1, 33 and 197 columns (vector blocks, single vectors and
// a scalar tail), each kernel against the interpreter as the CPU compiles it and
// with AVX-512 hidden from the prelude (its 8-lane AVX2 path).
TEST_F(MuGraphCodegen, GeluChainIsOneCallAtBothWidths) {
  auto gelu_body = [](int m, int n, const std::string& half) {
    std::string t = "graph gelu(%x: f32[1," + std::to_string(m) + "," + std::to_string(n) + "], %s: f32[" +
                    std::to_string(n) + "]) {\n";
    t += "  %r = const f32[] {0.70710678118654752}\n  %one = const f32[] {1}\n  %half = const f32[] {" + half + "}\n";
    t += "  %y = Mul(%x, %s)\n  %d = Mul(%r, %y)\n  %e = Erf(%d)\n  %a = Add(%one, %e)\n  %m = Mul(%a, %y)\n";
    t += "  %g = Mul(%half, %m)\n  return %g\n}\n";
    return t;
  };
  struct Case {
    std::string body;
    bool gelu;
  };
  const std::vector<Case> cases = {{testing::layernorm_gelu_body(3, 197), true},
                                   {testing::layernorm_gelu_body(1, 33), true},
                                   {gelu_body(33, 1, "0.5"), true},
                                   {gelu_body(2, 197, "0.5"), true},
                                   {gelu_body(2, 197, "0.6"), false}};
  for (const Case& c : cases) {
    Program p = from_body(parse_graph(c.body));
    const std::vector<BlockGraph> found = {direct_translation(p)};
    bool called = false;
    int n = 0;
    for (const BlockGraph& s : found) {
      for (const BlockGraph& g : tilings(p, s, 1, 1, {})) {
        if (++n > 1) break;
        const std::string src = generate_source(p, g, {});
        const std::string body = src.substr(src.find("isomer_mugraph_run"));
        called = called || body.find("mg_gelu_erfv(") != std::string::npos;
        if (!c.gelu) EXPECT_EQ(body.find("mg_gelu_erf"), std::string::npos) << "not GELU's 0.5\n" << body;
        for (const std::string& prefix : {std::string(), std::string("#undef __AVX512F__\n")}) {
          std::string why;
          auto k = load_kernel(prefix + src, &why);
          ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
          EXPECT_LT(max_rel_diff(p, g, *k, {}, {}, 1), 1e-5) << prefix << g.to_text(p);
        }
      }
    }
    EXPECT_EQ(called, c.gelu) << c.body;
  }
}

// The ranking that picks a kernel among all structures prices the loop iterations
// a causal mask lets the kernel skip (estimate_ms): priced without them, causal
// GQA 16x4 at 128 kept a tiling without a loop over KV blocks, which computes every
// masked score (1.10x over unfused, 1.74x with the skips).
TEST_F(MuGraphCodegen, RankingPricesSkippedMaskedIterations) {
  const int s = 64;
  std::vector<float> mask(static_cast<size_t>(s * s));
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < s; ++j) mask[static_cast<size_t>(i * s + j)] = j <= i ? 0.0f : -INFINITY;
  const std::vector<std::vector<float>> constants = {{}, {}, {}, mask};
  Program p = from_body(parse_graph(testing::gqa_attention_body(4, 2, s, 8)));
  SearchOptions o;
  o.max_seconds = 2;
  int looped = 0;
  for (const BlockGraph& st : search_structures(p, o, nullptr))
    for (const BlockGraph& g : tilings(p, st, 1, 4, constants)) {
      if (g.loop_atom < 0 || g.chunk <= 0 || g.chunk >= p.extent(g.loop_atom)) continue;
      const std::vector<uint8_t> skip = skip_table(p, g, constants);
      if (skip.empty()) continue;
      ++looped;
      EXPECT_LT(estimate_ms(p, g, 1, constants), estimate(p, g, 1).ms) << g.to_text(p);
      EXPECT_EQ(estimate_ms(p, g, 1, {}), estimate(p, g, 1).ms) << "no constants: nothing skipped";
    }
  EXPECT_GT(looped, 0) << "no tiling loops over KV blocks with a skip table";
}

// Kᵀ of Q·Kᵀ is packed once per KV block and KV head, shared by the query heads of
// its GQA group and the query rows of the tile (mg_dot packed it per call, and not
// at all for a call of a few rows), and the kernels that do so match the
// interpreter at odd lengths, with a causal mask (chunks skipped) and two batches.
TEST_F(MuGraphCodegen, AttentionPacksKeysOncePerSlice) {
  struct Case {
    int batch, heads, kv, seq;
  };
  for (const Case& c : {Case{2, 8, 2, 17}, Case{1, 8, 2, 97}}) {
    const int s = c.seq;
    std::vector<float> mask(static_cast<size_t>(s * s));
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) mask[static_cast<size_t>(i * s + j)] = j <= i ? 0.0f : -INFINITY;
    const std::vector<std::vector<float>> constants = {{}, {}, {}, mask};
    Program p = from_body(parse_graph(testing::gqa_attention_body(c.heads, c.kv, s, 16, c.batch)));
    SearchOptions o;
    o.max_seconds = 2;
    int hoisted = 0;
    for (const BlockGraph& st : search_structures(p, o, nullptr))
      for (const BlockGraph& g : tilings(p, st, 2, 8, constants)) {
        const KernelPlan plan = plan_kernel(p, g);
        bool packs = false;
        for (const auto& [i, m] : plan.matmuls) packs = packs || m.pack >= 0;
        if (!packs || hoisted >= 2) continue;
        ++hoisted;
        const std::vector<uint8_t> skip = skip_table(p, g, constants);
        const std::string src = generate_source(p, g, skip);
        // The pack is called in the kernel's body (the prelude only defines it).
        EXPECT_NE(src.find("mg_pack_t(", src.find("isomer_mugraph_run")), std::string::npos) << g.to_text(p);
        std::string why;
        auto k = load_kernel(src, &why);
        ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
        for (int threads : {1, 2})
          EXPECT_LT(max_rel_diff(p, g, *k, skip, constants, threads), 1e-5) << g.to_text(p);
      }
    EXPECT_GT(hoisted, 0) << "no attention kernel packs Kᵀ once for its query rows (seq " << s << ")";
  }
}

// Calls check(g, skip, looped, skipping) on each tiling of p whose loop covers part
// of its axis (those a skip table can apply to), with the counts so far of such
// tilings and of those with a skip table; returns the final counts.
std::pair<int, int> for_each_partial_loop(
    const Program& p, const std::vector<std::vector<float>>& constants,
    const std::function<void(const BlockGraph&, const std::vector<uint8_t>&, int, int)>& check) {
  SearchOptions o;
  o.max_seconds = 2;
  int looped = 0, skipping = 0;
  for (const BlockGraph& st : search_structures(p, o, nullptr))
    for (const BlockGraph& g : tilings(p, st, 1, 4, constants)) {
      if (g.loop_atom < 0 || g.chunk <= 0 || g.chunk >= p.extent(g.loop_atom)) continue;
      ++looped;
      const std::vector<uint8_t> skip = skip_table(p, g, constants);
      skipping += !skip.empty();
      check(g, skip, looped, skipping);
    }
  return {looped, skipping};
}

// GPT-2's causal mask as a bool kept by Where(keep, S, -inf): a KV block whose keep
// is all false is -inf, so the kernel skips it as it skips an added -inf mask's
// (before, bool constants were no constants to the skip table, and GPT-2's kernel
// computed every masked block). A mask that keeps some key of every block (random
// keys) skips nothing; any mask's kernel matches the interpreter.
TEST_F(MuGraphCodegen, BoolCausalMaskSkipsMaskedBlocks) {
  const int s = 64;
  const std::string body =
      "graph attn(%q: f32[1,2,64,16], %k: f32[1,2,64,16], %v: f32[1,2,64,16], %mask: bool[1,1,64,64]) {\n"
      "  %den = const f32[] {4}\n  %low = const f32[] {-inf}\n"
      "  %kt = Transpose(%k) {perm=[0, 1, 3, 2]}\n  %sc = MatMul(%q, %kt)\n  %sd = Div(%sc, %den)\n"
      "  %sm = Where(%mask, %sd, %low)\n  %p = Softmax(%sm) {axis=-1}\n  %o = MatMul(%p, %v)\n  return %o\n}\n";
  Program p = from_body(parse_graph(body));
  std::mt19937 rng(3);
  for (const char* kind : {"causal", "random", "upper"}) {
    std::vector<double> bits(static_cast<size_t>(s * s));
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) {
        const bool on = std::string(kind) == "causal" ? j <= i : std::string(kind) == "upper" ? j >= i : (rng() & 1) != 0;
        bits[static_cast<size_t>(i * s + j)] = on;
      }
    const Tensor keep = Tensor::from_f64(DType::Bool, {1, 1, s, s}, bits);
    const std::vector<std::vector<float>> constants = {{}, {}, {}, constant_values(keep)};
    const auto [looped, skipping] = for_each_partial_loop(
        p, constants, [&](const BlockGraph& g, const std::vector<uint8_t>& skip, int n, int n_skipping) {
          if (n > 2 && (skip.empty() || n_skipping > 2)) return;  // a few kernels compiled
          std::string why;
          auto k = load_kernel(generate_source(p, g, skip), &why);
          ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
          EXPECT_LT(max_rel_diff(p, g, *k, skip, constants, 1), 1e-5) << kind << "\n" << g.to_text(p);
        });
    ASSERT_GT(looped, 0) << "no tiling loops over KV blocks";
    if (std::string(kind) == "random") EXPECT_EQ(skipping, 0) << "a random mask keeps a key of every block";
    else EXPECT_GT(skipping, 0) << kind << ": blocks whose keys are all masked are not skipped";
  }
}

// Hugging Face's causal mask added as finfo.min (-3.4028e38) rather than -inf: a KV
// block whose every key carries the fill is skipped as a -inf block is (before, only
// -inf and false were in the skip table), and the field verifier accepts those
// kernels. A mask that keeps a key of every block (random keys) skips nothing, nor
// does a causal mask with one row filled throughout, whose softmax weighs every key
// evenly (skipped, the row would be 0/0); the kernels match the target itself.
TEST_F(MuGraphCodegen, FinfoMinMaskSkipsOnlyWhereExact) {
  const int s = 64;
  const float fill = -3.4028234663852886e38f;
  Program p = from_body(parse_graph(testing::gqa_attention_body(4, 2, s, 8)));
  std::mt19937 rng(5);
  for (const char* kind : {"causal", "random", "causal, row 9 filled"}) {
    const bool random = std::string(kind) == "random", row_filled = std::string(kind).find("row") != std::string::npos;
    std::vector<float> mask(static_cast<size_t>(s * s));
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) {
        const bool keep = random ? (rng() & 1) != 0 : j <= i && !(row_filled && i == 9);
        mask[static_cast<size_t>(i * s + j)] = keep ? 0.0f : fill;
      }
    const std::vector<std::vector<float>> constants = {{}, {}, {}, mask};
    const auto [looped, skipping] = for_each_partial_loop(
        p, constants, [&](const BlockGraph& g, const std::vector<uint8_t>& skip, int n, int n_skipping) {
          // (Row 9's keys all carry the fill: in float, as ONNX adds them, its scores
          // round to the fill and weigh evenly; the target in doubles keeps them apart.)
          if (row_filled || (n > 2 && (skip.empty() || n_skipping > 2))) return;  // a few kernels compiled
          EXPECT_TRUE(verify_field(p, g, constants, 11).ok) << kind << "\n" << g.to_text(p);
          std::string why;
          auto k = load_kernel(generate_source(p, g, skip), &why);
          ASSERT_TRUE(k) << why << "\n" << g.to_text(p);
          EXPECT_LT(max_rel_diff(p, g, *k, skip, constants, 1, true), 1e-5) << kind << "\n" << g.to_text(p);
        });
    ASSERT_GT(looped, 0) << "no tiling loops over KV blocks";
    if (std::string(kind) == "causal") EXPECT_GT(skipping, 0) << "blocks whose keys all carry the fill are not skipped";
    else EXPECT_EQ(skipping, 0) << kind << ": a skip table where a block is not exactly zero";
  }
}

}  // namespace
}  // namespace isomer::mugraph
