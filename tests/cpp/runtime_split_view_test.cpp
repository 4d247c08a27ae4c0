// Channel parts of a convolution's blocked output (nChw16c) as views in that
// layout: a Split or Slice on block boundaries makes no copy, and its parts feed
// convolutions, activations, residual adds and graph outputs as tensors of their
// own; parts off the block boundaries, partial last blocks and batches above 1
// take the plain path. Every case against the reference evaluator.
#include <gtest/gtest.h>

#include <random>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "runtime/runtime.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

const std::vector<int64_t> kPad1{1, 1, 1, 1};

// A 3x3 convolution of `x` with `oc` output channels (and a bias).
Value conv3(GraphBuilder& b, Value x, int64_t ic, int64_t oc, uint64_t seed) {
  return b.op1("Conv", {x, b.constant(random_tensor({oc, ic, 3, 3}, seed)), b.constant(random_tensor({oc}, seed + 1))},
               {{"pads", kPad1}});
}

std::vector<Value> split(GraphBuilder& b, Value x, const std::vector<int64_t>& sizes) {
  return b.op("Split", {x, b.constant(Tensor::vector_i64(sizes))}, {{"axis", int64_t{1}}}, sizes.size());
}

Value slice_channels(GraphBuilder& b, Value x, int64_t start, int64_t end, int64_t step = 1) {
  return b.op1("Slice", {x, b.constant(Tensor::vector_i64({start})), b.constant(Tensor::vector_i64({end})),
                         b.constant(Tensor::vector_i64({1})), b.constant(Tensor::vector_i64({step}))});
}

std::vector<runtime::StepInfo> expect_matches_reference(const Graph& g) {
  return testing::run_against_reference(g);
}

// Reorders or copies of a tensor of `dims` ("1x64x12x12") other than those that
// hand a graph output over in plain layout.
size_t conversions_of(const std::vector<runtime::StepInfo>& steps, const std::string& dims) {
  size_t n = 0;
  for (const runtime::StepInfo& s : steps)
    if ((s.kind == "reorder" || s.kind == "copy") && !s.boundary && s.signature.find(" " + dims + ":") != std::string::npos)
      ++n;
  return n;
}

// The layout a convolution writes a tensor of `dims` ("1x40x9x9") in, as the
// step's signature has it ("" if none does).
std::string written_layout(const std::vector<runtime::StepInfo>& steps, const std::string& dims) {
  for (const runtime::StepInfo& s : steps) {
    const auto at = s.signature.find(" dst " + dims + ":");
    if (s.kind == "conv" && at != std::string::npos) return s.signature.substr(at + 5, s.signature.find(' ', at + 5) - at - 5);
  }
  return "";
}

bool written_blocked(const std::vector<runtime::StepInfo>& steps, const std::string& dims) {
  return written_layout(steps, dims).find(":b1/") != std::string::npos;
}

// Inception's merged 1x1 branches: one convolution, its output split on 16-channel
// boundaries, each part read by another convolution, a Relu, or the graph output.
TEST(RuntimeSplitView, BlockAlignedSplitOfAConvolutionIsAView) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 12, 12})});
  Value merged = conv3(b, x, 8, 64, 1);
  std::vector<Value> p = split(b, merged, {16, 32, 16});
  Value a = conv3(b, p[0], 16, 32, 3);
  Value r = b.op1("Relu", {p[1]});
  Value c = conv3(b, p[1], 32, 16, 5);
  Graph g = b.finish({a, r, c, p[2]}, {"a", "r", "c", "p2"});
  auto steps = expect_matches_reference(g);
  EXPECT_TRUE(written_blocked(steps, "1x64x12x12")) << written_layout(steps, "1x64x12x12");
  EXPECT_EQ(conversions_of(steps, "1x64x12x12"), 0u) << "the merged output was converted as a whole";
  // The convolutions read their parts where the merged one wrote them.
  EXPECT_EQ(conversions_of(steps, "1x16x12x12") + conversions_of(steps, "1x32x12x12"), 0u);
}

