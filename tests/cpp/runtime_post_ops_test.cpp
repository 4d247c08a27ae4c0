// Post-op chains with the same oneDNN eltwise algorithm twice, with other
// parameters: Gemma-2's logit soft-cap (x / 30, tanh, x 30 on the LM head's
// product and on attention's scores), an affine map on each side of a ReLU, two
// LeakyReLUs or ELUs. oneDNN 2.6's jit kernels applied the first one's alpha to
// both; the runtime now ends the chain before the repeat. Against the reference
// evaluator, after a MatMul with constant weights, a product of two run-time
// operands, and a convolution.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

}  // namespace
}  // namespace isomer
