// Tests of ONNX Attention (attention.cpp): the reference semantics against values
// worked out by hand (scale, causal frontier with and without a past, grouped
// heads, bool masks, softcap, a fully masked row), the shape rule of both forms,
// and the errors for bad nodes. tests/python/test_attention_op.py checks every
// onnx node test case and ONNX Runtime.
#include <cmath>

#include "ops_nn_util.h"

namespace isomer {
namespace {
using namespace nn_test;

Attributes attrs(std::initializer_list<std::pair<std::string, AttrValue>> a) { return Attributes(a); }

// p1 = e^a / (e^0 + e^a): the weight of the second key when the scores are (0, a).
double second(double a) { return std::exp(a) / (1 + std::exp(a)); }

std::vector<Tensor> run_all(const std::vector<Tensor>& args, const Attributes& a, size_t outputs) {
  GraphBuilder b;
  std::vector<Value> ins;
  for (size_t i = 0; i < args.size(); ++i)
    ins.push_back(args[i].dtype() == DType::Undefined ? Value() : b.input("x" + std::to_string(i), args[i].type()));
  std::vector<Value> outs = b.op("Attention", ins, a, outputs);
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) names.push_back("y" + std::to_string(i));
  std::vector<Tensor> present;
  for (const Tensor& t : args)
    if (t.dtype() != DType::Undefined) present.push_back(t);
  return evaluate(b.finish(outs, names), present);
}

// Q = (1, 2), K = (0, 1), V = (10, 20), one head of size 1, scale 1.
const Tensor kQ = f64_tensor({1, 1, 2, 1}, {1, 2});
const Tensor kK = f64_tensor({1, 1, 2, 1}, {0, 1});
const Tensor kV = f64_tensor({1, 1, 2, 1}, {10, 20});

TEST(OpsAttention, ScoresSoftmaxAndValues) {
  // Scores: query 0 (0, 1), query 1 (0, 2).
  expect_near(run("Attention", {kQ, kK, kV}, attrs({{"scale", 1.0}})), {1, 1, 2, 1},
              {10 + 10 * second(1), 10 + 10 * second(2)});
  // The default scale is 1/sqrt(head size) = 1 here; 0.5 halves the scores.
  expect_near(run("Attention", {kQ, kK, kV}), {1, 1, 2, 1}, {10 + 10 * second(1), 10 + 10 * second(2)});
  expect_near(run("Attention", {kQ, kK, kV}, attrs({{"scale", 0.5}})), {1, 1, 2, 1},
              {10 + 10 * second(0.5), 10 + 10 * second(1)});
  // Softcap 1: scores become tanh(s).
  expect_near(run("Attention", {kQ, kK, kV}, attrs({{"softcap", 1.0}})), {1, 1, 2, 1},
              {10 + 10 * second(std::tanh(1.0)), 10 + 10 * second(std::tanh(2.0))});
}

TEST(OpsAttention, CausalFrontierAndPast) {
  // Query 0 sees key 0 only.
  expect_near(run("Attention", {kQ, kK, kV}, attrs({{"is_causal", int64_t{1}}})), {1, 1, 2, 1},
              {10, 10 + 10 * second(2)});
  // With one past key (k = 0, v = 10) ahead of the new key (k = 1, v = 20), the one new
  // query (q = 2) sees both: the frontier moves by the past length.
  const Tensor q = f64_tensor({1, 1, 1, 1}, {2}), k = f64_tensor({1, 1, 1, 1}, {1}), v = f64_tensor({1, 1, 1, 1}, {20});
  const Tensor pk = f64_tensor({1, 1, 1, 1}, {0}), pv = f64_tensor({1, 1, 1, 1}, {10});
  const auto out = run_all({q, k, v, Tensor(), pk, pv}, attrs({{"is_causal", int64_t{1}}}), 3);
  expect_near(out[0], {1, 1, 1, 1}, {10 + 10 * second(2)});
  expect_near(out[1], {1, 1, 2, 1}, {0, 1});
  expect_near(out[2], {1, 1, 2, 1}, {10, 20});
}

TEST(OpsAttention, GroupedHeadsShareKeysAndValues) {
  // Two query heads, one key/value head: head 1's query (2) against the same keys.
  const Tensor q = f64_tensor({1, 2, 1, 1}, {1, 2});
  const Tensor k = f64_tensor({1, 1, 2, 1}, {0, 1}), v = f64_tensor({1, 1, 2, 1}, {10, 20});
  expect_near(run("Attention", {q, k, v}), {1, 2, 1, 1}, {10 + 10 * second(1), 10 + 10 * second(2)});
  // The same in the 3-D form [batch, seq, heads * head_size].
  const Tensor q3 = f64_tensor({1, 1, 2}, {1, 2});
  const Tensor k3 = f64_tensor({1, 2, 1}, {0, 1}), v3 = f64_tensor({1, 2, 1}, {10, 20});
  expect_near(run("Attention", {q3, k3, v3}, attrs({{"q_num_heads", int64_t{2}}, {"kv_num_heads", int64_t{1}}})),
              {1, 1, 2}, {10 + 10 * second(1), 10 + 10 * second(2)});
}

TEST(OpsAttention, MasksAndFullyMaskedRows) {
  // Bool mask: query 0 may see key 1 only; query 1 sees nothing and is zero.
  const Tensor mask(DType::Bool, {2, 2}, std::string("\0\1\0\0", 4));
  expect_near(run("Attention", {kQ, kK, kV, mask}), {1, 1, 2, 1}, {20, 0});
  // A float mask is added to the scores; one shorter than the keys masks the rest.
  expect_near(run("Attention", {kQ, kK, kV, f64_tensor({1, 2}, {1, 0})}), {1, 1, 2, 1},
              {10 + 10 * second(0), 10 + 10 * second(1)});
  expect_near(run("Attention", {kQ, kK, kV, f64_tensor({1}, {0})}), {1, 1, 2, 1}, {10, 10});
}

TEST(OpsAttention, ShapesOfBothForms) {
  const TensorType y3 = infer("Attention",
                              {{DType::Float32, {2, 5, 12}}, {DType::Float32, {2, 7, 4}}, {DType::Float32, {2, 7, 6}}},
                              attrs({{"q_num_heads", int64_t{3}}, {"kv_num_heads", int64_t{1}}}));
  EXPECT_EQ(y3.shape, (Shape{2, 5, 18}));
  const TensorType y4 = infer("Attention",
                              {{DType::Float32, {2, 8, 5, 16}}, {DType::Float32, {2, 2, 7, 16}}, {DType::Float32, {2, 2, 7, 4}}});
  EXPECT_EQ(y4.shape, (Shape{2, 8, 5, 4}));
}

TEST(OpsAttention, BadNodesSayWhy) {
  const TensorType f4{DType::Float32, {1, 3, 4, 8}}, k4{DType::Float32, {1, 2, 4, 8}};
  expect_error([&] { infer("Attention", {f4, k4, k4}); }, "the 3 query heads are not a multiple of the 2 key/value heads");
  const TensorType f3{DType::Float32, {1, 4, 8}};
  expect_error([&] { infer("Attention", {f3, f3, f3}); }, "need the attributes q_num_heads and kv_num_heads");
  expect_error([&] { infer("Attention", {f3, f3, f3}, attrs({{"q_num_heads", int64_t{3}}, {"kv_num_heads", int64_t{1}}})); },
               "is not a multiple of 3");
  expect_error([&] { infer("Attention", {f4, f3, f3}); }, "Q, K and V must have the same rank");
  expect_error([&] { infer("Attention", {f4, f4, f4, TensorType{DType::Float32, {2, 4, 4}}}); }, "does not broadcast");
  expect_error([&] { infer("Attention", {f4, f4, f4}, attrs({{"is_causal", int64_t{2}}})); }, "is_causal must be 0 or 1");
  expect_error([&] { infer("Attention", {f4, f4, f4, TensorType(), TensorType{DType::Float32, {1, 3, 2, 8}}}); },
               "past_key and past_value must be given together");
}

}  // namespace
}  // namespace isomer
