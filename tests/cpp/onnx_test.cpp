// ONNX import/export: round trips, opaque nodes, dynamic dims, external data and
// every kind of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "onnx/onnx_io.h"
#include "onnx_test_util.h"

namespace isomer {
namespace {

using namespace onnx_test;

// x f32[2,3] -> Add(x, w) -> Relu -> y
onnx::ModelProto add_relu_model() {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2", "3"});
  *g->add_initializer() = f32_tensor("w", {3}, {1, -2, 0.5});
  add_node(g, "Add", {"x", "w"}, {"s"}, "add");
  add_node(g, "Relu", {"s"}, {"y"}, "relu");
  set_tensor_type(g->add_output(), "y", 1, {"2", "3"});
  return m;
}

// Export -> checker -> import -> same graph, and exporting again gives the same bytes.
Graph round_trip(const Graph& g) {
  std::string bytes = export_onnx_bytes(g);
  EXPECT_NO_THROW(check_onnx_model(bytes));
  Graph back = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(same_graph(g, back));
  EXPECT_EQ(export_onnx_bytes(back), bytes);
  return back;
}

// ---- Round trips ------------------------------------------------------------------

TEST(OnnxRoundTrip, BuilderGraph) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  Value c = b.constant(Tensor::from_f64(DType::Float32, {3}, std::vector<double>{1, -2, 0.5}), "bias");
  Value s = b.op1("Add", {x, c});
  Value r = b.op1("Relu", {s});
  Value m = b.op1("Mul", {r, s});
  Graph g = b.finish({m, r}, {"out", "relu_out"});
  Graph back = round_trip(g);
  Tensor in = Tensor::from_f64(DType::Float32, {2, 3}, std::vector<double>{0, 0, 0, -2, 3, 1});
  EXPECT_TRUE(evaluate(back, {in})[0].same_as(evaluate(g, {in})[0]));
  onnx::ModelProto proto = parse(export_onnx_bytes(g));
  EXPECT_EQ(proto.graph().initializer_size(), 1);
  EXPECT_EQ(proto.graph().initializer(0).name(), "bias");
  EXPECT_EQ(proto.graph().output(0).name(), "out");
}

TEST(OnnxRoundTrip, ImportedModelKeepsNamesAndOrder) {
  Graph g = import_onnx_bytes(bytes_of(add_relu_model()), "");
  onnx::ModelProto out = parse(export_onnx_bytes(g));
  ASSERT_EQ(out.graph().node_size(), 2);
  EXPECT_EQ(out.graph().node(0).name(), "add");
  EXPECT_EQ(out.graph().node(0).output(0), "s");
  EXPECT_EQ(out.graph().node(1).input(0), "s");
  EXPECT_EQ(out.graph().initializer(0).name(), "w");
  round_trip(g);
}

TEST(OnnxRoundTrip, ModelInfoSurvives) {
  onnx::ModelProto m = add_relu_model();
  m.set_producer_name("pytorch");
  m.set_producer_version("2.0");
  m.set_domain("org.example");
  m.set_model_version(7);
  m.set_doc_string("model doc");
  m.mutable_graph()->set_doc_string("graph doc");
  auto* p = m.add_metadata_props();
  p->set_key("author");
  p->set_value("me");
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  auto* f = m.add_functions();
  f->set_name("MyFn");
  f->set_domain("com.example");
  f->add_input("a");
  f->add_output("b");
  add_node(m.mutable_graph(), "Identity", {"y"}, {"unused"});  // a dead node: dropped
  auto* body = f->add_node();
  body->set_op_type("Relu");
  body->add_input("a");
  body->add_output("b");
  auto* fo = f->add_opset_import();
  fo->set_domain("");
  fo->set_version(17);
  Graph g = import_onnx_bytes(bytes_of(m), "");
  EXPECT_EQ(g.info().producer_name, "pytorch");
  onnx::ModelProto out = parse(export_onnx_bytes(g));
  EXPECT_EQ(out.ir_version(), 8);
  EXPECT_EQ(out.producer_name(), "pytorch");
  EXPECT_EQ(out.producer_version(), "2.0");
  EXPECT_EQ(out.domain(), "org.example");
  EXPECT_EQ(out.model_version(), 7);
  EXPECT_EQ(out.doc_string(), "model doc");
  EXPECT_EQ(out.graph().doc_string(), "graph doc");
  EXPECT_EQ(out.graph().name(), "test");
  ASSERT_EQ(out.metadata_props_size(), 1);
  EXPECT_EQ(out.metadata_props(0).value(), "me");
  ASSERT_EQ(out.opset_import_size(), 2);
  EXPECT_EQ(out.opset_import(1).domain(), "com.example");
  ASSERT_EQ(out.functions_size(), 1);
  EXPECT_EQ(out.functions(0).SerializeAsString(), m.functions(0).SerializeAsString());
  EXPECT_NO_THROW(check_onnx_model(out.SerializeAsString()));
}

TEST(OnnxRoundTrip, DynamicDimsKeepTheirNames) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"batch", "3"});
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();  // anonymous
  add_node(g, "Relu", {"x"}, {"y"});
  set_tensor_type(g->add_output(), "y", 1, {"batch", "3"});
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  const Shape& s = graph.inputs()[0]->output_types()[0].shape;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], Dim::sym("batch"));
  EXPECT_EQ(s[1], Dim(3));
  EXPECT_EQ(s[2], Dim::unknown());
  EXPECT_EQ(graph.outputs()[0].type().shape[0], Dim::sym("batch"));
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  const auto& dims = out.graph().input(0).type().tensor_type().shape().dim();
  EXPECT_EQ(dims.Get(0).dim_param(), "batch");
  EXPECT_EQ(dims.Get(1).dim_value(), 3);
  EXPECT_FALSE(dims.Get(2).has_dim_value() || dims.Get(2).has_dim_param());
  EXPECT_EQ(out.graph().output(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  round_trip(graph);
}

TEST(OnnxRoundTrip, InputShapesOptionFixesDims) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"batch", "3"});
  add_node(g, "Relu", {"x"}, {"y"});
  set_tensor_type(g->add_output(), "y", 1, {"batch", "3"});
  ImportOptions opts;
  opts.input_shapes["x"] = {4, 3};
  Graph graph = import_onnx_bytes(bytes_of(m), "", opts);
  EXPECT_EQ(graph.inputs()[0]->output_types()[0].shape, make_shape({4, 3}));
  EXPECT_EQ(graph.outputs()[0].type().shape, make_shape({4, 3}));
  opts.input_shapes = {{"nope", {1}}};
  expect_error([&] { import_onnx_bytes(bytes_of(m), "", opts); }, {"'nope'", "not a graph input"});
  opts.input_shapes = {{"x", {1, 2, 3}}};
  expect_error([&] { import_onnx_bytes(bytes_of(m), "", opts); }, {"'x'", "rank"});
}

