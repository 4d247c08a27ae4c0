// Tests of the entries that work along axes (reduce.cpp's ReduceMax..ReduceLogSumExp,
// scan.cpp's ArgMax, ArgMin and CumSum, normalization.cpp's LogSoftmax, RMS-, Group-
// and InstanceNormalization, pool.cpp's GlobalMaxPool): results against values
// worked out by hand, shape rules, and field semantics where they exist.
#include "ops_nn_util.h"

namespace isomer {
namespace {
using namespace nn_test;

Tensor i64_tensor(const Dims& d, const std::vector<int64_t>& v) { return Tensor::from_i64(DType::Int64, d, v); }
Attributes axes(std::vector<int64_t> a, int64_t keepdims = 1) { return {{"axes", a}, {"keepdims", keepdims}}; }

// [[1, -2, 3], [-4, 5, 0.5]]
const Vec kX = {1, -2, 3, -4, 5, 0.5};

TEST(OpsReduceMore, EachReductionAlongEachAxis) {
  const Tensor x = f64_tensor({2, 3}, kX);
  expect_near(run("ReduceMax", {x}, axes({1})), {2, 1}, {3, 5});
  expect_near(run("ReduceMin", {x}, axes({0}, 0)), {3}, {-4, -2, 0.5});
  expect_near(run("ReduceProd", {x}, axes({1}, 0)), {2}, {-6, -10});
  expect_near(run("ReduceSumSquare", {x}, axes({-1}, 0)), {2}, {14, 41.25});
  expect_near(run("ReduceL1", {x}, axes({1}, 0)), {2}, {6, 9.5});
  expect_near(run("ReduceL2", {x}, axes({1}, 0)), {2}, {std::sqrt(14.0), std::sqrt(41.25)});
  expect_near(run("ReduceLogSum", {f64_tensor({2}, {1, 2})}, axes({0}, 0)), {}, {std::log(3.0)});
  // Every axis when none are given; log-sum-exp stays exact for large values.
  expect_near(run("ReduceMax", {x}), {1, 1}, {5});
  expect_near(run("ReduceLogSumExp", {f64_tensor({2}, {1000, 1000})}, axes({0}, 0)), {}, {1000 + std::log(2.0)},
              1e-9);
  // Integers reduce exactly.
  EXPECT_EQ(run("ReduceMax", {i64_tensor({3}, {int64_t{1} << 60, 3, -1})}, axes({0}, 0)).i64_at(0), int64_t{1} << 60);
  expect_error([&] { run("ReduceMax", {x}, axes({2})); }, "axis");
}

TEST(OpsReduceMore, FieldSemanticsOfThePolynomialReductions) {
  const Tensor x = f64_tensor({2, 3}, {1, -2, 3, -4, 5, 2});
  expect_field_matches_float(one_op("ReduceSumSquare", {x}, axes({1})));
  expect_field_matches_float(one_op("ReduceProd", {x}, axes({0}, 0)));
  EXPECT_EQ(get_op("ReduceMax").eval_field, nullptr);  // piecewise: symbolic semantics only
  EXPECT_NE(get_op("ReduceMax").eval_sym, nullptr);
}

TEST(OpsScan, ArgMaxAndArgMinWithTiesAndLastIndex) {
  // [[1, 3, 3], [7, 0, 0]]
  const Tensor x = f64_tensor({2, 3}, {1, 3, 3, 7, 0, 0});
  Tensor am = run("ArgMax", {x}, {{"axis", int64_t{1}}});
  EXPECT_EQ(am.dtype(), DType::Int64);
  expect_near(am, {2, 1}, {1, 0});
  expect_near(run("ArgMax", {x}, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}), {2, 1}, {2, 0});
  expect_near(run("ArgMin", {x}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}}), {2}, {0, 1});
  expect_near(run("ArgMin", {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}),
              {2}, {0, 2});
  expect_near(run("ArgMax", {x}), {1, 3}, {1, 0, 0});  // axis 0 by default
  // A NaN wins both (the first one), as NumPy's argmax and argmin.
  const Tensor n = f64_tensor({4}, {1, std::nan(""), 5, std::nan("")});
  expect_near(run("ArgMax", {n}, {{"keepdims", int64_t{0}}}), {}, {1});
  expect_near(run("ArgMin", {n}, {{"keepdims", int64_t{0}}}), {}, {1});
  expect_error([&] { run("ArgMax", {f64_tensor({0}, {})}); }, "empty");
}

