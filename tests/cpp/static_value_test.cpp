// eval/static_value.h: values that constants and static shapes decide, and those
// they do not.
#include <gtest/gtest.h>

#include "eval/static_value.h"
#include "ir/graph.h"

namespace isomer {
namespace {

TEST(StaticValue, ShapeArithmeticOfAStaticInputIsKnown) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({3, 40})});
  Value dim = b.op1("Gather", {b.op1("Shape", {x}), b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{1}))});
  Value k = b.op1("Div", {dim, b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{4}))});
  std::optional<Tensor> v = static_value(k);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->dims(), std::vector<int64_t>{});
  EXPECT_EQ(v->i64_at(0), 10);
  EXPECT_EQ(static_value(b.constant(Tensor::vector_i64({5})))->i64_at(0), 5);
}

TEST(StaticValue, DataAndSymbolicDimsAreNotKnown) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Int64, make_shape({3})});
  Value y = b.input("y", {DType::Float32, {Dim::sym("n"), Dim(4)}});
  EXPECT_FALSE(static_value(x).has_value());
  EXPECT_FALSE(static_value(b.op1("Neg", {x})).has_value());  // the input's values
  EXPECT_FALSE(static_value(b.op1("Shape", {y})).has_value());  // a symbolic dim
}

}  // namespace
}  // namespace isomer
