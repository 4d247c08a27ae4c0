// Inputs the model can run on (check/inputs.h): graph text in, the derived values
// and the reasons out; and the check on two engines (check/compare.h).
#include <gtest/gtest.h>

#include <cmath>

#include "bridge/bridge.h"
#include "check/compare.h"
#include "check/inputs.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/text.h"

namespace isomer {
namespace {

std::vector<int64_t> values(const ModelInputs& in, size_t i) { return in.tensors.at(i).to_i64(); }

TEST(ValidInputs, IndicesStayWithinTheIndexedAxisThroughCastAndAShift) {
  // ids - 1 indexes a 7-row table: ids in [1, 8).
  Graph g = parse_graph(R"(graph g(%ids: i32[64]) {
    %t = const f32[7,2] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
    %one = const i64[] {1}
    %0 = Cast(%ids) {to=7}
    %1 = Sub(%0, %one)
    %2 = Gather(%t, %1) {axis=0}
    return %2
  })");
  ModelInputs in = valid_random_inputs(g, 3);
  ASSERT_TRUE(in.ok()) << in.impossible;
  for (int64_t v : values(in, 0)) {
    EXPECT_GE(v, 1);
    EXPECT_LT(v, 8);
  }
  ASSERT_EQ(in.notes.size(), 1u);
  EXPECT_EQ(in.notes[0], "'ids' = integers in [1, 8): indices of node (Gather), axis 0 of extent 7");
  EXPECT_NO_THROW(evaluate(g, in.tensors));
}

TEST(ValidInputs, ShapesAndAxesFitTheData) {
  Graph g = parse_graph(R"(graph g(%x: f32[2,1,3], %shape: i64[2], %sq: i64[1], %un: i64[2], %split: i64[2]) {
    %0 = Reshape(%x, %shape)
    %1 = Squeeze(%x, %sq)
    %2 = Unsqueeze(%x, %un)
    %3, %4 = Split(%x, %split) {axis=2}
    return %0, %1, %2, %3, %4
  })");
  ModelInputs in = valid_random_inputs(g, 0);
  ASSERT_TRUE(in.ok()) << in.impossible;
  EXPECT_EQ(values(in, 1), (std::vector<int64_t>{2, 3}));  // the leading dims merged into the last
  EXPECT_EQ(values(in, 2), (std::vector<int64_t>{1}));     // the unit axis
  EXPECT_EQ(values(in, 3), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values(in, 4), (std::vector<int64_t>{2, 1}));  // extent 3 shared out
  std::vector<Tensor> out = evaluate(g, in.tensors);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{2, 3}));
}

TEST(ValidInputs, IntegerDivisorsAreNeverZeroAndFloatsStayRandom) {
  Graph g = parse_graph(R"(graph g(%a: i64[256], %b: i64[256], %x: f32[4]) {
    %0 = Div(%a, %b)
    return %0, %x
  })");
  ModelInputs in = valid_random_inputs(g, 1);
  ASSERT_TRUE(in.ok());
  for (int64_t v : values(in, 1)) EXPECT_NE(v, 0);
  EXPECT_EQ(in.notes, std::vector<std::string>{"'b' = integers in [1, 4): integer divisor of node (Div) (non-zero)"});
  EXPECT_NE(in.tensors[2].to_f64()[0], std::round(in.tensors[2].to_f64()[0]));  // plain random floats
}

TEST(ValidInputs, ConsumersThatDisagreeMakeItImpossibleAndSayWhy) {
  Graph g = parse_graph(R"(graph g(%x: f32[2,3], %s: i64[2]) {
    %t = const f32[2] {1, 2}
    %0 = Reshape(%x, %s)
    %1 = Gather(%t, %s) {axis=0}
    return %0, %1
  })");
  ModelInputs in = valid_random_inputs(g, 0);
  EXPECT_FALSE(in.ok());
  EXPECT_TRUE(in.tensors.empty());
  EXPECT_NE(in.impossible.find("input 's'"), std::string::npos) << in.impossible;
  EXPECT_NE(in.impossible.find("Gather"), std::string::npos) << in.impossible;
}