TEST(OnnxRoundTrip, ConstantNodesOfEveryForm) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  auto constant = [&](const std::string& out, auto fill) {
    auto* n = add_node(g, "Constant", {}, {out});
    auto* a = n->add_attribute();
    fill(a);
  };
  using A = onnx::AttributeProto;
  constant("c_tensor", [](A* a) {
    a->set_name("value");
    a->set_type(A::TENSOR);
    *a->mutable_t() = f32_tensor("", {2}, {1.5f, 2.5f});
  });
  constant("c_float", [](A* a) { a->set_name("value_float"), a->set_type(A::FLOAT), a->set_f(0.25f); });
  constant("c_floats", [](A* a) {
    a->set_name("value_floats"), a->set_type(A::FLOATS);
    a->add_floats(1), a->add_floats(2);
  });
  constant("c_int", [](A* a) { a->set_name("value_int"), a->set_type(A::INT), a->set_i(-3); });
  constant("c_ints", [](A* a) {
    a->set_name("value_ints"), a->set_type(A::INTS);
    a->add_ints(4), a->add_ints(5);
  });
  constant("c_string", [](A* a) { a->set_name("value_string"), a->set_type(A::STRING), a->set_s("hi"); });
  constant("c_strings", [](A* a) {
    a->set_name("value_strings"), a->set_type(A::STRINGS);
    a->add_strings("a"), a->add_strings("b");
  });
  for (const char* name : {"c_tensor", "c_float", "c_floats", "c_int", "c_ints", "c_string", "c_strings"})
    g->add_output()->set_name(name);
  // Graph outputs need types for the checker; the importer takes them from the constants.
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  ASSERT_EQ(graph.outputs().size(), 7u);
  for (const Value& v : graph.outputs()) EXPECT_EQ(v.node->kind(), NodeKind::Constant);
  EXPECT_EQ(graph.outputs()[0].constant()->to_f64(), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(graph.outputs()[1].constant()->to_f64(), (std::vector<double>{0.25}));
  EXPECT_EQ(graph.outputs()[1].type().shape, Shape{});
  EXPECT_EQ(graph.outputs()[2].constant()->dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(graph.outputs()[3].constant()->to_i64(), (std::vector<int64_t>{-3}));
  EXPECT_EQ(graph.outputs()[4].constant()->to_i64(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(graph.outputs()[5].type().dtype, DType::String);
  EXPECT_EQ(graph.outputs()[6].type().shape, make_shape({2}));
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  EXPECT_EQ(out.graph().node_size(), 0);
  EXPECT_EQ(out.graph().initializer_size(), 7);
  EXPECT_EQ(out.graph().initializer(6).string_data(1), "b");
  round_trip(graph);
}

TEST(OnnxRoundTrip, TypedTensorFieldsAndRawData) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT8);
  t.add_dims(3);
  t.add_int32_data(-1), t.add_int32_data(2), t.add_int32_data(127);
  Tensor a = tensor_from_proto(t, "");
  EXPECT_EQ(a.to_i64(), (std::vector<int64_t>{-1, 2, 127}));
  onnx::TensorProto u;
  u.set_data_type(onnx::TensorProto::FLOAT16);
  u.add_dims(1);
  u.add_int32_data(0x3C00);  // 1.0 in half precision
  EXPECT_EQ(tensor_from_proto(u, "").to_f64(), (std::vector<double>{1.0}));
  onnx::TensorProto v;
  v.set_data_type(onnx::TensorProto::UINT64);
  v.add_dims(2);
  v.add_uint64_data(7), v.add_uint64_data(9);
  EXPECT_EQ(tensor_from_proto(v, "").to_i64(), (std::vector<int64_t>{7, 9}));
  onnx::TensorProto back;
  tensor_to_proto(a, &back);
  EXPECT_TRUE(tensor_from_proto(back, "").same_as(a));
  EXPECT_EQ(back.raw_data().size(), 3u);
  onnx::TensorProto short_data = t;
  short_data.add_dims(2);
  expect_error([&] { tensor_from_proto(short_data, ""); }, {"bytes", "i8[3,2]"});
}

TEST(OnnxRoundTrip, IrVersion3InitializersAreInputs) {
  onnx::ModelProto m = add_relu_model();
  m.set_ir_version(3);
  m.mutable_opset_import(0)->set_version(8);
  set_tensor_type(m.mutable_graph()->add_input(), "w", 1, {"3"});
  Graph g = import_onnx_bytes(bytes_of(m), "");
  ASSERT_EQ(g.inputs().size(), 1u);  // w is a constant, not an input
  EXPECT_EQ(g.inputs()[0]->name(), "x");
  onnx::ModelProto out = parse(export_onnx_bytes(g));
  ASSERT_EQ(out.graph().input_size(), 2);
  EXPECT_EQ(out.graph().input(1).name(), "w");
  EXPECT_NO_THROW(check_onnx_model(out.SerializeAsString()));
  round_trip(g);
}

TEST(OnnxRoundTrip, InitializersListedAsInputsAreOverridableFromIr4) {
  onnx::ModelProto m = add_relu_model();
  set_tensor_type(m.mutable_graph()->add_input(), "w", 1, {"3"});
  Graph g = import_onnx_bytes(bytes_of(m), "");
  ASSERT_EQ(g.inputs().size(), 2u);  // w is an input the user may feed, not a constant
  EXPECT_EQ(g.inputs()[1]->name(), "w");
  const auto defaults = input_defaults(g);
  ASSERT_EQ(defaults.size(), 1u);
  EXPECT_EQ(defaults[0].first, "w");
  EXPECT_EQ(defaults[0].second.to_f64(), (std::vector<double>{1, -2, 0.5}));
  onnx::ModelProto out = parse(export_onnx_bytes(g));
  ASSERT_EQ(out.graph().input_size(), 2);
  ASSERT_EQ(out.graph().initializer_size(), 1);
  EXPECT_EQ(out.graph().initializer(0).name(), "w");
  round_trip(g);
  // Asked to, import takes it for a constant and says so.
  ImportOptions freeze;
  freeze.freeze_overridable_inputs = true;
  ImportStats stats;
  Graph frozen = import_onnx_bytes(bytes_of(m), "", freeze, &stats);
  ASSERT_EQ(frozen.inputs().size(), 1u);
  EXPECT_EQ(stats.frozen_inputs, std::vector<std::string>{"w"});
  EXPECT_TRUE(input_defaults(frozen).empty());
}

TEST(OnnxRoundTrip, OldOpsetFormsConvertBothWays) {
  // Clip at opset 6 has min/max attributes; the IR has them as inputs.
  onnx::ModelProto m = base_model(6, 3);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"4"});
  auto* clip = add_node(g, "Clip", {"x"}, {"y"}, "clip");
  auto* a = clip->add_attribute();
  a->set_name("max"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(0.5f);
  set_tensor_type(g->add_output(), "y", 1, {"4"});
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  ASSERT_EQ(graph.outputs()[0].node->kind(), NodeKind::Op);
  EXPECT_EQ(graph.outputs()[0].node->inputs().size(), 3u);
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  ASSERT_EQ(out.graph().node_size(), 1);
  EXPECT_EQ(out.graph().node(0).input_size(), 1);
  EXPECT_EQ(out.graph().initializer_size(), 0);
  round_trip(graph);
  Tensor in = Tensor::from_f64(DType::Float32, {4}, std::vector<double>{-1, 0, 0.25, 2});
  EXPECT_EQ(evaluate(graph, {in})[0].to_f64(), (std::vector<double>{-1, 0, 0.25, 0.5}));
}

