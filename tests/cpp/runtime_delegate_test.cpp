// Opaque nodes on the runtime: run on ONNX Runtime node by node (runtime/delegate.h),
// with isomer's own steps around them. Needs the project's Python with onnxruntime
// (make deps); skipped where it is missing.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "bridge/bridge.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "runtime/delegate.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

void set_type(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::string out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

// x -> Relu -> Shrink (an operator isomer does not know) -> Neg -> y, batch dim `batch`.
Graph relu_shrink_neg(const std::string& batch, const ImportOptions& io = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("delegate");
  set_type(g->add_input(), "x", {batch, "3"});
  add_node(g, "Relu", {"x"}, "r");
  add_node(g, "Shrink", {"r"}, "c")->set_name("shrink");
  add_node(g, "Neg", {"c"}, "y");
  set_type(g->add_output(), "y", {batch, "3"});
  return import_onnx_bytes(m.SerializeAsString(), "", io);
}

// Shrink with its defaults (lambd 0.5, bias 0).
double shrink(double v) { return v > 0.5 || v < -0.5 ? v : 0; }

// Starts the helper, or skips the test with the reason.
#define REQUIRE_ONNXRUNTIME()                                 \
  try {                                                       \
    bridge::OrtBridge::shared();                              \
  } catch (const Error& e) {                                  \
    GTEST_SKIP() << e.what();                                 \
  }

TEST(RuntimeDelegate, OpaqueNodeRunsOnOnnxRuntimeBetweenIsomerSteps) {
  REQUIRE_ONNXRUNTIME();
  Graph g = relu_shrink_neg("N");
  for (int64_t batch : {1, 4}) {
    runtime::RuntimeOptions o;
    o.threads = 1;
    o.bindings = {{"N", batch}};
    auto exe = runtime::compile(g, o);
    std::vector<std::string> kinds;
    for (const runtime::StepInfo& s : exe->steps()) kinds.push_back(s.kind);
    EXPECT_EQ(kinds, (std::vector<std::string>{"pointwise", "onnxruntime", "pointwise"}));
    EXPECT_EQ(exe->steps()[1].ops, std::vector<std::string>{"Shrink"});
    std::vector<double> x;
    for (int64_t i = 0; i < batch * 3; ++i) x.push_back(i % 2 ? -1.0 * i : 0.5 * i);
    std::vector<Tensor> out = exe->run({Tensor::from_f64(DType::Float32, {batch, 3}, x)});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{batch, 3}));
    std::vector<double> y = out[0].to_f64();
    for (int64_t i = 0; i < batch * 3; ++i) EXPECT_FLOAT_EQ(y[i], -shrink(std::max(0.0, x[i]))) << "at " << i;
  }
}

TEST(RuntimeDelegate, ProfilingAndSignaturesCoverDelegatedSteps) {
  REQUIRE_ONNXRUNTIME();
  ImportOptions io;
  io.input_shapes = {{"x", {2, 3}}};
  auto exe = runtime::compile(relu_shrink_neg("N", io), {});
  const runtime::StepInfo& s = exe->steps()[1];
  EXPECT_EQ(s.signature.rfind("ort Shrink p", 0), 0u) << s.signature;
  EXPECT_NE(s.signature.find("f32[2,3]"), std::string::npos) << s.signature;
  std::vector<double> ms = exe->profile_steps(1, 4);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_GT(ms[1], 0.0);
}

TEST(RuntimeDelegate, OutputsOfAnotherShapeThanPlannedAreAnErrorAndTheHelperStaysInStep) {
  REQUIRE_ONNXRUNTIME();
  auto ort = bridge::OrtBridge::shared();
  const std::string model = export_onnx_bytes(relu_shrink_neg("2"));
  const TensorType f23{DType::Float32, make_shape({2, 3})};
  const std::vector<TensorType> probe_inputs = {f23};
  bridge::Session s = ort->load_bytes(model, {.threads = 1, .spinning = false}, &probe_inputs);
  ASSERT_EQ(s.probes.size(), 3u);  // zeros, ones, distinct values: all [2,3]
  for (const auto& p : s.probes) EXPECT_EQ(p, std::vector<TensorType>{f23});
  std::vector<float> x = {1, -2, 3, -4, 5, 6}, y(6, 0.f), wrong(6, 0.f);
  auto buffer = [](std::vector<float>& v, std::vector<int64_t> dims) {
    return bridge::Buffer{DType::Float32, std::move(dims), reinterpret_cast<char*>(v.data()), v.size() * sizeof(float)};
  };
  EXPECT_NE(ort->run_into(s.id, {buffer(x, {2, 3})}, {buffer(wrong, {3, 2})}), "");
  EXPECT_EQ(wrong, std::vector<float>(6, 0.f));  // nothing written where the plan was wrong
  EXPECT_EQ(ort->run_into(s.id, {buffer(x, {2, 3})}, {buffer(y, {2, 3})}), "");
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], -shrink(std::max(0.f, x[i]))) << "at " << i;
  ort->free(s.id);
}

