// Golden tests of the key merges of `--search eqsat`, graph text in and graph text
// out: a model is saturated over isomer's shipped rules and extracted under prices
// that make every contraction cost the same whatever its width (so a merge of n is
// n times cheaper), then the template passes fold the merged weights. The printed
// result must be exactly the expected text.
#include <gtest/gtest.h>

#include "egraph/ematch.h"
#include "egraph/extract.h"
#include "egraph/runner.h"
#include "ir/text.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "search/eqsat.h"
#include "search/search.h"

namespace isomer {
namespace {

const std::vector<Rule>& shipped_rules() {
  static const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  return rules;
}

// The merges the rules make, extracted by the ILP: a MatMul costs 1 plus 0.05 per
// output column, a Conv 1 plus 0.05 per output channel (a merge of n is cheaper than
// n contractions, a wider merge than needed is not), anything else 0.01.
std::string merged(const std::string& text) {
  Graph g = simplify(parse_graph(text));
  // The rules eqsat_search uses (no expanding reversals).
  const std::vector<const Rule*> ptrs = eqsat_rules(shipped_rules(), /*expanding_reversals=*/false);
  eg::EGraph e;
  std::vector<eg::ClassId> roots = eg::load_graph(e, g);
  eg::RunnerReport rep = eg::Runner(e, ptrs, {10, 5000, 10}).run();
  EXPECT_EQ(rep.stop, eg::StopReason::Saturated) << eg::stop_reason_name(rep.stop);
  eg::CostTable costs;
  for (eg::ClassId c : e.class_ids())
    for (const eg::ENode& n : e.cls(c).nodes) {
      double price = 0;
      if (n.kind == eg::ENodeKind::Op && !e.cls(c).constant)
        price = n.op->name == "MatMul" ? 1.0 + 0.05 * static_cast<double>(e.type(c).shape.back().value)
                : n.op->name == "Conv"   ? 1.0 + 0.05 * static_cast<double>(e.type(c).shape[1].value)
                                         : 0.01;
      costs[c].push_back(price);
    }
  eg::Extraction greedy = eg::extract_greedy(e, roots, costs);
  std::optional<eg::Extraction> ilp = eg::extract_ilp(e, roots, costs, greedy, 10);
  EXPECT_TRUE(ilp && ilp->optimal);
  const eg::Extraction& ex = ilp ? *ilp : greedy;
  EXPECT_TRUE(eg::find_cycle(e, ex.choice, roots).empty());
  GraphBuilder b;
  std::vector<Value> v =
      eg::build_values(e, ex, roots, b, [&](uint32_t leaf) { return b.intern(g.inputs().at(leaf))->output(0); });
  return print_graph(simplify(Graph(g.inputs(), v, g.output_names())));
}

const char* kSharedInput = R"(graph g(%x: f32[2,3]) {
  %w1 = const f32[3,2] {1, 2, 3, 4, 5, 6}
  %w2 = const f32[3,2] {-1, 0.5, 2, -3, 1, 1}
  %w3 = const f32[3,1] {2, -2, 0.25}
  %0 = MatMul(%x, %w1)
  %1 = MatMul(%x, %w2)
  %2 = MatMul(%x, %w3)
  return %0, %1, %2
}
)";

const char* kSumOfProducts = R"(graph g(%x: f32[2,3], %h: f32[2,2]) {
  %w1 = const f32[3,2] {1, 2, 3, 4, 5, 6}
  %w2 = const f32[2,2] {-1, 0.5, 2, -3}
  %0 = MatMul(%x, %w1)
  %1 = MatMul(%h, %w2)
  %2 = Add(%0, %1)
  %3 = Tanh(%2)
  return %3
}
)";

// NasRNN's gates and BERT's Q/K/V: products of one input become one product on the
// concatenated weights, split (all three at once, no merge of merges left over).
TEST(EqsatGolden, ProductsSharingAnInputMergeIntoOne) {
  EXPECT_EQ(merged(kSharedInput), R"(graph isomer(%x: f32[2,3]) {
  %0 = const f32[3,5] {1, 2, -1, 0.5, 2, 3, 4, 2, -3, -2, 5, 6, 1, 1, 0.25}
  %1 = MatMul(%x, %0) : f32[2,5]
  %2 = const i64[3] {2, 2, 1}
  %3, %4, %5 = Split(%1, %2) {axis=1} : f32[2,2], f32[2,2], f32[2,1]
  return %3 as "0", %4 as "1", %5 as "2"
}
)");
}

// x·W1 + h·W2 = [x|h]·[W1;W2] (NasRNN's gates on the input and the hidden state).
TEST(EqsatGolden, SumOfProductsBecomesOneProduct) {
  EXPECT_EQ(merged(kSumOfProducts), R"(graph isomer(%x: f32[2,3], %h: f32[2,2]) {
  %0 = Concat(%x, %h) {axis=1} : f32[2,5]
  %1 = const f32[5,2] {1, 2, 3, 4, 5, 6, -1, 0.5, 2, -3}
  %2 = MatMul(%0, %1) : f32[2,2]
  %3 = Tanh(%2) : f32[2,2]
  return %3 as "3"
}
)");
}

