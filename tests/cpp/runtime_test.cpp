// The CPU runtime against the reference evaluator: every lowering (and every
// fusion) must compute what the operator table says.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/npz.h"
#include "runtime/lowering.h"
#include "kernels/vector_isa.h"
#include "runtime/one_cpu_per_thread.h"
#include "runtime/runtime.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

// The fused executable's step kinds, after run_against_reference.
std::vector<std::string> expect_matches_reference(const Graph& g, double tol = 1e-4) {
  std::vector<std::string> kinds;
  for (const runtime::StepInfo& s : testing::run_against_reference(g, tol)) kinds.push_back(s.kind);
  return kinds;
}

size_t count(const std::vector<std::string>& v, const std::string& k) { return std::count(v.begin(), v.end(), k); }

TEST(Runtime, ConvBatchNormReluFoldsIntoOneConvolution) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 10, 10})});
  Value w = b.constant(random_tensor({16, 8, 3, 3}, 1));
  Value bias = b.constant(random_tensor({16}, 2));
  Value c = b.op1("Conv", {x, w, bias}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value bn = b.op1("BatchNormalization",
                   {c, b.constant(random_tensor({16}, 3)), b.constant(random_tensor({16}, 4)),
                    b.constant(random_tensor({16}, 5)), b.constant(random_tensor({16}, 6, 0.5, 2))});
  Graph g = b.finish({b.op1("Relu", {bn})}, {"y"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "conv"), 1u);
  EXPECT_EQ(count(kinds, "batchnorm") + count(kinds, "eltwise"), 0u);
}

// A product of constants is folded at compile time as the optimizer folds it, in
// float32 with the runtime's kernel (OpDef::fold), not by the reference evaluator's
// double sums: those took minutes on products of large weights, and gave other
// values than any runtime computes. Long sums of random values round differently
// in float and in double, so the two would not agree bit for bit.
TEST(Runtime, ConstantProductsFoldWithTheFloatKernel) {
  GraphBuilder b;
  Tensor a = random_tensor({8, 2048}, 11), w = random_tensor({2048, 16}, 12);
  Value x = b.input("x", {DType::Float32, make_shape({8, 16})});
  Value p = b.op1("MatMul", {b.constant(a), b.constant(w)});
  Graph g = b.finish({b.op1("Add", {x, p})}, {"y"});
  std::vector<Tensor> args{a, w};
  Attributes none;
  EvalContext ctx{none, args, 1};
  const OpDef& matmul = get_op("MatMul");
  ASSERT_NE(matmul.fold, nullptr);
  Tensor folded = matmul.fold(ctx)[0];
  ASSERT_FALSE(folded.same_as(matmul.eval(ctx)[0]));  // the two sums do differ here
  Tensor zero = Tensor::from_f64(DType::Float32, {8, 16}, std::vector<double>(8 * 16, 0.0));
  runtime::RuntimeOptions o;
  o.threads = 1;
  std::vector<Tensor> got = runtime::compile(g, o)->run({zero});
  EXPECT_TRUE(got[0].same_as(folded));
}

