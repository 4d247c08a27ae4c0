// Tests of trig.cpp's entries (Tan, Asin, ..., Atanh, Softsign) and of Size: values
// against the C library's at chosen points, and the fused pointwise kernels against
// the reference evaluator.
#include <cmath>

#include "ops_nn_util.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {
using namespace nn_test;

TEST(OpsTrig, ValuesAtChosenPoints) {
  const Tensor half = f64_tensor({3}, {-0.5, 0, 0.5});
  expect_near(run("Tan", {half}), {3}, {std::tan(-0.5), 0, std::tan(0.5)});
  expect_near(run("Asin", {half}), {3}, {-M_PI / 6, 0, M_PI / 6}, 1e-12);
  expect_near(run("Acos", {half}), {3}, {2 * M_PI / 3, M_PI / 2, M_PI / 3}, 1e-12);
  expect_near(run("Atan", {f64_tensor({2}, {1, -1})}), {2}, {M_PI / 4, -M_PI / 4}, 1e-12);
  expect_near(run("Sinh", {half}), {3}, {std::sinh(-0.5), 0, std::sinh(0.5)});
  expect_near(run("Cosh", {half}), {3}, {std::cosh(0.5), 1, std::cosh(0.5)});
  expect_near(run("Asinh", {f64_tensor({1}, {std::sinh(2.0)})}), {1}, {2}, 1e-12);
  expect_near(run("Acosh", {f64_tensor({1}, {std::cosh(2.0)})}), {1}, {2}, 1e-12);
  expect_near(run("Atanh", {half}), {3}, {-std::atanh(0.5), 0, std::atanh(0.5)});
  expect_near(run("Softsign", {f64_tensor({3}, {-3, 0, 1})}), {3}, {-0.75, 0, 0.5});
  EXPECT_TRUE(std::isnan(run("Asin", {f64_tensor({1}, {2})}).to_f64()[0]));
}

TEST(OpsTrig, SizeCountsElements) {
  const Tensor size = run("Size", {f64_tensor({2, 3, 4}, std::vector<double>(24, 0))});
  EXPECT_EQ(size.dtype(), DType::Int64);
  EXPECT_EQ(size.dims(), Dims{});
  EXPECT_EQ(size.to_i64(), std::vector<int64_t>{24});
}

// One fused kernel over all of them (inputs in (-1, 1) where every one is defined,
// Acosh on 1 + x^2), and Size of the input feeding the arithmetic.
TEST(OpsTrig, FusedKernelMatchesTheEvaluator) {
  GraphBuilder b;
  Value x = b.op1("Mul", {b.input("x", {DType::Float32, {4, 33}}), b.constant(Tensor::scalar_f32(0.9f))});
  Value sum = b.op1("Acosh", {b.op1("Add", {b.op1("Mul", {x, x}), b.constant(Tensor::scalar_f32(1))})});
  for (const char* op : {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "Softsign"})
    sum = b.op1("Add", {sum, b.op1(op, {x})});
  Value size = b.op1("Cast", {b.op1("Size", {x})}, {{"to", int64_t{1}}});
  Graph g = b.finish({b.op1("Mul", {sum, size})}, {"y"});
  for (const runtime::StepInfo& s : testing::run_against_reference(g, 1e-4)) {
    EXPECT_NE(s.kind, "reference") << s.label;
    EXPECT_NE(s.kind, "onnxruntime") << s.label;
  }
}

}  // namespace
}  // namespace isomer