// SqueezeNet's fire module: a 1x1 and a 3x3 convolution of one input. The 1x1 is
// enlarged to a 3x3 (its kernel padded by zeros, the input by one) and both become
// one convolution, split by channels; the Relu of each part becomes one Relu of the
// merged convolution before the Split (split_relu_hoist: a post-op the runtime fuses).
const char* kFire = R"(graph g(%x: f32[1,2,3,3]) {
  %w1 = const f32[1,2,1,1] {1, -2}
  %w3 = const f32[1,2,3,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9}
  %0 = Conv(%x, %w1)
  %1 = Conv(%x, %w3) {pads=[1, 1, 1, 1]}
  %2 = Relu(%0)
  %3 = Relu(%1)
  return %2, %3
}
)";

TEST(EqsatGolden, OneByOneAndThreeByThreeConvolutionsMergeIntoOne) {
  // The second output channel is the 1x1 kernel {1, -2} at the centre of zeros.
  // Outputs "2" and "3" are the Split's second and first parts.
  EXPECT_EQ(merged(kFire), R"(graph isomer(%x: f32[1,2,3,3]) {
  %0 = const f32[2,2,3,3] hex"0000803f0000004000004040000080400000a0400000c0400000e0400000004100001041000080bf000000c0000040c0000080c00000a0c00000c0c00000e0c0000000c1000010c1000000000000000000000000000000000000803f0000000000000000000000000000000000000000000000000000000000000000000000c000000000000000000000000000000000"
  %1 = Conv(%x, %0) {dilations=[1, 1], group=1, pads=[1, 1, 1, 1], strides=[1, 1]} : f32[1,2,3,3]
  %2 = Relu(%1) : f32[1,2,3,3]
  %3 = const i64[2] {1, 1}
  %4, %5 = Split(%2, %3) {axis=1} : f32[1,1,3,3], f32[1,1,3,3]
  return %5 as "2", %4 as "3"
}
)");
}

// The "enlarge" rule pads a 1x1 kernel to 3x3 only beside a 3x3 convolution of the
// same input: applications of it (and convolutions of 3x3 kernels in the saturated
// e-graph) per graph.
struct Enlarged {
  size_t applications = 0;
  size_t three_by_three = 0;  // Conv e-nodes with a 3x3 kernel
};

Enlarged enlarged(const std::string& text) {
  Graph g = simplify(parse_graph(text));
  const std::vector<const Rule*> ptrs = eqsat_rules(shipped_rules(), /*expanding_reversals=*/false);
  eg::EGraph e;
  eg::load_graph(e, g);
  eg::RunnerReport rep = eg::Runner(e, ptrs, {10, 5000, 10}).run();
  Enlarged out;
  for (const auto& [name, c] : rep.rules)
    if (name.starts_with("conv_enlarge")) out.applications += c.applications;
  for (eg::ClassId c : e.class_ids())
    for (const eg::ENode& n : e.cls(c).nodes)
      if (n.kind == eg::ENodeKind::Op && n.op->name == "Conv" && e.type(n.children.at(1)).shape.at(2) == Dim(3))
        ++out.three_by_three;
  return out;
}

TEST(EqsatGolden, AOneByOneConvolutionIsEnlargedOnlyBesideAThreeByThree) {
  // The fire module: enlarged once, beside its sibling.
  EXPECT_EQ(enlarged(kFire).applications, 1u);
  // A 1x1 convolution alone, and one beside a 3x3 of another input: never.
  const Enlarged alone = enlarged(R"(graph g(%x: f32[1,2,3,3]) {
  %w1 = const f32[1,2,1,1] {1, -2}
  %w2 = const f32[1,2,1,1] {3, 4}
  %0 = Conv(%x, %w1)
  %1 = Conv(%x, %w2)
  %2 = Relu(%0)
  %3 = Relu(%1)
  return %2, %3
}
)");
  EXPECT_EQ(alone.applications, 0u);
  EXPECT_EQ(alone.three_by_three, 0u);
  const Enlarged apart = enlarged(R"(graph g(%x: f32[1,2,3,3], %y: f32[1,2,3,3]) {
  %w1 = const f32[1,2,1,1] {1, -2}
  %w3 = const f32[1,2,3,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9}
  %0 = Conv(%x, %w1)
  %1 = Conv(%y, %w3) {pads=[1, 1, 1, 1]}
  return %0, %1
}
)");
  EXPECT_EQ(apart.applications, 0u);
  EXPECT_EQ(apart.three_by_three, 1u);  // the input's own
  // Beside a strided 3x3: the outputs' shapes differ, no merge, no enlarging.
  const Enlarged strided = enlarged(R"(graph g(%x: f32[1,2,4,4]) {
  %w1 = const f32[1,2,1,1] {1, -2}
  %w3 = const f32[1,2,3,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9}
  %0 = Conv(%x, %w1)
  %1 = Conv(%x, %w3) {pads=[1, 1, 1, 1], strides=[2, 2]}
  return %0, %1
}
)");
  EXPECT_EQ(strided.applications, 0u);
}

}  // namespace
}  // namespace isomer