TEST(OnnxRoundTrip, OutputsThatAreInputsOrRepeatedGetIdentities) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Value r = b.op1("Relu", {x});
  Graph g = b.finish({x, r, r}, {"x_out", "r1", "r2"});
  std::string bytes = export_onnx_bytes(g);
  EXPECT_NO_THROW(check_onnx_model(bytes));
  onnx::ModelProto out = parse(bytes);
  EXPECT_EQ(out.graph().node_size(), 3);  // Relu + 2 Identities
  Graph back = import_onnx_bytes(bytes, "");
  Tensor in = Tensor::from_f64(DType::Float32, {2}, std::vector<double>{-1, 2});
  std::vector<Tensor> got = evaluate(back, {in});
  EXPECT_EQ(got[0].to_f64(), (std::vector<double>{-1, 2}));
  EXPECT_EQ(got[2].to_f64(), (std::vector<double>{0, 2}));
  EXPECT_EQ(export_onnx_bytes(back), export_onnx_bytes(import_onnx_bytes(export_onnx_bytes(back), "")));
}

// ---- Opaque nodes -------------------------------------------------------------------

TEST(OnnxOpaque, CustomOpRoundTripsVerbatim) {
  onnx::ModelProto m = base_model();
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2", "3"});
  auto* foo = add_node(g, "Foo", {"x"}, {"f"}, "foo");
  foo->set_domain("com.example");
  foo->set_doc_string("kept verbatim");
  auto* a = foo->add_attribute();
  a->set_name("mode"), a->set_type(onnx::AttributeProto::STRING), a->set_s("fast");
  set_tensor_type(g->add_value_info(), "f", 1, {"2", "3"});  // the only source of f's type
  add_node(g, "Relu", {"f"}, {"y"}, "relu");
  set_tensor_type(g->add_output(), "y", 1, {"2", "3"});
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  EXPECT_EQ(stats.onnx_nodes, 2u);
  EXPECT_EQ(stats.opaque_nodes, 1u);
  ASSERT_EQ(stats.opaque_reasons.size(), 1u);
  EXPECT_NE(stats.opaque_reasons[0].find("node 'foo' (Foo)"), std::string::npos) << stats.opaque_reasons[0];
  const Node& relu = *graph.outputs()[0].node;
  EXPECT_EQ(relu.kind(), NodeKind::Op);  // f's type is known from value_info
  const Node& opaque = *relu.inputs()[0].node;
  ASSERT_EQ(opaque.kind(), NodeKind::Opaque);
  EXPECT_EQ(opaque.opaque()->domain, "com.example");
  EXPECT_EQ(opaque.output_types()[0], (TensorType{DType::Float32, make_shape({2, 3})}));
  EXPECT_FALSE(is_evaluable(graph));
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  ASSERT_EQ(out.graph().node_size(), 2);
  EXPECT_EQ(out.graph().node(0).SerializeAsString(), m.graph().node(0).SerializeAsString());
  EXPECT_NO_THROW(check_onnx_model(out.SerializeAsString()));
  round_trip(graph);
}

