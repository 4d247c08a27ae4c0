// Mobile CNN blocks as torch exports them (EfficientNet's MBConv with SiLU,
// MobileNetV3's with HardSwish and a HardSigmoid gate): depthwise convolutions
// with their activations, squeeze-excitation (global pool, two 1x1 convolutions,
// the gate multiplied over the image), a residual add; against the reference
// evaluator at one and two threads, and which steps take a smaller thread team.
// Causal and "same" convolutions written as an explicit zero Pad, then the Conv.
#include <gtest/gtest.h>

#include <string>

#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::count_kind;
using testing::random_tensor;
using testing::run_checked;

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

Value conv(GraphBuilder& b, Value x, int64_t in, int64_t out, int64_t k, int64_t group, uint64_t seed) {
  const int64_t p = k / 2;
  return b.op1("Conv", {x, b.constant(random_tensor({out, in / group, k, k}, seed)), b.constant(random_tensor({out}, seed + 1))},
               {{"group", group}, {"pads", std::vector<int64_t>{p, p, p, p}}});
}

Value silu(GraphBuilder& b, Value x) { return b.op1("Mul", {x, b.op1("Sigmoid", {x})}); }

// x -> expand 1x1 -> act -> depthwise kxk -> act -> x * gate(x) -> project 1x1 -> + x.
// gate: global average (ReduceMean over H, W, or GlobalAveragePool), 1x1 down to
// `squeeze` channels, act, 1x1 back up, Sigmoid (or HardSigmoid).
Graph mbconv(int64_t c, int64_t hw, int64_t expand, int64_t squeeze, bool hard) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, c, hw, hw}));
  auto act = [&](Value v) { return hard ? b.op1("HardSwish", {v}) : silu(b, v); };
  Value e = act(conv(b, x, c, expand, 1, 1, 1));
  Value d = act(conv(b, e, expand, expand, hard ? 5 : 3, expand, 3));
  Value pooled = hard ? b.op1("GlobalAveragePool", {d})
                      : b.op1("ReduceMean", {d}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}});
  Value s = conv(b, pooled, expand, squeeze, 1, 1, 5);
  s = hard ? b.op1("Relu", {s}) : silu(b, s);
  s = conv(b, s, squeeze, expand, 1, 1, 7);
  Value gate = hard ? b.op1("HardSigmoid", {s}, {{"alpha", 1.0f / 6}, {"beta", 0.5f}}) : b.op1("Sigmoid", {s});
  Value y = conv(b, b.op1("Mul", {d, gate}), expand, c, 1, 1, 9);
  return b.finish({b.op1("Add", {y, x})}, {"y"});
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The squeeze-excitation convolutions (1x1 on a 1x1 image, some thousand
// multiply-adds) and the global pool of a 7x7 image run on one thread at two; the
// expansion and depthwise convolutions over the whole image keep both.
TEST(RuntimeCnn, SqueezeExcitationStepsRunOnOneThreadAtTwo) {
  for (bool hard : {false, true}) {
    SCOPED_TRACE(hard ? "HardSwish" : "SiLU");
    const Graph big = mbconv(24, 28, 144, 8, hard);
    run_checked(big, 1);
    int one = 0, two = 0;
    for (const runtime::StepInfo& s : run_checked(big, 2)) {
      if (s.kind != "conv") continue;
      const bool gate_conv = s.signature.find("1x144x1x1") != std::string::npos ||
                             s.signature.find("1x8x1x1") != std::string::npos;
      EXPECT_TRUE(ends_with(s.signature, gate_conv ? " t1" : " t2")) << s.signature;
      (gate_conv ? one : two) += 1;
    }
    EXPECT_EQ(one, 2);
    EXPECT_GE(two, 3);
    const Graph small = mbconv(40, 7, 240, 16, hard);
    for (const runtime::StepInfo& s : run_checked(small, 2))
      if (s.kind == "pool") EXPECT_TRUE(ends_with(s.signature, " t1")) << s.signature;
  }
}

// A SqueezeNet fire module at an odd size: the expand convolutions write channel
// blocks (their Concat is cut on blocks), and the 1x1 convolution reading the
// Concat in parts reads each part as it is, in blocks: each was reordered to
// channels-last first (16 of SqueezeNet's 19 reorders).
TEST(RuntimeCnn, ConvolutionOfConcatPartsReadsBlockedPartsAsTheyAre) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, 48, 13, 11}));
  Value s = b.op1("Relu", {conv(b, x, 48, 16, 1, 1, 21)});
  Value e1 = b.op1("Relu", {conv(b, s, 16, 32, 1, 1, 23)});
  Value e3 = b.op1("Relu", {conv(b, s, 16, 32, 3, 1, 25)});
  Value cat = b.op1("Concat", {e1, e3}, {{"axis", int64_t{1}}});
  const Graph g = b.finish({b.op1("Relu", {conv(b, cat, 64, 40, 1, 1, 27)})}, {"y"});
  for (int threads : {1, 2}) {
    int parts = 0;
    for (const runtime::StepInfo& st : run_checked(g, threads)) {
      if (st.label.find("(part") == std::string::npos) continue;
      ++parts;
      const std::string src = st.signature.substr(0, st.signature.find(" wei "));
      EXPECT_NE(src.find(":b1/"), std::string::npos) << st.signature;
    }
    EXPECT_EQ(parts, 2);
  }
}

