// Tests of the template passes: for each rule a small graph where it must fire
// (count, resulting operators, same outputs as the original) and one where it must
// not; plus the driver's contract (nothing to do -> same graph; fixed point).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <random>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"
#include "passes/passes.h"

namespace isomer {
namespace {

using Histogram = std::map<std::string, size_t>;

// Rules over operators another component has not enabled yet are skipped, not failed.
#define REQUIRE_OPS(...)                                                       \
  for (std::string_view op_name_ : {__VA_ARGS__})                              \
    if (find_op(op_name_) == nullptr) GTEST_SKIP() << "operator " << op_name_ << " is not enabled yet";

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

Tensor values(std::vector<int64_t> dims, std::vector<double> v) { return Tensor::from_f64(DType::Float32, dims, v); }
Tensor ints(std::vector<int64_t> v) { return Tensor::vector_i64(v); }

size_t count(const PassStats& s, const std::string& rule) {
  auto it = s.applied.find(rule);
  return it == s.applied.end() ? 0 : it->second;
}

// Both graphs give the same outputs on random inputs, within float32 tolerance.
void expect_equivalent(const Graph& a, const Graph& b, const std::map<std::string, int64_t>& bindings = {}) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<Tensor> in = random_inputs(a, seed, bindings);
    std::vector<Tensor> ya = evaluate(a, in), yb = evaluate(b, in);
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) {
      ASSERT_EQ(ya[i].dtype(), yb[i].dtype()) << "output " << i;
      ASSERT_EQ(ya[i].dims(), yb[i].dims()) << "output " << i;
      std::vector<double> va = ya[i].to_f64(), vb = yb[i].to_f64();
      for (size_t k = 0; k < va.size(); ++k)
        ASSERT_NEAR(va[k], vb[k], 1e-4 * (1 + std::fabs(va[k]))) << "output " << i << " element " << k;
    }
  }
}

// simplify() and checks common to every "must fire" test: interface unchanged,
// outputs equal, and a second run finds nothing more to do.
Graph simplify_checked(const Graph& g, PassStats& stats, const PassOptions& opts = {},
                       const std::map<std::string, int64_t>& bindings = {}) {
  Graph out = simplify(g, opts, &stats);
  EXPECT_EQ(out.output_names(), g.output_names());
  for (size_t i = 0; i < g.outputs().size(); ++i) EXPECT_EQ(out.outputs()[i].type().dtype, g.outputs()[i].type().dtype);
  expect_equivalent(g, out, bindings);
  PassStats again;
  Graph twice = simplify(out, opts, &again);
  EXPECT_TRUE(again.applied.empty()) << "second run applied " << again.applied.begin()->first;
  EXPECT_TRUE(same_graph(out, twice));
  return out;
}

// ---- driver ------------------------------------------------------------------------

TEST(PassesDriver, NothingToDoReturnsSameGraph) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value w = b.constant(random_tensor({3}, 7));
  Graph g = b.finish({b.op1("Relu", {b.op1("Add", {x, w})})}, {"y"});
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_TRUE(same_graph(g, out));
  EXPECT_EQ(out.outputs()[0], g.outputs()[0]);
  EXPECT_TRUE(stats.applied.empty());
  EXPECT_EQ(stats.iterations, 1u);
}