TEST(OnnxOpaque, UnknownShapesMakeConsumersOpaque) {
  onnx::ModelProto m = base_model();
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2", "3"});
  add_node(g, "Foo", {"x"}, {"f"})->set_domain("com.example");  // no type for f anywhere
  add_node(g, "Relu", {"f"}, {"r"}, "relu");
  add_node(g, "Add", {"x", "x"}, {"s"}, "add");
  set_tensor_type(g->add_output(), "r", 1, {"2", "3"});
  set_tensor_type(g->add_output(), "s", 1, {"2", "3"});
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  EXPECT_EQ(stats.opaque_nodes, 2u);
  EXPECT_EQ(graph.outputs()[0].node->kind(), NodeKind::Opaque);
  EXPECT_EQ(graph.outputs()[1].node->kind(), NodeKind::Op);
  EXPECT_NE(stats.opaque_reasons[1].find("unknown type"), std::string::npos) << stats.opaque_reasons[1];
  std::string bytes = export_onnx_bytes(graph);
  EXPECT_NO_THROW(check_onnx_model(bytes));
  Graph back = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(same_graph(graph, back));
}

// A sequence graph input is kept with its ONNX type: SequenceAt (and Identity, a
// native operator, on the sequence) stay opaque, Relu after SequenceAt is native.
TEST(OnnxOpaque, SequenceInputRoundTrips) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  auto* seq = g->add_input();
  seq->set_name("seq");
  auto* elem = seq->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  elem->set_elem_type(1);
  elem->mutable_shape()->add_dim()->set_dim_value(2);
  elem->mutable_shape()->add_dim()->set_dim_value(3);
  onnx::TensorProto pos;
  pos.set_name("pos");
  pos.set_data_type(onnx::TensorProto::INT64);
  pos.add_int64_data(0);
  *g->add_initializer() = pos;
  add_node(g, "SequenceAt", {"seq", "pos"}, {"t"}, "at");
  add_node(g, "Relu", {"t"}, {"y"}, "relu");
  add_node(g, "Identity", {"seq"}, {"copy"}, "copy");
  set_tensor_type(g->add_output(), "y", 1, {"2", "3"});
  *g->add_output() = *seq;
  g->mutable_output(1)->set_name("copy");
  *g->add_output() = *seq;  // the input itself as an output

  Graph graph = import_onnx_bytes(bytes_of(m), "");
  ASSERT_EQ(graph.inputs().size(), 1u);
  ASSERT_NE(graph.inputs()[0]->onnx_type(), nullptr);
  EXPECT_EQ(*graph.inputs()[0]->onnx_type(), seq->type().SerializeAsString());
  const Value& y = graph.outputs()[0];
  EXPECT_EQ(y.node->op_type(), "Relu");
  EXPECT_EQ(y.node->kind(), NodeKind::Op);
  EXPECT_EQ(y.node->inputs()[0].node->kind(), NodeKind::Opaque);
  EXPECT_EQ(graph.outputs()[1].node->kind(), NodeKind::Opaque);

  Graph back = round_trip(graph);
  onnx::ModelProto out = parse(export_onnx_bytes(back));
  ASSERT_EQ(out.graph().input_size(), 1);
  EXPECT_TRUE(out.graph().input(0).type().has_sequence_type());
  for (int i = 1; i < out.graph().output_size(); ++i)
    EXPECT_TRUE(out.graph().output(i).type().has_sequence_type()) << out.graph().output(i).name();

  std::string why;
  EXPECT_FALSE(is_evaluable(graph, &why));
  EXPECT_NE(why.find("'seq'"), std::string::npos) << why;
  expect_error([&] { random_inputs(graph, 1); }, {"'seq'"});

  const std::string text = print_graph(graph);
  EXPECT_NE(text.find("onnx_type=b64"), std::string::npos) << text;
  Graph parsed = parse_graph(text);
  EXPECT_EQ(print_graph(parsed), text);
  ASSERT_NE(parsed.inputs()[0]->onnx_type(), nullptr);
  EXPECT_EQ(*parsed.inputs()[0]->onnx_type(), *graph.inputs()[0]->onnx_type());
}

