// Tests of the entries that place elements by position (indexing.cpp: Tile, Trilu,
// GatherElements, ScatterND; shape.cpp: Range) and of Einsum (einsum.cpp): results
// against values worked out by hand, shape rules, field semantics, and identities
// relating them to the basic operators proved by Z3 from their symbolic semantics.
#include "ops_nn_util.h"
#include "rules/rule.h"
#include "verify/z3_verifier.h"

namespace isomer {
namespace {
using namespace nn_test;

Tensor i64_tensor(const Dims& d, const std::vector<int64_t>& v) { return Tensor::from_i64(DType::Int64, d, v); }

TEST(OpsIndexing, TileRepeatsEveryAxis) {
  const Tensor x = f64_tensor({2, 2}, {1, 2, 3, 4});
  expect_near(run("Tile", {x, i64_tensor({2}, {1, 2})}), {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4});
  expect_near(run("Tile", {x, i64_tensor({2}, {2, 1})}), {4, 2}, {1, 2, 3, 4, 1, 2, 3, 4});
  EXPECT_EQ(infer("Tile", {{DType::Float32, {Dim::sym("n"), 3}}, {DType::Int64, {2}}}).shape,
            (Shape{Dim::unknown(), Dim::unknown()}));  // repeats known only when run
  expect_error([&] { run("Tile", {x, i64_tensor({1}, {2})}); }, "rank");
  expect_field_matches_float(one_op("Tile", {x, i64_tensor({2}, {2, 2})}));
}

TEST(OpsIndexing, TriluKeepsATriangle) {
  const Tensor x = f64_tensor({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expect_near(run("Trilu", {x}), {3, 3}, {1, 2, 3, 0, 5, 6, 0, 0, 9});
  expect_near(run("Trilu", {x}, {{"upper", int64_t{0}}}), {3, 3}, {1, 0, 0, 4, 5, 0, 7, 8, 9});
  expect_near(run("Trilu", {x, i64_tensor({}, {1})}), {3, 3}, {0, 2, 3, 0, 0, 6, 0, 0, 0});
  expect_near(run("Trilu", {x, i64_tensor({}, {-1})}, {{"upper", int64_t{0}}}), {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  // Batches of non-square matrices.
  expect_near(run("Trilu", {f64_tensor({2, 1, 2}, {1, 2, 3, 4}), i64_tensor({}, {1})}), {2, 1, 2}, {0, 2, 0, 4});
  expect_field_matches_float(one_op("Trilu", {x}));
}

TEST(OpsIndexing, GatherElementsTakesAlongAnAxis) {
  const Tensor x = f64_tensor({2, 2}, {1, 2, 3, 4});
  expect_near(run("GatherElements", {x, i64_tensor({2, 2}, {0, 0, 1, 0})}, {{"axis", int64_t{1}}}), {2, 2},
              {1, 1, 4, 3});
  expect_near(run("GatherElements", {x, i64_tensor({1, 2}, {1, -2})}), {1, 2}, {3, 2});
  expect_error([&] { run("GatherElements", {x, i64_tensor({1, 2}, {2, 0})}); }, "out of range");
}

TEST(OpsIndexing, ScatterNDWritesSlicesInOrder) {
  const Tensor x = f64_tensor({3, 2}, {1, 2, 3, 4, 5, 6});
  expect_near(run("ScatterND", {x, i64_tensor({2, 1}, {2, 0}), f64_tensor({2, 2}, {10, 20, 30, 40})}), {3, 2},
              {30, 40, 3, 4, 10, 20});
  expect_near(run("ScatterND", {x, i64_tensor({1, 2}, {1, 1}), f64_tensor({1}, {9})}), {3, 2}, {1, 2, 3, 9, 5, 6});
  expect_near(run("ScatterND", {x, i64_tensor({2, 1}, {0, 0}), f64_tensor({2, 2}, {1, 1, 2, 2})}, {{"reduction", std::string("add")}}),
              {3, 2}, {4, 5, 3, 4, 5, 6});
  expect_near(run("ScatterND", {x, i64_tensor({1, 1}, {1}), f64_tensor({1, 2}, {0, 9})}, {{"reduction", std::string("max")}}),
              {3, 2}, {1, 2, 3, 9, 5, 6});
  expect_error([&] { run("ScatterND", {x, i64_tensor({1, 1}, {3}), f64_tensor({1, 2}, {0, 0})}); }, "out of range");
}

TEST(OpsIndexing, RangeLengthAndValues) {
  auto f = [](double v) { return Tensor::scalar_f32(static_cast<float>(v)); };
  auto i = [](int64_t v) { return Tensor::from_i64(DType::Int32, {}, std::vector<int64_t>{v}); };
  expect_near(run("Range", {f(1), f(2.5), f(0.5)}), {3}, {1, 1.5, 2});
  expect_near(run("Range", {i(10), i(4), i(-3)}), {2}, {10, 7});
  expect_near(run("Range", {i(0), i(-3), i(1)}), {0}, {});
  expect_error([&] { run("Range", {i(0), i(3), i(0)}); }, "delta");
  expect_error([&] { run("Range", {i(0), i(int64_t{1} << 30), i(1)}); }, "too large");
  // Range-27: 16-bit floats computed wider (stash_type 1, the default) or in the type (0, not implemented).
  auto h = [](double v) { return Tensor::from_f64(DType::Float16, {}, std::vector<double>{v}); };
  expect_near(run("Range", {h(0), h(1.5), h(0.5)}), {3}, {0, 0.5, 1});
  expect_error([&] { run("Range", {h(0), h(1), h(0.5)}, {{"stash_type", int64_t{0}}}); }, "stash_type=0");
}

TEST(OpsEinsum, ContractionsTransposesAndSums) {
  const Vec a = random_values(2 * 3, 1), b = random_values(3 * 4, 2);
  // ij,jk->ik is MatMul.
  Vec mm = run("MatMul", {f64_tensor({2, 3}, a), f64_tensor({3, 4}, b)}).to_f64();
  expect_near(run("Einsum", {f64_tensor({2, 3}, a), f64_tensor({3, 4}, b)}, {{"equation", std::string("ij,jk->ik")}}),
              {2, 4}, mm, 1e-12);
  // Implicit output: letters used once, in alphabetical order.
  expect_near(run("Einsum", {f64_tensor({2, 3}, a), f64_tensor({3, 4}, b)}, {{"equation", std::string("ij,jk")}}),
              {2, 4}, mm, 1e-12);
  expect_near(run("Einsum", {f64_tensor({2, 3}, {1, 2, 3, 4, 5, 6})}, {{"equation", std::string("ij->ji")}}), {3, 2},
              {1, 4, 2, 5, 3, 6});
  expect_near(run("Einsum", {f64_tensor({2, 3}, {1, 2, 3, 4, 5, 6})}, {{"equation", std::string("ij->i")}}), {2},
              {6, 15});
  expect_near(run("Einsum", {f64_tensor({2, 2}, {1, 2, 3, 4})}, {{"equation", std::string("ii->")}}), {}, {5});
  // Ellipses broadcast: batch dims [2, 1] against [3].
  Tensor e = run("Einsum", {f64_tensor({2, 1, 1, 2}, {1, 2, 3, 4}), f64_tensor({3, 2, 1}, {1, 1, 2, 2, 3, 3})},
                 {{"equation", std::string("...ij,...jk->...ik")}});
  expect_near(e, {2, 3, 1, 1}, {3, 6, 9, 7, 14, 21});
  expect_field_matches_float(
      one_op("Einsum", {f64_tensor({2, 2}, {1, 2, 3, 4}), f64_tensor({2, 2}, {0, 1, -1, 2})},
             {{"equation", std::string("ij,kj->ik")}}));
  expect_error([&] { run("Einsum", {f64_tensor({2, 3}, a)}, {{"equation", std::string("ijk->i")}}); }, "rank");
  expect_error([&] { run("Einsum", {f64_tensor({2, 3}, a), f64_tensor({2, 3}, a)}, {{"equation", std::string("ij,jk")}}); },
               "disagree");
}

// Identities between the new operators and the basic ones, proved by Z3 from the
// symbolic semantics: the entries' semantics agree with each other, not only with
// hand-computed values.
TEST(OpsIndexing, IdentitiesWithTheBasicOperatorsAreProved) {
  RuleSet set = parse_rules(R"(
rule einsum_is_matmul {
  vars %x, %y
  verify-shapes %x: f32[2,3], %y: f32[3,2]
  source {
    %0 = Einsum(%x, %y) {equation="ij,jk->ik"}
    return %0
  }
  target {
    %0 = MatMul(%x, %y)
    return %0
  }
}

rule triangles_add_up {
  vars %x
  verify-shapes %x: f32[3,4]
  source {
    %k = const i64[] {-1}
    %0 = Trilu(%x) {upper=1}
    %1 = Trilu(%x, %k) {upper=0}
    %2 = Add(%0, %1)
    return %2
  }
  target {
    return %x
  }
}

rule sum_square_is_sum_of_products {
  vars %x
  verify-shapes %x: f32[2,3]
  source {
    %0 = ReduceSumSquare(%x) {axes=[1], keepdims=0}
    return %0
  }
  target {
    %0 = Mul(%x, %x)
    %a = const i64[1] {1}
    %1 = ReduceSum(%0, %a) {keepdims=0}
    return %1
  }
}

rule less_is_greater_swapped {
  vars %x, %y
  verify-shapes %x: f32[4], %y: f32[4]
  source {
    %0 = Less(%x, %y)
    return %0
  }
  target {
    %0 = Greater(%y, %x)
    return %0
  }
}

rule max_of_reduce_max {
  vars %x
  verify-shapes %x: f32[2,3]
  source {
    %0 = ReduceMax(%x) {axes=[0, 1], keepdims=0}
    return %0
  }
  target {
    %0 = ReduceMax(%x) {axes=[1], keepdims=1}
    %1 = ReduceMax(%0) {axes=[0, 1], keepdims=0}
    return %1
  }
}
)",
                            "new_ops.rules");
  for (const Rule& r : set.rules) {
    Z3VerifyResult v = z3_verify(r);
    EXPECT_EQ(v.verdict.kind, Verdict::Kind::Proved) << r.name << ": " << print_verdict(v.verdict);
  }
}

}  // namespace
}  // namespace isomer
