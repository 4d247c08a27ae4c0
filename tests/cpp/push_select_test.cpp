// The push-select template rules (rules/templates.rules): a row selection (Gather with
// a constant index, Slice with constant operands) moves above the per-row work that
// produces its input, so that work runs on the selected rows only. Graph text in, graph
// text out: per operator class one graph that is rewritten (to the expected graph, with
// the same outputs on random inputs) and one that must stay as it is (a selected axis
// the operator mixes, an operand that broadcasts over it, or skipped rows that another
// reader needs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "eval/evaluator.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "passes/passes.h"
#include "rules/rule.h"
#include "search/search.h"

namespace isomer {
namespace {

size_t pushes(const PassStats& s) {
  auto it = s.applied.find("push-select");
  return it == s.applied.end() ? 0 : it->second;
}

void expect_same_outputs(const Graph& a, const Graph& b) {
  for (uint64_t seed : {11u, 12u}) {
    std::vector<Tensor> in = random_inputs(a, seed);
    std::vector<Tensor> ya = evaluate(a, in), yb = evaluate(b, in);
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) {
      ASSERT_EQ(ya[i].dims(), yb[i].dims()) << "output " << i;
      std::vector<double> va = ya[i].to_f64(), vb = yb[i].to_f64();
      for (size_t k = 0; k < va.size(); ++k)
        ASSERT_NEAR(va[k], vb[k], 1e-5 * (1 + std::fabs(va[k]))) << "output " << i << " element " << k;
    }
  }
}

// `in` simplifies to `expected` (structurally, names aside) with `n` push-select rewrites.
void expect_rewrite(const char* in, const char* expected, size_t n) {
  Graph g = parse_graph(in);
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_TRUE(same_graph(out, parse_graph(expected))) << "got\n" << print_graph(out) << "expected\n" << expected;
  EXPECT_EQ(pushes(stats), n);
  expect_same_outputs(g, out);
}

// `in` is left as it is.
void expect_kept(const char* in) {
  Graph g = parse_graph(in);
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_TRUE(same_graph(out, g)) << "got\n" << print_graph(out);
  EXPECT_EQ(pushes(stats), 0u);
}

TEST(PushSelect, UnaryGatherMovesAboveErf) {
  expect_rewrite(R"(graph g(%x: f32[2,5,4]) {
  %i = const i64[] {0}
  %0 = Erf(%x)
  %1 = Tanh(%0)
  %2 = Gather(%1, %i) {axis=1}
  return %2
})",
                 R"(graph g(%x: f32[2,5,4]) {
  %i = const i64[] {0}
  %0 = Gather(%x, %i) {axis=1}
  %1 = Erf(%0)
  %2 = Tanh(%1)
  return %2
})",
                 2);
}

TEST(PushSelect, UnaryKeptWhenTheWholeTensorIsAlsoAnOutput) {
  expect_kept(R"(graph g(%x: f32[2,5,4]) {
  %i = const i64[] {0}
  %0 = Erf(%x)
  %1 = Gather(%0, %i) {axis=1}
  return %1, %0
})");
}

TEST(PushSelect, UnarySliceMovesAboveGeluWithItsAttributes) {
  expect_rewrite(R"(graph g(%x: f32[2,7,3]) {
  %st = const i64[1] {-1}
  %en = const i64[1] {9223372036854775807}
  %ax = const i64[1] {-2}
  %sp = const i64[1] {1}
  %0 = Gelu(%x) {approximate="tanh"}
  %1 = Slice(%0, %st, %en, %ax, %sp)
  return %1
})",
                 R"(graph g(%x: f32[2,7,3]) {
  %st = const i64[1] {-1}
  %en = const i64[1] {9223372036854775807}
  %ax = const i64[1] {-2}
  %sp = const i64[1] {1}
  %0 = Slice(%x, %st, %en, %ax, %sp)
  %1 = Gelu(%0) {approximate="tanh"}
  return %1
})",
                 1);
}

TEST(PushSelect, BinarySelectsFullOperandsAndKeepsBiases) {
  // Residual (both operands full), a bias on the right, a scalar on the left of a Sub.
  expect_rewrite(R"(graph g(%x: f32[2,5,4], %y: f32[2,5,4], %b: f32[4]) {
  %i = const i64[1] {3}
  %c = const f32[] {2}
  %0 = Add(%x, %y)
  %1 = Mul(%0, %b)
  %2 = Sub(%c, %1)
  %3 = Gather(%2, %i) {axis=1}
  return %3
})",
                 R"(graph g(%x: f32[2,5,4], %y: f32[2,5,4], %b: f32[4]) {
  %i = const i64[1] {3}
  %c = const f32[] {2}
  %gx = Gather(%x, %i) {axis=1}
  %gy = Gather(%y, %i) {axis=1}
  %0 = Add(%gx, %gy)
  %1 = Mul(%0, %b)
  %3 = Sub(%c, %1)
  return %3
})",
                 3);
}