// If node whose branches read outer values: those become implicit inputs.
onnx::ModelProto if_model() {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "cond", 9, {});
  set_tensor_type(g->add_input(), "x", 1, {"2"});
  add_node(g, "Relu", {"x"}, {"a"}, "relu");
  add_node(g, "Neg", {"x"}, {"b"}, "neg");
  auto* node = add_node(g, "If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* attr = node->add_attribute();
    attr->set_name(branch);
    attr->set_type(onnx::AttributeProto::GRAPH);
    auto* body = attr->mutable_g();
    body->set_name(branch);
    add_node(body, "Add", {"a", std::string(branch) == "then_branch" ? "a" : "b"}, {"out"});
    set_tensor_type(body->add_output(), "out", 1, {"2"});
  }
  set_tensor_type(g->add_output(), "y", 1, {"2"});
  return m;
}

TEST(OnnxOpaque, SubgraphOuterReferencesBecomeInputs) {
  onnx::ModelProto m = if_model();
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  const Node& if_node = *graph.outputs()[0].node;
  ASSERT_EQ(if_node.kind(), NodeKind::Opaque);
  ASSERT_EQ(if_node.inputs().size(), 3u);  // cond + implicit a, b
  EXPECT_EQ(if_node.inputs()[1].node->op_type(), "Relu");
  EXPECT_EQ(if_node.inputs()[2].node->op_type(), "Neg");
  EXPECT_EQ(graph.num_ops(), 3u);  // Relu and Neg stay alive through the implicit inputs
  EXPECT_NE(stats.opaque_reasons[0].find("subgraph"), std::string::npos);
  round_trip(graph);
}

