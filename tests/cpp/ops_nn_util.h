#pragma once
// Helpers shared by the neural-network operator tests (ops_nn_test.cpp,
// ops_nn_pool_test.cpp): random data with fixed seeds, one-operator graphs,
// tolerant comparison, and the check that field semantics equal float semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"

namespace isomer::nn_test {

using Dims = std::vector<int64_t>;
using Vec = std::vector<double>;

inline Vec random_values(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

inline Vec small_ints(int64_t n, uint64_t seed, int lo = -3, int hi = 3) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

inline int64_t count(const Dims& d) { return num_elements(d); }
inline Tensor f64_tensor(const Dims& d, const Vec& v) { return Tensor::from_f64(DType::Float64, d, v); }

// One operator applied to graph inputs of the given tensors' types; evaluated on them.
struct OneOp {
  Graph graph;
  std::vector<Tensor> args;
};

inline OneOp one_op(const std::string& op, const std::vector<Tensor>& args, const Attributes& attrs = {}) {
  GraphBuilder b;
  std::vector<Value> ins;
  for (size_t i = 0; i < args.size(); ++i) ins.push_back(b.input("x" + std::to_string(i), args[i].type()));
  return {b.finish({b.op1(op, ins, attrs)}, {"y"}), args};
}

inline Tensor run(const std::string& op, const std::vector<Tensor>& args, const Attributes& attrs = {}) {
  OneOp o = one_op(op, args, attrs);
  return evaluate(o.graph, o.args)[0];
}

inline TensorType infer(const std::string& op, const std::vector<TensorType>& types, const Attributes& attrs = {}) {
  GraphBuilder b;
  std::vector<Value> ins;
  for (size_t i = 0; i < types.size(); ++i) ins.push_back(b.input("x" + std::to_string(i), types[i]));
  return b.op1(op, ins, attrs).type();
}

inline void expect_near(const Tensor& got, const Dims& dims, const Vec& want, double tol = 1e-9) {
  ASSERT_EQ(got.dims(), dims);
  Vec g = got.to_f64();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << "at " << i;
}

inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "expected an Error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Evaluates the graph over F_p on the same (integer-valued) inputs and checks that
// every output equals the float output, which must be an integer.
inline void expect_field_matches_float(const OneOp& o) {
  std::vector<Tensor> floats = evaluate(o.graph, o.args);
  std::vector<FieldArray> field_in;
  for (const Tensor& t : o.args) {
    FieldArray a;
    a.dims = t.dims();
    for (double v : t.to_f64()) a.data.push_back(Fp::from_signed(std::llround(v)));
    field_in.push_back(a);
  }
  std::vector<FieldArray> field = evaluate_field(o.graph, field_in);
  ASSERT_EQ(field.size(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(field[i].dims, floats[i].dims());
    Vec f = floats[i].to_f64();
    for (size_t k = 0; k < f.size(); ++k) {
      ASSERT_NEAR(f[k], std::round(f[k]), 1e-6) << "float result is not an integer at " << k;
      ASSERT_EQ(field[i].data[k], Fp::from_signed(std::llround(f[k]))) << "at " << k;
    }
  }
}

}  // namespace isomer::nn_test