// FrozenBatchNorm2d as exports write it, x * k + b with one constant per channel
// (DETR's backbone), folds into the convolution's weights and bias as
// BatchNormalization does: no binary post-ops left. So do x / k and x - k after a
// 1-D convolution, and a scalar factor; a constant that varies along another axis
// stays a post-op.
TEST(Runtime, ChannelAffineAfterAConvolutionFoldsIntoItsWeights) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 10, 10})});
  Value c = b.op1("Conv", {x, b.constant(random_tensor({16, 8, 3, 3}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value k = b.op1("Identity", {b.constant(random_tensor({1, 16, 1, 1}, 2, 0.5, 2))});
  Value m = b.op1("Mul", {k, c});
  Value a = b.op1("Add", {m, b.constant(random_tensor({16, 1, 1}, 3))});
  Value y = b.op1("Relu", {b.op1("Mul", {a, b.constant(Tensor::scalar_f32(0.5f))})});
  Value x1 = b.input("x1", {DType::Float32, make_shape({2, 4, 12})});
  Value c1 = b.op1("Conv", {x1, b.constant(random_tensor({6, 4, 3}, 4)), b.constant(random_tensor({6}, 5))});
  Value d = b.op1("Div", {c1, b.constant(random_tensor({6, 1}, 6, 0.5, 2))});
  Value z = b.op1("Sub", {d, b.constant(random_tensor({1, 6, 1}, 7))});
  Value c2 = b.op1("Conv", {x, b.constant(random_tensor({16, 8, 1, 1}, 8))});
  Value v = b.op1("Mul", {c2, b.constant(random_tensor({1, 1, 10, 1}, 9))});  // along the height: not foldable
  Graph g = b.finish({y, z, v}, {"y", "z", "v"});
  std::vector<runtime::StepInfo> steps = testing::run_against_reference(g);
  size_t convs = 0, binary = 0;
  for (const runtime::StepInfo& s : steps) {
    EXPECT_NE(s.kind, "pointwise") << s.signature;
    if (s.kind != "conv") continue;
    ++convs;
    if (s.signature.find("+bin") != std::string::npos) ++binary;
  }
  EXPECT_EQ(convs, 3u);
  EXPECT_EQ(binary, 1u);  // the height-wise product only
}

TEST(Runtime, GroupedStridedDilatedConvolutions) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 8, 13, 11})});
  Value dw = b.op1("Conv", {x, b.constant(random_tensor({8, 1, 3, 3}, 1))},
                   {{"group", int64_t{8}}, {"strides", std::vector<int64_t>{2, 2}},
                    {"pads", std::vector<int64_t>{1, 0, 1, 2}}});
  Value dil = b.op1("Conv", {x, b.constant(random_tensor({6, 4, 3, 2}, 2)), b.constant(random_tensor({6}, 3))},
                    {{"group", int64_t{2}}, {"dilations", std::vector<int64_t>{2, 3}}});
  Value clip = b.op1("Clip", {dw, b.constant(Tensor::scalar_f32(0)), b.constant(Tensor::scalar_f32(0.5))});
  Graph g = b.finish({clip, dil}, {"a", "b"});
  expect_matches_reference(g);
}

// Groups narrower than a vector block (ResNeXt's 32 groups of 4 channels; 3 in, 2
// out) run merged, with zero weights between them, on a blocked kernel; with a
// folded BatchNormalization and a Relu post-op, and a bias.
TEST(Runtime, NarrowGroupsMergedIntoBlockedOnes) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 64, 9, 9})});
  Value c4 = b.op1("Conv", {x, b.constant(random_tensor({64, 4, 3, 3}, 1)), b.constant(random_tensor({64}, 2))},
                   {{"group", int64_t{16}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value bn = b.op1("BatchNormalization",
                   {c4, b.constant(random_tensor({64}, 3)), b.constant(random_tensor({64}, 4)),
                    b.constant(random_tensor({64}, 5)), b.constant(random_tensor({64}, 6, 0.5, 2))});
  Value r = b.op1("Relu", {bn});
  Value x2 = b.input("x2", {DType::Float32, make_shape({1, 24, 7, 7})});
  Value c3 = b.op1("Conv", {x2, b.constant(random_tensor({16, 3, 3, 3}, 7))}, {{"group", int64_t{8}}});
  Graph g = b.finish({r, c3}, {"y", "z"});
  expect_matches_reference(g);
}

// Max pooling of a convolution's blocked output on the native kernel: padding,
// ceil mode, strides and dilation, against the reference.
TEST(Runtime, MaxPoolOfABlockedConvolutionOutput) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 8, 17, 15})});
  Value c = b.op1("Conv", {x, b.constant(random_tensor({16, 8, 3, 3}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value p1 = b.op1("MaxPool", {c}, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                    {"ceil_mode", int64_t{1}}});
  Value p2 = b.op1("MaxPool", {c}, {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                                    {"dilations", std::vector<int64_t>{2, 1}}});
  Graph g = b.finish({p1, p2}, {"a", "b"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "pool"), 2u);
}

// Max pooling of a channel-blocked concatenation (an Inception block's output) runs
// on the native kernel in its blocks, a dilated window too (oneDNN has only its
// reference kernel for one): oneDNN's AVX-512 kernel took 10-20% longer on blocks
// (GoogLeNet's 3x3 pools at stride 1).
TEST(Runtime, MaxPoolOfABlockedConcatRunsNativeInItsBlocks) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 64, 13, 15})});
  Value ca = b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({32, 64, 3, 3}, 1))},
                                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
  Value cb = b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({48, 64, 1, 1}, 2))})});
  Value cat = b.op1("Concat", {ca, cb}, {{"axis", int64_t{1}}});
  Value p1 = b.op1("MaxPool", {cat}, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                      {"ceil_mode", int64_t{1}}});
  Value p2 = b.op1("MaxPool", {cat}, {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                                      {"dilations", std::vector<int64_t>{2, 1}}});
  Graph g = b.finish({p1, p2}, {"a", "b"});
  std::vector<std::string> pools;
  for (const runtime::StepInfo& s : testing::run_against_reference(g, 1e-4))
    if (s.kind == "pool") pools.push_back(s.signature);
  ASSERT_EQ(pools.size(), 2u);
  for (const std::string& sig : pools) EXPECT_EQ(sig.rfind("maxpool-native", 0), 0u) << sig;
}