TEST(OnnxOpaque, RenamedOuterValuesGetIdentities) {
  Graph graph = import_onnx_bytes(bytes_of(if_model()), "");
  // Replace Relu(x) by x itself: the branch still reads "a", which must still exist.
  Graph changed = rebuild(graph, [](const Node& n, const std::vector<Value>& in, GraphBuilder&) {
    return n.op_type() == "Relu" ? std::vector<Value>{in[0]} : std::vector<Value>{};
  });
  std::string bytes = export_onnx_bytes(changed);
  EXPECT_NO_THROW(check_onnx_model(bytes));
  onnx::ModelProto out = parse(bytes);
  bool identity_to_a = false;
  for (const auto& n : out.graph().node())
    identity_to_a = identity_to_a || (n.op_type() == "Identity" && n.input(0) == "x" && n.output(0) == "a");
  EXPECT_TRUE(identity_to_a);
}

TEST(OnnxOpaque, OmittedOptionalOutputsStayOmitted) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  // Unique (opaque: isomer does not implement it) with its indices and inverse_indices
  // omitted. (An LSTM whose W did not fit its input served here once; import now
  // refuses such a node.)
  set_tensor_type(g->add_input(), "x", 1, {"6"});
  add_node(g, "Unique", {"x"}, {"y", "", "", "counts"}, "unique");
  set_tensor_type(g->add_output(), "counts", 7, {"n"});
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  ASSERT_EQ(out.graph().node_size(), 1);
  ASSERT_EQ(out.graph().node(0).output_size(), 4);
  EXPECT_EQ(out.graph().node(0).output(1), "");
  EXPECT_EQ(out.graph().node(0).output(2), "");
  EXPECT_EQ(out.graph().node(0).output(3), "counts");
  round_trip(graph);
}

// ---- External data ------------------------------------------------------------------

Graph weights_graph() {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({64})});
  std::vector<double> w(64), v(4, 2.0);
  for (int i = 0; i < 64; ++i) w[i] = i * 0.5;
  Value big = b.constant(Tensor::from_f64(DType::Float32, {64}, w), "big");
  Value small = b.constant(Tensor::from_f64(DType::Float32, {4}, v), "small");
  Value s = b.op1("Add", {x, big});
  return b.finish({s, small}, {"y", "z"});
}

TEST(OnnxExternalData, WriteAndReadBack) {
  TempDir dir;
  Graph g = weights_graph();
  ExportOptions opts;
  opts.external_data = true;
  opts.external_threshold_bytes = 64;
  const ExportedFiles files_written = export_onnx_file(g, dir.file("m.onnx"), opts);
  ASSERT_TRUE(fs::exists(dir.file("m.onnx.data")));
  EXPECT_EQ(fs::file_size(dir.file("m.onnx.data")), 256u);
  EXPECT_EQ(files_written.data_path, dir.file("m.onnx.data"));
  EXPECT_EQ(files_written.data_bytes, 256u);
  EXPECT_EQ(files_written.model_bytes, fs::file_size(dir.file("m.onnx")));
  EXPECT_NE(files_written.describe().find("external data"), std::string::npos) << files_written.describe();
  onnx::ModelProto proto = parse(read_file(dir.file("m.onnx")));
  ASSERT_EQ(proto.graph().initializer_size(), 2);
  EXPECT_EQ(proto.graph().initializer(0).data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(proto.graph().initializer(1).data_location(), onnx::TensorProto::DEFAULT);  // under the threshold
  // The location is relative to the model, so the pair can be moved together.
  bool relative_location = false;
  for (const auto& e : proto.graph().initializer(0).external_data())
    relative_location = relative_location || (e.key() == "location" && e.value() == "m.onnx.data");
  EXPECT_TRUE(relative_location);
  EXPECT_NO_THROW(check_onnx_file(dir.file("m.onnx")));
  Graph back = import_onnx_file(dir.file("m.onnx"));
  EXPECT_TRUE(same_graph(g, back));
  // Without the option the same graph is written inline, and no temporary files remain.
  const ExportedFiles inline_written = export_onnx_file(g, dir.file("inline.onnx"));
  EXPECT_FALSE(fs::exists(dir.file("inline.onnx.data")));
  EXPECT_TRUE(inline_written.data_path.empty());
  EXPECT_EQ(inline_written.describe().rfind("one file", 0), 0u) << inline_written.describe();
  EXPECT_TRUE(same_graph(g, import_onnx_file(dir.file("inline.onnx"))));
  EXPECT_EQ(read_file(dir.file("inline.onnx")), export_onnx_bytes(g));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.str())) files += e.is_regular_file();
  EXPECT_EQ(files, 3u);
}

