// Constant folding within its budget (passes/passes.h FoldBudget, ops/fold_cost.h): what the
// optimizer computes at optimization time and writes into the model stays bounded, and the
// e-graph's and the runtime's constant evaluation do not materialize blow-ups of small
// constants (the seventh family of the hostile campaign, scripts/hostile_mutators_resource.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "egraph/egraph.h"
#include "ir/graph.h"
#include "ops/fold_cost.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

Tensor floats(std::vector<int64_t> dims, unsigned seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(gen);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

Tensor ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_i64(DType::Int64, {n}, v);
}

size_t folds(const PassStats& s) {
  auto it = s.applied.find("fold-constants");
  return it == s.applied.end() ? 0 : it->second;
}

TEST(FoldBudget, FlopsOfContractionsAndOthers) {
  const TensorType a{DType::Float32, make_shape({2, 3})}, b{DType::Float32, make_shape({3, 4})},
      y{DType::Float32, make_shape({2, 4})};
  // Elements moved (6 + 12 + 8) plus one multiply-add per output element per K (8 * 3).
  EXPECT_EQ(fold_flops("MatMul", {}, std::vector{a, b}, std::vector{y}), 26.0 + 24.0);
  EXPECT_EQ(fold_flops("Add", {}, std::vector{y, y}, std::vector{y}), 24.0);
  // Conv: [1, 2, 5, 5] * weight [3, 2, 3, 3] -> [1, 3, 3, 3]: 27 outputs, 18 products each.
  const TensorType x{DType::Float32, make_shape({1, 2, 5, 5})}, w{DType::Float32, make_shape({3, 2, 3, 3})},
      c{DType::Float32, make_shape({1, 3, 3, 3})};
  EXPECT_EQ(fold_flops("Conv", {}, std::vector{x, w}, std::vector{c}), 50.0 + 54.0 + 27.0 + 27.0 * 18.0);
  // Einsum: one multiply-add per (i, j, k).
  Attributes eq;
  eq.set("equation", std::string("ij,jk->ik"));
  EXPECT_EQ(fold_flops("Einsum", eq, std::vector{a, b}, std::vector{y}), 26.0 + 24.0);
  const TensorType dynamic{DType::Float32, {Dim::sym("n"), Dim(3)}};
  EXPECT_FALSE(fold_flops("MatMul", {}, std::vector{dynamic, b}, std::vector{y}).has_value());
}

TEST(FoldBudget, ProductOverTheArithmeticLimitIsLeft) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 64})});
  Value w = b.op1("MatMul", {b.constant(floats({64, 64}, 1)), b.constant(floats({64, 64}, 2))});
  Graph g = b.finish({b.op1("MatMul", {x, w})}, {"y"});
  PassOptions tight;
  tight.fold_flops_limit = 64.0 * 64 * 64;  // the product needs 64^3 multiply-adds plus its elements
  PassStats left, folded;
  Graph kept = simplify(g, tight, &left);
  EXPECT_EQ(folds(left), 0u);
  EXPECT_EQ(kept.op_histogram().at("MatMul"), 2u);
  Graph out = simplify(g, {}, &folded);
  EXPECT_EQ(folds(folded), 1u);
  EXPECT_EQ(out.op_histogram().at("MatMul"), 1u);
}