// DenseNet's stem: a convolution, a max pool, and the pool's output the first part of
// the dense block's Concats. The convolution writes channel blocks for the cut the
// pool passes on, so the Concat is written in place: with the pool channels-last,
// every Concat copied every part.
TEST(RuntimeCnn, APoolBetweenAConvolutionAndAConcatKeepsTheConcatInPlace) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, 8, 17, 19}));
  Value stem = b.op1("Relu", {conv(b, x, 8, 32, 3, 1, 31)});
  Value pool = b.op1("MaxPool", {stem}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                         {"strides", std::vector<int64_t>{2, 2}},
                                         {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value layer = b.op1("Relu", {conv(b, pool, 32, 16, 3, 1, 33)});
  Value cat = b.op1("Concat", {pool, layer}, {{"axis", int64_t{1}}});
  const Graph g = b.finish({conv(b, cat, 48, 24, 3, 1, 35)}, {"y"});
  for (int threads : {1, 2}) {
    int concats = 0;
    for (const runtime::StepInfo& st : run_checked(g, threads)) concats += st.kind == "concat" || st.kind == "copy";
    EXPECT_EQ(concats, 0);
  }
}

// An image's few channel planes read by a convolution in channels last (brgconv's
// layout on AVX-512) are interleaved by the native copy, not oneDNN's reorder,
// which stored one float at a time (224 x 224 x 3: 0.041 ms, 3% of MnasNet 0.5).
// Odd sizes, batch 2; 5 channels stay on oneDNN's reorder.
TEST(RuntimeCnn, AFewInputPlanesAreInterleavedByTheNativeCopy) {
  for (int64_t ch : {3, 4, 5}) {
    SCOPED_TRACE(ch);
    GraphBuilder b;
    Value x = b.input("x", f32({2, ch, 33, 35}));
    Value y = b.op1("Conv", {x, b.constant(random_tensor({20, ch, 3, 3}, 41)), b.constant(random_tensor({20}, 42))},
                    {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    const Graph g = b.finish({b.op1("Relu", {y})}, {"y"});
    const std::string input_reorder = "reorder 2x" + std::to_string(ch) + "x33x35";
    for (int threads : {1, 2})
      for (const runtime::StepInfo& s : run_checked(g, threads))
        if (ch <= 4) EXPECT_NE(s.signature.rfind(input_reorder, 0), 0u) << s.signature;
  }
}

// ReduceMean over H and W without keepdims (an image classifier's pooling before
// its Linear, as torchvision's MnasNet exports it) is global pooling of the
// convolution's layout too: it was a reorder to plain and a reduction.
TEST(RuntimeCnn, SpatialMeanWithoutKeepdimsIsGlobalPooling) {
  for (int64_t ch : {20, 32}) {
    GraphBuilder b;
    Value x = b.input("x", f32({2, 8, 9, 7}));
    Value c = b.op1("Relu", {conv(b, x, 8, ch, 3, 1, 51)});
    Value m = b.op1("ReduceMean", {c}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}});
    Value y = b.op1("Gemm", {m, b.constant(random_tensor({5, ch}, 53))}, {{"transB", int64_t{1}}});
    const Graph g = b.finish({y}, {"y"});
    for (int threads : {1, 2}) {
      const auto steps = run_checked(g, threads);
      EXPECT_EQ(count_kind(steps, "reduce"), 0u);
      EXPECT_EQ(count_kind(steps, "pool"), 1u);
    }
  }
}

// A conformer's convolution module along 399 tokens of 64 channels: a depthwise
// Conv1d (kernel 7) with its activation, then a residual add. oneDNN 2.6 has only a
// gemm kernel for the 1-D form; as a unit-height 2-D one it gets a depthwise kernel.
Graph conformer_conv(bool residual) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, 64, 399}));
  Value d = b.op1("Conv", {x, b.constant(random_tensor({64, 1, 7}, 11)), b.constant(random_tensor({64}, 12))},
                  {{"group", int64_t{64}}, {"pads", std::vector<int64_t>{3, 3}}});
  Value y = silu(b, d);
  return b.finish({residual ? b.op1("Add", {y, x}) : y}, {"y"});
}

TEST(RuntimeCnn, DepthwiseConv1dRunsOnADepthwiseKernel) {
  for (bool residual : {false, true})
    for (int threads : {1, 2})
      for (const runtime::StepInfo& s : run_checked(conformer_conv(residual), threads))
        if (s.kind == "conv") EXPECT_EQ(s.signature.find("gemm"), std::string::npos) << s.signature;
}

