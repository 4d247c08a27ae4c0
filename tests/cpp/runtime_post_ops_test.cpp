// Post-op chains with the same oneDNN eltwise algorithm twice, with other
// parameters: Gemma-2's logit soft-cap (x / 30, tanh, x 30 on the LM head's
// product and on attention's scores), an affine map on each side of a ReLU, two
// LeakyReLUs or ELUs. oneDNN 2.6's jit kernels applied the first one's alpha to
// both; the runtime now ends the chain before the repeat. Against the reference
// evaluator, after a MatMul with constant weights, a product of two run-time
// operands, and a convolution. Then SwiGLU's silu(gate) x up: a binary post-op
// whose operand outgrows the cache runs as a pass of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

// (op, scalar operand or none, attribute alpha or none), applied in order.
struct Link {
  std::string op;
  std::optional<float> k;
  std::optional<float> alpha;
};

Value chain(GraphBuilder& b, Value v, const std::vector<Link>& links, const Value& shared) {
  for (const Link& l : links) {
    Attributes a;
    if (l.alpha) a = {{"alpha", *l.alpha}};
    if (!l.k) v = b.op1(l.op, {v}, a);
    // 30 is one constant shared by its readers (as the exporter wrote Gemma-2's).
    else v = b.op1(l.op, {v, *l.k == 30.0f ? shared : b.constant(Tensor::scalar_f32(*l.k))}, a);
  }
  return v;
}

const std::vector<std::vector<Link>>& chains() {
  static const std::vector<std::vector<Link>> all = {
      {{"Div", 30.0f, {}}, {"Tanh", {}, {}}, {"Mul", 30.0f, {}}},
      {{"Mul", 30.0f, {}}, {"Tanh", {}, {}}, {"Div", 30.0f, {}}},
      {{"Mul", 3.0f, {}}, {"Relu", {}, {}}, {"Add", 0.5f, {}}},
      {{"LeakyRelu", {}, 0.1f}, {"Tanh", {}, {}}, {"LeakyRelu", {}, 0.5f}},
      {{"Elu", {}, 0.5f}, {"Mul", 3.0f, {}}, {"Elu", {}, 2.0f}},
  };
  return all;
}

TEST(RuntimePostOps, RepeatedEltwiseAfterAMatmulWithConstantWeights) {
  for (const auto& links : chains()) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 32, 64})});
    Value m = b.op1("MatMul", {x, b.constant(random_tensor({64, 200}, 1))});
    Graph g = b.finish({chain(b, m, links, b.constant(Tensor::scalar_f32(30.0f)))}, {"y"});
    testing::run_against_reference(g);
  }
}

TEST(RuntimePostOps, RepeatedEltwiseAfterAProductOfRuntimeOperandsAndBeforeAMask) {
  // Attention's scores: Q K^T scaled, soft-capped, plus a mask, then Softmax.
  for (const auto& links : chains()) {
    GraphBuilder b;
    Value q = b.input("q", {DType::Float32, make_shape({1, 4, 16, 32})});
    Value k = b.input("k", {DType::Float32, make_shape({1, 4, 32, 16})});
    Value mask = b.input("mask", {DType::Float32, make_shape({1, 4, 16, 16})});
    Value s = b.op1("Mul", {b.op1("MatMul", {q, k}), b.constant(Tensor::scalar_f32(0.125f))});
    s = b.op1("Add", {chain(b, s, links, b.constant(Tensor::scalar_f32(30.0f))), mask});
    Graph g = b.finish({b.op1("Softmax", {s}, {{"axis", int64_t{-1}}})}, {"p"});
    testing::run_against_reference(g);
  }
}

TEST(RuntimePostOps, RepeatedEltwiseAfterAConvolution) {
  for (const auto& links : chains()) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 16, 12, 12})});
    Value c = b.op1("Conv", {x, b.constant(random_tensor({32, 16, 3, 3}, 2)), b.constant(random_tensor({32}, 3))},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Graph g = b.finish({chain(b, c, links, b.constant(Tensor::scalar_f32(30.0f)))}, {"y"});
    testing::run_against_reference(g);
  }
}

// silu(x Wg) * (x Wu) with x of dims `x_dims` and both products `n` wide.
Graph swiglu(const std::vector<int64_t>& x_dims, int64_t n) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape(x_dims)});
  const int64_t k = x_dims.back();
  Value gate = b.op1("MatMul", {x, b.constant(random_tensor({k, n}, 11, -0.5, 0.5))});
  Value up = b.op1("MatMul", {x, b.constant(random_tensor({k, n}, 12, -0.5, 0.5))});
  Value silu = b.op1("Mul", {gate, b.op1("Sigmoid", {gate})});
  return b.finish({b.op1("Mul", {silu, up})}, {"y"});
}

bool fused_in_a_product(const std::vector<runtime::StepInfo>& steps, const std::string& op) {
  return std::any_of(steps.begin(), steps.end(), [&](const runtime::StepInfo& s) {
    return s.kind == "matmul" && std::find(s.ops.begin(), s.ops.end(), op) != s.ops.end();
  });
}

TEST(RuntimePostOps, SwigluOfAProductLargerThanTheCacheMultipliesInAPassOfItsOwn) {
  // 2 x 1031 x 1999 products: 16.5 MB, more than any core's L2. oneDNN's epilogue
  // read the up projection tile by tile while the weights streamed (LLaMA's gate,
  // 128 x 2816 at 1 thread: 0.3 ms over the product alone; a pass, 0.11 ms).
  const std::vector<runtime::StepInfo> steps = testing::run_against_reference(swiglu({2, 1031, 24}, 1999));
  if (kernels::prefer_packed_gemm(2 * 1031)) GTEST_SKIP() << "isomer's packed GEMM runs the products here";
  EXPECT_FALSE(fused_in_a_product(steps, "Sigmoid"));
  EXPECT_TRUE(std::any_of(steps.begin(), steps.end(), [](const runtime::StepInfo& s) {
    return s.kind == "pointwise" && s.ops == std::vector<std::string>{"Sigmoid", "Mul", "Mul"};
  }));
}

TEST(RuntimePostOps, SwigluOfASmallProductStaysInItsEpilogue) {
  const std::vector<runtime::StepInfo> steps = testing::run_against_reference(swiglu({1, 17, 64}, 203));
  if (kernels::prefer_packed_gemm(17)) GTEST_SKIP() << "isomer's packed GEMM runs the products here";
  EXPECT_TRUE(fused_in_a_product(steps, "Sigmoid"));
}

}  // namespace
}  // namespace isomer