TEST(PassesDriver, RuleNamesAreStable) {
  std::vector<std::string> names = template_rule_names();
  for (const char* expected :
       {"fold-constants", "fold-shape", "cse", "dce", "eliminate-identity", "eliminate-dropout",
        "eliminate-reshape-noop", "eliminate-transpose-pair", "eliminate-reshape-chain", "eliminate-cast-noop",
        "eliminate-slice-noop", "eliminate-pad-noop", "eliminate-concat-single", "eliminate-expand-noop",
        "fuse-conv-batchnorm", "fuse-gemm-batchnorm", "fold-conv-bias", "fold-gemm-bias", "fold-conv-mul"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate rule name";
}

TEST(PassesDriver, FixedPointAcrossRules) {
  // Identity -> Cast(noop) -> Add(const-folded operand): three rules over two rounds at most.
  GraphBuilder b;
  Value x = b.input("x", f32({4}));
  Value c = b.op1("Add", {b.constant(values({4}, {1, 2, 3, 4})), b.constant(values({4}, {1, 1, 1, 1}))});
  Value y = b.op1("Cast", {b.op1("Identity", {x})}, {{"to", int64_t{1}}});
  Graph g = b.finish({b.op1("Mul", {y, c})}, {"out"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Mul", 1}}));
  EXPECT_EQ(count(stats, "eliminate-identity"), 1u);
  EXPECT_EQ(count(stats, "eliminate-cast-noop"), 1u);
  EXPECT_EQ(count(stats, "fold-constants"), 1u);
  EXPECT_EQ(stats.iterations, 2u);  // one round that rewrote, one that found nothing
}

TEST(PassesDriver, DisabledRuleDoesNotFire) {
  GraphBuilder b;
  Value x = b.input("x", f32({4}));
  Graph g = b.finish({b.op1("Relu", {b.op1("Identity", {x})})}, {"y"});
  PassOptions opts;
  opts.disabled = {"eliminate-identity"};
  PassStats stats;
  Graph out = simplify(g, opts, &stats);
  EXPECT_TRUE(same_graph(g, out));
  EXPECT_EQ(count(stats, "eliminate-identity"), 0u);
}

TEST(PassesDriver, BadDisabledNamesAreErrors) {
  GraphBuilder b;
  Value x = b.input("x", f32({4}));
  Graph g = b.finish({b.op1("Relu", {x})}, {"y"});
  PassOptions unknown;
  unknown.disabled = {"fold-everything"};
  EXPECT_THROW(simplify(g, unknown), Error);
  PassOptions dce;
  dce.disabled = {"dce"};
  EXPECT_THROW(simplify(g, dce), Error);
}

TEST(PassesDriver, MaxIterationsBoundsRounds) {
  GraphBuilder b;
  Value x = b.input("x", f32({4}));
  Graph g = b.finish({b.op1("Identity", {b.op1("Identity", {x})})}, {"y"});
  PassOptions opts;
  opts.max_iterations = 1;
  PassStats stats;
  simplify(g, opts, &stats);
  EXPECT_EQ(stats.iterations, 1u);
}

// ---- fold ----------------------------------------------------------------------------

TEST(PassesFold, FoldConstantsFires) {
  GraphBuilder b;
  Value x = b.input("x", f32({3}));
  Value c = b.op1("Neg", {b.op1("Add", {b.constant(values({3}, {1, 2, 3})), b.constant(values({3}, {4, 5, 6}))})});
  Graph g = b.finish({b.op1("Mul", {x, c})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Mul", 1}}));
  EXPECT_EQ(count(stats, "fold-constants"), 2u);
  const Tensor* folded = out.outputs()[0].node->inputs()[1].constant();
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->to_f64(), (std::vector<double>{-5, -7, -9}));
}

TEST(PassesFold, FoldConstantsRespectsSizeLimit) {
  GraphBuilder b;
  Value x = b.input("x", f32({1024}));
  Value c = b.op1("Exp", {b.constant(random_tensor({1024}, 3))});
  Graph g = b.finish({b.op1("Add", {x, c})}, {"y"});
  PassOptions opts;
  opts.fold_limit_bytes = 1000;  // the folded constant would be 4096 bytes
  PassStats stats;
  Graph out = simplify(g, opts, &stats);
  EXPECT_EQ(count(stats, "fold-constants"), 0u);
  EXPECT_TRUE(same_graph(g, out));
}

TEST(PassesFold, FoldConstantsNeedsAllInputsConstant) {
  GraphBuilder b;
  Value x = b.input("x", f32({3}));
  Graph g = b.finish({b.op1("Add", {x, b.constant(values({3}, {1, 2, 3}))})}, {"y"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_EQ(count(stats, "fold-constants"), 0u);
}

TEST(PassesFold, ShapeChainOfStaticInputFolds) {
  REQUIRE_OPS("Shape", "Gather", "Unsqueeze", "Concat", "Reshape");
  // PyTorch's x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Value batch = b.op1("Gather", {b.op1("Shape", {x}), b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{0}))});
  Value shape = b.op1("Concat", {b.op1("Unsqueeze", {batch, b.constant(ints({0}))}), b.constant(ints({-1}))},
                      {{"axis", int64_t{0}}});
  Graph g = b.finish({b.op1("Reshape", {b.op1("Relu", {x}), shape})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}, {"Reshape", 1}}));
  // Shape and Gather(Shape) fold by rule in the same round, Unsqueeze and Concat by constant folding.
  EXPECT_EQ(count(stats, "fold-shape"), 2u);
  EXPECT_EQ(count(stats, "fold-constants"), 2u);
  EXPECT_EQ(out.outputs()[0].type(), f32({2, 12}));
}

TEST(PassesFold, ShapeOfSymbolicDimFoldsOnlyStaticDims) {
  REQUIRE_OPS("Shape", "Gather");
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, {Dim::sym("N"), 3, 4}});
  Value scalar0 = b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{0}));
  Value scalar1 = b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{1}));
  Value shape = b.op1("Shape", {x});
  Graph g = b.finish({shape, b.op1("Gather", {shape, scalar0}), b.op1("Gather", {shape, scalar1})}, {"s", "n", "c"});
  PassStats stats;
  Graph out = simplify_checked(g, stats, {}, {{"N", 2}});
  EXPECT_EQ(count(stats, "fold-shape"), 1u);  // only the Gather of the static dim
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Gather", 1}, {"Shape", 1}}));
  ASSERT_NE(out.outputs()[2].constant(), nullptr);
  EXPECT_EQ(out.outputs()[2].constant()->to_i64(), (std::vector<int64_t>{3}));
}