// Merged branches that each applied a Relu: the Relu runs once, as the merged
// convolution's post-op, and its parts are views (no pointwise pass, no copy).
TEST(RuntimeSplitView, ActivationOfEveryPartIsAPostOpOfTheConvolution) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 12, 12})});
  Value merged = conv3(b, x, 8, 64, 1);
  std::vector<Value> p = split(b, merged, {16, 32, 16});
  Value r0 = b.op1("Relu", {p[0]}), r1 = b.op1("Relu", {p[1]}), r2 = b.op1("Relu", {p[2]});
  Value a = conv3(b, r1, 32, 16, 3);
  Graph g = b.finish({r0, a, r2}, {"r0", "a", "r2"});
  auto steps = expect_matches_reference(g);
  size_t pointwise = 0;
  for (const runtime::StepInfo& s : steps) pointwise += s.kind == "pointwise" || s.kind == "eltwise";
  EXPECT_EQ(pointwise, 0u);
  EXPECT_EQ(conversions_of(steps, "1x64x12x12") + conversions_of(steps, "1x32x12x12"), 0u);
}

// The same where the merged convolution is a 1x1 one of a concatenation it reads in
// parts (NasNet-A's summed branches, merged): the activation is the last part's
// post-op, not a pass of its own over each part.
TEST(RuntimeSplitView, ActivationOfEveryPartFollowsAConvolutionOfParts) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 10, 10})});
  Value y = b.input("y", {DType::Float32, make_shape({1, 16, 10, 10})});
  Value cat = b.op1("Concat", {conv3(b, x, 16, 16, 11), conv3(b, y, 16, 16, 13)}, {{"axis", int64_t{1}}});
  Value merged = b.op1("Conv", {cat, b.constant(random_tensor({48, 32, 1, 1}, 7))});
  std::vector<Value> p = split(b, merged, {16, 32});
  Value r0 = b.op1("Relu", {p[0]}), r1 = b.op1("Relu", {p[1]});
  Graph g = b.finish({r0, conv3(b, r1, 32, 16, 3)}, {"r0", "a"});
  auto steps = expect_matches_reference(g);
  size_t parts = 0, pointwise = 0;
  for (const runtime::StepInfo& s : steps) {
    parts += s.label.find(" (part ") != std::string::npos;
    pointwise += s.kind == "pointwise" || s.kind == "eltwise";
  }
  EXPECT_EQ(parts, 2u) << "the concatenation was made";
  EXPECT_EQ(pointwise, 0u) << "an activation ran as a pass of its own";
}

// Not every part activated alike (a LeakyRelu, a part also read raw, a graph
// output): each activation runs on its own, on the raw parts.
TEST(RuntimeSplitView, PartsActivatedDifferentlyStayApart) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 10, 10})});
  Value m1 = conv3(b, x, 8, 32, 1);
  std::vector<Value> p = split(b, m1, {16, 16});
  Value r0 = b.op1("Relu", {p[0]});
  Value l1 = b.op1("LeakyRelu", {p[1]}, {{"alpha", 0.1}});
  Value m2 = conv3(b, x, 8, 32, 3);
  std::vector<Value> q = split(b, m2, {16, 16});
  Value s0 = b.op1("Relu", {q[0]}), s1 = b.op1("Relu", {q[1]});
  Value raw = conv3(b, q[1], 16, 8, 5);
  Value m3 = conv3(b, x, 8, 32, 7);
  std::vector<Value> t = split(b, m3, {16, 16});
  Value u0 = b.op1("Relu", {t[0]}), u1 = b.op1("Relu", {t[1]});
  Graph g = b.finish({r0, l1, s0, s1, raw, u0, u1, t[1]}, {"r0", "l1", "s0", "s1", "raw", "u0", "u1", "t1"});
  expect_matches_reference(g);
}

// Inception's module end: a concatenation of a part of the merged convolution (a
// view of its buffer) and of convolutions of the other parts. Those convolutions
// write their regions in place; only the view is copied.
TEST(RuntimeSplitView, ConcatOfAPartAndConvolutionsCopiesOnlyThePart) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 12, 12})});
  Value merged = conv3(b, x, 8, 64, 1);
  std::vector<Value> p = split(b, merged, {16, 48});
  Value r0 = b.op1("Relu", {p[0]}), r1 = b.op1("Relu", {p[1]});
  Value c1 = b.op1("Relu", {conv3(b, r1, 48, 32, 3)});
  Value c2 = conv3(b, r1, 48, 16, 5);
  Value cat = b.op1("Concat", {r0, c1, c2, r0}, {{"axis", int64_t{1}}});
  Value y = conv3(b, cat, 80, 16, 7);
  Graph g = b.finish({y}, {"y"});
  auto steps = expect_matches_reference(g);
  if (!written_blocked(steps, "1x64x12x12")) GTEST_SKIP() << "no blocked layout here: " << written_layout(steps, "1x64x12x12");
  size_t concat = 0, copies = 0;
  for (const runtime::StepInfo& s : steps) {
    concat += s.kind == "concat";
    copies += (s.kind == "copy" || s.kind == "reorder") && !s.boundary;
  }
  EXPECT_EQ(concat, 0u);
  // The part twice; the last convolution reads the concatenation's blocks as they
  // are (with the first part's batch stride they took a reorder to channels last).
  EXPECT_EQ(copies, 2u);
}