TEST(PushSelect, BinaryKeptWhenAnOperandBroadcastsOverTheAxis) {
  // %y is [5,1] against [2,5,4]: it has the selected axis 1 without being full rank.
  expect_kept(R"(graph g(%x: f32[2,5,4], %y: f32[5,1]) {
  %i = const i64[] {3}
  %0 = Add(%x, %y)
  %1 = Gather(%0, %i) {axis=1}
  return %1
})");
  // %x is [2,1,4]: it broadcasts over the selected axis.
  expect_kept(R"(graph g(%x: f32[2,1,4], %y: f32[2,5,4]) {
  %st = const i64[1] {0}
  %en = const i64[1] {3}
  %ax = const i64[1] {1}
  %sp = const i64[1] {2}
  %0 = Div(%x, %y)
  %1 = Slice(%0, %st, %en, %ax, %sp)
  return %1
})");
}

TEST(PushSelect, MatMulSelectsRowsOfTheLeftOperand) {
  expect_rewrite(R"(graph g(%x: f32[2,5,4]) {
  %w = const f32[4,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
  %i = const i64[] {-1}
  %0 = MatMul(%x, %w)
  %1 = Gather(%0, %i) {axis=1}
  return %1
})",
                 R"(graph g(%x: f32[2,5,4]) {
  %w = const f32[4,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
  %i = const i64[] {-1}
  %0 = Gather(%x, %i) {axis=1}
  %1 = MatMul(%0, %w)
  return %1
})",
                 1);
}

TEST(PushSelect, MatMulKeptForColumnsAndBatchedRightOperands) {
  expect_kept(R"(graph g(%x: f32[2,5,4], %w: f32[4,3]) {
  %i = const i64[] {1}
  %0 = MatMul(%x, %w)
  %1 = Gather(%0, %i) {axis=2}
  return %1
})");
  expect_kept(R"(graph g(%x: f32[2,5,4], %w: f32[2,4,3]) {
  %i = const i64[] {1}
  %0 = MatMul(%x, %w)
  %1 = Gather(%0, %i) {axis=1}
  return %1
})");
}

TEST(PushSelect, LayerNormAndSoftmaxKeepTheirAxisWhenItMoves) {
  expect_rewrite(R"(graph g(%x: f32[2,5,4], %s: f32[4], %b: f32[4]) {
  %i = const i64[] {0}
  %0 = LayerNormalization(%x, %s, %b) {axis=-1, epsilon=0.001}
  %1 = Gather(%0, %i) {axis=1}
  return %1
})",
                 R"(graph g(%x: f32[2,5,4], %s: f32[4], %b: f32[4]) {
  %i = const i64[] {0}
  %0 = Gather(%x, %i) {axis=1}
  %1 = LayerNormalization(%0, %s, %b) {axis=1, epsilon=0.001}
  return %1
})",
                 1);
  expect_rewrite(R"(graph g(%x: f32[2,5,4]) {
  %i = const i64[] {4}
  %0 = Softmax(%x) {axis=2}
  %1 = Gather(%0, %i) {axis=1}
  return %1
})",
                 R"(graph g(%x: f32[2,5,4]) {
  %i = const i64[] {4}
  %0 = Gather(%x, %i) {axis=1}
  %1 = Softmax(%0) {axis=1}
  return %1
})",
                 1);
}

TEST(PushSelect, LayerNormAndSoftmaxKeptWhenTheAxisIsNormalized) {
  expect_kept(R"(graph g(%x: f32[2,5,4], %s: f32[5,4]) {
  %i = const i64[] {0}
  %0 = LayerNormalization(%x, %s) {axis=1}
  %1 = Gather(%0, %i) {axis=1}
  return %1
})");
  expect_kept(R"(graph g(%x: f32[2,5,4]) {
  %st = const i64[1] {0}
  %en = const i64[1] {2}
  %ax = const i64[1] {-1}
  %sp = const i64[1] {1}
  %0 = Softmax(%x) {axis=-1}
  %1 = Slice(%0, %st, %en, %ax, %sp)
  return %1
})");
}

TEST(PushSelect, TransposeMapsTheAxis) {
  // [5,2,4] -> [4,5,2], row 0 of the 5: row 0 of x's first axis, then [2,4] -> [4,2].
  expect_rewrite(R"(graph g(%x: f32[5,2,4]) {
  %i = const i64[] {0}
  %0 = Transpose(%x) {perm=[2, 0, 1]}
  %1 = Gather(%0, %i) {axis=1}
  return %1
})",
                 R"(graph g(%x: f32[5,2,4]) {
  %i = const i64[] {0}
  %0 = Gather(%x, %i) {axis=0}
  %1 = Transpose(%0) {perm=[1, 0]}
  return %1
})",
                 1);
}

