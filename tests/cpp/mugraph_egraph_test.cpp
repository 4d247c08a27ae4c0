// The abstract-expression e-graph of the μGraph search: rebuilding after merges
// keeps every node findable in its class (the search's pruning is a lookup).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "ir/text.h"
#include "mugraph/egraph.h"
#include "mugraph/program.h"
#include "mugraph/search.h"

namespace isomer::mugraph {
namespace {

ENode uf(int kid) {
  ENode n;
  n.kind = EKind::Uf;
  n.data = static_cast<int64_t>(Op::Sqrt);
  n.kids[n.nkids++] = kid;
  return n;
}

// f(x) and f(x*1) become congruent once x*1 merges with x; the second class is the
// larger one (it also holds f(x*1)*1), so it absorbs the first while the rebuild is
// walking its own nodes. The rebuild dropped the absorbed class's nodes with the
// congruent one (lookup found neither f(x) nor f(x*1)) and read the survivor's
// node vector after the merge had reallocated it.
TEST(MuGraphEGraph, CongruenceIntoTheLargerClassKeepsItsNodes) {
  EGraph e({0b1}, {4});
  const int x = e.add(leaf_node(0)), one = e.add(const_node(1));
  const int x1 = e.add(op_node(EKind::Mul, {x, one}));
  const int fx = e.add(uf(x)), fx1 = e.add(uf(x1));
  e.add(op_node(EKind::Mul, {fx1, one}));
  SaturationReport r = e.saturate(SaturationLimits{});
  EXPECT_EQ(r.stop, "saturated");
  EXPECT_EQ(e.find(x), e.find(x1));
  EXPECT_EQ(e.find(fx), e.find(fx1));
  EXPECT_EQ(e.lookup(uf(x)), e.find(fx));
  EXPECT_EQ(e.lookup(uf(x1)), e.find(fx));
}

// Many congruences at once, in classes of every size: a residual Add, LayerNorm and a
// projection (ViT's "Add LayerNormalization Gemm" region, which crashed `optimize
// --mugraph` on ViT-S/16 in the rebuild) saturated to the node limit. Every node added
// before saturation is still found, in the class it was merged into.
TEST(MuGraphEGraph, EveryAddedNodeSurvivesSaturation) {
  EGraph e({0b11, 0b11, 0b10, 0b10, 0b110}, {4, 8, 6});
  std::vector<std::pair<ENode, int>> added;
  auto add = [&](const ENode& n) {
    const int c = e.add(n);
    added.emplace_back(n, c);
    return c;
  };
  const int x = add(leaf_node(0)), res = add(leaf_node(1)), g = add(leaf_node(2)), b = add(leaf_node(3));
  const int w = add(leaf_node(4));
  const int n = add(const_node(8)), m1 = add(const_node(-1)), eps = add(const_node(1e-5));
  const int h = add(op_node(EKind::Add, {x, res}));
  const int mean = add(op_node(EKind::Div, {add(op_node(EKind::Sum, {h}, 1)), n}));
  const int d = add(op_node(EKind::Add, {h, add(op_node(EKind::Mul, {m1, mean}))}));
  const int var = add(op_node(EKind::Div, {add(op_node(EKind::Sum, {add(op_node(EKind::Mul, {d, d}))}, 1)), n}));
  const int sd = add(uf(add(op_node(EKind::Add, {var, eps}))));
  const int y = add(op_node(EKind::Add, {add(op_node(EKind::Mul, {add(op_node(EKind::Div, {d, sd})), g})), b}));
  add(op_node(EKind::Sum, {add(op_node(EKind::Mul, {y, w}))}, 1));
  SaturationLimits limits;
  limits.max_seconds = 600;  // the node limit stops it, the same on every machine
  SaturationReport r = e.saturate(limits);
  EXPECT_EQ(r.stop, "node limit");
  for (const auto& [node, c] : added) EXPECT_EQ(e.lookup(node), e.find(c));
}

// The search's own use: every tile of the region's direct translation is a
// subexpression of the saturated target (a lost node pruned the target itself).
TEST(MuGraphEGraph, TheTargetFindsItsOwnTiles) {
  const Program p = from_body(parse_graph(
      "graph ln(%x: f32[1,4,8], %r: f32[1,4,8], %s: f32[8], %b: f32[8], %w: f32[6,8], %c: f32[6]) {\n"
      "  %h = Add(%x, %r)\n"
      "  %y = LayerNormalization(%h, %s, %b) {axis=-1, epsilon=1e-06}\n"
      "  %f = const i64[2] {4, 8}\n"
      "  %y2 = Reshape(%y, %f)\n"
      "  %z = Gemm(%y2, %w, %c) {transB=1}\n"
      "  return %z\n}\n"));
  SaturationReport rep;
  SaturationLimits limits;
  limits.max_seconds = 600;
  Target t(p, limits, &rep);
  const BlockGraph g = direct_translation(p);
  std::vector<int> classes;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    classes.push_back(op_class(t, p, g, i, classes));
    EXPECT_GE(classes.back(), 0) << "op " << i << " of\n" << g.to_text(p);
  }
}

}  // namespace
}  // namespace isomer::mugraph
