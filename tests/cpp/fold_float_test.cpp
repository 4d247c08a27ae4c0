// Constant folding's float32 products (OpDef::fold for MatMul and Gemm): summed in
// float with the runtime's kernel, within float rounding of the reference
// evaluator's double sums, for odd shapes, batches, vectors and every Gemm form;
// other element types fold exactly as the reference evaluates them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/graph.h"
#include "ops/op.h"
#include "ops/reference_gemm.h"
#include "passes/passes.h"

namespace isomer {
namespace {

constexpr double kUnit = 0x1p-24;  // float's unit roundoff

Tensor random_tensor(DType dtype, std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> small(-9, 9);
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (double& x : v) x = is_float(dtype) ? normal(rng) : static_cast<double>(small(rng));
  return Tensor::from_f64(dtype, std::move(dims), v);
}

Tensor absolute(const Tensor& t) {
  std::vector<double> v = t.to_f64();
  for (double& x : v) x = std::fabs(x);
  return Tensor::from_f64(DType::Float64, t.dims(), v);  // double: |A|·|B| is not rounded to float
}

std::vector<Tensor> run(std::vector<Tensor> (*fn)(const EvalContext&), const Attributes& attrs,
                        const std::vector<Tensor>& args) {
  return fn(EvalContext{attrs, args, 1});
}

// Every element of `folded` within `depth` float roundings of the reference's:
// |fold - ref| <= (depth + 1) · u · scale, `scale` the same operator on |operands|
// (each of the depth multiply-adds rounds once, and the reference's result is
// rounded to float once).
void expect_within_rounding(const Tensor& folded, const Tensor& reference, const Tensor& scale, int64_t depth) {
  ASSERT_EQ(folded.dtype(), DType::Float32);
  ASSERT_EQ(folded.dims(), reference.dims());
  const std::vector<double> f = folded.to_f64(), r = reference.to_f64(), s = scale.to_f64();
  ASSERT_EQ(f.size(), s.size());
  for (size_t i = 0; i < f.size(); ++i)
    ASSERT_LE(std::fabs(f[i] - r[i]), static_cast<double>(depth + 1) * kUnit * s[i]) << "element " << i;
}

size_t differing(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_f64(), y = b.to_f64();
  size_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) n += x[i] != y[i];
  return n;
}

struct MatMulCase {
  std::vector<int64_t> a, b;
  int64_t depth;
};

TEST(FoldFloat, MatMulIsTheReferenceWithinFloatRounding) {
  const OpDef& op = get_op("MatMul");
  ASSERT_NE(op.fold, nullptr);
  const std::vector<MatMulCase> cases = {
      {{1, 1}, {1, 1}, 1},
      {{7, 13}, {13, 5}, 13},
      {{1, 300}, {300, 17}, 300},          // one row: the matrix-vector kernel
      {{65, 1029}, {1029, 33}, 1029},      // deeper than one cache block, ragged tiles
      {{13}, {13, 5}, 13},                 // a vector on the left
      {{7, 13}, {13}, 13},                 // and on the right
      {{3, 7, 13}, {13, 5}, 13},           // a batch against one matrix
      {{2, 1, 7, 13}, {3, 13, 5}, 13},     // batches that broadcast
      {{4, 6, 600}, {4, 600, 19}, 600},    // a batch of pairs
  };
  uint64_t seed = 1;
  for (const MatMulCase& c : cases) {
    SCOPED_TRACE(to_string(c.a) + " x " + to_string(c.b));
    const Tensor a = random_tensor(DType::Float32, c.a, seed++), b = random_tensor(DType::Float32, c.b, seed++);
    const Tensor folded = run(op.fold, {}, {a, b})[0];
    const Tensor reference = run(op.eval, {}, {a, b})[0];
    const Tensor scale = run(op.eval, {}, {absolute(a), absolute(b)})[0];
    expect_within_rounding(folded, reference, scale, c.depth);
  }
}

TEST(FoldFloat, MatMulSumsInFloatNotDouble) {
  // A deep product whose float sums round differently from the double ones
  // somewhere: the fold took the float path (and the bound above is not vacuous).
  const OpDef& op = get_op("MatMul");
  const Tensor a = random_tensor(DType::Float32, {65, 1029}, 11), b = random_tensor(DType::Float32, {1029, 33}, 12);
  EXPECT_GT(differing(run(op.fold, {}, {a, b})[0], run(op.eval, {}, {a, b})[0]), 0u);
}

TEST(FoldFloat, GemmIsTheReferenceWithinFloatRoundingInEveryForm) {
  const OpDef& op = get_op("Gemm");
  ASSERT_NE(op.fold, nullptr);
  const int64_t M = 37, K = 523, N = 29;
  const std::vector<std::vector<int64_t>> c_shapes = {{}, {N}, {M, 1}, {1, N}, {M, N}};
  uint64_t seed = 100;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& [alpha, beta] : std::vector<std::pair<double, double>>{{1.0, 1.0}, {0.5, -2.0}, {-1.25, 0.0}})
        for (size_t ci = 0; ci <= c_shapes.size(); ++ci) {  // ci == size: no C
          SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " alpha " +
                       std::to_string(alpha) + " beta " + std::to_string(beta) + " C " +
                       (ci < c_shapes.size() ? to_string(c_shapes[ci]) : "absent"));
          Attributes attrs;
          attrs.set("transA", int64_t{ta});
          attrs.set("transB", int64_t{tb});
          attrs.set("alpha", alpha);
          attrs.set("beta", beta);
          const Tensor a = random_tensor(DType::Float32, ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K},
                                         seed++);
          const Tensor b = random_tensor(DType::Float32, tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
                                         seed++);
          std::vector<Tensor> args{a, b}, abs_args{absolute(a), absolute(b)};
          if (ci < c_shapes.size()) {
            const Tensor c = random_tensor(DType::Float32, c_shapes[ci], seed++);
            args.push_back(c);
            abs_args.push_back(absolute(c));
          }
          // |alpha|·|A||B| + |beta|·|C|: the reference's Gemm on |operands| and |scales|.
          Attributes abs_attrs = attrs;
          abs_attrs.set("alpha", std::fabs(alpha));
          abs_attrs.set("beta", std::fabs(beta));
          const Tensor folded = run(op.fold, attrs, args)[0];
          expect_within_rounding(folded, run(op.eval, attrs, args)[0], run(op.eval, abs_attrs, abs_args)[0], K + 3);
        }
}