// The same through Slice, and a Concat of the parts back in order.
TEST(RuntimeSplitView, BlockAlignedChannelSliceIsAView) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 10, 10})});
  Value merged = conv3(b, x, 16, 48, 1);
  Value s = slice_channels(b, merged, 16, 48);
  Value c = conv3(b, s, 32, 16, 3);
  std::vector<Value> p = split(b, merged, {32, 16});
  Value back = b.op1("Concat", {p[0], p[1]}, {{"axis", int64_t{1}}});
  Value d = conv3(b, back, 48, 16, 5);
  Graph g = b.finish({c, d}, {"c", "d"});
  auto steps = expect_matches_reference(g);
  EXPECT_EQ(conversions_of(steps, "1x48x10x10"), 0u);
  EXPECT_EQ(conversions_of(steps, "1x32x10x10"), 0u);
}

// Parts off the block boundaries (5 | 19 | 16 channels of 40) of a blocked tensor
// (a convolution of an aligned part, which keeps its input's layout) take the
// plain path; the ones that are aligned may still be views. Strided slices too.
TEST(RuntimeSplitView, UnalignedPartsOfABlockedTensorAreCorrect) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 9, 9})});
  Value merged = conv3(b, x, 8, 64, 1);
  std::vector<Value> q = split(b, merged, {16, 48});
  Value blocked = conv3(b, q[1], 48, 40, 11);
  std::vector<Value> p = split(b, blocked, {5, 19, 16});
  Value a = conv3(b, p[0], 5, 16, 3);
  Value r = b.op1("Relu", {p[1]});
  Value c = conv3(b, p[2], 16, 16, 5);
  Value odd = slice_channels(b, blocked, 1, 40, 2);
  Value e = conv3(b, odd, 20, 8, 7);
  // Rows of a one-block part (a dense run) and of the 40-channel tensor (not one).
  auto rows = [&](Value v) {
    return b.op1("Slice", {v, b.constant(Tensor::vector_i64({2})), b.constant(Tensor::vector_i64({7})),
                           b.constant(Tensor::vector_i64({2}))});
  };
  Value h0 = conv3(b, rows(q[0]), 16, 8, 13), h1 = b.op1("Relu", {rows(blocked)});
  Graph g = b.finish({a, r, c, p[2], e, q[0], h0, h1}, {"a", "r", "c", "p2", "e", "q0", "h0", "h1"});
  auto steps = expect_matches_reference(g);
  if (written_blocked(steps, "1x64x9x9")) EXPECT_TRUE(written_blocked(steps, "1x40x9x9"));
}

// The same split off the block boundaries of a convolution of the graph's input:
// its output is not made blocked for it.
TEST(RuntimeSplitView, UnalignedSplitKeepsTheConvolutionsLayout) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 9, 9})});
  Value merged = conv3(b, x, 8, 40, 1);
  std::vector<Value> p = split(b, merged, {5, 19, 16});
  Value a = conv3(b, p[0], 5, 16, 3);
  Value r = b.op1("Relu", {p[1]});
  Graph g = b.finish({a, r, p[2]}, {"a", "r", "p2"});
  auto steps = expect_matches_reference(g);
  GraphBuilder alone;
  Value y = conv3(alone, alone.input("x", {DType::Float32, make_shape({1, 8, 9, 9})}), 8, 40, 1);
  runtime::RuntimeOptions o;
  o.threads = 1;
  EXPECT_EQ(written_layout(steps, "1x40x9x9"), written_layout(runtime::compile(alone.finish({y}, {"y"}), o)->steps(), "1x40x9x9"));
}

