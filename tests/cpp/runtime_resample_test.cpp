// The upsampling lowerings (lower_resample.cpp, lower_resize.cpp) against the reference evaluator on
// random geometries from fixed seeds: ConvTranspose on oneDNN's deconvolution with
// fused post-ops, Resize on oneDNN's resampling or isomer's own kernel, the pixel
// shuffles as strided copies. None may leave a step to the reference kernel.
#include <gtest/gtest.h>

#include <random>

#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;
using testing::run_against_reference;

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

void expect_native(const std::vector<runtime::StepInfo>& steps, const std::string& what) {
  for (const runtime::StepInfo& s : steps) {
    EXPECT_NE(s.kind, "reference") << what << ": " << s.label;
    EXPECT_NE(s.kind, "onnxruntime") << what << ": " << s.label;
  }
}

TEST(RuntimeResample, ConvTransposeRandomGeometries) {
  std::mt19937_64 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t r = trial % 6 == 5 ? 1 : trial % 6 == 4 ? 3 : 2, G = pick(1, 2), Cg = pick(1, 4), Mg = pick(1, 4);
    std::vector<int64_t> xd{pick(1, 2), G * Cg}, wd{G * Cg, Mg}, strides, dil, pads(2 * r), op;
    for (int64_t i = 0; i < r; ++i) {
      xd.push_back(pick(1, 6));
      wd.push_back(pick(1, 4));
      strides.push_back(pick(1, 3));
      dil.push_back(pick(1, 2));
      op.push_back(pick(0, std::max(strides.back(), dil.back()) - 1));
      pads[i] = pick(0, (wd.back() - 1) * dil.back());
      pads[r + i] = pick(0, (wd.back() - 1) * dil.back());
      const int64_t full = strides.back() * (xd.back() - 1) + op.back() + (wd.back() - 1) * dil.back() + 1;
      pads[r + i] = std::min(pads[r + i], full - 1 - pads[i]);  // at least one output pixel
    }
    GraphBuilder b;
    Value x = b.input("x", f32(xd));
    const bool runtime_weights = trial % 4 == 3;
    Value w = runtime_weights ? b.input("w", f32(wd)) : b.constant(random_tensor(wd, 100 + trial));
    std::vector<Value> in{x, w};
    if (trial % 2 == 0) in.push_back(b.constant(random_tensor({G * Mg}, 200 + trial)));
    Attributes a{{"strides", strides}, {"dilations", dil}, {"pads", pads}, {"output_padding", op}};
    if (G > 1) a.set("group", G);
    Value y = b.op1("ConvTranspose", in, a);
    if (trial % 3 == 0) y = b.op1("Relu", {y});
    const std::string what = "trial " + std::to_string(trial) + " x" + to_string(xd) + " w" + to_string(wd) + " s" +
                              to_string(strides) + " d" + to_string(dil) + " p" + to_string(pads) + " op" +
                              to_string(op) + " g" + std::to_string(G);
    SCOPED_TRACE(what);
    // (output_padding beyond the far padding pads the input with zeros for oneDNN)
    expect_native(run_against_reference(b.finish({y}, {"y"})), what);
  }
}

// Kernel = stride, no padding (UNet's up-convolutions): a 1x1 convolution and a copy,
// with an activation fused, read by a concatenation and a convolution.
TEST(RuntimeResample, ConvTransposeWithKernelEqualToStride) {
  for (int64_t s : {2, 3}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1 + (s == 3), 24, 5, 7}));
    Value w = b.constant(random_tensor({24, 16, s, s}, 40 + s));
    std::vector<Value> in{x, w};
    if (s == 2) in.push_back(b.constant(random_tensor({16}, 50)));
    Value up = b.op1("Relu", {b.op1("ConvTranspose", in, {{"strides", std::vector<int64_t>{s, s}}})});
    Value skip = b.input("skip", f32({1 + (s == 3), 8, 5 * s, 7 * s}));
    Value cat = b.op1("Concat", {skip, up}, {{"axis", int64_t{1}}});
    Value y = b.op1("Conv", {cat, b.constant(random_tensor({8, 24, 3, 3}, 60))},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    const std::vector<runtime::StepInfo> steps = run_against_reference(b.finish({y, up}, {"y", "up"}));
    expect_native(steps, "stride " + std::to_string(s));
    bool shuffled = false;
    for (const runtime::StepInfo& st : steps) shuffled = shuffled || st.signature.find("deconv as 1x1 conv") == 0;
    EXPECT_TRUE(shuffled) << "stride " << s;
  }
}