TEST(Runtime, ResidualAddAndReluArePostOps) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 8, 8})});
  Value c1 = b.op1("Conv", {x, b.constant(random_tensor({16, 16, 1, 1}, 1))});
  Value c2 = b.op1("Conv", {c1, b.constant(random_tensor({16, 16, 3, 3}, 2))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value y = b.op1("Relu", {b.op1("Add", {c2, x})});
  Graph g = b.finish({y}, {"y"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "binary"), 0u);
}

TEST(Runtime, ResidualAccumulatesInPlaceOnlyWhenNothingElseReadsTheAddend) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 8, 8})});
  Value r1 = b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({16, 16, 1, 1}, 1))})});
  Value side = b.op1("Conv", {x, b.constant(random_tensor({16, 16, 1, 1}, 3))});  // read only by the Add
  Value y = b.op1("Add", {b.op1("Conv", {r1, b.constant(random_tensor({16, 16, 1, 1}, 2))}), side});
  Value y2 = b.op1("Add", {b.op1("Conv", {y, b.constant(random_tensor({16, 16, 1, 1}, 4))}), r1});
  Value z = b.op1("Mul", {y2, r1});  // r1 is read after the second residual add
  Graph g = b.finish({z}, {"z"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "copy"), 1u);  // for r1 only
}