TEST(RuntimeDelegate, WithoutDelegationOpaqueNodesAreNotRunnable) {
  Graph g = relu_shrink_neg("2");
  runtime::RuntimeOptions o;
  o.delegate_opaque = false;
  std::string why;
  EXPECT_FALSE(runtime::is_runnable(g, &why, o));
  EXPECT_NE(why.find("node 'shrink' (Shrink)"), std::string::npos) << why;
  try {
    runtime::compile(g, o);
    FAIL() << "compiled a graph with an opaque node without delegation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shrink"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(runtime::is_runnable(g, &why));  // delegation is the default
}

// x [2,3] -> Relu -> Shrink "s1" -> `between` -> Shrink "s2" (bias 1) -> Neg -> y,
// where `between` is "" (s1 feeds s2), "reshape" (a Reshape to [6]: s2 and y are
// [6]) or "relu" (a Sigmoid: a step isomer computes between them). With `tap`, s1's
// output is also a graph output (read outside the group).
Graph shrink_pair(const std::string& between, bool tap) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("delegate_pair");
  set_type(g->add_input(), "x", {"2", "3"});
  add_node(g, "Relu", {"x"}, "r");
  add_node(g, "Shrink", {"r"}, "c1")->set_name("s1");
  std::string into = "c1";
  if (between == "reshape") {
    onnx::TensorProto* shape = g->add_initializer();
    shape->set_name("flat");
    shape->set_data_type(onnx::TensorProto::INT64);
    shape->add_dims(1);
    shape->add_int64_data(6);
    add_node(g, "Reshape", {"c1", "flat"}, "m");
    into = "m";
  } else if (between == "relu") {
    add_node(g, "Sigmoid", {"c1"}, "m");
    into = "m";
  }
  onnx::NodeProto* s2 = add_node(g, "Shrink", {into}, "c2");
  s2->set_name("s2");
  onnx::AttributeProto* bias = s2->add_attribute();
  bias->set_name("bias");
  bias->set_type(onnx::AttributeProto::FLOAT);
  bias->set_f(1.0f);
  add_node(g, "Neg", {"c2"}, "y");
  set_type(g->add_output(), "y", between == "reshape" ? std::vector<std::string>{"6"} : std::vector<std::string>{"2", "3"});
  if (tap) set_type(g->add_output(), "c1", {"2", "3"});
  return import_onnx_bytes(m.SerializeAsString(), "");
}

// Adjacent delegated nodes (directly, or through a reshape) are one step, one
// ONNX Runtime session; a node isomer computes between them keeps them apart.
TEST(RuntimeDelegate, AdjacentDelegatedNodesAreOneStep) {
  REQUIRE_ONNXRUNTIME();
  struct Case {
    std::string between;
    bool tap;
    std::vector<std::string> kinds;
  };
  const std::vector<Case> cases = {
      {"", false, {"pointwise", "onnxruntime", "pointwise"}},
      {"", true, {"pointwise", "onnxruntime", "pointwise"}},
      {"reshape", false, {"pointwise", "onnxruntime", "pointwise"}},
      {"relu", false, {"pointwise", "onnxruntime", "pointwise", "onnxruntime", "pointwise"}},
  };
  const std::vector<double> x = {1, -2, 0.25, 3, 0.75, -0.5};
  for (const Case& k : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE("between '" + k.between + "', tap " + std::to_string(k.tap) + ", " + std::to_string(threads) +
                   " threads");
      runtime::RuntimeOptions o;
      o.threads = threads;
      auto exe = runtime::compile(shrink_pair(k.between, k.tap), o);
      std::vector<std::string> kinds;
      for (const runtime::StepInfo& s : exe->steps()) kinds.push_back(s.kind);
      EXPECT_EQ(kinds, k.kinds);
      if (k.kinds.size() == 3) {
        const std::vector<std::string> ops = k.between == "reshape"
                                                 ? std::vector<std::string>{"Shrink", "Reshape", "Shrink"}
                                                 : std::vector<std::string>{"Shrink", "Shrink"};
        EXPECT_EQ(exe->steps()[1].ops, ops);
      }
      std::vector<Tensor> out = exe->run({Tensor::from_f64(DType::Float32, {2, 3}, x)});
      ASSERT_EQ(out.size(), k.tap ? 2u : 1u);
      std::vector<double> y = out[0].to_f64();
      ASSERT_EQ(y.size(), 6u);
      for (size_t i = 0; i < 6; ++i) {
        double c1 = shrink(std::max(0.0, x[i]));
        double in = k.between == "relu" ? 1 / (1 + std::exp(-c1)) : c1;
        double c2 = in > 0.5 ? in - 1 : in < -0.5 ? in + 1 : 0;
        EXPECT_NEAR(y[i], -c2, 1e-6) << "at " << i;
        if (k.tap) EXPECT_FLOAT_EQ(out[1].to_f64()[i], c1) << "at " << i;
      }
    }
}

}  // namespace
}  // namespace isomer
