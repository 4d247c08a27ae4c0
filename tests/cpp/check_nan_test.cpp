// The output check and NaN: an element NaN in both the original's and the optimized
// graph's outputs proves nothing about their agreement, so it is not counted as a match.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "check/compare.h"

namespace isomer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f32(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_f64(DType::Float32, {n}, v);
}

TEST(CheckNaN, AnOutputNaNEverywhereInBothIsNotAMatch) {
  CheckResult r = compare_outputs({f32({1, 2}), f32({kNaN, kNaN})}, {f32({1, 2}), f32({kNaN, kNaN})}, {"a", "b"}, 1e-3);
  EXPECT_EQ(r.status, CheckResult::Status::Skipped);
  EXPECT_NE(r.reason.find("output 'b' is NaN at every element"), std::string::npos) << r.reason;
}

TEST(CheckNaN, SharedNaNElementsAreCountedAndLeftOut) {
  CheckResult r = compare_outputs({f32({1, kNaN, 3})}, {f32({1, kNaN, 3})}, {"y"}, 1e-3);
  EXPECT_EQ(r.status, CheckResult::Status::Passed);
  EXPECT_NE(r.reason.find("1 of 3 elements of output 'y' are NaN in both"), std::string::npos) << r.reason;
  // The numbers beside the NaN are still compared.
  EXPECT_EQ(compare_outputs({f32({1, kNaN, 3})}, {f32({1, kNaN, 4})}, {"y"}, 1e-3).status, CheckResult::Status::Failed);
}

TEST(CheckNaN, NaNOnOneSideOnlyIsAMismatch) {
  EXPECT_EQ(compare_outputs({f32({kNaN, kNaN})}, {f32({0, kNaN})}, {"y"}, 1e-3).status, CheckResult::Status::Failed);
  EXPECT_EQ(compare_outputs({f32({1, 2})}, {f32({1, 2})}, {"y"}, 1e-3).reason, "");
}

}  // namespace
}  // namespace isomer
