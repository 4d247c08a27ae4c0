// Float -> integer conversions of untrusted values (ir/float_to_int.h) and the Tensor
// conversions built on them: NaN, infinities and out-of-range values are either
// saturated (documented) or an Error, never undefined behaviour.
#include "ir/float_to_int.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eval/evaluator.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace isomer {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(FloatToInt, ExactWhereTheTypeHoldsTheValue) {
  EXPECT_EQ(float_to_int<int8_t>(-128.9), int8_t{-128});
  EXPECT_EQ(float_to_int<int8_t>(127.9), int8_t{127});
  EXPECT_EQ(float_to_int<int8_t>(-129.0), std::nullopt);
  EXPECT_EQ(float_to_int<int8_t>(128.0), std::nullopt);
  EXPECT_EQ(float_to_int<uint8_t>(-0.9), uint8_t{0});  // truncates toward zero first
  EXPECT_EQ(float_to_int<uint8_t>(-1.0), std::nullopt);
  EXPECT_EQ(float_to_int<int64_t>(-9223372036854775808.0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(float_to_int<int64_t>(9223372036854775808.0), std::nullopt);  // 2^63
  EXPECT_EQ(float_to_int<uint64_t>(18446744073709549568.0), uint64_t{18446744073709549568u});
  EXPECT_EQ(float_to_int<uint64_t>(18446744073709551616.0), std::nullopt);  // 2^64
  EXPECT_EQ(float_to_int<int32_t>(kNaN), std::nullopt);
  EXPECT_EQ(float_to_int<int32_t>(kInf), std::nullopt);
  EXPECT_EQ(float_to_int<int32_t>(-3.4e38), std::nullopt);
  EXPECT_EQ(exact_float_to_int<int32_t>(2.5), std::nullopt);
  EXPECT_EQ(exact_float_to_int<int32_t>(-7.0), -7);
}

TEST(FloatToInt, SaturateClampsAndRefusesNaN) {
  EXPECT_EQ(saturate_float_to_int<int8_t>(-3.4e38, "x"), -128);
  EXPECT_EQ(saturate_float_to_int<int8_t>(kInf, "x"), 127);
  EXPECT_EQ(saturate_float_to_int<uint16_t>(-5.0, "x"), 0);
  EXPECT_EQ(saturate_float_to_int<int64_t>(1e300, "x"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(saturate_float_to_int<int32_t>(-2.75, "x"), -2);
  EXPECT_THROW(saturate_float_to_int<int32_t>(kNaN, "x"), Error);
  try {
    checked_float_to_int<int16_t>(1e9, "Reshape shape");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Reshape shape: 1000000000 is outside the range of int16");
  }
}

TEST(FloatToInt, TensorConversionsWrapSaturateOrRefuse) {
  const std::vector<double> values = {-3.4e38, -300.7, -1.5, 0.0, 200.0, 3.4e38};
  // Saturate: numbers (bounds, fill values, Cast).
  Tensor s = Tensor::from_f64(DType::Int8, {6}, values, FloatToInt::Saturate);
  EXPECT_EQ(s.to_i64(), (std::vector<int64_t>{-128, -128, -1, 0, 127, 127}));
  // Wrap: integer results computed in double wrap like two's-complement arithmetic,
  // but a value beyond int64 has no such result.
  EXPECT_EQ(Tensor::from_f64(DType::Int8, {3}, std::vector<double>{-300.7, 200.0, -1.5}).to_i64(),
            (std::vector<int64_t>{-44, -56, -1}));
  EXPECT_THROW(Tensor::from_f64(DType::Int8, {6}, values), Error);
  EXPECT_THROW(Tensor::from_f64(DType::Int64, {1}, std::vector<double>{kInf}), Error);
  EXPECT_THROW(Tensor::from_f64(DType::Int32, {1}, std::vector<double>{kNaN}, FloatToInt::Saturate), Error);
  EXPECT_EQ(Tensor::from_f64(DType::UInt64, {1}, std::vector<double>{1e30}, FloatToInt::Saturate).bytes(),
            std::string(8, '\xff'));
  // ONNX: only +-0 casts to false; NaN and infinities are true.
  EXPECT_EQ(Tensor::from_f64(DType::Bool, {4}, std::vector<double>{-0.0, kNaN, -kInf, 0.5}).to_i64(),
            (std::vector<int64_t>{0, 1, 1, 1}));
  // A float element read as an integer must fit int64.
  Tensor f = Tensor::from_f64(DType::Float32, {3}, std::vector<double>{2.9, -1e30, kNaN});
  EXPECT_EQ(f.i64_at(0), 2);
  EXPECT_THROW(f.i64_at(1), Error);
  EXPECT_THROW(f.i64_at(2), Error);
  EXPECT_THROW(f.to_i64(), Error);
}

// Hostile dims: the element count must not overflow.
TEST(FloatToInt, TensorDimsThatOverflowAreRefused) {
  EXPECT_THROW(Tensor(DType::Float32, {int64_t{1} << 62, 4}, std::string()), Error);
  EXPECT_THROW(Tensor(DType::Float32, {int64_t{1} << 32, int64_t{1} << 32}, std::string()), Error);
  Tensor t(DType::Float32, {2}, std::string(8, '\0'));
  EXPECT_THROW(t.reshaped({int64_t{1} << 62, 4, 0, int64_t{1} << 62}), Error);
}

TEST(FloatToInt, CastToInt64GivesInt64MinWhereItHasNoValue) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (double v : {kNaN, kInf, -kInf, 1e19, -1e19, 9223372036854775808.0}) EXPECT_EQ(cast_float_to_int64(v), kMin);
  EXPECT_EQ(cast_float_to_int64(-9223372036854775808.0), kMin);
  EXPECT_EQ(cast_float_to_int64(-2.75), -2);
  EXPECT_EQ(cast_float_to_int64(9007199254740993.0), 9007199254740992);
}

// Each integer target as ONNX Runtime's Cast on x86: int32 and narrower through a 32-bit
// conversion (INT32_MIN where int32 has no value), then wrapped; uint64 past 2^63 through
// v - 2^63 (an infinity is 0, NaN 2^63).
TEST(FloatToInt, CastPerTargetAsOnnxRuntimeOnX86) {
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  for (double v : {kNaN, kInf, -kInf, 3e9, -2147483649.0, 1e19}) EXPECT_EQ(cast_float_to<int32_t>(v), kMin32);
  EXPECT_EQ(cast_float_to<int32_t>(-2147483648.5), kMin32);
  EXPECT_EQ(cast_float_to<int16_t>(3e9), 0);          // INT32_MIN wrapped, not 3e9 wrapped
  EXPECT_EQ(cast_float_to<int16_t>(70000.5), 4464);   // int32's 70000 wrapped
  EXPECT_EQ(cast_float_to<int8_t>(300.7), 44);
  EXPECT_EQ(cast_float_to<uint8_t>(-300.7), 212);
  EXPECT_EQ(cast_float_to<int64_t>(3e9), 3000000000);
  EXPECT_EQ(cast_float_to<uint32_t>(5e9), 705032704u);  // int64's 5e9 wrapped
  EXPECT_EQ(cast_float_to<uint64_t>(kNaN), uint64_t{1} << 63);
  EXPECT_EQ(cast_float_to<uint64_t>(kInf), 0u);
  EXPECT_EQ(cast_float_to<uint64_t>(-kInf), uint64_t{1} << 63);
  EXPECT_EQ(cast_float_to<uint64_t>(1e19), 10000000000000000000u);
  EXPECT_EQ(cast_float_to<uint64_t>(-3.0), ~uint64_t{2});
}

// Where ONNX leaves Cast's result undefined, the evaluator casts as the runtime does and
// as ONNX Runtime on x86 (cast_float_to): 300.5 and -1.0 are 44 and 255 as uint8, NaN and
// what int32 does not hold INT32_MIN, 0 once wrapped.
TEST(FloatToInt, CastGoesThroughInt32AsTheRuntimeDoes) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({6})});
  Attributes to;
  to.set("to", static_cast<int64_t>(DType::UInt8));
  Graph g = b.finish({b.op1("Cast", {x}, to)}, {"y"});
  Tensor in = Tensor::from_f64(DType::Float32, {6}, std::vector<double>{-1e10, 300.5, 7.9, 1e38, -1.0, NAN});
  // -1e10, 1e38 and NaN are INT32_MIN in int32, 0 as uint8: as ONNX Runtime.
  EXPECT_EQ(evaluate(g, {in})[0].to_i64(), (std::vector<int64_t>{0, 44, 7, 0, 255, 0}));
}

}  // namespace
}  // namespace isomer