TEST(ValidInputs, SymbolicDimsComeFromTheBindings) {
  Graph g = parse_graph(R"(graph g(%ids: i64[B,S]) {
    %t = const f32[5,2] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
    %0 = Gather(%t, %ids) {axis=0}
    return %0
  })");
  ModelInputs in = valid_random_inputs(g, 0, {{"B", 2}, {"S", 3}});
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in.tensors[0].dims(), (std::vector<int64_t>{2, 3}));
  for (int64_t v : values(in, 0)) EXPECT_LT(v, 5);
}

TEST(SymbolicExtent, ExpressionNamesAreComputedFromTheirSymbols) {
  // torch's dynamo exporter names dims after sympy expressions over its symbols.
  const std::map<std::string, int64_t> b{{"past", 7}, {"s0", 4}};
  EXPECT_EQ(symbolic_extent("past", b), 7);
  EXPECT_EQ(symbolic_extent("past + 1", b), 8);
  EXPECT_EQ(symbolic_extent("2*s0", b), 8);
  EXPECT_EQ(symbolic_extent("s0 - 1", b), 3);
  EXPECT_EQ(symbolic_extent("(s0 + 1)//2", b), 2);
  EXPECT_EQ(symbolic_extent("past*s0 + -3", b), 25);
  EXPECT_EQ(symbolic_extent("batch", b), 1);           // unbound name
  EXPECT_EQ(symbolic_extent("batch + 1", b, 3), 4);    // unbound name at the given extent
  EXPECT_EQ(symbolic_extent("past + 1", {{"past + 1", 5}}), 5);  // a binding of the name itself wins
  EXPECT_EQ(symbolic_extent("s0//0", b), 1);           // not an extent: unbound
  EXPECT_EQ(symbolic_extent("unk__12?", b), 1);        // not an expression: unbound
}

TEST(ValidInputs, DimsNamedByExpressionsAgreeWithTheirSymbols) {
  // A KV cache's decode step: past keys [past, 4] and a mask over past + 1 positions.
  // Concat(keys, new) must line up with the mask; at "past + 1" = 1 it cannot.
  GraphBuilder b;
  Value keys = b.input("keys", {DType::Float32, {Dim::sym("past"), 4}});
  Value fresh = b.input("new", {DType::Float32, {1, 4}});
  Value mask = b.input("mask", {DType::Float32, {Dim::sym("past + 1"), 4}});
  Value both = b.op1("Concat", {keys, fresh}, [] {
    Attributes a;
    a.set("axis", int64_t{0});
    return a;
  }());
  Graph g = b.finish({b.op1("Mul", {both, mask})}, {"y"});
  EXPECT_EQ(concrete_input_dims(g), (std::vector<std::vector<int64_t>>{{1, 4}, {1, 4}, {2, 4}}));
  EXPECT_EQ(concrete_input_dims(g, {{"past", 5}})[2], (std::vector<int64_t>{6, 4}));
  ModelInputs in = valid_random_inputs(g, 0, {});
  ASSERT_TRUE(in.ok()) << in.impossible;
  std::vector<Tensor> out = evaluate(g, in.tensors);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 4}));

  // An expression below 1 at unbound names of 1 moves them all up: "n - 2" at n = 3.
  GraphBuilder b2;
  Value x = b2.input("x", {DType::Float32, {Dim::sym("n")}});
  Value y = b2.input("y", {DType::Float32, {Dim::sym("n - 2")}});
  Graph g2 = b2.finish({x, y}, {"x", "y"});
  EXPECT_EQ(concrete_input_dims(g2), (std::vector<std::vector<int64_t>>{{3}, {1}}));
}