// The tail of a pre-norm transformer block and the classifier's token selection:
// the out-projection, both residual Adds, the LayerNorms and the FFN run on one row.
constexpr const char* kBlockTail = R"(graph g(%a: f32[1,6,8], %h: f32[1,6,8]) {
  %wo = const f32[8,8] hex"%WO%"
  %w1 = const f32[8,16] hex"%W1%"
  %w2 = const f32[16,8] hex"%W2%"
  %b1 = const f32[16] hex"%B1%"
  %s = const f32[8] hex"%S%"
  %half = const f32[] {0.5}
  %i = const i64[] {0}
  %o = MatMul(%a, %wo)
  %r = Add(%h, %o)
  %n = LayerNormalization(%r, %s, %s) {axis=-1}
  %f = MatMul(%n, %w1)
  %fb = Add(%f, %b1)
  %e = Erf(%fb)
  %m = Mul(%fb, %e)
  %m2 = Mul(%m, %half)
  %f2 = MatMul(%m2, %w2)
  %y = Add(%r, %f2)
  %z = LayerNormalization(%y, %s, %s) {axis=-1}
  %sel = Gather(%z, %i) {axis=1}
  return %sel%EXTRA%
})";

std::string hex_of(size_t n, uint32_t seed) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t k = 0; k < n; ++k) {
    // Small floats in [-1, 1): a fixed pattern from the seed, little-endian bytes.
    float v = static_cast<float>(static_cast<int>((k * 2654435761u + seed * 40503u) % 2001u) - 1000) / 1000.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) {
      const uint32_t byte = (bits >> (8 * b)) & 0xffu;
      out += digits[byte >> 4];
      out += digits[byte & 15];
    }
  }
  return out;
}

std::string block_tail(const std::string& extra) {
  std::string t = kBlockTail;
  auto put = [&](const std::string& key, const std::string& value) { t.replace(t.find(key), key.size(), value); };
  put("%WO%", hex_of(64, 1));
  put("%W1%", hex_of(128, 2));
  put("%W2%", hex_of(128, 3));
  put("%B1%", hex_of(16, 4));
  put("%S%", hex_of(8, 5));
  put("%EXTRA%", extra);
  return t;
}

TEST(PushSelect, ReachesTheAttentionOutputThroughABlockTail) {
  Graph g = parse_graph(block_tail(""));
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  expect_same_outputs(g, out);
  // Every operator now works on the selected row ([1,8] or [1,16], not [1,6,*]); the
  // Gathers read the inputs.
  size_t gathers = 0;
  for (const NodePtr& n : out.topo_order()) {
    if (n->kind() != NodeKind::Op) continue;
    if (n->op_type() == "Gather") {
      ++gathers;
      EXPECT_EQ(n->inputs()[0].node->kind(), NodeKind::Input) << print_graph(out);
    } else {
      EXPECT_EQ(n->output_types()[0].rank(), 2) << n->op_type() << " still runs on every row:\n" << print_graph(out);
    }
  }
  EXPECT_EQ(gathers, 2u);  // one of %a, one of %h (merged where both branches reached it)
  // Final LayerNorm, both Adds of the residual, the FFN (MatMul, Add, Erf, two Muls,
  // MatMul), the first LayerNorm and the out-projection.
  EXPECT_EQ(pushes(stats), 11u);
}

TEST(PushSelect, BlockTailKeptWhereTheSkippedRowsAreAnOutput) {
  // The pre-selection hidden state is a graph output too (BERT's last_hidden_state):
  // every row of it is computed anyway, so nothing moves.
  expect_kept(block_tail(", %z").c_str());
}

TEST(PushSelect, ResidualStreamReadTwiceStopsThePush) {
  // The residual %r is also an output: the FFN branch and the final LayerNorm still move,
  // the residual Add above %r does not.
  Graph g = parse_graph(block_tail(", %r"));
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  expect_same_outputs(g, out);
  EXPECT_GT(pushes(stats), 0u);
  // Only the out-projection, which %r needs whole, runs on every row.
  size_t full = 0;
  for (const NodePtr& n : out.topo_order())
    if (n->kind() == NodeKind::Op && n->op_type() == "MatMul" && n->output_types()[0].rank() == 3) {
      ++full;
      EXPECT_EQ(n->inputs()[0].node->kind(), NodeKind::Input) << print_graph(out);
    }
  EXPECT_EQ(full, 1u) << print_graph(out);
}

TEST(PushSelect, TheSearchDoesNotTakeThem) {
  size_t marked = 0;
  for (const Rule& r : template_rules().rules)
    if (r.family() == "push-select") {
      EXPECT_TRUE(r.templates_only) << r.name;
      EXPECT_TRUE(r.usable()) << r.name;
      ++marked;
    }
  EXPECT_GE(marked, 60u);
  for (const Rule& r : search_rules(template_rules())) EXPECT_NE(r.family(), "push-select") << r.name;
  // The marker survives printing and parsing.
  const std::string text = print_rule(*template_rules().find("push-select/erf-gather"));
  EXPECT_NE(text.find("\n  templates-only\n"), std::string::npos) << text;
  EXPECT_TRUE(parse_rules(text, "t.rules").rules.at(0).templates_only);
}

}  // namespace
}  // namespace isomer