// A last part that ends in a partial block (40 channels, blocks of 16): its
// padding is the merged output's own zeros. Parts of 8 and of 24 channels.
TEST(RuntimeSplitView, PartialLastBlockIsCorrect) {
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{32, 8}, std::vector<int64_t>{16, 24}}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 8, 9, 9})});
    Value merged = conv3(b, x, 8, 40, 1);
    std::vector<Value> p = split(b, merged, sizes);
    Value a = conv3(b, p[1], sizes[1], 16, 3);
    Value r = b.op1("Relu", {p[1]});
    Value m = b.op1("MaxPool", {p[1]}, {{"kernel_shape", std::vector<int64_t>{3, 3}}});
    Value c = conv3(b, p[0], sizes[0], 8, 5);
    Graph g = b.finish({a, r, m, c, p[1]}, {"a", "r", "m", "c", "p1"});
    expect_matches_reference(g);
  }
}

// A part used as a residual addend: the convolution adding it must not accumulate
// into the merged buffer, which the other part's readers still need.
TEST(RuntimeSplitView, ResidualAddOfAPartLeavesTheOtherPartsIntact) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 8, 8})});
  Value merged = conv3(b, x, 16, 64, 1);
  std::vector<Value> p = split(b, merged, {32, 32});
  Value y = b.op1("Add", {conv3(b, p[0], 32, 32, 3), p[1]});
  Value z = b.op1("Relu", {conv3(b, p[1], 32, 16, 5)});
  Value w = b.op1("Add", {conv3(b, y, 32, 32, 7), p[0]});
  Graph g = b.finish({y, z, w, merged}, {"y", "z", "w", "merged"});
  expect_matches_reference(g);
}

// Batch 2: a channel part of a blocked tensor is not one dense run; the plain
// path, still exact.
TEST(RuntimeSplitView, BatchAboveOneIsCorrect) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 16, 7, 7})});
  Value merged = conv3(b, x, 16, 48, 1);
  std::vector<Value> p = split(b, merged, {16, 32});
  Value a = conv3(b, p[0], 16, 16, 3);
  Value r = b.op1("Relu", {p[1]});
  Value s = conv3(b, slice_channels(b, merged, 32, 48), 16, 8, 5);
  Graph g = b.finish({a, r, s}, {"a", "r", "s"});
  expect_matches_reference(g);
}


// A depthwise 3x3 convolution (oneDNN writes it channels last).
Value depthwise3(GraphBuilder& b, Value x, int64_t c, uint64_t seed) {
  return b.op1("Conv", {x, b.constant(random_tensor({c, 1, 3, 3}, seed))}, {{"pads", kPad1}, {"group", c}});
}

// A sum of a blocked part (the merged convolution's) and a branch written
// channels last: the branch is reordered into the blocks and the pass walks both
// alike; mapped onto the blocks, it was read in runs of 16 lanes, one strided
// element at a time (10x the time of the reorder and the pass together).
TEST(RuntimeSplitView, SumOfABlockedPartAndAChannelLastBranchRunsInTheBlocks) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 12, 12})});
  Value y = b.input("y", {DType::Float32, make_shape({1, 32, 12, 12})});
  std::vector<Value> p = split(b, conv3(b, x, 16, 64, 1), {32, 32});
  Value r0 = b.op1("Relu", {p[0]}), r1 = b.op1("Relu", {p[1]});
  const std::vector<int64_t> k3{3, 3};
  Value pool = b.op1("AveragePool", {depthwise3(b, y, 32, 3)}, {{"kernel_shape", k3}, {"pads", kPad1}});
  Graph g = b.finish({b.op1("Add", {pool, r0}), conv3(b, r1, 32, 8, 7)}, {"s", "c"});
  auto steps = expect_matches_reference(g);
  size_t sums = 0;
  for (const runtime::StepInfo& s : steps) {
    if (s.kind != "pointwise") continue;
    ++sums;
    // Every operand of the sum walks the iteration space as its result does.
    const auto out = s.signature.find(" of32");
    ASSERT_NE(out, std::string::npos) << s.signature;
    auto strides_at = [&](size_t at) { return s.signature.substr(at + 5, s.signature.find(']', at) - at - 4); };
    for (auto at = s.signature.find(" if32"); at != std::string::npos && at < out; at = s.signature.find(" if32", at + 1))
      EXPECT_EQ(strides_at(at), strides_at(out)) << s.signature;
  }
  EXPECT_EQ(sums, 1u);
}