TEST(GivenInputs, AreMatchedByNameAndBindSymbolicDims) {
  Graph g = parse_graph(R"(graph g(%x: f32[N,2], %y: i64[3]) {
    return %x, %y
  })");
  Tensor x = Tensor::from_f64(DType::Float32, {4, 2}, std::vector<double>(8, 1.0));
  Tensor y = Tensor::vector_i64({1, 2, 3});
  ModelInputs in = given_inputs(g, {{"y", y}, {"x", x}}, "in.npz");
  EXPECT_EQ(in.bindings.at("N"), 4);
  EXPECT_EQ(in.source, "given (in.npz)");
  ASSERT_EQ(in.tensors.size(), 2u);
  EXPECT_TRUE(in.tensors[0].same_as(x));
  try {
    given_inputs(g, {{"x", x}}, "in.npz");
    FAIL() << "a missing input was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "in.npz has no array for input 'y'");
  }
  Tensor wrong = Tensor::from_f64(DType::Float32, {4, 3}, std::vector<double>(12, 1.0));
  EXPECT_THROW(given_inputs(g, {{"x", wrong}, {"y", y}}, "in.npz"), Error);
}

// An engine that computes the graph right, but adds `delta` to every float output:
// a kernel bug, as far as the check can tell.
class Skewed : public Prepared {
 public:
  Skewed(Graph g, double delta) : g_(std::move(g)), delta_(delta) {}
  std::vector<Tensor> run(const std::vector<Tensor>& in) override {
    std::vector<Tensor> out = evaluate(g_, in);
    for (Tensor& t : out) {
      std::vector<double> v = t.to_f64();
      for (double& x : v) x += delta_;
      t = Tensor::from_f64(t.dtype(), t.dims(), v);
    }
    return out;
  }
  std::vector<double> time(const std::vector<Tensor>&, int, int repeats) override {
    return std::vector<double>(static_cast<size_t>(repeats), 1.0);
  }

 private:
  Graph g_;
  double delta_;
};

const char* kRelu = R"(graph g(%x: f32[8]) {
  %0 = Identity(%x)
  %1 = Relu(%0)
  return %1
})";
const char* kReluOptimized = R"(graph g(%x: f32[8]) {
  %0 = Relu(%x)
  return %0
})";

TEST(Check, RunsTheGraphsOnTwoEnginesAndAsksTheReferenceWhenTheyDisagree) {
  Graph original = parse_graph(kRelu), optimized = parse_graph(kReluOptimized);
  ModelInputs in = valid_random_inputs(original, 0);
  CheckOptions co;
  co.allow_onnxruntime = false;  // runtime against the reference evaluator
  EngineOptions eo;
  eo.allow_onnxruntime = false;
  {
    Engines engines(eo);
    CheckResult r = check_graphs(engines, original, optimized, in, co);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
    EXPECT_EQ(r.method, "isomer's runtime against reference evaluator");
  }
  {
    // The runtime is wrong on the optimized graph: the check says so, but the
    // reference evaluator finds the graphs equal, so no rule is blamed.
    Engines engines(eo);
    engines.set_factory(Engine::Runtime, [](const Graph& g, const EngineOptions&) {
      return std::make_unique<Skewed>(g, 0.5);
    });
    CheckResult r = check_graphs(engines, original, optimized, in, co);
    EXPECT_EQ(r.status, CheckResult::Status::Passed);
    EXPECT_EQ(r.method, "reference evaluator");
    EXPECT_NE(r.reason.find("disagreed"), std::string::npos) << r.reason;
    EXPECT_FALSE(r.engine_fault);
    EXPECT_NE(r.reason.find("as far from it on the original"), std::string::npos) << r.reason;
  }
  {
    // The runtime is right on the original and wrong on the rewrite only: the rewrite
    // exposes a fault of the engine it is written for, which the check reports (and
    // optimize keeps the original) although the graphs are equal.
    Engines engines(eo);
    engines.set_factory(Engine::Runtime, [](const Graph& g, const EngineOptions&) {
      return std::make_unique<Skewed>(g, g.num_ops() == 1 ? 0.5 : 0.0);
    });
    CheckResult r = check_graphs(engines, original, optimized, in, co);
    EXPECT_EQ(r.status, CheckResult::Status::Failed);
    EXPECT_TRUE(r.engine_fault);
    EXPECT_EQ(r.method, "isomer's runtime against reference evaluator");
    EXPECT_NE(r.reason.find("isomer's runtime computes the rewritten graph wrongly"), std::string::npos) << r.reason;
  }
  {
    // A wrong rewrite (Relu dropped) fails on both.
    Engines engines(eo);
    Graph wrong = parse_graph("graph g(%x: f32[8]) {\n  %0 = Identity(%x)\n  return %0\n}");
    CheckResult r = check_graphs(engines, original, wrong, in, co);
    EXPECT_EQ(r.status, CheckResult::Status::Failed);
    EXPECT_EQ(r.method, "reference evaluator");
  }
}