TEST(Runtime, BroadcastOperandsAreBinaryPostOps) {
  // A per-channel Add and a squeeze-and-excitation Mul ([N, C, 1, 1] computed at
  // run time) after a convolution, and a Gemm whose C has the output's full shape
  // (NasRNN's first step after constant folding, once 700x slower on oneDNN's
  // reference matmul) followed by a Mul of a same-shaped value: each is one step.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 6, 6})});
  Value cv = b.op1("Conv", {x, b.constant(random_tensor({32, 16, 3, 3}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value biased = b.op1("Add", {cv, b.constant(random_tensor({1, 32, 1, 1}, 2))});
  Value se = b.op1("Sigmoid", {b.op1("GlobalAveragePool", {x})});
  Value se32 = b.op1("Concat", {se, se}, {{"axis", int64_t{1}}});
  Value scaled = b.op1("Mul", {b.op1("Relu", {biased}), se32});
  Value h = b.input("h", {DType::Float32, make_shape({16, 24})});
  Value gemm = b.op1("Gemm", {h, b.constant(random_tensor({24, 8}, 3)), b.constant(random_tensor({16, 8}, 4))});
  Value gate = b.input("gate", {DType::Float32, make_shape({16, 8})});
  Value gated = b.op1("Mul", {b.op1("Tanh", {gemm}), b.op1("Sigmoid", {gate})});
  Graph g = b.finish({scaled, gated}, {"s", "u"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "reference"), 0u);
  runtime::RuntimeOptions o;
  o.threads = 1;
  o.packed_gemm = false;  // oneDNN's post-ops, which this test is about, on any CPU
  auto exe = runtime::compile(g, o);
  for (const runtime::StepInfo& st : exe->steps()) {
    EXPECT_EQ(st.signature.find("impl ref"), std::string::npos) << st.signature;
    if (st.kind == "conv") {
      EXPECT_EQ(st.ops, (std::vector<std::string>{"Conv", "Add", "Relu", "Mul"}));
    }
    if (st.kind == "matmul") {
      EXPECT_EQ(st.ops, (std::vector<std::string>{"Gemm", "Tanh", "Mul"}));
    }
  }
}

TEST(Runtime, DenseBlockConcatenationsShareOneBufferAndBatchNormTakesTheRelu) {
  // DenseNet: every layer reads the concatenation of all features so far through
  // BatchNormalization and Relu. Each feature is written once, in place, into the
  // buffer of the block's last concatenation; the earlier ones are its prefixes.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 16, 5, 5})});
  std::vector<Value> features = {b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({16, 16, 1, 1}, 1))})})};
  for (int layer = 0; layer < 3; ++layer) {
    Value cat = b.op1("Concat", features, {{"axis", int64_t{1}}});
    const int64_t ch = 16 * static_cast<int64_t>(features.size());
    Value bn = b.op1("BatchNormalization",
                     {cat, b.constant(random_tensor({ch}, 10 + layer)), b.constant(random_tensor({ch}, 20 + layer)),
                      b.constant(random_tensor({ch}, 30 + layer)), b.constant(random_tensor({ch}, 40 + layer, 0.5, 2))});
    features.push_back(b.op1("Conv", {b.op1("Relu", {bn}), b.constant(random_tensor({16, ch, 3, 3}, 50 + layer))},
                             {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  }
  Graph g = b.finish({b.op1("Concat", features, {{"axis", int64_t{1}}})}, {"y"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "concat") + count(kinds, "copy"), 0u);
  EXPECT_EQ(count(kinds, "batchnorm"), 3u);
  EXPECT_EQ(count(kinds, "pointwise"), 0u);  // the Relus ride along
}

TEST(Runtime, EveryOperatorsLoweringHasAFunction) {
  for (const OpDef* op : all_ops()) {
    if (op->lower == Lowering::ReferenceOnly) continue;  // parallel operators: plans run MPI collectives
    EXPECT_NE(runtime::lowering_of(op->lower), nullptr) << op->name;
  }
}

TEST(Runtime, PoolsAndConcat) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 4, 10, 10})});
  Value mp = b.op1("MaxPool", {x}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                    {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", int64_t{1}}});
  Value ap = b.op1("AveragePool", {x}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                        {"strides", std::vector<int64_t>{2, 2}},
                                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value cat = b.op1("Concat", {mp, ap}, {{"axis", int64_t{1}}});
  Value gap = b.op1("GlobalAveragePool", {cat});
  Graph g = b.finish({cat, gap}, {"cat", "gap"});
  expect_matches_reference(g);
}

TEST(Runtime, ConcatReadOnlyByPointwiseConvolutionsIsNeverMade) {
  // A SqueezeNet fire module feeding the next one: the 1x1 convolutions after the
  // Concat read its parts (the second one with BatchNormalization and Relu), and
  // three parts of odd channel counts; a Concat also read by a 3x3 convolution
  // stays a copy.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 6, 9, 7})});
  Value e1 = b.op1(
      "Relu", {b.op1("Conv", {x, b.constant(random_tensor({5, 6, 1, 1}, 1)), b.constant(random_tensor({5}, 2))})});
  Value e3 = b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({7, 6, 3, 3}, 3))},
                                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
  Value cat = b.op1("Concat", {e1, e3, x}, {{"axis", int64_t{1}}});
  Value s1 = b.op1(
      "Relu", {b.op1("Conv", {cat, b.constant(random_tensor({4, 18, 1, 1}, 4)), b.constant(random_tensor({4}, 5))})});
  Value s2 = b.op1("Conv", {cat, b.constant(random_tensor({3, 18, 1, 1}, 6))});
  Value bn = b.op1("BatchNormalization",
                   {s2, b.constant(random_tensor({3}, 7)), b.constant(random_tensor({3}, 8)),
                    b.constant(random_tensor({3}, 9)), b.constant(random_tensor({3}, 10, 0.5, 2))});
  Value cat2 = b.op1("Concat", {s1, e1}, {{"axis", int64_t{1}}});
  Value t = b.op1("Conv", {cat2, b.constant(random_tensor({2, 9, 3, 3}, 11))});
  Value u = b.op1("Conv", {cat2, b.constant(random_tensor({2, 9, 1, 1}, 12))});
  Graph g = b.finish({b.op1("Relu", {bn}), t, u}, {"a", "t", "u"});
  auto kinds = expect_matches_reference(g);
  // Only cat2, which a 3x3 convolution reads, is made: one concatenation where
  // the convolutions write channel blocks (nChw8c on AVX2), or a copy of each of
  // its two parts where they write channel-last (nhwc: AVX-512's brgconv). Made,
  // cat would add one more concatenation, or three copies.
  const size_t made = count(kinds, "concat") + count(kinds, "copy");
  EXPECT_TRUE(made == 1u || (made == 2u && count(kinds, "concat") == 0u)) << made;
  EXPECT_EQ(count(kinds, "conv"), 2u + 3u + 3u + 1u + 1u);  // s1 and s2 in three parts each
}