// A depthwise convolution of a blocked part (NasNet-A's separable convolutions of
// a merged convolution's parts) reads it as it is: oneDNN offers its depthwise
// kernel for a blocked input only with the output's layout named, and the part
// was reordered to channels last first.
TEST(RuntimeSplitView, DepthwiseConvolutionReadsABlockedPartAsItIs) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 14, 14})});
  std::vector<Value> p = split(b, conv3(b, x, 16, 64, 1), {32, 32});
  Value d0 = depthwise3(b, b.op1("Relu", {p[0]}), 32, 3), d1 = depthwise3(b, b.op1("Relu", {p[1]}), 32, 5);
  Graph g = b.finish({conv3(b, d0, 32, 8, 7), conv3(b, d1, 32, 8, 9)}, {"a", "c"});
  auto steps = expect_matches_reference(g);
  if (!written_blocked(steps, "1x64x14x14")) GTEST_SKIP() << "no blocked layout here: " << written_layout(steps, "1x64x14x14");
  EXPECT_EQ(conversions_of(steps, "1x32x14x14"), 0u);
}

// A 1x1 convolution of a concatenation read in parts (NasNet-A's cell outputs)
// whose parts are mostly in channel blocks writes those blocks and reads the
// blocked parts as they are; it wrote channels last, and each blocked part was
// reordered for it (NasNet-A: 165 reorders, 5-9 ms of ~145, now 15).
TEST(RuntimeSplitView, ConvolutionOfBlockedPartsReadsThemAsTheyAre) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 10, 10})});
  Value y = b.input("y", {DType::Float32, make_shape({1, 16, 10, 10})});
  Value z = b.input("z", {DType::Float32, make_shape({1, 24, 10, 10})});
  Value cat = b.op1("Concat", {conv3(b, x, 16, 32, 11), conv3(b, y, 16, 32, 13), depthwise3(b, z, 24, 15)},
                    {{"axis", int64_t{1}}});
  Value merged = b.op1("Relu", {b.op1("Conv", {cat, b.constant(random_tensor({48, 88, 1, 1}, 7))})});
  Graph g = b.finish({conv3(b, merged, 48, 8, 3)}, {"a"});
  auto steps = expect_matches_reference(g);
  size_t parts = 0;
  for (const runtime::StepInfo& s : steps) parts += s.label.find(" (part ") != std::string::npos;
  ASSERT_EQ(parts, 3u) << "the concatenation was made";
  if (!written_blocked(steps, "1x32x10x10")) GTEST_SKIP() << "no blocked layout here: " << written_layout(steps, "1x32x10x10");
  EXPECT_EQ(conversions_of(steps, "1x32x10x10"), 0u);
  EXPECT_TRUE(written_blocked(steps, "1x48x10x10")) << written_layout(steps, "1x48x10x10");
}
}  // namespace
}  // namespace isomer

namespace isomer {
namespace {

// A pooling of a channel part off the block boundaries (a plain strided view of
// the convolution's output, whatever layout the convolution chose) runs on one of
// oneDNN's fast kernels after a reorder, never on its reference kernel (NasNet-A's
// average pools of a merged convolution's parts once took 19 ms each that way).
TEST(RuntimeSplitView, PoolingOfAPartNeverTakesTheReferenceKernel) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 12, 12})});
  std::vector<Value> parts = split(b, conv3(b, x, 8, 40, 1), {20, 20});
  const std::vector<int64_t> k3{3, 3}, s1{1, 1};
  Value avg = b.op1("AveragePool", {parts[0]}, {{"kernel_shape", k3}, {"strides", s1}, {"pads", kPad1}});
  Value mx = b.op1("MaxPool", {parts[1]}, {{"kernel_shape", k3}, {"strides", s1}, {"pads", kPad1}});
  Graph g = b.finish({avg, mx}, {"a", "m"});
  for (const runtime::StepInfo& s : expect_matches_reference(g))
    if (s.kind == "pool") EXPECT_EQ(s.signature.find("ref:"), std::string::npos) << s.signature;
}

}  // namespace
}  // namespace isomer
