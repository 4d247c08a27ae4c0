// Half-precision models on the runtime (runtime/precision.h): they compute in
// float32 on the same kernels as float32 models, keep their interface types, and
// keep the roundings a Cast to half writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "check/compare.h"
#include "runtime/precision.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

Tensor as(DType t, const Tensor& x) { return Tensor::from_f64(t, x.dims(), x.to_f64()); }

// An encoder-like chain in float16: MatMul with half weights, LayerNormalization,
// Softmax, a ConstantOfShape of a half value, and a Cast to float32 and back.
Graph half_block(DType half) {
  GraphBuilder b;
  Value x = b.input("x", {half, make_shape({4, 32})});
  Value h = b.op1("MatMul", {x, b.constant(as(half, random_tensor({32, 32}, 1)))});
  Value ln = b.op1("LayerNormalization",
                   {h, b.constant(as(half, random_tensor({32}, 2, 0.5, 1.5))), b.constant(as(half, random_tensor({32}, 3)))},
                   {{"axis", int64_t{-1}}});
  Value wide = b.op1("Cast", {ln}, {{"to", static_cast<int64_t>(DType::Float32)}});
  Value sm = b.op1("Softmax", {wide}, {{"axis", int64_t{-1}}});
  Value back = b.op1("Cast", {sm}, {{"to", static_cast<int64_t>(half)}});
  Attributes fill;
  fill.set("value", as(half, Tensor::from_f64(DType::Float32, {1}, std::vector<double>{0.5})));
  Value c = b.op1("ConstantOfShape", {b.constant(Tensor::vector_i64({4, 32}))}, fill);
  Value y = b.op1("Add", {back, c});
  return b.finish({y, wide}, {"y", "wide"});
}

TEST(RuntimePrecision, HalfModelsRunInFloatOnNativeKernels) {
  for (DType half : {DType::Float16, DType::BFloat16}) {
    Graph g = half_block(half);
    ASSERT_TRUE(runtime::has_half_values(g));
    std::vector<Tensor> inputs = {as(half, random_tensor({4, 32}, 9))};
    std::vector<Tensor> want = evaluate(g, inputs);
    runtime::RuntimeOptions o;
    o.threads = 1;
    auto exe = runtime::compile(g, o);
    std::vector<Tensor> got = exe->run(inputs);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].dtype(), half);  // the interface as written
    EXPECT_EQ(got[1].dtype(), DType::Float32);
    // 'wide' is float32 but computed from a half value, which the runtime holds in
    // float32: it agrees to the half type's precision (bfloat16: 2^-8).
    CheckResult r = compare_outputs(want, got, g.output_names(), half == DType::BFloat16 ? 2e-2 : 1e-3);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << dtype_name(half) << ": " << r.reason;
    for (const runtime::StepInfo& s : exe->steps()) EXPECT_NE(s.kind, "reference") << s.label;
  }
}

// The promoted graph rounds where the model casts to half: Cast(to f16) stays,
// followed by a widening cast, and nothing else is half inside.
TEST(RuntimePrecision, PromotionKeepsTheModelsRoundingsAndInterface) {
  Graph g = half_block(DType::Float16);
  Graph p = runtime::promote_half_to_float(g);
  ASSERT_EQ(p.inputs().size(), 1u);
  EXPECT_EQ(p.inputs()[0]->output_types()[0].dtype, DType::Float16);
  EXPECT_EQ(p.outputs()[0].type().dtype, DType::Float16);
  EXPECT_EQ(p.outputs()[1].type().dtype, DType::Float32);
  size_t half_values = 0, half_casts = 0;
  for (const NodePtr& n : p.topo_order()) {
    if (n->kind() == NodeKind::Input) continue;
    if (n->output_types()[0].dtype == DType::Float16) {
      ++half_values;
      EXPECT_EQ(n->op_type(), "Cast") << n->name();
      half_casts += n->op_type() == "Cast";
    }
  }
  EXPECT_EQ(half_casts, 2u);  // the model's own rounding to half, and the output's
  EXPECT_EQ(half_values, half_casts);
  // A float32 model is left alone.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Graph f = b.finish({b.op1("Relu", {x})}, {"y"});
  EXPECT_FALSE(runtime::has_half_values(f));
  EXPECT_TRUE(same_graph(runtime::promote_half_to_float(f), f));
}

// A model that casts float32 to half as its output, and half to float32 as
// another: the output is that rounding itself (not widened and rounded again),
// and the Cast of an input widened already computes nothing. The runtime gives
// the reference's bits.
TEST(RuntimePrecision, CastsAtTheInterfaceAreNotRepeated) {
  for (DType half : {DType::Float16, DType::BFloat16}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({3, 40})});
    Value h = b.input("h", {half, make_shape({3, 40})});
    Value y = b.op1("Cast", {x}, {{"to", static_cast<int64_t>(half)}});
    Value z = b.op1("Cast", {h}, {{"to", static_cast<int64_t>(DType::Float32)}});
    Graph g = b.finish({y, z}, {"y", "z"});
    Graph p = runtime::promote_half_to_float(g);
    size_t casts = 0;
    for (const NodePtr& n : p.topo_order()) casts += n->kind() == NodeKind::Op;
    EXPECT_EQ(casts, 2u) << dtype_name(half) << ": one rounding of x, one widening of h";
    EXPECT_EQ(p.outputs()[0].type().dtype, half);
    std::vector<Tensor> inputs = {random_tensor({3, 40}, 4, -70000.0, 70000.0), as(half, random_tensor({3, 40}, 5))};
    std::vector<Tensor> want = evaluate(g, inputs);
    runtime::RuntimeOptions o;
    o.threads = 1;
    std::vector<Tensor> got = runtime::compile(g, o)->run(inputs);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(got[0].same_as(want[0])) << dtype_name(half);
    EXPECT_TRUE(got[1].same_as(want[1])) << dtype_name(half);
  }
}

// A half output is compared at its own precision: 3 epsilons of float16 pass, an
// error of 2% does not; a float32 output keeps the given tolerance.
TEST(RuntimePrecision, HalfOutputsAreComparedAtTheirPrecision) {
  auto vec = [](DType t, double v) { return Tensor::from_f64(t, {2}, std::vector<double>{1.0, v}); };
  EXPECT_EQ(compare_outputs({vec(DType::Float16, 0.5)}, {vec(DType::Float16, 0.5 + 3 * 0x1p-10)}, {"y"}, 1e-3).status,
            CheckResult::Status::Passed);
  EXPECT_EQ(compare_outputs({vec(DType::Float16, 0.5)}, {vec(DType::Float16, 0.52)}, {"y"}, 1e-3).status,
            CheckResult::Status::Failed);
  EXPECT_EQ(compare_outputs({vec(DType::Float32, 0.5)}, {vec(DType::Float32, 0.5 + 3 * 0x1p-10)}, {"y"}, 1e-3).status,
            CheckResult::Status::Failed);
}

}  // namespace
}  // namespace isomer