TEST(FoldBudget, BlowUpOfSmallConstantsIsNotWritten) {
  // A scalar expanded to 2048x2048 (16 MB) added to the input: folding would write 16 MB
  // into a model of a few hundred bytes.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2048, 2048})});
  Value c = b.op1("Expand", {b.constant(floats({1, 1}, 3)), b.constant(ints({2048, 2048}))});
  Graph g = b.finish({b.op1("Add", {x, c})}, {"y"});
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_EQ(folds(stats), 0u);
  EXPECT_LT(out.constant_bytes(), size_t{1024});
  // Within the allowance (1 MiB) a small one still folds.
  GraphBuilder s;
  Value xs = s.input("x", {DType::Float32, make_shape({64, 64})});
  Value cs = s.op1("Expand", {s.constant(floats({1, 1}, 3)), s.constant(ints({64, 64}))});
  PassStats small;
  Graph folded = simplify(s.finish({s.op1("Add", {xs, cs})}, {"y"}), {}, &small);
  EXPECT_EQ(folds(small), 1u);
  // The allowance is shared by the whole call: two such blow-ups fit, the third does not.
  GraphBuilder t;
  Value xt = t.input("x", {DType::Float32, make_shape({256, 256})});
  Value sum = xt;
  for (int i = 0; i < 5; ++i)
    sum = t.op1("Add", {sum, t.op1("Expand", {t.constant(floats({1, 1}, 10 + i)), t.constant(ints({256, 256}))})});
  PassStats shared;
  simplify(t.finish({sum}, {"y"}), {}, &shared);
  EXPECT_EQ(folds(shared), 4u);  // 256 kB each: four within 1 MiB
}

TEST(FoldBudget, EGraphDoesNotEvaluateBlowUps) {
  // ReduceSum(Expand(0.5, [10^9])): a scalar the e-graph must not compute through 4 GB.
  eg::EGraph e;
  eg::ClassId big = e.add_op(get_op("Expand"), {e.add_constant(floats({1}, 4)), e.add_constant(ints({1000000000}))}, {});
  Attributes keep;
  keep.set("keepdims", int64_t{0});
  eg::ClassId sum = e.add_op(get_op("ReduceSum"), {big}, keep);
  EXPECT_EQ(e.constant_value(big), nullptr);
  EXPECT_EQ(e.constant_value(sum), nullptr);
  // A small one is evaluated.
  eg::ClassId small = e.add_op(get_op("Expand"), {e.add_constant(floats({1}, 4)), e.add_constant(ints({8}))}, {});
  ASSERT_NE(e.constant_value(e.add_op(get_op("ReduceSum"), {small}, keep)), nullptr);
}

TEST(FoldBudget, RuntimeRunsBlowUpAsAStep) {
  // 2^25 floats (128 MB) from one scalar, summed: run as steps, not folded at compile time
  // (the reference kernels would hold 256 MB of index tables beside it); the sum is right.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Value big = b.op1("Expand", {b.constant(Tensor::from_f64(DType::Float32, {1}, std::vector<double>{0.25})),
                               b.constant(ints({1 << 25}))});
  Value sum = b.op1("ReduceSum", {big}, {{"keepdims", int64_t{1}}});
  Graph g = b.finish({b.op1("Add", {x, sum})}, {"y"});
  runtime::RuntimeOptions o;
  o.threads = 1;
  auto exe = runtime::compile(g, o);
  EXPECT_GE(exe->steps().size(), 2u);
  std::vector<Tensor> got = exe->run({Tensor::from_f64(DType::Float32, {2}, std::vector<double>{1, 2})});
  EXPECT_EQ(got[0].to_f64(), (std::vector<double>{1 + (1 << 23), 2 + (1 << 23)}));
}

TEST(FoldBudget, RuntimeFoldsNodesWithAnOmittedOptionalInput) {
  // Clip of a constant with its min left out (Deformable DETR's dynamo export has such
  // nodes): every present input is known, so the runtime folds it; the omitted input
  // has no data to count (counting it crashed the compile).
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({4})});
  Tensor c = floats({4}, 3);
  Value clipped = b.op1("Clip", {b.constant(c), Value{}, b.constant(Tensor::scalar_f32(0.25f))});
  Graph g = b.finish({b.op1("Add", {x, clipped})}, {"y"});
  runtime::RuntimeOptions o;
  o.threads = 1;
  auto exe = runtime::compile(g, o);
  std::vector<Tensor> got = exe->run({Tensor::from_f64(DType::Float32, {4}, std::vector<double>(4, 1.0))});
  const std::vector<double> cv = c.to_f64(), y = got[0].to_f64();
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], 1 + std::min(cv[i], 0.25));
}

}  // namespace
}  // namespace isomer
