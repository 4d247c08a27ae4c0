// Layout and shape operators (ops/layout.cpp, ops/shape.cpp): shape rules with
// static and symbolic dims, float semantics against hand-computed results, field
// semantics equal to float semantics on small integer data, bit-exact copies of
// every dtype, errors, and the ONNX opset adapters.
#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <source_location>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"

namespace isomer {
namespace {

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

Tensor f32(Ints dims, Doubles v) { return Tensor::from_f64(DType::Float32, std::move(dims), v); }
Tensor i64(Ints v) { return Tensor::vector_i64(v); }
Tensor iota_f32(Ints dims) {
  Doubles v(static_cast<size_t>(num_elements(dims)));
  std::iota(v.begin(), v.end(), 0.0);
  return f32(std::move(dims), v);
}
TensorType type(DType t, Shape s) { return {t, std::move(s)}; }
Shape sym(std::initializer_list<Dim> dims) { return Shape(dims); }
const Tensor kOmitted{};  // an omitted optional operand

FieldArray to_field(const Tensor& t) {
  FieldArray a;
  a.dims = t.dims();
  for (int64_t v : t.to_i64()) a.data.push_back(Fp::from_signed(v));
  return a;
}

bool small_integers(const Tensor& t) {
  for (double v : t.to_f64())
    if (v != std::floor(v) || std::fabs(v) > 1e9) return false;
  return true;
}

// Builds op(x, operands...) with the operands as constants, checks the inferred
// types against the evaluated outputs, and, where all data are small integers,
// checks that the field semantics agree with the float semantics.
std::vector<Tensor> run(const std::string& op, const Tensor& x, const std::vector<Tensor>& operands,
                        Attributes attrs = {}, size_t num_outputs = 0, bool check_field = true) {
  GraphBuilder b;
  std::vector<Value> ins{b.input("x", x.type())};
  for (const Tensor& t : operands) ins.push_back(t.dtype() == DType::Undefined ? Value{} : b.constant(t));
  std::vector<Value> outs = b.op(op, ins, std::move(attrs), num_outputs);
  Graph g = b.finish(outs, std::vector<std::string>(outs.size(), "y"));
  std::vector<Tensor> res = evaluate(g, {x});
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(to_string(outs[i].type()), to_string(res[i].type())) << op;
  bool field = check_field && is_numeric(x.dtype()) && small_integers(x);
  for (const Tensor& t : operands) field = field && (t.dtype() == DType::Undefined || small_integers(t));
  if (field) {
    std::vector<FieldArray> fres = evaluate_field(g, {to_field(x)});
    for (size_t i = 0; i < res.size(); ++i) {
      FieldArray expect = to_field(res[i]);
      EXPECT_EQ(fres[i].dims, expect.dims) << op << " field output " << i;
      EXPECT_TRUE(fres[i].data == expect.data) << op << " field output " << i;
    }
  }
  return res;
}

Tensor run1(const std::string& op, const Tensor& x, const std::vector<Tensor>& operands, Attributes attrs = {}) {
  return run(op, x, operands, std::move(attrs)).at(0);
}

// Output type of op(x, operands...) without evaluating.
TensorType infer(const std::string& op, TensorType x, const std::vector<Tensor>& operands, Attributes attrs = {},
                 size_t num_outputs = 0, size_t which = 0) {
  GraphBuilder b;
  std::vector<Value> ins{b.input("x", std::move(x))};
  for (const Tensor& t : operands) ins.push_back(t.dtype() == DType::Undefined ? Value{} : b.constant(t));
  return b.op(op, ins, std::move(attrs), num_outputs).at(which).type();
}

std::string inferred(const std::string& op, TensorType x, const std::vector<Tensor>& operands, Attributes attrs = {}) {
  return to_string(infer(op, std::move(x), operands, std::move(attrs)));
}

// The message of the Error building op(x, operands...) throws ("" if none).
std::string build_error(const std::string& op, TensorType x, const std::vector<Tensor>& operands,
                        Attributes attrs = {}, size_t num_outputs = 0) {
  try {
    infer(op, std::move(x), operands, std::move(attrs), num_outputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_values(const Tensor& t, const Ints& dims, const Doubles& values,
                   std::source_location at = std::source_location::current()) {
  EXPECT_EQ(t.dims(), dims) << "checked at line " << at.line();
  EXPECT_EQ(t.to_f64(), values) << "checked at line " << at.line();
}

const TensorType kF23{DType::Float32, make_shape({2, 3})};

// ---- Concat ------------------------------------------------------------------------

TEST(OpsLayoutConcat, AxesAndValues) {
  GraphBuilder b;
  Value x = b.input("x", kF23);
  Value c = b.constant(f32({2, 1}, {10, 20}));
  Value y = b.op1("Concat", {x, c, x}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(to_string(y.type()), "f32[2,7]");
  Graph g = b.finish({y}, {"y"});
  Tensor in = iota_f32({2, 3});
  expect_values(evaluate(g, {in})[0], {2, 7}, {0, 1, 2, 10, 0, 1, 2, 3, 4, 5, 20, 3, 4, 5});
  FieldArray f = evaluate_field(g, {to_field(in)})[0];
  EXPECT_EQ(f.data[3], Fp(10));
  EXPECT_EQ(f.data[11], Fp(3));
  expect_values(run1("Concat", iota_f32({1, 2}), {}, {{"axis", int64_t{0}}}), {1, 2}, {0, 1});
}

TEST(OpsLayoutConcat, SymbolicDims) {
  GraphBuilder b;
  Value x = b.input("x", type(DType::Float32, sym({Dim::sym("N"), 2})));
  Value y = b.input("y", type(DType::Float32, sym({Dim::unknown(), Dim::sym("M")})));
  Value z = b.input("z", type(DType::Float32, sym({3, 0})));
  EXPECT_EQ(to_string(b.op1("Concat", {x, y}, {{"axis", int64_t{1}}}).type()), "f32[N,?]");
  EXPECT_EQ(to_string(b.op1("Concat", {x, y}, {{"axis", int64_t{0}}}).type()), "f32[?,2]");
  EXPECT_EQ(to_string(b.op1("Concat", {y, z}, {{"axis", int64_t{1}}}).type()), "f32[3,M]");
}

TEST(OpsLayoutConcat, Errors) {
  GraphBuilder b;
  Value x = b.input("x", kF23);
  Value w = b.input("w", type(DType::Float32, make_shape({3, 3})));
  Value i = b.input("i", type(DType::Int64, make_shape({2, 3})));
  EXPECT_THROW(b.op1("Concat", {x, w}, {{"axis", int64_t{1}}}), Error);
  EXPECT_THROW(b.op1("Concat", {x, i}, {{"axis", int64_t{0}}}), Error);
  EXPECT_THROW(b.op1("Concat", {x, x}, {{"axis", int64_t{2}}}), Error);
  EXPECT_THROW(b.op1("Concat", {x, x}), Error);  // axis is required
}

// ---- Split -------------------------------------------------------------------------

TEST(OpsLayoutSplit, SizesAndEqualParts) {
  Tensor x = iota_f32({2, 6});
  std::vector<Tensor> parts = run("Split", x, {i64({2, 4})}, {{"axis", int64_t{1}}});
  ASSERT_EQ(parts.size(), 2u);
  expect_values(parts[0], {2, 2}, {0, 1, 6, 7});
  expect_values(parts[1], {2, 4}, {2, 3, 4, 5, 8, 9, 10, 11});
  // Without sizes: equal parts for the outputs asked for (no field check: the
  // field evaluator does not know the output count).
  parts = run("Split", x, {}, {{"axis", int64_t{-1}}}, 3, /*check_field=*/false);
  ASSERT_EQ(parts.size(), 3u);
  expect_values(parts[2], {2, 2}, {4, 5, 10, 11});
  // Uneven implicit split (opset 18 rule): ceil(5/2) = 3, then the rest.
  parts = run("Split", iota_f32({5}), {}, {}, 2, false);
  expect_values(parts[0], {3}, {0, 1, 2});
  expect_values(parts[1], {2}, {3, 4});
  // Zero-size parts.
  parts = run("Split", f32({0}, {}), {i64({0, 0, 0})}, {});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].dims(), Ints({0}));
}

TEST(OpsLayoutSplit, ShapesAndErrors) {
  TensorType x = type(DType::Float32, sym({Dim::sym("N"), 6}));
  EXPECT_EQ(to_string(infer("Split", x, {i64({1, 5})}, {{"axis", int64_t{1}}}, 0, 1)), "f32[N,5]");
  EXPECT_EQ(to_string(infer("Split", x, {}, {}, 2, 1)), "f32[?,6]");
  EXPECT_EQ(to_string(infer("Split", x, {i64({3, 4})}, {}, 0, 1)), "f32[4,6]");  // static sizes, symbolic axis
  EXPECT_NE(build_error("Split", kF23, {i64({1, 1})}, {{"axis", int64_t{1}}}).find("add up"), std::string::npos);
  EXPECT_NE(build_error("Split", kF23, {i64({1, 2})}, {{"axis", int64_t{1}}}, 3).find("requested"), std::string::npos);
  EXPECT_NE(build_error("Split", kF23, {}).find("number of outputs"), std::string::npos);
  EXPECT_NE(build_error("Split", kF23, {}, {{"axis", int64_t{2}}}, 2).find("out of range"), std::string::npos);
  EXPECT_NE(build_error("Split", type(DType::Float32, make_shape({5})), {}, {}, 4).find("cannot split"),
            std::string::npos);
  EXPECT_EQ(to_string(infer("Split", kF23, {}, {}, 3, 2)), "f32[0,3]");  // 2 into 3: 1, 1, 0
}

// ---- Transpose ---------------------------------------------------------------------

TEST(OpsLayoutTranspose, DefaultAndGivenPerm) {
  Tensor t = run1("Transpose", iota_f32({2, 3}), {});
  expect_values(t, {3, 2}, {0, 3, 1, 4, 2, 5});
  t = run1("Transpose", iota_f32({2, 3, 2}), {}, {{"perm", Ints{1, 0, 2}}});
  expect_values(t, {3, 2, 2}, {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
  expect_values(run1("Transpose", f32({}, {7}), {}), {}, {7});
  EXPECT_EQ(inferred("Transpose", type(DType::Float32, sym({Dim::sym("N"), 3, Dim::unknown()})), {},
                     {{"perm", Ints{2, 0, 1}}}),
            "f32[?,N,3]");
}

TEST(OpsLayoutTranspose, BadPerm) {
  EXPECT_NE(build_error("Transpose", kF23, {}, {{"perm", Ints{0, 0}}}).find("not a permutation"), std::string::npos);
  EXPECT_NE(build_error("Transpose", kF23, {}, {{"perm", Ints{0, 2}}}).find("not a permutation"), std::string::npos);
  EXPECT_NE(build_error("Transpose", kF23, {}, {{"perm", Ints{0}}}).find("rank"), std::string::npos);
}

// ---- Reshape / Flatten -------------------------------------------------------------

TEST(OpsLayoutReshape, ZeroAndMinusOne) {
  Tensor x = iota_f32({2, 3, 4});
  EXPECT_EQ(run1("Reshape", x, {i64({2, 0, 1, -1})}).dims(), Ints({2, 3, 1, 4}));
  EXPECT_EQ(run1("Reshape", x, {i64({-1})}).dims(), Ints({24}));
  EXPECT_EQ(run1("Reshape", x, {i64({-1, 2, 3, 4})}).dims(), Ints({1, 2, 3, 4}));
  EXPECT_EQ(run1("Reshape", x, {i64({4, 2, 3})}).to_f64(), x.to_f64());
  // allowzero: 0 is a real zero extent.
  Tensor empty = f32({0, 3, 4}, {});
  EXPECT_EQ(run1("Reshape", empty, {i64({3, 4, 0})}, {{"allowzero", int64_t{1}}}).dims(), Ints({3, 4, 0}));
  EXPECT_EQ(run1("Reshape", empty, {i64({0, 12})}).dims(), Ints({0, 12}));
}

TEST(OpsLayoutReshape, SymbolicDims) {
  TensorType n34 = type(DType::Float32, sym({Dim::sym("N"), 3, 4}));
  EXPECT_EQ(inferred("Reshape", n34, {i64({0, -1})}), "f32[N,12]");
  EXPECT_EQ(inferred("Reshape", n34, {i64({-1, 12})}), "f32[N,12]");
  EXPECT_EQ(inferred("Reshape", n34, {i64({-1, 6})}), "f32[?,6]");
  EXPECT_EQ(inferred("Reshape", n34, {i64({0, 4, 3})}), "f32[N,4,3]");
  EXPECT_EQ(inferred("Reshape", type(DType::Float32, sym({Dim::sym("N"), 12})), {i64({-1, 3, 4})}), "f32[N,3,4]");
  EXPECT_EQ(inferred("Reshape", type(DType::Float32, sym({Dim::unknown(), 12})), {i64({-1, 3, 4})}), "f32[?,3,4]");
}

TEST(OpsLayoutReshape, DynamicShapeInput) {
  GraphBuilder b;
  Value x = b.input("x", type(DType::Float32, make_shape({2, 3, 4})));
  Value s = b.input("s", type(DType::Int64, make_shape({3})));
  Value y = b.op1("Reshape", {x, s});
  EXPECT_EQ(to_string(y.type()), "f32[?,?,?]");
  Graph g = b.finish({y}, {"y"});
  Tensor out = evaluate(g, {iota_f32({2, 3, 4}), i64({0, -1, 2})})[0];
  EXPECT_EQ(out.dims(), Ints({2, 6, 2}));
  std::vector<FieldArray> f = evaluate_field(g, {to_field(iota_f32({2, 3, 4})), to_field(i64({4, 0, -1}))});
  EXPECT_EQ(f[0].dims, Ints({4, 3, 2}));
  EXPECT_EQ(f[0].data[5], Fp(5));
}

TEST(OpsLayoutReshape, Errors) {
  EXPECT_NE(build_error("Reshape", kF23, {i64({4, 2})}).find("cannot reshape"), std::string::npos);
  EXPECT_NE(build_error("Reshape", kF23, {i64({-1, -1})}).find("more than one -1"), std::string::npos);
  EXPECT_NE(build_error("Reshape", kF23, {i64({-1, 4})}).find("cannot reshape"), std::string::npos);
  EXPECT_NE(build_error("Reshape", kF23, {i64({0, 0, 0})}).find("missing dimension"), std::string::npos);
  EXPECT_NE(build_error("Reshape", kF23, {i64({-2, 3})}).find("invalid dimension"), std::string::npos);
  EXPECT_NE(build_error("Reshape", kF23, {i64({0, -1})}, {{"allowzero", int64_t{1}}}).find("allowzero"),
            std::string::npos);
}

TEST(OpsLayoutFlatten, Axes) {
  Tensor x = iota_f32({2, 3, 4, 5});
  EXPECT_EQ(run1("Flatten", x, {}).dims(), Ints({2, 60}));
  EXPECT_EQ(run1("Flatten", x, {}, {{"axis", int64_t{0}}}).dims(), Ints({1, 120}));
  EXPECT_EQ(run1("Flatten", x, {}, {{"axis", int64_t{4}}}).dims(), Ints({120, 1}));
  EXPECT_EQ(run1("Flatten", x, {}, {{"axis", int64_t{-1}}}).dims(), Ints({24, 5}));
  EXPECT_EQ(run1("Flatten", f32({0, 3}, {}), {}).dims(), Ints({0, 3}));
  TensorType n34 = type(DType::Float32, sym({Dim::sym("N"), 3, 4}));
  EXPECT_EQ(inferred("Flatten", n34, {}), "f32[N,12]");
  EXPECT_EQ(inferred("Flatten", n34, {}, {{"axis", int64_t{2}}}), "f32[?,4]");
  EXPECT_NE(build_error("Flatten", kF23, {}, {{"axis", int64_t{3}}}).find("out of range"), std::string::npos);
}

// ---- Squeeze / Unsqueeze -----------------------------------------------------------

TEST(OpsLayoutSqueeze, AxesAndDefault) {
  Tensor x = iota_f32({1, 3, 1, 2});
  expect_values(run1("Squeeze", x, {i64({0, -2})}), {3, 2}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(run1("Squeeze", x, {i64({2})}).dims(), Ints({1, 3, 2}));
  EXPECT_EQ(run1("Squeeze", x, {}).dims(), Ints({3, 2}));
  EXPECT_EQ(inferred("Squeeze", type(DType::Float32, sym({Dim::sym("N"), 1})), {}), "f32[N]");
  EXPECT_EQ(inferred("Squeeze", type(DType::Float32, sym({Dim::sym("N"), 1})), {i64({0})}), "f32[1]");
  EXPECT_NE(build_error("Squeeze", kF23, {i64({1})}).find("not 1"), std::string::npos);
  EXPECT_NE(build_error("Squeeze", kF23, {i64({2})}).find("out of range"), std::string::npos);
}

TEST(OpsLayoutUnsqueeze, Axes) {
  Tensor x = iota_f32({3, 4, 5});
  EXPECT_EQ(run1("Unsqueeze", x, {i64({5, 4, 2})}).dims(), Ints({3, 4, 1, 5, 1, 1}));
  EXPECT_EQ(run1("Unsqueeze", x, {i64({-1, 0})}).dims(), Ints({1, 3, 4, 5, 1}));
  EXPECT_EQ(run1("Unsqueeze", f32({}, {2}), {i64({0})}).dims(), Ints({1}));
  EXPECT_EQ(inferred("Unsqueeze", type(DType::Float32, sym({Dim::sym("N")})), {i64({0})}), "f32[1,N]");
  EXPECT_NE(build_error("Unsqueeze", kF23, {i64({1, 1})}).find("repeat"), std::string::npos);
  EXPECT_NE(build_error("Unsqueeze", kF23, {i64({3})}).find("out of range"), std::string::npos);
}

// ---- Slice -------------------------------------------------------------------------

TEST(OpsLayoutSlice, StepsAndClamping) {
  Tensor x = iota_f32({10});
  expect_values(run1("Slice", x, {i64({2}), i64({5})}), {3}, {2, 3, 4});
  expect_values(run1("Slice", x, {i64({-3}), i64({-1})}), {2}, {7, 8});
  expect_values(run1("Slice", x, {i64({8}), i64({1}), i64({0}), i64({-3})}), {3}, {8, 5, 2});
  expect_values(run1("Slice", x, {i64({1}), i64({1000}), kOmitted, i64({4})}), {3}, {1, 5, 9});
  expect_values(run1("Slice", x, {i64({1000}), i64({1000})}), {0}, {});
  expect_values(run1("Slice", x, {i64({3}), i64({3})}), {0}, {});
  expect_values(run1("Slice", x, {i64({-100}), i64({2})}), {2}, {0, 1});
  expect_values(run1("Slice", x, {i64({100}), i64({-100}), i64({0}), i64({-4})}), {3}, {9, 5, 1});
}

TEST(OpsLayoutSlice, Sentinels) {
  Tensor x = iota_f32({5});
  expect_values(run1("Slice", x, {i64({1}), i64({INT64_MAX})}), {4}, {1, 2, 3, 4});
  expect_values(run1("Slice", x, {i64({-1}), i64({INT64_MIN}), i64({0}), i64({-1})}), {5}, {4, 3, 2, 1, 0});
  expect_values(run1("Slice", x, {i64({INT64_MAX}), i64({INT64_MIN}), i64({0}), i64({-2})}), {3}, {4, 2, 0});
  expect_values(run1("Slice", x, {i64({INT64_MIN}), i64({INT64_MAX}), i64({0}), i64({INT64_MAX})}), {1}, {0});
  expect_values(run1("Slice", x, {i64({3}), i64({INT64_MIN}), i64({0}), i64({INT64_MIN})}), {1}, {3});
  expect_values(run1("Slice", f32({0}, {}), {i64({-1}), i64({INT64_MIN}), i64({0}), i64({-1})}), {0}, {});
}

TEST(OpsLayoutSlice, AxesOnMatrix) {
  Tensor x = iota_f32({3, 4});
  // rows 2..0 backwards, columns 1 and 3.
  Tensor t = run1("Slice", x, {i64({-1, 1}), i64({INT64_MIN, 4}), i64({0, -1}), i64({-1, 2})});
  expect_values(t, {3, 2}, {9, 11, 5, 7, 1, 3});
  expect_values(run1("Slice", x, {i64({1}), i64({3}), i64({1})}), {3, 2}, {1, 2, 5, 6, 9, 10});
}

TEST(OpsLayoutSlice, SymbolicAndErrors) {
  TensorType x = type(DType::Float32, sym({Dim::sym("N"), 10}));
  EXPECT_EQ(inferred("Slice", x, {i64({2}), i64({5}), i64({1})}), "f32[N,3]");
  EXPECT_EQ(inferred("Slice", x, {i64({0}), i64({INT64_MAX})}), "f32[N,10]");
  EXPECT_EQ(inferred("Slice", x, {i64({-1}), i64({INT64_MIN}), i64({0}), i64({-1})}), "f32[N,10]");
  EXPECT_EQ(inferred("Slice", x, {i64({1}), i64({INT64_MAX})}), "f32[?,10]");
  EXPECT_NE(build_error("Slice", kF23, {i64({0}), i64({1}), i64({0}), i64({0})}).find("step"), std::string::npos);
  EXPECT_NE(build_error("Slice", kF23, {i64({0}), i64({1}), i64({2})}).find("out of range"), std::string::npos);
  EXPECT_NE(build_error("Slice", kF23, {i64({0, 0}), i64({1})}).find("length"), std::string::npos);
  EXPECT_NE(build_error("Slice", kF23, {i64({0, 0}), i64({1, 1}), i64({1, -1})}).find("repeat"), std::string::npos);
}

TEST(OpsLayoutSlice, DynamicOperands) {
  GraphBuilder b;
  Value x = b.input("x", type(DType::Float32, make_shape({4, 6})));
  Value s = b.input("s", type(DType::Int64, make_shape({1})));
  Value y = b.op1("Slice", {x, s, b.constant(i64({6})), b.constant(i64({1}))});
  EXPECT_EQ(to_string(y.type()), "f32[4,?]");
  Value z = b.op1("Slice", {x, s, b.constant(i64({6}))});
  EXPECT_EQ(to_string(z.type()), "f32[?,6]");
  Graph g = b.finish({y}, {"y"});
  EXPECT_EQ(evaluate(g, {iota_f32({4, 6}), i64({-2})})[0].dims(), Ints({4, 2}));
}

// ---- Gather ------------------------------------------------------------------------

TEST(OpsLayoutGather, IndicesOfAnyRank) {
  Tensor x = iota_f32({3, 3});
  expect_values(run1("Gather", x, {i64({2, -3})}), {2, 3}, {6, 7, 8, 0, 1, 2});
  Tensor idx2 = Tensor::from_i64(DType::Int64, {1, 2}, Ints{0, 2});
  expect_values(run1("Gather", x, {idx2}, {{"axis", int64_t{1}}}), {3, 1, 2}, {0, 2, 3, 5, 6, 8});
  Tensor scalar = Tensor::from_i64(DType::Int32, {}, Ints{-1});
  expect_values(run1("Gather", x, {scalar}, {{"axis", int64_t{-1}}}), {3}, {2, 5, 8});
  expect_values(run1("Gather", iota_f32({10}), {i64({0, -9, -10})}), {3}, {0, 1, 0});
  EXPECT_EQ(inferred("Gather", type(DType::Float32, sym({Dim::sym("N"), 5})), {idx2}, {{"axis", int64_t{1}}}),
            "f32[N,1,2]");
}

TEST(OpsLayoutGather, Errors) {
  EXPECT_NE(build_error("Gather", kF23, {i64({2})}).find("out of range"), std::string::npos);
  EXPECT_NE(build_error("Gather", kF23, {i64({-3})}).find("out of range"), std::string::npos);
  EXPECT_NE(build_error("Gather", kF23, {i64({0})}, {{"axis", int64_t{2}}}).find("out of range"), std::string::npos);
  EXPECT_NE(build_error("Gather", kF23, {f32({1}, {0})}).find("int32 or int64"), std::string::npos);
  // Dynamic indices out of range fail at evaluation.
  GraphBuilder b;
  Value x = b.input("x", kF23);
  Value i = b.input("i", type(DType::Int64, make_shape({1})));
  Graph g = b.finish({b.op1("Gather", {x, i})}, {"y"});
  EXPECT_THROW(evaluate(g, {iota_f32({2, 3}), i64({5})}), Error);
}

// ---- Pad ---------------------------------------------------------------------------

TEST(OpsLayoutPad, Modes) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor c = run1("Pad", x, {i64({0, 1, 1, 0}), f32({}, {9})});
  expect_values(c, {3, 4}, {9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9});
  expect_values(run1("Pad", x, {i64({0, 1, 0, 0})}), {2, 4}, {0, 1, 2, 3, 0, 4, 5, 6});
  Tensor r = run1("Pad", x, {i64({0, 2, 0, 1})}, {{"mode", std::string("reflect")}});
  expect_values(r, {2, 6}, {3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
  Tensor e = run1("Pad", x, {i64({1, 2, 0, 1})}, {{"mode", std::string("edge")}});
  expect_values(e, {3, 6}, {1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6});
  // Negative pads crop.
  expect_values(run1("Pad", x, {i64({0, -1, -1, 1})}), {1, 3}, {2, 3, 0});
  EXPECT_EQ(inferred("Pad", type(DType::Float32, sym({Dim::sym("N"), 3})), {i64({0, 1, 0, 1})}), "f32[N,5]");
  EXPECT_EQ(inferred("Pad", type(DType::Float32, sym({Dim::sym("N"), 3})), {i64({1, 1, 0, 1})}), "f32[?,5]");
}

TEST(OpsLayoutPad, Errors) {
  EXPECT_NE(build_error("Pad", kF23, {i64({0, 3, 0, 0})}, {{"mode", std::string("reflect")}}).find("reflect"),
            std::string::npos);
  EXPECT_NE(build_error("Pad", kF23, {i64({0, 1})}).find("2 * rank"), std::string::npos);
  EXPECT_NE(build_error("Pad", kF23, {i64({0, -2, 0, -2})}).find("removes"), std::string::npos);
  EXPECT_NE(build_error("Pad", kF23, {i64({0, 0, 0, 0})}, {{"mode", std::string("wrap")}}).find("not supported"),
            std::string::npos);
  EXPECT_NE(build_error("Pad", kF23, {i64({0, 0, 0, 0}), i64({1})}).find("constant_value"), std::string::npos);
}

// ---- Expand ------------------------------------------------------------------------

TEST(OpsLayoutExpand, Bidirectional) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor t = run1("Expand", x, {i64({2, 1, 2})});
  expect_values(t, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  expect_values(run1("Expand", x, {i64({1})}), {3, 1}, {1, 2, 3});
  expect_values(run1("Expand", f32({}, {4}), {i64({2})}), {2}, {4, 4});
  EXPECT_EQ(inferred("Expand", type(DType::Float32, sym({Dim::sym("N"), 1})), {i64({1, 4})}), "f32[N,4]");
  EXPECT_NE(build_error("Expand", kF23, {i64({2, 2})}).find("broadcast"), std::string::npos);
  GraphBuilder b;
  Value in = b.input("x", type(DType::Float32, make_shape({3, 1})));
  Value y = b.op1("Expand", {in, b.input("s", type(DType::Int64, make_shape({3})))});
  EXPECT_EQ(to_string(y.type()), "f32[?,3,?]");
  Graph g = b.finish({y}, {"y"});
  EXPECT_EQ(evaluate(g, {x, i64({2, 1, 5})})[0].dims(), Ints({2, 3, 5}));
}

// ---- Shape / ConstantOfShape -------------------------------------------------------

TEST(OpsLayoutShape, StartEnd) {
  Tensor x = iota_f32({3, 4, 5});
  Tensor s = run1("Shape", x, {});
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.to_i64(), Ints({3, 4, 5}));
  EXPECT_EQ(run1("Shape", x, {}, {{"start", int64_t{-1}}}).to_i64(), Ints({5}));
  EXPECT_EQ(run1("Shape", x, {}, {{"start", int64_t{1}}, {"end", int64_t{-1}}}).to_i64(), Ints({4}));
  EXPECT_EQ(run1("Shape", x, {}, {{"start", int64_t{-10}}, {"end", int64_t{10}}}).to_i64(), Ints({3, 4, 5}));
  EXPECT_EQ(run1("Shape", x, {}, {{"start", int64_t{2}}, {"end", int64_t{1}}}).dims(), Ints({0}));
  EXPECT_EQ(inferred("Shape", type(DType::Float16, sym({Dim::sym("N"), 3})), {}), "i64[2]");
}

// ConstantOfShape(shape) with a constant shape, evaluated in both semantics.
Tensor constant_of_shape(const Ints& shape, Attributes attrs = {}) {
  GraphBuilder b;
  Value y = b.op1("ConstantOfShape", {b.constant(i64(shape))}, std::move(attrs));
  Graph g = b.finish({y}, {"y"});
  Tensor out = evaluate(g, {})[0];
  EXPECT_EQ(to_string(y.type()), to_string(out.type()));
  FieldArray f = evaluate_field(g, {})[0];
  EXPECT_EQ(f.dims, out.dims());
  EXPECT_TRUE(f.data == to_field(out).data);
  return out;
}

TEST(OpsLayoutShape, ConstantOfShape) {
  Tensor z = constant_of_shape({2, 3});
  EXPECT_EQ(z.dtype(), DType::Float32);
  expect_values(z, {2, 3}, {0, 0, 0, 0, 0, 0});
  Attributes seven{{"value", Tensor::from_i64(DType::Int32, {1}, Ints{7})}};
  Tensor s = constant_of_shape({2}, seven);
  EXPECT_EQ(s.dtype(), DType::Int32);
  expect_values(s, {2}, {7, 7});
  EXPECT_EQ(constant_of_shape({0}).dims(), Ints({0}));
  EXPECT_EQ(constant_of_shape({}, seven).dims(), Ints({}));
  // A dynamic shape operand gives unknown extents of the operand's length.
  GraphBuilder b;
  Value shape = b.input("s", type(DType::Int64, make_shape({3})));
  Value y = b.op1("ConstantOfShape", {shape}, seven);
  EXPECT_EQ(to_string(y.type()), "i32[?,?,?]");
  Graph g = b.finish({y}, {"y"});
  expect_values(evaluate(g, {i64({1, 2, 1})})[0], {1, 2, 1}, {7, 7});
  EXPECT_THROW(b.op1("ConstantOfShape", {b.constant(i64({-1}))}), Error);
  EXPECT_THROW(b.op1("ConstantOfShape", {b.constant(i64({2}))}, {{"value", i64({1, 2})}}), Error);
}

// ---- Bit exactness -----------------------------------------------------------------

TEST(OpsLayoutBits, EveryDtypeCopiedExactly) {
  const uint32_t nan_payload = 0x7fc12345u;
  std::string f32_bytes(16, '\0');
  const uint32_t words[4] = {nan_payload, 0x80000000u /* -0.0 */, 0x00000001u /* denormal */, 0x3f800000u};
  std::memcpy(f32_bytes.data(), words, 16);
  Tensor f(DType::Float32, {2, 2}, f32_bytes);
  Tensor t = run1("Transpose", f, {});
  uint32_t back[4];
  std::memcpy(back, t.bytes().data(), 16);
  EXPECT_EQ(back[0], nan_payload);
  EXPECT_EQ(back[1], 0x00000001u);
  EXPECT_EQ(back[2], 0x80000000u);
  Tensor u = Tensor::from_i64(DType::UInt64, {2}, Ints{-1, 5});  // 2^64 - 1 survives
  EXPECT_EQ(run1("Concat", u, {}, {{"axis", int64_t{0}}}).bytes(), u.bytes());
  Tensor big = Tensor::from_i64(DType::Int64, {2}, Ints{INT64_MAX, INT64_MIN + 1});
  EXPECT_EQ(run("Gather", big, {i64({1, 0})}, {}, 0, false)[0].to_i64(), Ints({INT64_MIN + 1, INT64_MAX}));
  Tensor h = Tensor::from_f64(DType::Float16, {3}, Doubles{0.5, -2, 65504});
  Tensor hp = run1("Pad", h, {i64({1, 1}), Tensor::from_f64(DType::Float16, {}, Doubles{1.5})},
                   {{"mode", std::string("constant")}});
  EXPECT_EQ(hp.dtype(), DType::Float16);
  EXPECT_EQ(hp.to_f64(), Doubles({1.5, 0.5, -2, 65504, 1.5}));
  Tensor bools = Tensor::from_i64(DType::Bool, {2, 2}, Ints{1, 0, 0, 1});
  EXPECT_EQ(run1("Slice", bools, {i64({1}), i64({2}), i64({1})}).to_i64(), Ints({0, 1}));
  Tensor c128(DType::Complex128, {2}, std::string(32, '\x5a'));
  EXPECT_EQ(run1("Expand", c128, {i64({2, 2})}).byte_size(), 64u);
}

// ---- Properties and ONNX adapters --------------------------------------------------

TEST(OpsLayoutProps, TableEntries) {
  for (const char* name : {"Concat", "Split", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice",
                           "Gather", "Pad", "Expand"}) {
    const OpDef& d = get_op(name);
    EXPECT_TRUE(d.props.shape_only) << name;
    EXPECT_EQ(d.props.linear_in, std::vector<int>{0}) << name;
    EXPECT_NE(d.eval_field, nullptr) << name;
  }
  EXPECT_NE(get_op("Shape").eval_field, nullptr);
  EXPECT_NE(get_op("ConstantOfShape").eval_field, nullptr);
}

// Runs an op's import hook on an ONNX form of `opset`.
OnnxForm imported(const std::string& op, OnnxForm form, int64_t opset, GraphBuilder& b) {
  const OpDef& d = get_op(op);
  EXPECT_NE(d.onnx_import, nullptr) << op;
  EXPECT_EQ(d.onnx_import(form, opset, b), "") << op;
  return form;
}

TEST(OpsLayoutOnnx, AttributesBecomeInputsAndBack) {
  GraphBuilder b;
  Value x = b.input("x", type(DType::Float32, make_shape({1, 4, 6})));
  // Squeeze-11: axes attribute.
  OnnxForm sq = imported("Squeeze", {{{"axes", Ints{-3}}}, {x}, 1}, 11, b);
  ASSERT_EQ(sq.inputs.size(), 2u);
  EXPECT_EQ(sq.inputs[1].constant()->to_i64(), Ints({-3}));
  EXPECT_FALSE(sq.attrs.has("axes"));
  EXPECT_EQ(to_string(b.op1("Squeeze", sq.inputs, sq.attrs).type()), "f32[4,6]");
  get_op("Squeeze").onnx_export(sq, 10);
  EXPECT_EQ(sq.inputs.size(), 1u);
  EXPECT_EQ(sq.attrs.get_ints("axes"), Ints({-3}));  // written back as the model had it
  // Split-11 attribute, Split-18 num_outputs.
  OnnxForm sp = imported("Split", {{{"axis", int64_t{2}}, {"split", Ints{2, 4}}}, {x}, 2}, 11, b);
  EXPECT_EQ(sp.inputs[1].constant()->to_i64(), Ints({2, 4}));
  OnnxForm s18 = imported("Split", {{{"axis", int64_t{2}}, {"num_outputs", int64_t{3}}}, {x}, 3}, 18, b);
  EXPECT_EQ(s18.inputs.size(), 1u);
  EXPECT_FALSE(s18.attrs.has("num_outputs"));
  OnnxForm bad{{{"num_outputs", int64_t{2}}}, {x}, 3};
  EXPECT_NE(get_op("Split").onnx_import(bad, 18, b), "");
  get_op("Split").onnx_export(s18, 18);
  EXPECT_EQ(s18.attrs.get_int("num_outputs"), 3);
  OnnxForm s4{{{"axis", int64_t{2}}}, {x}, 4};  // 6 into 4 parts: uneven, explicit before opset 18
  get_op("Split").onnx_export(s4, 11);
  EXPECT_EQ(s4.attrs.get_ints("split"), Ints({2, 2, 2, 0}));
  // Slice-9: starts/ends/axes attributes.
  OnnxForm sl = imported("Slice", {{{"starts", Ints{1}}, {"ends", Ints{3}}, {"axes", Ints{2}}}, {x}, 1}, 9, b);
  ASSERT_EQ(sl.inputs.size(), 4u);
  EXPECT_EQ(to_string(b.op1("Slice", sl.inputs, sl.attrs).type()), "f32[1,4,2]");
  get_op("Slice").onnx_export(sl, 9);
  EXPECT_EQ(sl.inputs.size(), 1u);
  EXPECT_EQ(sl.attrs.get_ints("starts"), Ints({1}));
  EXPECT_EQ(sl.attrs.get_ints("axes"), Ints({2}));
  // Reshape-1: shape attribute.
  OnnxForm rs = imported("Reshape", {{{"shape", Ints{4, -1}}}, {x}, 1}, 1, b);
  EXPECT_EQ(to_string(b.op1("Reshape", rs.inputs, rs.attrs).type()), "f32[4,6]");
  // Concat-1: default axis 1.
  OnnxForm cc = imported("Concat", {{}, {x, x}, 1}, 1, b);
  EXPECT_EQ(cc.attrs.get_int("axis"), 1);
}

TEST(OpsLayoutOnnx, PadForms) {
  GraphBuilder b;
  Value x = b.input("x", type(DType::Float32, make_shape({2, 3})));
  OnnxForm p2 = imported("Pad", {{{"pads", Ints{0, 1, 0, 1}}, {"value", 2.5}}, {x}, 1}, 2, b);
  ASSERT_EQ(p2.inputs.size(), 3u);
  EXPECT_EQ(p2.inputs[2].constant()->to_f64(), Doubles({2.5}));
  EXPECT_EQ(to_string(b.op1("Pad", p2.inputs, p2.attrs).type()), "f32[2,5]");
  get_op("Pad").onnx_export(p2, 2);
  EXPECT_EQ(p2.inputs.size(), 1u);
  EXPECT_EQ(p2.attrs.get_ints("pads"), Ints({0, 1, 0, 1}));
  EXPECT_EQ(p2.attrs.get_float("value"), 2.5);
  // Opset 18 axes input: pads for axis -1 only.
  OnnxForm p18 = imported("Pad", {{}, {x, b.constant(i64({1, 2})), Value{}, b.constant(i64({-1}))}, 1}, 18, b);
  ASSERT_EQ(p18.inputs.size(), 2u);
  EXPECT_EQ(p18.inputs[1].constant()->to_i64(), Ints({0, 1, 0, 2}));
  Value dyn = b.input("axes", type(DType::Int64, make_shape({1})));
  OnnxForm pd{{}, {x, b.constant(i64({1, 2})), Value{}, dyn}, 1};
  EXPECT_NE(get_op("Pad").onnx_import(pd, 18, b).find("not constant"), std::string::npos);
  OnnxForm wrap{{{"mode", std::string("wrap")}}, {x, b.constant(i64({0, 0, 0, 0}))}, 1};
  EXPECT_NE(get_op("Pad").onnx_import(wrap, 19, b), "");
}

}  // namespace
}  // namespace isomer
