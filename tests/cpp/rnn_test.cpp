// LSTM, GRU and RNN (ops/rnn.cpp, runtime/lower_rnn.cpp): the shape rule on symbolic
// and batch-first shapes, errors that name the node and the reason, a step of the
// reference semantics worked by hand, and the runtime's oneDNN lowering against the
// reference evaluator on random shapes. tests/python/test_rnn.py checks the
// reference against ONNX Runtime and PyTorch's exports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;
using testing::run_against_reference;

int64_t gates(const std::string& op) { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }

TEST(Rnn, ShapesFollowLayoutDirectionAndSymbolicDims) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, {Dim::sym("seq"), Dim::sym("batch"), Dim(3)}});
  Value w = b.constant(random_tensor({2, 16, 3}, 1)), r = b.constant(random_tensor({2, 16, 4}, 2));
  std::vector<Value> out = b.op("LSTM", {x, w, r}, {{"hidden_size", int64_t{4}}, {"direction", std::string("bidirectional")}}, 3);
  EXPECT_EQ(out[0].type().shape, (Shape{Dim::sym("seq"), Dim(2), Dim::sym("batch"), Dim(4)}));
  EXPECT_EQ(out[1].type().shape, (Shape{Dim(2), Dim::sym("batch"), Dim(4)}));
  EXPECT_EQ(out[2].type().shape, out[1].type().shape);

  Value xb = b.input("xb", {DType::Float32, {Dim::sym("batch"), Dim(7), Dim(3)}});
  std::vector<Value> gru = b.op("GRU", {xb, b.constant(random_tensor({1, 12, 3}, 3)), b.constant(random_tensor({1, 12, 4}, 4))},
                                {{"layout", int64_t{1}}}, 2);  // hidden_size from R
  EXPECT_EQ(gru[0].type().shape, (Shape{Dim::sym("batch"), Dim(7), Dim(1), Dim(4)}));
  EXPECT_EQ(gru[1].type().shape, (Shape{Dim::sym("batch"), Dim(1), Dim(4)}));
  EXPECT_EQ(b.op("RNN", {xb, b.constant(random_tensor({1, 4, 3}, 5)), b.constant(random_tensor({1, 4, 4}, 6))},
                 {{"layout", int64_t{1}}})
                .size(),
            2u);
}