onnx::ModelProto external_model(const std::string& location) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2"});
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location"), e->set_value(location);
  e = w->add_external_data();
  e->set_key("offset"), e->set_value("4");
  add_node(g, "Add", {"x", "w"}, {"y"});
  set_tensor_type(g->add_output(), "y", 1, {"2"});
  return m;
}

TEST(OnnxExternalData, ReadsOffsetsRelativeToTheModel) {
  TempDir dir;
  float data[3] = {9, 1.5f, -2};
  write_file(dir.file("weights.bin"), std::string(reinterpret_cast<const char*>(data), sizeof data));
  write_file(dir.file("m.onnx"), bytes_of(external_model("weights.bin")));
  Graph g = import_onnx_file(dir.file("m.onnx"));
  const Tensor* w = g.outputs()[0].node->inputs()[1].constant();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->to_f64(), (std::vector<double>{1.5, -2}));
}

TEST(OnnxExternalData, RefusesEscapesAndNamesMissingFiles) {
  TempDir dir;
  write_file(dir.file("up.onnx"), bytes_of(external_model("../secret.bin")));
  expect_error([&] { import_onnx_file(dir.file("up.onnx")); }, {"up.onnx", "'../secret.bin'", "outside"});
  write_file(dir.file("abs.onnx"), bytes_of(external_model("/etc/passwd")));
  expect_error([&] { import_onnx_file(dir.file("abs.onnx")); }, {"'/etc/passwd'", "outside"});
  write_file(dir.file("missing.onnx"), bytes_of(external_model("nowhere.bin")));
  expect_error([&] { import_onnx_file(dir.file("missing.onnx")); }, {"nowhere.bin", "cannot be opened", "'w'"});
  write_file(dir.file("short.bin"), "1234");
  write_file(dir.file("short.onnx"), bytes_of(external_model("short.bin")));
  expect_error([&] { import_onnx_file(dir.file("short.onnx")); }, {"short.bin", "bytes"});
}

// ---- Bad input ---------------------------------------------------------------------

TEST(OnnxBadInput, MissingTruncatedAndCorruptFiles) {
  TempDir dir;
  expect_error([&] { import_onnx_file(dir.file("nope.onnx")); }, {"nope.onnx", "cannot open"});
  std::string good = bytes_of(add_relu_model());
  write_file(dir.file("truncated.onnx"), good.substr(0, good.size() / 2));
  expect_error([&] { import_onnx_file(dir.file("truncated.onnx")); }, {"truncated.onnx", "does not parse"});
  write_file(dir.file("garbage.onnx"), std::string("\xff\xff\xff\xff garbage \x01\x02", 16));
  expect_error([&] { import_onnx_file(dir.file("garbage.onnx")); }, {"garbage.onnx", "does not parse"});
  write_file(dir.file("empty.onnx"), "");
  expect_error([&] { import_onnx_file(dir.file("empty.onnx")); }, {"empty.onnx", "empty"});
}

TEST(OnnxBadInput, UnsupportedIrVersions) {
  onnx::ModelProto m = add_relu_model();
  m.set_ir_version(0);
  expect_error([&] { import_onnx_bytes(bytes_of(m), ""); }, {"IR version 0"});
  m.set_ir_version(99);
  expect_error([&] { import_onnx_bytes(bytes_of(m), ""); }, {"IR version 99"});
}

