// nonfinite_weight reads each floating-point constant in place, in its own element
// type: the first NaN, or Inf in a tensor of more than one element, is named.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "pipeline/optimize.h"

namespace isomer {
namespace {

Graph graph_with_weight(const Tensor& w) {
  GraphBuilder b;
  Value x = b.input("x", w.type());
  return b.finish({b.op1("Add", {x, b.constant(w, "w")})}, {"y"});
}

TEST(NonfiniteWeight, FoundInEveryFloatTypeAtItsIndex) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
    std::vector<double> v(37, 0.25);
    EXPECT_EQ(nonfinite_weight(graph_with_weight(Tensor::from_f64(t, {37}, v))), "") << dtype_name(t);
    v[29] = nan;
    v[33] = inf;
    std::string what = nonfinite_weight(graph_with_weight(Tensor::from_f64(t, {37}, v)));
    EXPECT_NE(what.find("initializer 'w'"), std::string::npos) << what;
    EXPECT_NE(what.find("NaN at element 29"), std::string::npos) << dtype_name(t) << ": " << what;
    v[29] = 1;
    what = nonfinite_weight(graph_with_weight(Tensor::from_f64(t, {37}, v)));
    EXPECT_NE(what.find("Inf at element 33"), std::string::npos) << dtype_name(t) << ": " << what;
  }
  // A lone infinity is a bound (a mask's fill value), not a broken weight.
  EXPECT_EQ(nonfinite_weight(graph_with_weight(Tensor::from_f64(DType::Float16, {}, std::vector<double>{-inf}))), "");
  EXPECT_NE(nonfinite_weight(graph_with_weight(Tensor::from_f64(DType::Float16, {}, std::vector<double>{nan}))), "");
}

}  // namespace
}  // namespace isomer