// ---- cse / dce -------------------------------------------------------------------------

TEST(PassesCse, MergesEqualNodes) {
  GraphBuilder b(/*dedupe=*/false);  // as the importer builds: duplicates kept
  Value x = b.input("x", f32({2, 3}));
  Value r1 = b.op1("Relu", {x}), r2 = b.op1("Relu", {x});
  Value s1 = b.op1("Sigmoid", {r1}), s2 = b.op1("Sigmoid", {r2});
  Graph g = b.finish({b.op1("Add", {s1, s2})}, {"y"});
  ASSERT_EQ(g.num_ops(), 5u);
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "cse"), 2u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Add", 1}, {"Relu", 1}, {"Sigmoid", 1}}));
}

TEST(PassesCse, CanBeDisabled) {
  GraphBuilder b(/*dedupe=*/false);
  Value x = b.input("x", f32({2, 3}));
  Graph g = b.finish({b.op1("Add", {b.op1("Relu", {x}), b.op1("Relu", {x})})}, {"y"});
  PassOptions opts;
  opts.disabled = {"cse"};
  PassStats stats;
  Graph out = simplify(g, opts, &stats);
  EXPECT_EQ(count(stats, "cse"), 0u);
  EXPECT_EQ(out.num_ops(), 3u);
}

TEST(PassesDce, CountsNodesLeftWithoutReaders) {
  REQUIRE_OPS("Transpose");
  // The inner Transpose is read only by the outer one: once the pair goes, it is dead.
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Value t1 = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  Value t2 = b.op1("Transpose", {t1}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  Graph g = b.finish({b.op1("Relu", {t2})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-transpose-pair"), 1u);
  EXPECT_EQ(count(stats, "dce"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}}));
}

// ---- eliminate ---------------------------------------------------------------------------

TEST(PassesEliminate, IdentityFires) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Graph g = b.finish({b.op1("Identity", {b.op1("Relu", {b.op1("Identity", {x})})})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-identity"), 2u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}}));
}

TEST(PassesEliminate, DropoutFiresWhenMaskUnread) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value d1 = b.op1("Dropout", {x});
  std::vector<Value> d2 = b.op("Dropout", {b.op1("Relu", {d1})}, {}, 2);  // mask requested, never read
  Graph g = b.finish({b.op1("Sigmoid", {d2[0]})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-dropout"), 2u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}, {"Sigmoid", 1}}));
}

TEST(PassesEliminate, DropoutKeptWhenMaskRead) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  std::vector<Value> d = b.op("Dropout", {x}, {}, 2);
  Graph g = b.finish({d[0], d[1]}, {"y", "mask"});
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_EQ(count(stats, "eliminate-dropout"), 0u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Dropout", 1}}));
}

TEST(PassesEliminate, CastToSameTypeFires) {
  GraphBuilder b;
  Value x = b.input("x", f32({3}));
  Value same = b.op1("Cast", {x}, {{"to", int64_t{1}}});
  Value other = b.op1("Cast", {x}, {{"to", int64_t{static_cast<int64_t>(DType::Float16)}}});
  Graph g = b.finish({b.op1("Relu", {same}), other}, {"y", "h"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-cast-noop"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Cast", 1}, {"Relu", 1}}));
}

TEST(PassesEliminate, ReshapeNoopFires) {
  REQUIRE_OPS("Reshape", "Squeeze", "Unsqueeze");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value r = b.op1("Reshape", {x, b.constant(ints({2, 3}))});
  Value s = b.op1("Squeeze", {b.op1("Unsqueeze", {r, b.constant(ints({0}))}), b.constant(ints({0}))});
  Graph g = b.finish({b.op1("Relu", {s})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-reshape-noop"), 1u);  // the Reshape; Squeeze(Unsqueeze) is a chain, not a noop
  EXPECT_EQ(out.outputs()[0].type(), f32({2, 3}));
}

TEST(PassesEliminate, ReshapeThatChangesShapeKept) {
  REQUIRE_OPS("Reshape");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Graph g = b.finish({b.op1("Reshape", {x, b.constant(ints({3, 2}))})}, {"y"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_TRUE(stats.applied.empty());
}

TEST(PassesEliminate, TransposePairNotIdentityBecomesOne) {
  REQUIRE_OPS("Transpose");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Value t1 = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value t2 = b.op1("Transpose", {t1}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Graph g = b.finish({t2}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-transpose-pair"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Transpose", 1}}));
  EXPECT_EQ(out.outputs()[0].node->attrs().get_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
}

TEST(PassesEliminate, TransposeDefaultPermsCancel) {
  REQUIRE_OPS("Transpose");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Graph g = b.finish({b.op1("Transpose", {b.op1("Transpose", {x})})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-transpose-pair"), 1u);
  EXPECT_EQ(out.num_ops(), 0u);
}

TEST(PassesEliminate, ReshapeChainBecomesOne) {
  REQUIRE_OPS("Reshape", "Flatten");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3, 4}));
  Value flat = b.op1("Flatten", {x}, {{"axis", int64_t{2}}});
  Value r = b.op1("Reshape", {flat, b.constant(ints({4, -1}))});
  Graph g = b.finish({b.op1("Relu", {r})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-reshape-chain"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}, {"Reshape", 1}}));
}

TEST(PassesEliminate, ReshapeChainWithSymbolicDimsBecomesOne) {
  REQUIRE_OPS("Reshape");
  // The second shape alone determines the result (it has no 0 copying an input dim),
  // symbolic dims or not.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, {Dim::sym("N"), 6}});
  Value r1 = b.op1("Reshape", {x, b.constant(ints({-1, 2, 3}))});
  Graph g = b.finish({b.op1("Reshape", {r1, b.constant(ints({-1, 3, 2}))})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats, {}, {{"N", 2}});
  EXPECT_EQ(count(stats, "eliminate-reshape-chain"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Reshape", 1}}));
  // A 0 in the second shape copies a dim of its input, which the first Reshape changed.
  GraphBuilder b2;
  Value x2 = b2.input("x", f32({2, 6}));
  Value r2 = b2.op1("Reshape", {x2, b2.constant(ints({3, 4}))});
  Graph g2 = b2.finish({b2.op1("Reshape", {r2, b2.constant(ints({0, 2, 2}))})}, {"y"});
  PassStats stats2;
  simplify(g2, {}, &stats2);
  EXPECT_EQ(count(stats2, "eliminate-reshape-chain"), 0u);
}

TEST(PassesEliminate, SliceNoopFiresReverseKept) {
  REQUIRE_OPS("Slice");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value full = b.op1("Slice", {x, b.constant(ints({0})), b.constant(ints({INT64_MAX})), b.constant(ints({1}))});
  Value reversed = b.op1("Slice", {x, b.constant(ints({-1})), b.constant(ints({INT64_MIN})), b.constant(ints({1})),
                                   b.constant(ints({-1}))});
  Graph g = b.finish({b.op1("Relu", {full}), reversed}, {"y", "r"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-slice-noop"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Relu", 1}, {"Slice", 1}}));
}

TEST(PassesEliminate, PadNoopFires) {
  REQUIRE_OPS("Pad");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value none = b.op1("Pad", {x, b.constant(ints({0, 0, 0, 0}))});
  Value some = b.op1("Pad", {x, b.constant(ints({0, 1, 0, 0}))});
  Graph g = b.finish({b.op1("Relu", {none}), some}, {"y", "p"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-pad-noop"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Pad", 1}, {"Relu", 1}}));
}

TEST(PassesEliminate, ConcatSingleFires) {
  REQUIRE_OPS("Concat");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value one = b.op1("Concat", {x}, {{"axis", int64_t{1}}});
  Value two = b.op1("Concat", {x, one}, {{"axis", int64_t{1}}});
  Graph g = b.finish({two}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-concat-single"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Concat", 1}}));
}

TEST(PassesEliminate, ExpandNoopFires) {
  REQUIRE_OPS("Expand");
  GraphBuilder b;
  Value x = b.input("x", f32({2, 3}));
  Value y = b.input("y", f32({1, 3}));
  Value same = b.op1("Expand", {x, b.constant(ints({2, 3}))});
  Value grows = b.op1("Expand", {y, b.constant(ints({2, 3}))});
  Graph g = b.finish({b.op1("Add", {same, grows})}, {"z"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "eliminate-expand-noop"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Add", 1}, {"Expand", 1}}));
}

// ---- fuse ----------------------------------------------------------------------------

constexpr int64_t kC = 4;  // output channels of the test convolutions

Attributes conv_attrs() {
  return {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
}

// Conv over x [1,3,5,5] with constant W [4,3,3,3] and (optionally) a constant bias.
Value conv(GraphBuilder& b, const Value& x, bool with_bias, uint64_t seed = 11) {
  std::vector<Value> in{x, b.constant(random_tensor({kC, 3, 3, 3}, seed))};
  if (with_bias) in.push_back(b.constant(random_tensor({kC}, seed + 1)));
  return b.op1("Conv", in, conv_attrs());
}

Value batchnorm(GraphBuilder& b, const Value& x, uint64_t seed = 21, int64_t channels = kC) {
  return b.op1("BatchNormalization",
               {x, b.constant(random_tensor({channels}, seed, 0.5, 2)), b.constant(random_tensor({channels}, seed + 1)),
                b.constant(random_tensor({channels}, seed + 2)), b.constant(random_tensor({channels}, seed + 3, 0.1, 2))},
               {{"epsilon", 1e-3}});
}

TEST(PassesFuse, ConvBatchNormFires) {
  REQUIRE_OPS("Conv", "BatchNormalization");
  for (bool with_bias : {false, true}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, 3, 5, 5}));
    Graph g = b.finish({b.op1("Relu", {batchnorm(b, conv(b, x, with_bias))})}, {"y"});
    PassStats stats;
    Graph out = simplify_checked(g, stats);
    EXPECT_EQ(count(stats, "fuse-conv-batchnorm"), 1u);
    EXPECT_EQ(count(stats, "dce"), 1u);  // the unfused Conv
    EXPECT_EQ(out.op_histogram(), (Histogram{{"Conv", 1}, {"Relu", 1}}));
  }
}

TEST(PassesFuse, ConvBatchNormKeptWhenConvReadTwice) {
  REQUIRE_OPS("Conv", "BatchNormalization");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value c = conv(b, x, true);
  Graph g = b.finish({batchnorm(b, c), b.op1("Relu", {c})}, {"y", "r"});
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_TRUE(stats.applied.empty());
  EXPECT_TRUE(same_graph(g, out));
}

TEST(PassesFuse, ConvBatchNormKeptWhenMeanNotConstant) {
  REQUIRE_OPS("Conv", "BatchNormalization");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value mean = b.input("mean", f32({kC}));
  Value bn = b.op1("BatchNormalization", {conv(b, x, true), b.constant(random_tensor({kC}, 1, 0.5, 2)),
                                          b.constant(random_tensor({kC}, 2)), mean,
                                          b.constant(random_tensor({kC}, 3, 0.1, 2))});
  Graph g = b.finish({bn}, {"y"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_TRUE(stats.applied.empty());
}

TEST(PassesFuse, ConvBiasAddFires) {
  REQUIRE_OPS("Conv");
  // [1,C,1,1] on the right, [C,1,1] on the left, then a Sub; all become the bias.
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value a1 = b.op1("Add", {conv(b, x, false), b.constant(random_tensor({1, kC, 1, 1}, 5))});
  Value a2 = b.op1("Add", {b.constant(random_tensor({kC, 1, 1}, 6)), a1});
  Value s = b.op1("Sub", {a2, b.constant(random_tensor({1, kC, 1, 1}, 7))});
  Graph g = b.finish({s}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fold-conv-bias"), 3u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Conv", 1}}));
}