TEST(OnnxBadInput, CyclesDanglingInputsAndDuplicateNames) {
  onnx::ModelProto cycle = base_model();
  auto* g = cycle.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2"});
  add_node(g, "Add", {"x", "b"}, {"a"}, "first");
  add_node(g, "Relu", {"a"}, {"b"}, "second");
  set_tensor_type(g->add_output(), "b", 1, {"2"});
  expect_error([&] { import_onnx_bytes(bytes_of(cycle), ""); }, {"cycle", "node 'first' (Add)"});

  onnx::ModelProto dangling = add_relu_model();
  dangling.mutable_graph()->mutable_node(1)->set_input(0, "ghost");
  expect_error([&] { import_onnx_bytes(bytes_of(dangling), ""); }, {"node 'relu' (Relu)", "'ghost'"});

  onnx::ModelProto dup = add_relu_model();
  dup.mutable_graph()->mutable_node(1)->set_output(0, "s");
  expect_error([&] { import_onnx_bytes(bytes_of(dup), ""); }, {"node 'relu' (Relu)", "'s'", "also produced"});

  onnx::ModelProto shadow = add_relu_model();
  shadow.mutable_graph()->mutable_node(0)->set_output(0, "x");
  expect_error([&] { import_onnx_bytes(bytes_of(shadow), ""); }, {"node 'add' (Add)", "'x'"});

  onnx::ModelProto dup_init = add_relu_model();
  *dup_init.mutable_graph()->add_initializer() = f32_tensor("w", {1}, {0});
  expect_error([&] { import_onnx_bytes(bytes_of(dup_init), ""); }, {"duplicate initializer 'w'"});

  onnx::ModelProto no_output = add_relu_model();
  no_output.mutable_graph()->mutable_output(0)->set_name("nothing");
  expect_error([&] { import_onnx_bytes(bytes_of(no_output), ""); }, {"graph output 'nothing'"});
}

TEST(OnnxBadInput, UnsortedButAcyclicNodesAreSorted) {
  onnx::ModelProto m = add_relu_model();
  m.mutable_graph()->mutable_node()->SwapElements(0, 1);
  Graph g = import_onnx_bytes(bytes_of(m), "");
  EXPECT_EQ(g.num_ops(), 2u);
}

TEST(OnnxBadInput, ShapeMismatchIsAnErrorNamingTheNode) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "a", 1, {"2", "3"});
  set_tensor_type(g->add_input(), "b", 1, {"4", "3"});
  add_node(g, "Add", {"a", "b"}, {"y"}, "bad_add");
  set_tensor_type(g->add_output(), "y", 1, {"2", "3"});
  expect_error([&] { import_onnx_bytes(bytes_of(m), ""); }, {"'bad_add'", "broadcast"});
}

// Non-tensor inputs are read (see OnnxOpaque.SequenceInputRoundTrips), but a shape
// cannot be fixed on them.
TEST(OnnxBadInput, NonTensorInputsRefuseFixedShapes) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("seq");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  add_node(g, "SequenceLength", {"seq"}, {"n"});
  set_tensor_type(g->add_output(), "n", 7, {});
  EXPECT_NO_THROW(import_onnx_bytes(bytes_of(m), ""));
  ImportOptions opts;
  opts.input_shapes["seq"] = {2};
  expect_error([&] { import_onnx_bytes(bytes_of(m), "", opts); }, {"graph input 'seq'", "sequence"});
}

TEST(OnnxBadInput, FailedExportLeavesExistingFileAlone) {
  TempDir dir;
  const std::string path = dir.file("out.onnx");
  write_file(path, "previous");
  // Clip with a bound computed at run time cannot be written at opset 6 (attributes only).
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Value lo = b.input("lo", {DType::Float32, {}});
  Graph g = b.finish({b.op1("Clip", {x, lo})}, {"y"});
  g.mutable_info().opset_imports = {{"", 6}};
  expect_error([&] { export_onnx_file(g, path); }, {"out.onnx", "Clip", "opset 6"});
  EXPECT_EQ(read_file(path), "previous");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.str())) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  expect_error([&] { export_onnx_file(weights_graph(), dir.file("no/such/dir/m.onnx")); }, {"cannot write"});
}

TEST(OnnxBadInput, CheckerMessagesAreOneLine) {
  onnx::ModelProto m = add_relu_model();
  m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  expect_error([&] { check_onnx_model(bytes_of(m)); }, {"ONNX checker", "NoSuchOp"});
}

}  // namespace
}  // namespace isomer
