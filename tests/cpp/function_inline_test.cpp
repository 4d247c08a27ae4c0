// inline_model_functions on ModelProtos: what the graph holds after the calls are expanded.
#include "onnx/function_inline.h"

#include <gtest/gtest.h>

#include "onnx_test_util.h"

namespace isomer {
namespace {

using namespace onnx_test;

// `f` with these formal inputs and outputs, importing `model`'s ai.onnx opset.
onnx::FunctionProto* add_function(onnx::ModelProto* model, const std::string& domain, const std::string& name,
                                  std::vector<std::string> inputs, std::vector<std::string> outputs) {
  onnx::FunctionProto* f = model->add_functions();
  f->set_domain(domain);
  f->set_name(name);
  for (auto& s : inputs) f->add_input(s);
  for (auto& s : outputs) f->add_output(s);
  *f->add_opset_import() = model->opset_import(0);
  return f;
}

// A body node (add_node on the function's nodes).
onnx::NodeProto* add_body_node(onnx::FunctionProto* f, const std::string& op, std::vector<std::string> in,
                               std::vector<std::string> out) {
  onnx::GraphProto g;
  onnx::NodeProto* n = f->add_node();
  *n = *add_node(&g, op, std::move(in), std::move(out));
  return n;
}

onnx::AttributeProto float_attr(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}

onnx::AttributeProto reference(const std::string& name, const std::string& ref) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_ref_attr_name(ref);
  a.set_type(onnx::AttributeProto::FLOAT);
  return a;
}

// local.fn:F(a) -> b = Neg(LeakyRelu(a, alpha = @slope)), its values named as the graph's.
onnx::ModelProto leaky_model() {
  onnx::ModelProto m = base_model(21, 10);
  auto* o = m.add_opset_import();
  o->set_domain("local.fn");
  o->set_version(1);
  onnx::FunctionProto* f = add_function(&m, "local.fn", "F", {"a"}, {"b"});
  f->add_attribute(std::string("slope"));
  *add_body_node(f, "LeakyRelu", {"a"}, {"t"})->add_attribute() = reference("alpha", "slope");
  add_body_node(f, "Neg", {"t"}, {"b"});
  return m;
}

onnx::NodeProto* add_call(onnx::GraphProto* g, const std::string& in, const std::string& out, const std::string& name) {
  onnx::NodeProto* call = add_node(g, "F", {in}, {out}, name);
  call->set_domain("local.fn");
  return call;
}

TEST(FunctionInline, EachCallIsItsBodyRenamedApartWithItsAttributes) {
  onnx::ModelProto m = leaky_model();
  onnx::GraphProto* g = m.mutable_graph();
  add_node(g, "Relu", {"x"}, {"t"}, "f1/LeakyRelu");  // the names a first copy would take
  *add_call(g, "t", "u", "f1")->add_attribute() = float_attr("slope", 0.5f);
  add_call(g, "u", "y", "");  // no slope: LeakyRelu's alpha is absent
  onnx_detail::InlinedFunctions done = onnx_detail::inline_model_functions(&m);
  EXPECT_EQ(done.calls, 2u);
  EXPECT_TRUE(done.kept.empty());
  EXPECT_EQ(m.functions_size(), 0);
  ASSERT_EQ(g->node_size(), 5);
  const onnx::NodeProto& first = g->node(1);
  EXPECT_EQ(first.name(), "f1/LeakyRelu_1");
  EXPECT_EQ(first.input(0), "t");
  ASSERT_EQ(first.attribute_size(), 1);
  EXPECT_EQ(first.attribute(0).name(), "alpha");
  EXPECT_TRUE(first.attribute(0).ref_attr_name().empty());
  EXPECT_EQ(first.attribute(0).f(), 0.5f);
  EXPECT_EQ(first.output(0), "f1/t");
  EXPECT_EQ(g->node(2).input(0), "f1/t");
  EXPECT_EQ(g->node(2).output(0), "u");  // the returned value takes the call's name
  EXPECT_EQ(g->node(3).name(), "F/LeakyRelu");
  EXPECT_EQ(g->node(3).attribute_size(), 0);
  EXPECT_EQ(g->node(3).output(0), "F/t");
  EXPECT_EQ(g->node(4).output(0), "y");
}

TEST(FunctionInline, ANameTheDomainDefinesIsThatOperator) {
  onnx::ModelProto m = base_model(21, 10);
  add_body_node(add_function(&m, "", "Relu", {"a"}, {"b"}), "Sigmoid", {"a"}, {"b"});
  add_node(m.mutable_graph(), "Relu", {"x"}, {"y"});
  onnx_detail::InlinedFunctions done = onnx_detail::inline_model_functions(&m);
  EXPECT_EQ(done.calls, 0u);
  EXPECT_EQ(m.graph().node(0).op_type(), "Relu");  // ONNX Runtime runs ONNX's Relu here
}

std::string function_name(int i) {
  std::string name = "F";
  name += std::to_string(i);
  return name;
}

TEST(FunctionInline, CallsPastTheNodeBudgetStayCallsWithTheReason) {
  // F0 calls F1 twice, F1 calls F2 twice, ...: 2^20 Negs in all.
  onnx::ModelProto m = base_model(21, 10);
  const int levels = 20;
  for (int i = 0; i < levels; ++i) {
    const std::string callee = function_name(i + 1);
    onnx::FunctionProto* f = add_function(&m, "local.fn", function_name(i), {"a"}, {"b"});
    add_body_node(f, callee, {"a"}, {"t"})->set_domain("local.fn");
    add_body_node(f, callee, {"t"}, {"b"})->set_domain("local.fn");
  }
  add_body_node(add_function(&m, "local.fn", function_name(levels), {"a"}, {"b"}), "Neg", {"a"}, {"b"});
  add_node(m.mutable_graph(), "F0", {"x"}, {"y"})->set_domain("local.fn");
  onnx_detail::InlinedFunctions done = onnx_detail::inline_model_functions(&m);
  EXPECT_GT(done.calls, 0u);
  EXPECT_FALSE(done.kept.empty());
  EXPECT_NE(done.kept_reason.find("200000 nodes"), std::string::npos) << done.kept_reason;
  EXPECT_LT(m.graph().node_size(), 200000);
  // The functions the calls left still call are written; those only inlined calls used are not.
  EXPECT_GT(m.functions_size(), 0);
  for (const auto& f : m.functions()) EXPECT_NE(f.name(), "F0");
}

}  // namespace
}  // namespace isomer