// Pad(x, pads, value) -> Conv, the convolution with pads `own` and `stride`, a
// Relu after: a TCN's causal Conv1d (F.pad on the left), TensorFlow's asymmetric
// "same" padding ported to 2-D, a dilated 3-D one.
Graph padded_conv(std::vector<int64_t> xd, std::vector<int64_t> pads, std::vector<int64_t> own, int64_t stride,
                  int64_t dilation, float value, bool mode_reflect = false) {
  GraphBuilder b;
  Value x = b.input("x", f32(xd));
  const size_t sp = xd.size() - 2;
  std::vector<int64_t> wd = {8, xd[1]};
  for (size_t i = 0; i < sp; ++i) wd.push_back(3);
  std::vector<Value> pad_in = {x, b.constant(Tensor::from_i64(DType::Int64, {static_cast<int64_t>(pads.size())}, pads))};
  if (value != 0.0f || mode_reflect) pad_in.push_back(b.constant(Tensor::scalar_f32(value)));
  Attributes pa;
  if (mode_reflect) pa.set("mode", std::string("reflect"));
  Value p = b.op1("Pad", pad_in, pa);
  Value y = b.op1("Conv", {p, b.constant(random_tensor(wd, 21)), b.constant(random_tensor({8}, 22))},
                  {{"pads", own},
                   {"strides", std::vector<int64_t>(sp, stride)},
                   {"dilations", std::vector<int64_t>(sp, dilation)}});
  return b.finish({b.op1("Relu", {y})}, {"y"});
}

TEST(RuntimeCnn, BatchNorm1dOnAPlainInputRunsAsFourD) {
  // BatchNorm1d over [N, C, L] (PatchTST's, after a Transpose) runs on a [N, C, L, 1]
  // view: oneDNN has only its reference kernel for the 3-D plain layout (5.5x as
  // slow). The Relu after one of them is still taken into the same pass.
  GraphBuilder b;
  Value x = b.input("x", f32({7, 11, 64}));
  auto bn = [&](Value v, uint64_t seed) {
    Tensor var = random_tensor({64}, seed + 3);
    std::vector<double> pv = var.to_f64();
    for (double& d : pv) d = d * d + 0.5;
    return b.op1("BatchNormalization", {v, b.constant(random_tensor({64}, seed)), b.constant(random_tensor({64}, seed + 1)),
                                        b.constant(random_tensor({64}, seed + 2)),
                                        b.constant(Tensor::from_f64(DType::Float32, {64}, pv))});
  };
  Value t = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value y = b.op1("Relu", {bn(t, 1)});
  Value z = bn(y, 11);
  Graph g = b.finish({z}, {"z"});
  for (int threads : {1, 2}) {
    int bns = 0;
    for (const runtime::StepInfo& s : run_checked(g, threads))
      if (s.kind == "batchnorm") {
        ++bns;
        EXPECT_NE(s.signature.find("7x64x11x1"), std::string::npos) << s.signature;
      }
    EXPECT_EQ(bns, 2);
  }
}

TEST(RuntimeCnn, ZeroPadBeforeAConvolutionBecomesItsPadding) {
  struct Case {
    std::vector<int64_t> xd, pads, own;
    int64_t stride, dilation;
  };
  const std::vector<Case> cases = {
      {{1, 6, 50}, {0, 0, 4, 0, 0, 0}, {0, 0}, 1, 2},                          // causal, dilated
      {{2, 5, 13, 11}, {0, 0, 0, 1, 0, 0, 1, 2}, {1, 0, 1, 0}, 2, 1},          // asymmetric, own pads, stride 2
      {{1, 4, 6, 7, 5}, {0, 0, 1, 2, 0, 0, 0, 1, 2, 2}, {0, 0, 0, 0, 0, 0}, 1, 2}};  // 3-D
  for (const Case& k : cases) {
    SCOPED_TRACE(to_string(k.xd));
    for (int threads : {1, 2}) {
      const auto steps = run_checked(padded_conv(k.xd, k.pads, k.own, k.stride, k.dilation, 0.0f), threads);
      EXPECT_EQ(count_kind(steps, "pad"), 0u);
      EXPECT_EQ(count_kind(steps, "conv"), 1u);
    }
  }
  // Not zeros, or not constant: the Pad runs as its own step.
  EXPECT_EQ(count_kind(run_checked(padded_conv({1, 6, 50}, {0, 0, 4, 0, 0, 0}, {0, 0}, 1, 1, 0.5f), 1), "pad"), 1u);
  EXPECT_EQ(count_kind(run_checked(padded_conv({1, 6, 50}, {0, 0, 2, 0, 0, 2}, {0, 0}, 1, 1, 0.0f, true), 1), "conv"), 1u);
}

}  // namespace
}  // namespace isomer