TEST(PassesFuse, ConvBiasKeptForSpatialConstantOrReversedSub) {
  REQUIRE_OPS("Conv");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value spatial = b.op1("Add", {conv(b, x, true, 11), b.constant(random_tensor({1, 1, 5, 5}, 5))});
  Value reversed = b.op1("Sub", {b.constant(random_tensor({1, kC, 1, 1}, 6)), conv(b, x, true, 31)});
  Value last_axis = b.op1("Add", {conv(b, x, true, 41), b.constant(random_tensor({5}, 7))});
  Graph g = b.finish({spatial, reversed, last_axis}, {"a", "b", "c"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_TRUE(stats.applied.empty());
}

TEST(PassesFuse, ConvMulFires) {
  REQUIRE_OPS("Conv");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value m = b.op1("Mul", {b.constant(random_tensor({1, kC, 1, 1}, 8)), conv(b, x, true)});
  Graph g = b.finish({m}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fold-conv-mul"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Conv", 1}}));
}

TEST(PassesFuse, ConvMulKeptWhenNotPerChannel) {
  REQUIRE_OPS("Conv");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value spatial = b.op1("Mul", {conv(b, x, true), b.constant(random_tensor({1, 1, 5, 1}, 8))});
  Graph g = b.finish({spatial}, {"y"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_TRUE(stats.applied.empty());
}

TEST(PassesFuse, ConvBatchNormAddMulChainBecomesOneConv) {
  REQUIRE_OPS("Conv", "BatchNormalization");
  GraphBuilder b;
  Value x = b.input("x", f32({1, 3, 5, 5}));
  Value bn = batchnorm(b, conv(b, x, false));
  Value add = b.op1("Add", {bn, b.constant(random_tensor({1, kC, 1, 1}, 9))});
  Value mul = b.op1("Mul", {add, b.constant(random_tensor({kC, 1, 1}, 10))});
  Graph g = b.finish({b.op1("Relu", {mul})}, {"y"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fuse-conv-batchnorm"), 1u);
  EXPECT_EQ(count(stats, "fold-conv-bias"), 1u);
  EXPECT_EQ(count(stats, "fold-conv-mul"), 1u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Conv", 1}, {"Relu", 1}}));
}

TEST(PassesFuse, MatMulBiasBecomesGemm) {
  REQUIRE_OPS("MatMul", "Gemm");
  GraphBuilder b;
  Value a = b.input("a", f32({2, 3}));
  Value mm = b.op1("MatMul", {a, b.constant(random_tensor({3, 5}, 12))});
  Value y = b.op1("Add", {b.constant(random_tensor({5}, 13)), mm});
  Value gemm = b.op1("Gemm", {a, b.constant(random_tensor({5, 3}, 14))}, {{"transB", int64_t{1}}, {"beta", 0.5}});
  Value z = b.op1("Add", {gemm, b.constant(random_tensor({1, 5}, 15))});
  Graph g = b.finish({y, z}, {"y", "z"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fold-gemm-bias"), 2u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Gemm", 2}}));
}

TEST(PassesFuse, MatMulBiasKeptForBatchedOrNonConstantBias) {
  REQUIRE_OPS("MatMul", "Gemm");
  GraphBuilder b;
  Value a3 = b.input("a3", f32({4, 2, 3}));
  Value a2 = b.input("a2", f32({2, 3}));
  Value bias = b.input("bias", f32({5}));
  Value w = b.constant(random_tensor({3, 5}, 12));
  Value batched = b.op1("Add", {b.op1("MatMul", {a3, w}), b.constant(random_tensor({5}, 13))});
  Value dynamic = b.op1("Add", {b.op1("MatMul", {a2, w}), bias});
  Graph g = b.finish({batched, dynamic}, {"y", "z"});
  PassStats stats;
  EXPECT_TRUE(same_graph(g, simplify(g, {}, &stats)));
  EXPECT_TRUE(stats.applied.empty());
}

TEST(PassesFuse, GemmBatchNormFires) {
  REQUIRE_OPS("MatMul", "Gemm", "BatchNormalization");
  GraphBuilder b;
  Value a = b.input("a", f32({2, 3}));
  Value mm = b.op1("MatMul", {a, b.constant(random_tensor({3, 5}, 12))});
  Value gemm = b.op1("Gemm", {a, b.constant(random_tensor({5, 3}, 14)), b.constant(random_tensor({1, 5}, 15))},
                     {{"transB", int64_t{1}}, {"beta", 0.5}, {"alpha", 2.0}});
  Graph g = b.finish({batchnorm(b, mm, 21, 5), batchnorm(b, gemm, 31, 5)}, {"y", "z"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fuse-gemm-batchnorm"), 2u);
  EXPECT_EQ(out.op_histogram(), (Histogram{{"Gemm", 2}}));
}

// LeViT's Linear then BatchNorm1d over flatten(0, 1): the MatMul's product of a 3-D
// input reshaped (dynamo) or flattened (TorchScript) to [rows, channels] before the
// BatchNormalization. Both fold into the weights and a bias; a reshape that moves
// the channels off the last axis does not.
TEST(PassesFuse, MatMulReshapeBatchNormFires) {
  REQUIRE_OPS("MatMul", "Reshape", "Flatten", "BatchNormalization");
  GraphBuilder b;
  Value a = b.input("a", f32({2, 4, 3}));
  Value w = b.constant(random_tensor({3, 5}, 12));
  Value rows = b.op1("Reshape", {b.op1("MatMul", {a, w}), b.constant(Tensor::from_i64(DType::Int64, {2}, std::vector<int64_t>{8, 5}))});
  Value flat = b.op1("Flatten", {b.op1("MatMul", {a, b.constant(random_tensor({3, 5}, 13))})}, {{"axis", int64_t{2}}});
  Value moved = b.op1("Reshape", {b.op1("MatMul", {a, b.constant(random_tensor({3, 4}, 14))}),
                                  b.constant(Tensor::from_i64(DType::Int64, {2}, std::vector<int64_t>{4, 8}))});
  Graph g = b.finish({batchnorm(b, rows, 21, 5), batchnorm(b, flat, 31, 5), batchnorm(b, moved, 41, 8)}, {"y", "z", "u"});
  PassStats stats;
  Graph out = simplify_checked(g, stats);
  EXPECT_EQ(count(stats, "fuse-matmul-reshape-batchnorm"), 2u);
  EXPECT_EQ(out.op_histogram().at("BatchNormalization"), 1u);  // the one whose channels moved
}

}  // namespace
}  // namespace isomer