TEST(FoldFloat, OtherElementTypesFoldExactlyAsTheReferenceEvaluates) {
  const OpDef &matmul = get_op("MatMul"), &gemm = get_op("Gemm");
  Attributes scaled;
  scaled.set("alpha", 3.0);
  scaled.set("beta", -2.0);
  scaled.set("transB", int64_t{1});
  uint64_t seed = 200;
  for (DType t : {DType::Float64, DType::Float16, DType::Int64, DType::Int32}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Tensor a = random_tensor(t, {2, 9, 300}, seed++), b = random_tensor(t, {300, 11}, seed++);
    EXPECT_TRUE(run(matmul.fold, {}, {a, b})[0].same_as(run(matmul.eval, {}, {a, b})[0]));
    const Tensor ga = random_tensor(t, {9, 300}, seed++), gb = random_tensor(t, {11, 300}, seed++),
                 gc = random_tensor(t, {11}, seed++);
    EXPECT_TRUE(run(gemm.fold, scaled, {ga, gb, gc})[0].same_as(run(gemm.eval, scaled, {ga, gb, gc})[0]));
  }
}

TEST(FoldFloat, TheFoldedWeightsDoNotDependOnTheThreadCount) {
  const OpDef& op = get_op("MatMul");
  const Tensor a = random_tensor(DType::Float32, {301, 700}, 300), b = random_tensor(DType::Float32, {700, 257}, 301);
  Tensor one, all;
  {
    ops::ScopedGemmThreads threads(1);
    one = run(op.fold, {}, {a, b})[0];
  }
  {
    ops::ScopedGemmThreads threads(0);
    all = run(op.fold, {}, {a, b})[0];
  }
  EXPECT_TRUE(one.same_as(all));
}

TEST(FoldFloat, SimplifyFoldsAFloatProductOfWeightsWithTheFoldHook) {
  // x · (W1 · W2): the product of the weights becomes one constant, the fold's.
  const Tensor w1 = random_tensor(DType::Float32, {96, 515}, 400), w2 = random_tensor(DType::Float32, {515, 40}, 401);
  GraphBuilder b;
  Value x = b.input("x", TensorType{DType::Float32, make_shape({3, 96})});
  Value w = b.op1("MatMul", {b.constant(w1), b.constant(w2)});
  Graph g = b.finish({b.op1("MatMul", {x, w})}, {"y"});
  PassStats stats;
  Graph out = simplify(g, {}, &stats);
  EXPECT_EQ(stats.applied["fold-constants"], 1u);
  const Tensor* folded = out.outputs()[0].node->inputs()[1].constant();
  ASSERT_NE(folded, nullptr);
  const OpDef& op = get_op("MatMul");
  EXPECT_TRUE(folded->same_as(run(op.fold, {}, {w1, w2})[0]));
  expect_within_rounding(*folded, run(op.eval, {}, {w1, w2})[0], run(op.eval, {}, {absolute(w1), absolute(w2)})[0],
                         515);
}

}  // namespace
}  // namespace isomer