TEST(Runtime, ConcatPartsAreWrittenInPlace) {
  // Batch 1: each part's region of the output is one contiguous run, so the
  // convolutions (blocked layout, 16 and 32 channels) and the matmuls (rows) write
  // their results straight into the concatenation; no step copies them. A part
  // that is a graph input is copied.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 6, 6})});
  Value c1 = b.op1("Relu", {b.op1("Conv", {x, b.constant(random_tensor({16, 8, 1, 1}, 1))})});
  Value c2 = b.op1("Conv", {x, b.constant(random_tensor({32, 8, 3, 3}, 2))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value cat = b.op1("Concat", {c1, c2}, {{"axis", int64_t{1}}});
  Value y = b.op1("Conv", {cat, b.constant(random_tensor({4, 48, 3, 3}, 3))});
  Value v = b.input("v", {DType::Float32, make_shape({1, 10})});
  Value m1 = b.op1("MatMul", {v, b.constant(random_tensor({10, 5}, 4))});
  Value m2 = b.op1("MatMul", {v, b.constant(random_tensor({10, 7}, 5))});
  Value cat2 = b.op1("Concat", {m1, m2}, {{"axis", int64_t{1}}});
  Value cat3 = b.op1("Concat", {v, m1}, {{"axis", int64_t{1}}});
  Graph g = b.finish({y, b.op1("Tanh", {cat2}), cat3}, {"y", "t", "c"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "concat"), 0u);
  EXPECT_EQ(count(kinds, "copy"), 2u);  // v and m1 (which already lives in cat2) into cat3
}

TEST(Runtime, AttentionBlock) {
  // q k^T / sqrt(d) -> softmax -> v, with a transposed view feeding MatMul.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 5, 8})});
  Value wq = b.constant(random_tensor({8, 8}, 1)), bq = b.constant(random_tensor({8}, 2));
  Value q = b.op1("Add", {b.op1("MatMul", {x, wq}), bq});
  Value k = b.op1("MatMul", {x, b.constant(random_tensor({8, 8}, 3))});
  Value kt = b.op1("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value s = b.op1("Div", {b.op1("MatMul", {q, kt}), b.constant(Tensor::scalar_f32(2.8284271f))});
  Value p = b.op1("Softmax", {s}, {{"axis", int64_t{-1}}});
  Value o = b.op1("MatMul", {p, x});
  Value ln = b.op1("LayerNormalization",
                   {b.op1("Add", {o, x}), b.constant(random_tensor({8}, 4)), b.constant(random_tensor({8}, 5))},
                   {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  Graph g = b.finish({ln}, {"y"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "reference"), 0u);
}

TEST(Runtime, ErfGeluSubgraphBecomesOneEltwise) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({3, 8})});
  Value h = b.op1("Add", {b.op1("MatMul", {x, b.constant(random_tensor({8, 16}, 1))}), b.constant(random_tensor({16}, 2))});
  Value e = b.op1("Erf", {b.op1("Div", {h, b.constant(Tensor::scalar_f32(1.4142135f))})});
  Value m = b.op1("Mul", {h, b.op1("Add", {e, b.constant(Tensor::scalar_f32(1))})});
  Value y = b.op1("Mul", {m, b.constant(Tensor::scalar_f32(0.5))});
  Graph g = b.finish({y}, {"y"});
  auto kinds = expect_matches_reference(g);
  // MatMul + bias + GELU in one primitive; with AVX-512 the GELU (still one
  // operation, not five) is isomer's pointwise pass after it, cheaper than
  // oneDNN's post-op (lower_matmul.cpp).
  if (kernels::best_vector_isa() == kernels::VectorIsa::Avx512) {
    EXPECT_EQ(kinds.size(), 2u);
    EXPECT_EQ(count(kinds, "pointwise"), 1u);
  } else {
    EXPECT_EQ(kinds.size(), 1u);
  }
}

// x * sigmoid(a x) is oneDNN's swish: SiLU after a convolution (EfficientNet,
// torch exports nn.SiLU as Sigmoid and Mul) and QuickGELU after a matmul (CLIP)
// each run as one primitive; a sigmoid whose value is also read elsewhere is not
// folded away.
TEST(Runtime, SwishSubgraphsBecomeOneEltwise) {
  {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 8, 10, 10})});
    Value c = b.op1("Conv", {x, b.constant(random_tensor({16, 8, 3, 3}, 1)), b.constant(random_tensor({16}, 2))},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Value y = b.op1("Mul", {b.op1("Sigmoid", {c}), c});
    auto kinds = expect_matches_reference(b.finish({y}, {"y"}));
    EXPECT_EQ(count(kinds, "conv"), 1u);
    EXPECT_EQ(count(kinds, "pointwise"), 0u);
  }
  {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({3, 8})});
    Value h = b.op1("MatMul", {x, b.constant(random_tensor({8, 16}, 3))});
    Value y = b.op1("Mul", {h, b.op1("Sigmoid", {b.op1("Mul", {b.constant(Tensor::scalar_f32(1.702f)), h})})});
    auto kinds = expect_matches_reference(b.finish({y}, {"y"}));
    EXPECT_EQ(kinds.size(), 1u);
  }
  {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({3, 8})});
    Value h = b.op1("MatMul", {x, b.constant(random_tensor({8, 16}, 4))});
    Value s = b.op1("Sigmoid", {h});
    Value y = b.op1("Mul", {h, s});
    auto kinds = expect_matches_reference(b.finish({y, s}, {"y", "s"}));
    EXPECT_EQ(count(kinds, "pointwise"), 1u);  // the sigmoid is an output too: it is computed on its own
  }
}