void expect_node_error(const std::string& op, Attributes attrs, std::vector<int64_t> w_dims,
                       const std::vector<std::string>& fragments) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, {Dim(5), Dim(2), Dim(3)}});
  const int64_t rows = w_dims[1];
  Value w = b.constant(random_tensor(w_dims, 1)), r = b.constant(random_tensor({w_dims[0], rows, rows / gates(op)}, 2));
  try {
    b.op(op, {x, w, r}, std::move(attrs), 0, "cell");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'cell'"), std::string::npos) << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

TEST(Rnn, BadAttributesNameTheNodeAndTheReason) {
  expect_node_error("LSTM", {{"direction", std::string("sideways")}}, {1, 16, 3}, {"direction 'sideways'"});
  expect_node_error("GRU", {{"layout", int64_t{2}}}, {1, 12, 3}, {"layout must be 0 or 1"});
  expect_node_error("RNN", {{"hidden_size", int64_t{5}}}, {1, 4, 3}, {"W", "4 vs 5"});
  expect_node_error("LSTM", {{"activations", std::vector<std::string>{"Sigmoid", "Swish", "Tanh"}}}, {1, 16, 3},
                    {"activation 'Swish'"});
  expect_node_error("GRU", {{"activations", std::vector<std::string>{"Sigmoid"}}}, {1, 12, 3}, {"takes 2"});
  expect_node_error("GRU", {{"input_forget", int64_t{1}}}, {1, 12, 3}, {"input_forget is an LSTM attribute"});
  expect_node_error("RNN", {{"activations", std::vector<std::string>{"Affine"}}}, {1, 4, 3}, {"Affine needs"});
  expect_node_error("LSTM", {{"clip", -1.0}}, {1, 16, 3}, {"clip must be positive"});
  expect_node_error("LSTM", {{"direction", std::string("bidirectional")}}, {1, 16, 3}, {"W", "dim 0", "1 vs 2"});
}

// One step of each cell with hidden_size 1, worked by hand from ONNX's equations.
TEST(Rnn, OneStepByHand) {
  auto run = [](const std::string& op, std::vector<double> w, std::vector<double> r, std::vector<double> bias,
                std::vector<double> h0, Attributes attrs = {}) {
    GraphBuilder b;
    const int64_t g = gates(op);
    Value x = b.constant(Tensor::from_f64(DType::Float32, {1, 1, 1}, std::vector<double>{0.5}));
    std::vector<Value> in{x, b.constant(Tensor::from_f64(DType::Float32, {1, g, 1}, w)),
                          b.constant(Tensor::from_f64(DType::Float32, {1, g, 1}, r)),
                          b.constant(Tensor::from_f64(DType::Float32, {1, 2 * g}, bias)), Value{},
                          b.constant(Tensor::from_f64(DType::Float32, {1, 1, 1}, h0))};
    if (op == "LSTM") in.push_back(b.constant(Tensor::from_f64(DType::Float32, {1, 1, 1}, std::vector<double>{0.25})));
    std::vector<Value> out = b.op(op, in, attrs, 2);
    return evaluate(b.finish({out[1]}, {"h"}), {})[0].to_f64()[0];
  };
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double h0 = 0.3, c0 = 0.25;
  // RNN: tanh(x w + h r + Wb + Rb)
  EXPECT_NEAR(run("RNN", {2}, {-1}, {0.1, 0.2}, {h0}), std::tanh(0.5 * 2 - h0 + 0.3), 1e-6);
  // LSTM, gates i o f c.
  const double i = sig(0.5 * 1 + h0 * 0.5 + 0.1), o = sig(0.5 * -1 + h0 * 1), f = sig(0.5 * 2 + h0 * -0.5),
               cc = std::tanh(0.5 * 0.5 + h0 * 2), cell = f * c0 + i * cc;
  EXPECT_NEAR(run("LSTM", {1, -1, 2, 0.5}, {0.5, 1, -0.5, 2}, {0.1, 0, 0, 0, 0, 0, 0, 0}, {h0}),
              o * std::tanh(cell), 1e-6);
  // GRU, gates z r h, both reset forms.
  const double z = sig(0.5 * 1 + h0 * 0.5), rr = sig(0.5 * -1 + h0 * 1);
  const double before = std::tanh(0.5 * 2 + (rr * h0) * -0.5 + 0.2), after = std::tanh(0.5 * 2 + rr * (h0 * -0.5 + 0.2));
  EXPECT_NEAR(run("GRU", {1, -1, 2}, {0.5, 1, -0.5}, {0, 0, 0, 0, 0, 0.2}, {h0}), (1 - z) * before + z * h0, 1e-6);
  EXPECT_NEAR(run("GRU", {1, -1, 2}, {0.5, 1, -0.5}, {0, 0, 0, 0, 0, 0.2}, {h0}, {{"linear_before_reset", int64_t{1}}}),
              (1 - z) * after + z * h0, 1e-6);
}

struct Case {
  std::string op;
  std::string direction;
  int64_t layout, seq, batch, input, hidden;
  bool bias, h0, c0;
  int64_t lbr;
  size_t outputs;
};

Graph case_graph(const Case& k, uint64_t seed, Attributes extra = {}) {
  GraphBuilder b;
  const int64_t D = k.direction == "bidirectional" ? 2 : 1, G = gates(k.op), H = k.hidden;
  const std::vector<int64_t> xd = k.layout == 0 ? std::vector<int64_t>{k.seq, k.batch, k.input}
                                                : std::vector<int64_t>{k.batch, k.seq, k.input};
  const std::vector<int64_t> sd = k.layout == 0 ? std::vector<int64_t>{D, k.batch, H} : std::vector<int64_t>{k.batch, D, H};
  Value x = b.input("x", {DType::Float32, make_shape(xd)});
  std::vector<Value> in{x, b.constant(random_tensor({D, G * H, k.input}, seed)),
                        b.constant(random_tensor({D, G * H, H}, seed + 1))};
  in.push_back(k.bias ? b.constant(random_tensor({D, 2 * G * H}, seed + 2)) : Value{});
  in.push_back(Value{});
  in.push_back(k.h0 ? b.input("h0", {DType::Float32, make_shape(sd)}) : Value{});
  if (k.op == "LSTM") in.push_back(k.c0 ? b.input("c0", {DType::Float32, make_shape(sd)}) : Value{});
  while (!in.back().present()) in.pop_back();
  Attributes a = extra;
  a.set("hidden_size", H);
  a.set("direction", k.direction);
  a.set("layout", k.layout);
  if (k.op == "GRU") a.set("linear_before_reset", k.lbr);
  std::vector<Value> out = b.op(k.op, in, a, k.outputs);
  std::vector<std::string> names{"y", "y_h", "y_c"};
  names.resize(out.size());
  return b.finish(out, names);
}

void random_shapes_against_reference() {
  std::mt19937_64 rng(0x4e4e);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* const ops[] = {"LSTM", "GRU", "RNN"};
  const char* const directions[] = {"forward", "reverse", "bidirectional"};
  for (int i = 0; i < 36; ++i) {
    Case k{ops[i % 3], directions[(i / 3) % 3], (i / 9) % 2, pick(1, 6), pick(1, 4), pick(1, 9), pick(1, 12),
           pick(0, 1) == 1, pick(0, 1) == 1, pick(0, 1) == 1, pick(0, 1), static_cast<size_t>(pick(1, i % 3 == 0 ? 3 : 2))};
    SCOPED_TRACE(k.op + " " + k.direction + " layout " + std::to_string(k.layout) + " T" + std::to_string(k.seq) + " N" +
                 std::to_string(k.batch) + " I" + std::to_string(k.input) + " H" + std::to_string(k.hidden) +
                 (k.bias ? " bias" : "") + (k.h0 ? " h0" : "") + (k.c0 ? " c0" : "") + " lbr" + std::to_string(k.lbr) +
                 " outputs " + std::to_string(k.outputs));
    for (const runtime::StepInfo& s : run_against_reference(case_graph(k, 100 + i), 1e-4))
      EXPECT_NE(s.kind, "reference") << s.label << " has no fast path";
  }
}

// By default batches up to 4 run isomer's own recurrence and larger ones oneDNN's
// primitives; $ISOMER_RNN forces either, so both are checked on every shape.
TEST(Rnn, RuntimeMatchesTheReferenceOnRandomShapes) {
  for (const char* impl : {"", "native", "onednn"}) {
    SCOPED_TRACE(std::string("ISOMER_RNN=") + impl);
    if (*impl) setenv("ISOMER_RNN", impl, 1);
    random_shapes_against_reference();
    unsetenv("ISOMER_RNN");
  }
}

// Batch 1 on two threads: one thread runs the steps of small cells; large ones (G * H
// * H >= 2^20 multiply-adds a step: the LSTM at 512) split each step's panels and
// hidden units between the two, meeting at barriers.
TEST(Rnn, BatchOneOnTwoThreadsMatchesTheReference) {
  const Case cases[] = {{"LSTM", "forward", 0, 3, 1, 24, 512, true, true, true, 0, 3},
                        {"GRU", "reverse", 1, 4, 1, 16, 200, true, true, false, 1, 2},
                        {"RNN", "bidirectional", 0, 3, 1, 8, 520, false, false, false, 0, 2},
                        {"LSTM", "bidirectional", 1, 6, 1, 12, 130, true, false, true, 0, 3}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.op + " " + k.direction + " H" + std::to_string(k.hidden));
    Graph g = case_graph(k, 500 + k.hidden);
    std::vector<Tensor> inputs = random_inputs(g, 3);
    std::vector<Tensor> want = evaluate(g, inputs);
    runtime::RuntimeOptions o;
    o.threads = 2;
    auto exe = runtime::compile(g, o);
    for (const runtime::StepInfo& st : exe->steps()) EXPECT_NE(st.kind, "reference") << st.label;
    for (int run = 0; run < 2; ++run) {
      CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
      EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
    }
  }
}

// Outside the fast paths (activations other than the defaults, input_forget) the
// reference kernel runs the node: the same answer, more slowly.
TEST(Rnn, InstancesOutsideTheFastPathRunOnTheReferenceKernel) {
  const Case k{"LSTM", "forward", 0, 4, 2, 3, 5, true, true, true, 0, 3};
  bool reference = false;
  for (const runtime::StepInfo& s : run_against_reference(case_graph(k, 7, {{"input_forget", int64_t{1}}})))
    reference = reference || s.kind == "reference";
  EXPECT_TRUE(reference);
  const Case g{"GRU", "bidirectional", 1, 4, 2, 3, 5, true, false, false, 1, 2};
  reference = false;
  for (const runtime::StepInfo& s : run_against_reference(
           case_graph(g, 8, {{"activations", std::vector<std::string>{"HardSigmoid", "Relu", "Sigmoid", "Tanh"}}})))
    reference = reference || s.kind == "reference";
  EXPECT_TRUE(reference);
}

}  // namespace
}  // namespace isomer