// Every mode and coordinate transformation the runtime takes, upsampling and
// downsampling, by scales and by sizes.
TEST(RuntimeResample, ResizeModesAndCoordinates) {
  const std::vector<std::string> coords = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                           "half_pixel_symmetric", "tf_half_pixel_for_nn"};
  const std::vector<std::string> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int trial = 0;
  for (const std::string mode : {"nearest", "linear", "cubic"})
    for (const std::string& coord : coords) {
      if (coord == "tf_half_pixel_for_nn" && mode != "nearest") continue;
      for (const std::vector<double>& scales : {std::vector<double>{1, 1, 2, 2}, std::vector<double>{1, 1, 0.6, 1.7},
                                                std::vector<double>{1, 1, 3, 0.5}}) {
        ++trial;
        GraphBuilder b;
        Value x = b.input("x", f32({1, 3, 5, 6}));
        Attributes a{{"mode", mode}, {"coordinate_transformation_mode", coord}};
        // (tf_half_pixel_for_nn rounding up moves even unscaled axes by one pixel: the
        // reference kernel's case, left out here)
        if (mode == "nearest") a.set("nearest_mode", coord == "tf_half_pixel_for_nn" ? "floor" : nearest[trial % 4]);
        if (mode == "cubic" && trial % 2) a.set("exclude_outside", int64_t{1});
        Value s = b.constant(Tensor::from_f64(DType::Float32, {4}, scales));
        Value y = trial % 3 == 0
                      ? b.op1("Resize", {x, Value{}, Value{}, b.constant(Tensor::vector_i64({1, 3, 9, 4}))}, a)
                      : b.op1("Resize", {x, Value{}, s}, a);
        if (trial % 4 == 1) y = b.op1("Relu", {y});
        const std::string what = mode + " " + coord + " " + std::to_string(trial);
        SCOPED_TRACE(what);
        expect_native(run_against_reference(b.finish({y}, {"y"})), what);
      }
    }
}

// A Resize after a convolution reads its (blocked) output as it is, and an Add after
// it is fused; a 5-D (trilinear) resize; one of rank 3.
TEST(RuntimeResample, ResizeBetweenConvolutionsAndOtherRanks) {
  GraphBuilder b;
  Value x = b.input("x", f32({1, 16, 32, 32}));
  Value c = b.op1("Conv", {x, b.constant(random_tensor({96, 16, 3, 3}, 3))}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value up = b.op1("Resize", {c, Value{}, b.constant(Tensor::from_f64(DType::Float32, {4}, std::vector<double>{1, 1, 2, 2}))},
                   {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                    {"nearest_mode", std::string("floor")}});
  Value skip = b.input("skip", f32({1, 96, 64, 64}));
  Value sum = b.op1("Add", {up, skip});
  Value v = b.input("v", f32({1, 2, 3, 4, 5}));
  Value tri = b.op1("Resize", {v, Value{}, Value{}, b.constant(Tensor::vector_i64({1, 2, 6, 8, 7}))},
                    {{"mode", std::string("linear")}});
  Value s = b.input("s", f32({2, 3, 7}));
  Value line = b.op1("Resize", {s, Value{}, Value{}, b.constant(Tensor::vector_i64({2, 3, 15}))},
                     {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}});
  const std::vector<runtime::StepInfo> steps = run_against_reference(b.finish({sum, tri, line}, {"sum", "tri", "line"}));
  expect_native(steps, "mixed");
  bool onednn = false;  // the convolution's output is channel-blocked or channel-last
  for (const runtime::StepInfo& s : steps) onednn = onednn || s.kind == "resample";
  EXPECT_TRUE(onednn);
}

TEST(RuntimeResample, DepthToSpaceAndSpaceToDepth) {
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t bs = 2 + trial % 2;
    GraphBuilder b;
    Value x = b.input("x", f32({1 + trial % 2, 2 * bs * bs, 3, 4}));
    Attributes a{{"blocksize", bs}};
    if (trial % 3 == 1) a.set("mode", std::string("CRD"));
    Value d2s = b.op1("DepthToSpace", {x}, a);
    Value s2d = b.op1("SpaceToDepth", {d2s}, {{"blocksize", bs}});
    // After a convolution: its blocked output is read as a plain tensor.
    Value c = b.op1("Conv", {x, b.constant(random_tensor({8, 2 * bs * bs, 1, 1}, 9))});
    Value d2 = b.op1("DepthToSpace", {c}, {{"blocksize", int64_t{2}}});
    expect_native(run_against_reference(b.finish({d2s, s2d, d2}, {"d2s", "s2d", "d2"})), "trial " + std::to_string(trial));
  }
}

}  // namespace
}  // namespace isomer