// A SiLU or sigmoid ending a large convolution's post-ops runs as a step of its own
// in place on the convolution's output, in whatever layout that has: after a
// folded BatchNormalization and a residual add (which stay post-ops), with 24 and
// 40 output channels (not whole vector blocks), and feeding another convolution
// and a pooling that read the same buffer.
TEST(Runtime, LargeConvolutionGatesRunInPlaceAfterIt) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 80, 80})});
  Value r = b.input("r", {DType::Float32, make_shape({1, 32, 80, 80})});
  const std::vector<int64_t> pads = {1, 1, 1, 1};
  Value c = b.op1("Conv", {x, b.constant(random_tensor({32, 8, 3, 3}, 1)), b.constant(random_tensor({32}, 2))},
                  {{"pads", pads}});
  Value bn = b.op1("BatchNormalization",
                   {c, b.constant(random_tensor({32}, 3)), b.constant(random_tensor({32}, 4)),
                    b.constant(random_tensor({32}, 5)), b.constant(random_tensor({32}, 6, 0.5, 2))});
  Value sum = b.op1("Add", {bn, r});
  Value silu = b.op1("Mul", {sum, b.op1("Sigmoid", {sum})});
  Value c2 = b.op1("Conv", {silu, b.constant(random_tensor({24, 32, 1, 1}, 7))});
  Value silu2 = b.op1("Mul", {b.op1("Sigmoid", {c2}), c2});
  Value c3 = b.op1("Conv", {silu2, b.constant(random_tensor({40, 24, 1, 1}, 8))});
  Value gate = b.op1("Sigmoid", {c3});
  Value pool = b.op1("GlobalAveragePool", {silu2});
  Graph g = b.finish({gate, pool}, {"gate", "pool"});
  std::vector<std::string> kinds, sigs;
  for (const runtime::StepInfo& st : testing::run_against_reference(g, 1e-4)) {
    kinds.push_back(st.kind);
    sigs.push_back(st.kind + ": " + st.signature);
  }
  EXPECT_EQ(count(kinds, "conv"), 3u);
  EXPECT_EQ(count(kinds, "pointwise"), 3u) << ::testing::PrintToString(sigs);  // the two SiLUs and the sigmoid
  // Small outputs keep the gate as a post-op: one step.
  GraphBuilder s;
  Value xs = s.input("x", {DType::Float32, make_shape({1, 8, 10, 10})});
  Value cs = s.op1("Conv", {xs, s.constant(random_tensor({16, 8, 1, 1}, 9))});
  auto small = expect_matches_reference(s.finish({s.op1("Mul", {cs, s.op1("Sigmoid", {cs})})}, {"y"}));
  EXPECT_EQ(count(small, "conv"), 1u);
  EXPECT_EQ(count(small, "pointwise"), 0u);
}