// An engine that counts how many graphs it holds prepared at once (each would hold
// the graph's weights again); every graph it runs answers [0].
class Counted : public Prepared {
 public:
  Counted(int* live, int* most) : live_(live) { *most = std::max(*most, ++*live_); }
  ~Counted() override { --*live_; }
  std::vector<Tensor> run(const std::vector<Tensor>&) override {
    return {Tensor::from_f64(DType::Float32, {1}, std::vector<double>{0})};
  }
  std::vector<double> time(const std::vector<Tensor>&, int, int repeats) override {
    return std::vector<double>(static_cast<size_t>(repeats), 1.0);
  }

 private:
  int* live_;
};

// A large graph (its weights at kLargeGraphBytes) is prepared on one engine at a
// time by the check: the engine that ran the rewrite lets it go before the other
// prepares the original. A small one keeps both (the guard times them next).
TEST(Check, ALargeGraphIsPreparedOnOneEngineAtATime) {
  for (size_t bytes : {kLargeGraphBytes, size_t{4096}}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1})});
    Value w = b.constant(Tensor(DType::Float32, {static_cast<int64_t>(bytes / 4)}, std::string(bytes, '\0')), "w");
    Value s = b.op1("ReduceSum", {w}, {{"keepdims", int64_t{1}}});
    Graph original = b.finish({b.op1("Add", {x, s})}, {"y"});
    Graph optimized = b.finish({b.op1("Add", {s, x})}, {"y"});
    int live = 0, most = 0;
    Engines engines;
    for (Engine e : {Engine::Runtime, Engine::OnnxRuntimePlain, Engine::OnnxRuntime, Engine::Reference})
      engines.set_factory(e, [&](const Graph&, const EngineOptions&) { return std::make_unique<Counted>(&live, &most); });
    CheckResult r = check_graphs(engines, original, optimized, valid_random_inputs(original, 0), CheckOptions{});
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
    EXPECT_EQ(most, bytes >= kLargeGraphBytes ? 1 : 2) << bytes << " bytes of weights";
  }
}

TEST(Check, OnOnnxRuntimeTheOriginalRunsAsWritten) {
  try {
    bridge::OrtBridge::shared();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  Graph original = parse_graph(kRelu), optimized = parse_graph(kReluOptimized);
  Engines engines;
  CheckResult r = check_graphs(engines, original, optimized, valid_random_inputs(original, 0), {});
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  EXPECT_EQ(r.method, "isomer's runtime against ONNX Runtime (optimizations off)");
  CheckOptions co;
  co.target = Engine::OnnxRuntime;
  r = check_graphs(engines, original, optimized, valid_random_inputs(original, 0), co);
  EXPECT_EQ(r.method, "ONNX Runtime against isomer's runtime");
}

TEST(Check, NoValidInputsSkipItWithTheReason) {
  Graph original = parse_graph(kRelu), optimized = parse_graph(kReluOptimized);
  ModelInputs none;
  none.impossible = "input 'x': nothing fits";
  Engines engines;
  CheckResult r = check_graphs(engines, original, optimized, none, {});
  EXPECT_EQ(r.status, CheckResult::Status::Skipped);
  EXPECT_EQ(r.reason, "no valid inputs: input 'x': nothing fits");
}

}  // namespace
}  // namespace isomer
