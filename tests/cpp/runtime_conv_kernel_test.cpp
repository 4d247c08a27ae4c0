// Which of oneDNN's kernels a convolution runs on where a channel-blocked layout
// is on offer (a blocked part of a Split it reads, a blocked Concat it writes a
// part of): its blocked direct kernel, or the kernel oneDNN picks for `any`
// (brgconv, channels last, on AVX-512) behind a reorder or copy, by the
// convolution's work per element moved. Every case against the reference
// evaluator, at odd channels, odd spatial dims, stride 2, asymmetric padding and
// batch 2.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "runtime/runtime.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

struct ConvSpec {
  int64_t ic = 0, oc = 0, k = 3, stride = 1;
  std::vector<int64_t> pads{1, 1, 1, 1};
};

Value conv(GraphBuilder& b, Value x, const ConvSpec& s, uint64_t seed) {
  return b.op1("Conv",
               {x, b.constant(random_tensor({s.oc, s.ic, s.k, s.k}, seed)), b.constant(random_tensor({s.oc}, seed + 1))},
               {{"pads", s.pads}, {"strides", std::vector<int64_t>{s.stride, s.stride}}});
}

std::vector<Value> split(GraphBuilder& b, Value x, const std::vector<int64_t>& sizes) {
  return b.op("Split", {x, b.constant(Tensor::vector_i64(sizes))}, {{"axis", int64_t{1}}}, sizes.size());
}

// The implementation of the convolution step that writes a tensor of `dims`
// ("1x128x8x8"), as its signature names it ("" if no step does).
std::string impl_writing(const std::vector<runtime::StepInfo>& steps, const std::string& dims) {
  for (const runtime::StepInfo& s : steps)
    if (const auto at = s.signature.find(" impl "); s.kind == "conv" && at != std::string::npos &&
                                                      s.signature.find(" dst " + dims + ":") != std::string::npos)
      return s.signature.substr(at + 6, s.signature.find(' ', at + 6) - at - 6);
  return "";
}

bool brgconv(const std::string& impl) { return impl.rfind("brgconv:", 0) == 0; }

// The implementation oneDNN picks for convolution `s` alone, reading a plain input of `in`.
std::string impl_alone(const std::vector<int64_t>& in, const ConvSpec& s, const std::string& out_dims) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape(in)});
  Graph g = b.finish({conv(b, x, s, 41)}, {"y"});
  runtime::RuntimeOptions o;
  o.threads = 1;
  return impl_writing(runtime::compile(g, o)->steps(), out_dims);
}

// A merged 1x1 convolution split on block boundaries (its parts are views of its
// channel blocks); one part is read by a 3x3 convolution of many multiply-adds per
// input element, which takes the kernel oneDNN picks for `any` where that is
// brgconv, the other by a small one that reads its part as it is.
TEST(RuntimeConvKernel, WideConvolutionOfABlockedPartTakesBrgconv) {
  for (const std::vector<int64_t>& hw : {std::vector<int64_t>{8, 8}, std::vector<int64_t>{7, 9}}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 16, hw[0], hw[1]})});
    Value merged = conv(b, x, {16, 96, 1, 1, {0, 0, 0, 0}}, 1);
    std::vector<Value> p = split(b, merged, {32, 64});
    const ConvSpec wide{64, 136, 3, 1, {1, 1, 1, 1}}, narrow{32, 16, 3, 1, {1, 1, 1, 1}};
    Graph g = b.finish({conv(b, p[1], wide, 3), conv(b, p[0], narrow, 5)}, {"wide", "narrow"});
    auto steps = testing::run_against_reference(g);
    const std::string at = "x" + std::to_string(hw[0]) + "x" + std::to_string(hw[1]);
    const std::string alone = impl_alone({1, 64, hw[0], hw[1]}, wide, "1x136" + at);
    if (brgconv(alone)) {
      EXPECT_TRUE(brgconv(impl_writing(steps, "1x136" + at))) << impl_writing(steps, "1x136" + at);
    }
    // The narrow one: 16 x 9 multiply-adds per element read, under a reorder's worth.
    const std::string small = impl_writing(steps, "1x16" + at);
    EXPECT_FALSE(small.empty());
    if (brgconv(alone)) EXPECT_FALSE(brgconv(small)) << small;
  }
}

// Convolutions of many multiply-adds per output element writing parts of a
// channel Concat: on brgconv (channels last), each part copied into the Concat,
// rather than in place on the blocked kernel.
TEST(RuntimeConvKernel, WideConvolutionsOfAConcatTakeBrgconv) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 72, 9, 9})});
  const ConvSpec a{72, 32, 3, 1, {1, 1, 1, 1}}, c{72, 48, 3, 1, {1, 1, 1, 1}};
  Value cat = b.op1("Concat", {conv(b, x, a, 1), conv(b, x, c, 3)}, {{"axis", int64_t{1}}});
  Graph g = b.finish({b.op1("Relu", {cat})}, {"y"});
  auto steps = testing::run_against_reference(g);
  if (brgconv(impl_alone({1, 72, 9, 9}, a, "1x32x9x9"))) {
    EXPECT_TRUE(brgconv(impl_writing(steps, "1x32x9x9"))) << impl_writing(steps, "1x32x9x9");
  }
}

// A batch of small images under large weights (ResNet-50's last stage at a small
// input size, batch above 1): brgconv would read its weights once per image, so
// the direct kernel runs on the same channels-last tensors; from 32 output pixels
// per image, or at batch 1, brgconv stays.
TEST(RuntimeConvKernel, BatchOfSmallImagesUnderLargeWeightsLeavesBrgconv) {
  const ConvSpec wide{256, 256, 3, 1, {1, 1, 1, 1}};
  if (!brgconv(impl_alone({1, 256, 5, 5}, wide, "1x256x5x5"))) GTEST_SKIP() << "oneDNN picks no brgconv here";
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({3, 256, 5, 5})});
  Graph g = b.finish({b.op1("Relu", {conv(b, x, wide, 1)})}, {"y"});
  auto steps = testing::run_against_reference(g);
  const std::string impl = impl_writing(steps, "3x256x5x5");
  EXPECT_EQ(impl.rfind("jit:", 0), 0u) << impl;
  EXPECT_TRUE(brgconv(impl_alone({2, 256, 7, 7}, wide, "2x256x7x7")));
}

// The same graphs' outputs at stride 2, asymmetric padding, odd channels and batch 2
// (where no part is a view: a batch's channel part is no dense run).
TEST(RuntimeConvKernel, OddShapesMatchTheReference) {
  for (int64_t batch : {1, 2})
    for (const ConvSpec& wide : {ConvSpec{64, 67, 3, 2, {1, 0, 0, 1}}, ConvSpec{64, 128, 3, 1, {0, 1, 2, 1}},
                                 ConvSpec{64, 40, 5, 2, {2, 2, 1, 1}}}) {
      GraphBuilder b;
      Value x = b.input("x", {DType::Float32, make_shape({batch, 16, 11, 13})});
      Value merged = conv(b, x, {16, 80, 1, 1, {0, 0, 0, 0}}, 1);
      std::vector<Value> p = split(b, merged, {16, 64});
      Value y = conv(b, p[1], wide, 3);
      Value cat = b.op1("Concat", {conv(b, p[1], wide, 7), b.op1("Relu", {y})}, {{"axis", int64_t{1}}});
      Graph g = b.finish({cat, conv(b, p[0], {16, 24, 3, 1, {1, 1, 1, 1}}, 5)}, {"cat", "p0"});
      testing::run_against_reference(g);
    }
}

}  // namespace
}  // namespace isomer