// A constant Pad of zeros everywhere (Swin's windows, padded to a multiple of a
// window that already divides the map) is its input, in whatever layout that has:
// no step; a real pad after it still pads.
TEST(Runtime, PadOfNothingIsItsInput) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 14, 14})});
  Value c = b.op1("Conv", {x, b.constant(random_tensor({16, 8, 3, 3}, 1))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value t = b.op1("Transpose", {c}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  Value zero = b.constant(Tensor::from_i64(DType::Int64, {8}, std::vector<int64_t>(8, 0)));
  Value p = b.op1("Pad", {t, zero});
  Value y = b.op1("Relu", {p});
  Value q = b.op1("Pad", {y, b.constant(Tensor::from_i64(DType::Int64, {8}, std::vector<int64_t>{0, 1, 0, 0, 0, 0, 2, 0}))});
  Value direct = b.op1("Pad", {x, zero});
  auto kinds = expect_matches_reference(b.finish({q, direct}, {"q", "direct"}));
  EXPECT_EQ(count(kinds, "pad"), 1u);
}

TEST(Runtime, GemmTransposesAndBroadcastBinary) {
  GraphBuilder b;
  Value a = b.input("a", {DType::Float32, make_shape({6, 4})});
  Value g1 = b.op1("Gemm", {a, b.constant(random_tensor({5, 6}, 1)), b.constant(random_tensor({5}, 2))},
                   {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}});
  Value d = b.op1("Sub", {g1, b.constant(random_tensor({1, 5}, 3))});
  Value r = b.op1("ReduceMean", {d}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  Graph g = b.finish({d, r}, {"d", "r"});
  expect_matches_reference(g);
}

// Gather, Erf and the shape computations of a Reshape all have native paths: no
// reference kernel runs.
TEST(Runtime, NativeKernelsLeaveNothingToTheReference) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({4, 6})});
  Value idx = b.constant(Tensor::from_i64(DType::Int64, {2}, std::vector<int64_t>{3, 1}));
  Value gth = b.op1("Gather", {x, idx}, {{"axis", int64_t{0}}});
  Value e = b.op1("Erf", {gth});
  Value sh = b.op1("Shape", {x});
  Value r = b.op1("Reshape", {b.op1("Relu", {x}), b.op1("Concat", {sh, b.constant(Tensor::vector_i64({}))},
                                                        {{"axis", int64_t{0}}})});
  Graph g = b.finish({e, r}, {"e", "r"});
  auto kinds = expect_matches_reference(g);
  EXPECT_EQ(count(kinds, "reference"), 0u);
  EXPECT_EQ(count(kinds, "gather"), 1u);
  EXPECT_EQ(count(kinds, "pointwise"), 2u);  // Erf, Relu
}

TEST(Runtime, BuffersAreSharedByLiveness) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 64, 32, 32})});
  Value v = x;
  for (int i = 0; i < 6; ++i) v = b.op1("Sigmoid", {b.op1("Tanh", {v})});
  Graph g = b.finish({v}, {"y"});
  runtime::RuntimeOptions o;
  o.threads = 1;
  o.fuse = false;  // one step per operator (fused, the chain is one pass and one buffer)
  auto exe = runtime::compile(g, o);
  // Three maps (the input, and the chain in place or in two buffers by turns) of
  // the thirteen it computes.
  EXPECT_LE(exe->arena_bytes(), 3u * 64 * 32 * 32 * sizeof(float));
  expect_matches_reference(g);
}

TEST(Runtime, OpaqueNodesAreReportedNotRun) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  OpaqueInfo info;
  info.op_type = "FancyOp";
  info.domain = "com.example";
  Value y = b.opaque(info, {x}, {{DType::Float32, make_shape({2})}}, "fancy")[0];
  Graph g = b.finish({y}, {"y"});
  std::string why;
  runtime::RuntimeOptions own;
  own.delegate_opaque = false;
  EXPECT_FALSE(runtime::is_runnable(g, &why, own));
  EXPECT_NE(why.find("fancy"), std::string::npos) << why;
  // Delegated (the default), ONNX Runtime does not know the operator either (or is
  // not installed): the compile fails naming the node.
  try {
    runtime::compile(g);
    FAIL() << "compiled an operator nobody knows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fancy"), std::string::npos) << e.what();
  }
}

