#pragma once
// Small models for the parallelization tests, built against the operator table:
// an MLP, a transformer block (as PyTorch exports one: MatMul + bias Add, heads by
// Reshape/Transpose, Softmax, LayerNormalization, erf GELU), and a CNN.
#include <cmath>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "parallel/machine.h"

namespace isomer::test {

inline Tensor pweights(std::vector<int64_t> dims, uint64_t seed, double scale = 0.3) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(static_cast<double>(seed * 131 + i * 7 + 1));
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

inline Value linear(GraphBuilder& b, Value x, int64_t in, int64_t out, uint64_t seed) {
  Value y = b.op1("MatMul", {x, b.constant(pweights({in, out}, seed))});
  return b.op1("Add", {y, b.constant(pweights({out}, seed + 1, 0.1))});
}

inline Graph mlp_graph(int64_t batch = 8, int64_t width = 16, int layers = 3) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({batch, width})});
  for (int l = 0; l < layers; ++l) {
    x = linear(b, x, width, 2 * width, 10 * l + 1);
    x = b.op1("Relu", {x});
    x = b.op1("Gemm", {x, b.constant(pweights({2 * width, width}, 10 * l + 5)), b.constant(pweights({width}, 10 * l + 6))});
  }
  return b.finish({x}, {"y"});
}

// One post-norm transformer encoder layer: x [batch, seq, hidden].
inline Graph transformer_graph(int64_t batch = 2, int64_t seq = 4, int64_t hidden = 16, int64_t heads = 4,
                               int layers = 1) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({batch, seq, hidden})});
  const int64_t hd = hidden / heads;
  auto split_heads = [&](Value t) {
    Value r = b.op1("Reshape", {t, b.constant(Tensor::vector_i64({batch, seq, heads, hd}))});
    return b.op1("Transpose", {r}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  auto layer_norm = [&](Value t, uint64_t seed) {
    return b.op1("LayerNormalization", {t, b.constant(pweights({hidden}, seed, 1.0)), b.constant(pweights({hidden}, seed + 1, 0.1))},
                 {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  };
  for (int l = 0; l < layers; ++l) {
    const uint64_t s = 100 * static_cast<uint64_t>(l);
    Value q = split_heads(linear(b, x, hidden, hidden, s + 1));
    Value k = split_heads(linear(b, x, hidden, hidden, s + 3));
    Value v = split_heads(linear(b, x, hidden, hidden, s + 5));
    Value kt = b.op1("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    Value scores = b.op1("Div", {b.op1("MatMul", {q, kt}), b.constant(Tensor::scalar_f32(std::sqrt(static_cast<float>(hd))))});
    Value p = b.op1("Softmax", {scores}, {{"axis", int64_t{-1}}});
    Value ctx = b.op1("Transpose", {b.op1("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    ctx = b.op1("Reshape", {ctx, b.constant(Tensor::vector_i64({batch, seq, hidden}))});
    x = layer_norm(b.op1("Add", {x, linear(b, ctx, hidden, hidden, s + 7)}), s + 9);
    Value h = linear(b, x, hidden, 4 * hidden, s + 11);
    // erf GELU in PyTorch's export order: h * (erf(h / sqrt 2) + 1) * 0.5
    Value e = b.op1("Add", {b.op1("Erf", {b.op1("Div", {h, b.constant(Tensor::scalar_f32(1.4142135f))})}),
                            b.constant(Tensor::scalar_f32(1.0f))});
    Value g = b.op1("Mul", {b.op1("Mul", {h, e}), b.constant(Tensor::scalar_f32(0.5f))});
    x = layer_norm(b.op1("Add", {x, linear(b, g, 4 * hidden, hidden, s + 13)}), s + 15);
  }
  return b.finish({x}, {"y"});
}

inline Graph cnn_graph(int64_t batch = 4) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({batch, 3, 8, 8})});
  Value c1 = b.op1("Conv", {x, b.constant(pweights({8, 3, 3, 3}, 1)), b.constant(pweights({8}, 2, 0.1))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value r1 = b.op1("Relu", {c1});
  Value dw = b.op1("Conv", {r1, b.constant(pweights({8, 1, 3, 3}, 3)), b.constant(pweights({8}, 4, 0.1))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{8}}});
  Value pw = b.op1("Conv", {b.op1("Relu", {dw}), b.constant(pweights({16, 8, 1, 1}, 5)), b.constant(pweights({16}, 6, 0.1))});
  Value pool = b.op1("MaxPool", {b.op1("Relu", {pw})}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Value gap = b.op1("GlobalAveragePool", {pool});
  Value flat = b.op1("Flatten", {gap});
  Value fc = b.op1("Gemm", {flat, b.constant(pweights({10, 16}, 7)), b.constant(pweights({10}, 8, 0.1))}, {{"transB", int64_t{1}}});
  return b.finish({b.op1("Softmax", {fc}, {{"axis", int64_t{-1}}})}, {"p"});
}

inline parallel::Cluster test_cluster(int nodes, int per_node) {
  parallel::Cluster c;
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.device = parallel::DeviceRates{100, 2000, 2};
  c.memory_gb = 80;
  c.intra.gbps = 2400;
  c.intra.latency_us = 5;
  c.inter.gbps = 200;
  c.inter.latency_us = 10;
  return c;
}

}  // namespace isomer::test
