// check/dynamic_quant_check.h: a dynamically quantized model whose outputs one
// rounding flip carried apart matches when ONNX Runtime, fed isomer's own
// quantizations, agrees layer by layer; a wrong kernel still fails. Both engines are
// the reference evaluator here, the "runtime" one with a fault written into its graph.
#include <gtest/gtest.h>

#include "check/dynamic_quant_check.h"
#include "check/inputs.h"
#include "ir/text.h"

namespace isomer {
namespace {

// Two dynamically quantized linears. x spans [0, 255]: the first quantization's
// scale is 1 and its zero point 0, so x[0] = 2.5 lies exactly at a rounding tie (2
// half to even). Row 0 of the first weight is large: that one element carries far.
Graph two_quantized_linears() {
  return parse_graph(R"(graph g(%x: f32[2,8]) {
    %w1 = const u8[8,8] {200, 200, 200, 200, 200, 200, 200, 200,
                         1, 2, 3, 4, 5, 6, 7, 8,   8, 7, 6, 5, 4, 3, 2, 1,   1, 1, 1, 1, 1, 1, 1, 1,
                         2, 2, 2, 2, 2, 2, 2, 2,   3, 1, 3, 1, 3, 1, 3, 1,   1, 3, 1, 3, 1, 3, 1, 3,
                         2, 1, 2, 1, 2, 1, 2, 1}
    %w2 = const u8[8,4] {1, 2, 3, 4, 4, 3, 2, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                         3, 1, 3, 1, 1, 3, 1, 3, 2, 1, 2, 1, 1, 2, 1, 2}
    %q1, %s1, %z1 = DynamicQuantizeLinear(%x)
    %a1 = MatMulInteger(%q1, %w1, %z1)
    %f1 = Cast(%a1) {to=1}
    %h = Mul(%f1, %s1)
    %q2, %s2, %z2 = DynamicQuantizeLinear(%h)
    %a2 = MatMulInteger(%q2, %w2, %z2)
    %f2 = Cast(%a2) {to=1}
    %y = Mul(%f2, %s2)
    return %y
  })");
}

Tensor inputs_at_a_tie() {
  std::vector<double> x = {2.5, 255, 17, 40, 3, 99, 128, 64, 5, 6, 7, 8, 9, 10, 11, 12};
  return Tensor::from_f64(DType::Float32, {2, 8}, x);
}

// `g` with the input of its `which`-th DynamicQuantizeLinear (or its output, which = -1)
// multiplied by `factor`, plus `offset`.
Graph skewed(const Graph& g, int which, double factor, double offset = 0) {
  int seen = 0;
  Graph out = rebuild(g, [&](const Node& n, const std::vector<Value>& in, GraphBuilder& b) -> std::vector<Value> {
    if (n.op_type() != "DynamicQuantizeLinear" || seen++ != which) return {};
    Value x = b.op1("Mul", {in[0], b.constant(Tensor::scalar_f32(static_cast<float>(factor)))});
    x = b.op1("Add", {x, b.constant(Tensor::scalar_f32(static_cast<float>(offset)))});
    return b.op("DynamicQuantizeLinear", {x}, {}, 3);
  });
  if (which >= 0) return out;
  std::vector<Value> outs;
  GraphBuilder b;
  for (const Value& v : out.outputs())
    outs.push_back(v.node->op_type() == "DynamicQuantizeLinear"
                       ? v
                       : b.op1("Mul", {v, b.constant(Tensor::scalar_f32(static_cast<float>(factor)))}));
  return Graph(out.inputs(), outs, out.output_names(), out.info());
}

struct Case {
  int which;
  double factor, offset = 0;
};

CheckResult check_with_runtime(const Case& c, CheckResult* plain) {
  const Graph g = two_quantized_linears();
  const std::vector<Tensor> inputs = {inputs_at_a_tie()};
  Engines engines;
  engines.set_factory(Engine::Runtime, [c](const Graph& h, const EngineOptions& o) {
    return prepare(skewed(h, c.which, c.factor, c.offset), Engine::Reference, o);
  });
  engines.set_factory(Engine::OnnxRuntime,
                      [](const Graph& h, const EngineOptions& o) { return prepare(h, Engine::Reference, o); });
  const std::vector<Tensor> want = prepare(g, Engine::Reference, {})->run(inputs);
  const std::vector<Tensor> got = prepare(skewed(g, c.which, c.factor, c.offset), Engine::Reference, {})->run(inputs);
  *plain = compare_outputs(want, got, g.output_names(), 1e-4);
  return check_fed_dynamic_quantization(engines, g, inputs, got, 1e-4);
}

TEST(DynamicQuantCheck, AFlipAtATieMatchesLayerByLayer) {
  // 2^-20 added: the float noise of another summation order, which moves x[0] past its
  // tie (2.50000095 rounds to 3) and leaves the range, so the scale, as it is.
  CheckResult plain;
  CheckResult r = check_with_runtime({0, 1.0, 1.0 / (1 << 20)}, &plain);
  ASSERT_EQ(plain.status, CheckResult::Status::Failed) << "the flip should carry past the float tolerance";
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  EXPECT_NE(r.reason.find("2 DynamicQuantizeLinear results: 1 of 32 quantized elements a rounding tie apart"),
            std::string::npos)
      << r.reason;
}

TEST(DynamicQuantCheck, NoFlipIsExact) {
  CheckResult plain;
  CheckResult r = check_with_runtime({0, 1.0}, &plain);
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  EXPECT_NE(r.reason.find("0 of 32"), std::string::npos) << r.reason;
}

TEST(DynamicQuantCheck, AWrongKernelBeforeAQuantizationFails) {
  // 0.1% off before the first quantization (more than float noise: elements move by up
  // to a quarter step, away from ties), 1% off before the second.
  for (Case c : {Case{0, 1.001}, Case{1, 1.01}}) {
    CheckResult plain;
    CheckResult r = check_with_runtime(c, &plain);
    EXPECT_EQ(r.status, CheckResult::Status::Failed) << c.which << ": " << r.reason;
    EXPECT_NE(r.reason.find("quantizes what ONNX Runtime computes"), std::string::npos) << r.reason;
  }
}

TEST(DynamicQuantCheck, AWrongKernelAfterTheLastQuantizationFails) {
  CheckResult plain;
  CheckResult r = check_with_runtime({-1, 1.01}, &plain);
  EXPECT_EQ(r.status, CheckResult::Status::Failed) << r.reason;
}

// The never-slower guard's check (check_graphs): a rewrite (here an Identity after the
// output) that isomer's runtime computes with one flip at a tie, where the reference
// evaluator finds the graphs equal and the runtime computes the original as the
// reference does, is not the runtime's fault when ONNX Runtime fed its quantizations
// agrees; a wrong kernel on the rewrite still is.
CheckResult check_rewrite_with_runtime(const Case& c) {
  const Graph original = two_quantized_linears();
  GraphBuilder b;
  const Graph optimized(original.inputs(), {b.op1("Identity", {original.outputs()[0]})}, original.output_names(),
                        original.info());
  Engines engines;
  engines.set_factory(Engine::Runtime, [c](const Graph& h, const EngineOptions& o) {
    const bool rewrite = h.op_histogram().count("Identity") > 0;
    return prepare(rewrite ? skewed(h, c.which, c.factor, c.offset) : h, Engine::Reference, o);
  });
  for (Engine e : {Engine::OnnxRuntime, Engine::OnnxRuntimePlain})
    engines.set_factory(e, [](const Graph& h, const EngineOptions& o) { return prepare(h, Engine::Reference, o); });
  ModelInputs in;
  in.tensors = {inputs_at_a_tie()};
  in.source = "given";
  CheckOptions co;
  co.tolerance = 1e-4;
  return check_graphs(engines, original, optimized, in, co);
}

TEST(DynamicQuantCheck, TheGuardDoesNotBlameTheRuntimeForAFlipAtATie) {
  CheckResult r = check_rewrite_with_runtime({0, 1.0, 1.0 / (1 << 20)});
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  EXPECT_FALSE(r.engine_fault);
  EXPECT_NE(r.reason.find("on the rewrite matches with ONNX Runtime fed"), std::string::npos) << r.reason;
}

TEST(DynamicQuantCheck, TheGuardStillBlamesAWrongKernelOnTheRewrite) {
  CheckResult r = check_rewrite_with_runtime({1, 1.01});
  EXPECT_EQ(r.status, CheckResult::Status::Failed) << r.reason;
  EXPECT_TRUE(r.engine_fault) << r.reason;
}

}  // namespace
}  // namespace isomer