TEST(Runtime, NpzRoundTrip) {
  std::string path = (std::filesystem::temp_directory_path() / "isomer_rt_test.npz").string();
  runtime::NamedTensors in = {{"a", random_tensor({2, 3}, 1)},
                              {"b", Tensor::from_i64(DType::Int64, {4}, std::vector<int64_t>{1, -2, 3, 4})},
                              {"s", Tensor::scalar_f32(2.5f)}};
  runtime::write_npz(path, in);
  runtime::NamedTensors out = runtime::read_npz(path);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_TRUE(out[i].second.same_as(in[i].second));
  }
  std::remove(path.c_str());
  EXPECT_THROW(runtime::read_npz(path), Error);
}

TEST(Runtime, OtherRunnableTasksAndTheOpenMpPolicyReport) {
  const char* saved = std::getenv("ISOMER_RUNNABLE_TASKS");
  std::string keep = saved ? saved : "";
  ::unsetenv("ISOMER_RUNNABLE_TASKS");
  EXPECT_GE(runtime::other_runnable_tasks(), 0);  // read from /proc/loadavg
  ::setenv("ISOMER_RUNNABLE_TASKS", "3", 1);
  EXPECT_EQ(runtime::other_runnable_tasks(), 3);
  ::setenv("ISOMER_RUNNABLE_TASKS", "x", 1);  // not a count: the machine's own
  EXPECT_GE(runtime::other_runnable_tasks(), 0);
  if (saved) ::setenv("ISOMER_RUNNABLE_TASKS", keep.c_str(), 1);
  else ::unsetenv("ISOMER_RUNNABLE_TASKS");
  // The test binary never restarts itself: it reports the environment's policy.
  std::string w = runtime::openmp_waits();
  if (std::getenv("ISOMER_OMP_REEXEC") == nullptr) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) {
      EXPECT_NE(w.find("set by the user"), std::string::npos) << w;
    } else {
      EXPECT_EQ(w, "libgomp default");
    }
  }
}

// Each OpenMP thread's CPUs, read from inside a team of `team`.
std::vector<std::vector<int>> team_cpus(int team) {
  std::vector<std::vector<int>> cpus(team);
#pragma omp parallel num_threads(team)
  if (omp_get_num_threads() == team) cpus[omp_get_thread_num()] = runtime::thread_cpus();
  return cpus;
}

TEST(Runtime, OneCpuPerThreadPinsTheTeamAndGivesTheMasksBack) {
  // The guard times with each OpenMP thread on its own CPU: a scheduler that packs
  // an idle machine's threads onto one CPU made each barrier wait out a spin.
  const std::vector<int> mine = runtime::thread_cpus();
  if (mine.size() < 2) GTEST_SKIP() << "one CPU: no team to pin";
  const std::vector<std::vector<int>> before = team_cpus(2);
  {
    runtime::OneCpuPerThread pinned(2);
    EXPECT_EQ(pinned.cpus(), std::vector<int>(mine.begin(), mine.begin() + 2));
    EXPECT_EQ(pinned.note(), "2 threads, one per CPU (" + std::to_string(mine[0]) + ", " + std::to_string(mine[1]) + ")");
    const std::vector<std::vector<int>> during = team_cpus(2);
    EXPECT_EQ(during[0], std::vector<int>{mine[0]});
    EXPECT_EQ(during[1], std::vector<int>{mine[1]});
  }
  EXPECT_EQ(team_cpus(2), before);
  EXPECT_EQ(runtime::thread_cpus(), mine);
  // A team of one, or one larger than the CPUs, stays where the scheduler puts it.
  runtime::OneCpuPerThread one(1);
  EXPECT_TRUE(one.cpus().empty());
  EXPECT_EQ(one.note(), "1 thread");
  runtime::OneCpuPerThread more(static_cast<int>(mine.size()) + 1);
  EXPECT_TRUE(more.cpus().empty());
  EXPECT_NE(more.note().find("not pinned"), std::string::npos) << more.note();
  EXPECT_EQ(runtime::thread_cpus(), mine);
}

}  // namespace
}  // namespace isomer
