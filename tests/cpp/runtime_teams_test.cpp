// Which steps of a transformer-sized model take a thread team at two threads: a
// product, a transpose and a BatchNormalization each join a second thread only
// when their work pays for waking it (kernels::team_for_work; runtime/compiler.h's
// TeamScope), and a team changes no output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/parallel.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

// x [rows, d] -> MatMul by [d, d] -> Transpose to [d, rows] -> BatchNormalization
// over the d channels of [1, d, rows].
Graph block(int64_t rows, int64_t d) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({rows, d})});
  Value y = b.op1("MatMul", {x, b.constant(random_tensor({d, d}, 1))});
  Value t = b.op1("Transpose", {y}, {{"perm", std::vector<int64_t>{1, 0}}});
  Value u = b.op1("Unsqueeze", {t, b.constant(Tensor::vector_i64({0}))});
  Value bn = b.op1("BatchNormalization", {u, b.constant(random_tensor({d}, 2, 0.5, 1.5)), b.constant(random_tensor({d}, 3)),
                                          b.constant(random_tensor({d}, 4)), b.constant(random_tensor({d}, 5, 0.5, 2.0))});
  return b.finish({bn, y}, {"z", "y"});
}

// The team (" t1" / " t2" ending the signature) of each kind of step, checking the
// outputs against the reference evaluator.
std::map<std::string, std::string> teams(const Graph& g) {
  std::vector<Tensor> inputs = random_inputs(g, 7);
  std::vector<Tensor> want = evaluate(g, inputs);
  runtime::RuntimeOptions o;
  o.threads = 2;
  auto exe = runtime::compile(g, o);
  CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  std::map<std::string, std::string> out;
  for (const runtime::StepInfo& s : exe->steps()) out[s.kind] = s.signature.substr(s.signature.rfind(' ') + 1);
  return out;
}

TEST(RuntimeTeams, SmallStepsRunOnOneThreadAtTwo) {
  // DeiT-tiny's sizes: 66 tokens of 64 (270K multiply-adds, 34 KB moved).
  std::map<std::string, std::string> small = teams(block(66, 64));
  EXPECT_EQ(small["matmul"], "t1");
  EXPECT_EQ(small["reorder"], "t1");
  EXPECT_EQ(small["batchnorm"], "t1");
  // 512 tokens of 512 (134M multiply-adds, 2 MB moved): both threads.
  std::map<std::string, std::string> big = teams(block(512, 512));
  EXPECT_EQ(big["matmul"], "t2");
  EXPECT_EQ(big["reorder"], "t2");
  EXPECT_EQ(big["batchnorm"], "t2");
}

// While the threads sleep between regions (the cores are busy), a thread needs 4x
// the work: a product of 576K multiply-adds takes a team while they spin, not then.
TEST(RuntimeTeams, SleepingThreadsNeedMoreWork) {
  const Graph g = block(144, 64);
  EXPECT_EQ(teams(g)["matmul"], "t2");
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  EXPECT_EQ(teams(g)["matmul"], "t1");
  unsetenv("OMP_WAIT_POLICY");
}

// x [rows, d] -> DynamicQuantizeLinear -> MatMulInteger by s8 weights [d, d] -> Cast
// to float -> Mul by the two scales: a dynamically quantized linear layer.
Graph int8_block(int64_t rows, int64_t d) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({rows, d})});
  std::vector<Value> q = b.op("DynamicQuantizeLinear", {x}, {}, 3);
  std::string w(static_cast<size_t>(d * d), '\0');
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(static_cast<int>(i * 37 % 255) - 127);
  Value wv = b.constant(Tensor(DType::Int8, {d, d}, Bytes(std::move(w))));
  Value acc = b.op1("MatMulInteger", {q[0], wv, q[2], b.constant(Tensor(DType::Int8, {}, Bytes(std::string(1, '\0'))))});
  Value f = b.op1("Cast", {acc}, {{"to", int64_t{1}}});
  Value scale = b.op1("Mul", {q[1], b.constant(Tensor::scalar_f32(0.01f))});
  return b.finish({b.op1("Mul", {f, scale})}, {"y"});
}

// An integer product pays for a thread from four times a float one's work (VNNI's
// four int8 multiply-adds per lane), and its quantization from kTeamBytes moved.
TEST(RuntimeTeams, SmallIntegerProductsRunOnOneThreadAtTwo) {
  std::map<std::string, std::string> small = teams(int8_block(8, 256));  // 524K multiply-adds, 8 KB
  EXPECT_EQ(small["int8-matmul"], "t1");
  std::map<std::string, std::string> big = teams(int8_block(512, 512));  // 134M multiply-adds
  EXPECT_EQ(big["int8-matmul"], "t2");
}

}  // namespace
}  // namespace isomer