TEST(OpsScan, CumSumForwardReverseExclusive) {
  const Tensor x = f64_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto axis = [](int64_t a) { return Tensor::from_i64(DType::Int32, {}, std::vector<int64_t>{a}); };
  expect_near(run("CumSum", {x, axis(1)}), {2, 3}, {1, 3, 6, 4, 9, 15});
  expect_near(run("CumSum", {x, axis(0)}), {2, 3}, {1, 2, 3, 5, 7, 9});
  expect_near(run("CumSum", {x, axis(-1)}, {{"exclusive", int64_t{1}}}), {2, 3}, {0, 1, 3, 0, 4, 9});
  expect_near(run("CumSum", {x, axis(1)}, {{"reverse", int64_t{1}}}), {2, 3}, {6, 5, 3, 15, 11, 6});
  expect_near(run("CumSum", {x, axis(1)}, {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}), {2, 3},
              {5, 3, 0, 11, 6, 0});
  expect_near(run("CumSum", {i64_tensor({4}, {1, 1, 0, 1}), axis(0)}), {4}, {1, 2, 2, 3});  // position ids
  expect_field_matches_float(one_op("CumSum", {x, i64_tensor({}, {1})}));
  expect_error([&] { run("CumSum", {x, axis(2)}); }, "axis");
}

// ---- normalizations ------------------------------------------------------------------

TEST(OpsNormalizeMore, LogSoftmaxIsExactForLargeLogits) {
  const double l = std::log(1 + std::exp(-1.0));
  expect_near(run("LogSoftmax", {f64_tensor({2, 2}, {0, 1, 1000, 999})}), {2, 2}, {-1 - l, -l, -l, -1 - l}, 1e-9);
  expect_near(run("LogSoftmax", {f64_tensor({2, 2}, {0, 1, 2, 3})}, {{"axis", int64_t{0}}}), {2, 2},
              {-2 - std::log(1 + std::exp(-2.0)), -2 - std::log(1 + std::exp(-2.0)), -std::log(1 + std::exp(-2.0)),
               -std::log(1 + std::exp(-2.0))},
              1e-9);
}

TEST(OpsNormalizeMore, RmsNormalizationScalesByTheRootMeanSquare) {
  // Rows [3, 4] and [1, -1]: mean squares 12.5 and 1.
  const Tensor x = f64_tensor({2, 2}, {3, 4, 1, -1}), scale = f64_tensor({2}, {1, 2});
  const double r = 1 / std::sqrt(12.5 + 1e-5), s = 1 / std::sqrt(1 + 1e-5);
  expect_near(run("RMSNormalization", {x, scale}), {2, 2}, {3 * r, 8 * r, s, -2 * s}, 1e-9);
  // Over the last two axes of [1, 2, 2].
  const double t = 1 / std::sqrt((9 + 16 + 1 + 1) / 4.0 + 1e-5);
  expect_near(run("RMSNormalization", {f64_tensor({1, 2, 2}, {3, 4, 1, -1}), f64_tensor({1}, {1})},
                  {{"axis", int64_t{1}}}),
              {1, 2, 2}, {3 * t, 4 * t, t, -t}, 1e-9);
}

TEST(OpsNormalizeMore, GroupAndInstanceNormalization) {
  // [1, 4, 2]: channels (1, 3), (5, 7) | (0, 2), (4, 10).
  const Tensor x = f64_tensor({1, 4, 2}, {1, 3, 5, 7, 0, 2, 4, 10});
  const Tensor scale = f64_tensor({4}, {1, 2, 1, 1}), bias = f64_tensor({4}, {0, 0, 1, 0});
  // Two groups of two channels: group 0 has mean 4, variance 5; group 1 mean 4, variance 14.
  const double a = 1 / std::sqrt(5 + 1e-5), b = 1 / std::sqrt(14 + 1e-5);
  expect_near(run("GroupNormalization", {x, scale, bias}, {{"num_groups", int64_t{2}}}), {1, 4, 2},
              {-3 * a, -1 * a, 2 * a, 6 * a, -4 * b + 1, -2 * b + 1, 0, 6 * b}, 1e-9);
  // A group per channel: channel (p, q) becomes -+d / sqrt(d^2 + eps), d = (q - p) / 2.
  const double e = 1 / std::sqrt(1 + 1e-5), f = 3 / std::sqrt(9 + 1e-5);
  expect_near(run("InstanceNormalization", {x, scale, bias}), {1, 4, 2},
              {-e, e, -2 * e, 2 * e, 1 - e, 1 + e, -f, f}, 1e-9);
  expect_error([&] { run("GroupNormalization", {x, scale, bias}, {{"num_groups", int64_t{3}}}); }, "divide");
  expect_error([&] { run("InstanceNormalization", {x, f64_tensor({2}, {1, 1}), bias}); }, "channels");
}

TEST(OpsPoolMore, GlobalMaxPool) {
  expect_near(run("GlobalMaxPool", {f64_tensor({1, 2, 2, 2}, {1, 5, -3, 2, -1, -2, -8, -4})}), {1, 2, 1, 1}, {5, -1});
}

}  // namespace
}  // namespace isomer
