// ONNX as the current release writes it: every IR version and opset up to the newest
// the version table knows, operator versions newer than libonnx's schemas, element
// types isomer does not compute with, fields libonnx does not know, and external data.
#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>

#include <map>

#include "ir/graph.h"
#include "ir/text.h"
#include "onnx/onnx_io.h"
#include "onnx/onnx_versions.h"
#include "onnx_test_util.h"
#include "ops/op.h"

namespace isomer {
namespace {

using namespace onnx_test;
using onnx_detail::kReviewedOpset;

// x f32[2,3] -> Add(x, w) -> Relu -> y, at the given versions.
onnx::ModelProto add_relu(int64_t opset, int64_t ir_version) {
  onnx::ModelProto m = base_model(opset, ir_version);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2", "3"});
  *g->add_initializer() = f32_tensor("w", {3}, {1, -2, 0.5});
  add_node(g, "Add", {"x", "w"}, {"s"}, "add");
  add_node(g, "Relu", {"s"}, {"y"}, "relu");
  set_tensor_type(g->add_output(), "y", 1, {"2", "3"});
  return m;
}

// ---- Versions ---------------------------------------------------------------------

// The (IR version, opset) pairs of ONNX releases from 1.2 to the newest.
TEST(OnnxCurrent, ReadsEveryIrVersionAndWritesItBack) {
  const std::pair<int64_t, int64_t> releases[] = {{3, 7},   {4, 9},   {5, 10},  {6, 11},  {7, 13},
                                                  {8, 17},  {9, 19},  {9, 20},  {10, 21}, {10, 22},
                                                  {11, 23}, {12, 24}, {13, 25}, {13, 26}, {14, 28}};
  for (auto [ir, opset] : releases) {
    SCOPED_TRACE("IR " + std::to_string(ir) + ", opset " + std::to_string(opset));
    ImportStats stats;
    Graph g = import_onnx_bytes(bytes_of(add_relu(opset, ir)), "", {}, &stats);
    EXPECT_EQ(stats.opaque_nodes, 0u);
    onnx::ModelProto out = parse(export_onnx_bytes(g));
    EXPECT_EQ(out.ir_version(), ir);
    ASSERT_EQ(out.opset_import_size(), 1);
    EXPECT_EQ(out.opset_import(0).version(), opset);
    EXPECT_EQ(out.graph().node_size(), 2);
  }
  EXPECT_EQ(onnx_detail::newest_ir_version(), 14);
  EXPECT_EQ(onnx_detail::newest_opset(""), 28);
  EXPECT_EQ(onnx_detail::newest_opset("ai.onnx"), 28);
  EXPECT_EQ(onnx_detail::newest_opset("com.example"), 0);
}

TEST(OnnxCurrent, RefusesVersionsNewerThanItKnows) {
  expect_error([] { import_onnx_bytes(bytes_of(add_relu(28, 15)), ""); }, {"IR version 15", "1 to 14"});
  expect_error([] { import_onnx_bytes(bytes_of(add_relu(29, 14)), ""); }, {"opset 29 of ai.onnx", "up to 28"});
  onnx::ModelProto ml = add_relu(28, 14);
  auto* o = ml.add_opset_import();
  o->set_domain("ai.onnx.ml"), o->set_version(6);
  expect_error([&] { import_onnx_bytes(bytes_of(ml), ""); }, {"opset 6 of ai.onnx.ml", "up to 5"});
  // Vendor domains have no version this build could know: any is read.
  o->set_domain("com.example"), o->set_version(99);
  EXPECT_NO_THROW(import_onnx_bytes(bytes_of(ml), ""));
}

// Every ONNX version of isomer's operators up to kReviewedOpset, as checked against
// their import hooks: after the version isomer's canonical form follows, later ones
// only let more element types in (the float8, int4, ... that isomer keeps opaque) or
// add attributes that matter only for those types (Cast-19's saturate and Cast-24's
// round_mode act on float8 targets, Pad-19's "wrap" mode is refused by Pad's hook).
// A regenerated table with a new version of one of them fails here: check the new
// version against the operator's hook, then update this list and kReviewedOpset.
TEST(OnnxCurrent, OperatorVersionsWereReviewed) {
  const std::map<std::string, std::vector<int>> reviewed = {
      {"Relu", {1, 6, 13, 14}}, {"LeakyRelu", {1, 6, 16}}, {"Sigmoid", {1, 6, 13}}, {"HardSigmoid", {1, 6, 22}},
      {"HardSwish", {14, 22}}, {"Tanh", {1, 6, 13}}, {"Erf", {9, 13}}, {"Gelu", {20}}, {"Exp", {1, 6, 13}},
      {"Log", {1, 6, 13}}, {"Sqrt", {1, 6, 13}}, {"Reciprocal", {1, 6, 13}}, {"Neg", {1, 6, 13}},
      {"Abs", {1, 6, 13}}, {"Clip", {1, 6, 11, 12, 13}}, {"Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}},
      // CastLike (15, 19, 21, 23, 24, 25: Cast's changes) imports as Cast to its second input's type.
      {"Dropout", {1, 6, 7, 10, 12, 13, 22}}, {"Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25, 28}},
      {"Add", {1, 6, 7, 13, 14}}, {"Sub", {1, 6, 7, 13, 14}}, {"Mul", {1, 6, 7, 13, 14}},
      {"Div", {1, 6, 7, 13, 14}}, {"Pow", {1, 7, 12, 13, 15}}, {"Max", {1, 6, 8, 12, 13}},
      {"Min", {1, 6, 8, 12, 13}}, {"Equal", {1, 7, 11, 13, 19}}, {"Where", {9, 16}}, {"MatMul", {1, 9, 13}},
      {"Gemm", {1, 6, 7, 9, 11, 13}}, {"Conv", {1, 11, 22}}, {"MaxPool", {1, 8, 10, 11, 12, 22}},
      {"AveragePool", {1, 7, 10, 11, 19, 22}}, {"GlobalAveragePool", {1, 22}},
      {"BatchNormalization", {1, 6, 7, 9, 14, 15}}, {"LayerNormalization", {17}}, {"Softmax", {1, 11, 13}},
      {"ReduceMean", {1, 11, 13, 18}}, {"ReduceSum", {1, 11, 13}}, {"Concat", {1, 4, 11, 13}},
      {"Split", {1, 2, 11, 13, 18}}, {"Transpose", {1, 13, 21, 23, 24, 25}},
      {"Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}}, {"Flatten", {1, 9, 11, 13, 21, 23, 24, 25}},
      {"Squeeze", {1, 11, 13, 21, 23, 24, 25}}, {"Unsqueeze", {1, 11, 13, 21, 23, 24, 25}},
      {"Slice", {1, 10, 11, 13}}, {"Gather", {1, 11, 13}}, {"Pad", {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}},
      {"Expand", {8, 13}}, {"Shape", {1, 13, 15, 19, 21, 23, 24, 25}},
      {"ConstantOfShape", {9, 20, 21, 23, 24, 25}}, {"EyeLike", {9, 22}},
      // Operators of current exporters. Mod-28 lets fmod=0 take floats (A - floor(A/B) B,
      // which Mod's evaluator and kernel compute); Range-27's stash_type matters for
      // 16-bit floats only (isomer computes in double: stash_type=1; 0 is refused);
      // ReduceMax/Min-20 take bool (refused by their shape rule: kept opaque);
      // ScatterND-16 and 18 add reductions (all four are implemented); the rest widen types.
      {"Sin", {7, 22}}, {"Cos", {7, 22}}, {"Floor", {1, 6, 13}}, {"Ceil", {1, 6, 13}}, {"Round", {11, 22}},
      {"Sign", {9, 13}}, {"Mod", {10, 13, 28}}, {"Sum", {1, 6, 8, 13}}, {"Mean", {1, 6, 8, 13}},
      {"Less", {1, 7, 9, 13}}, {"LessOrEqual", {12, 16}}, {"Greater", {1, 7, 9, 13}},
      {"GreaterOrEqual", {12, 16}}, {"Not", {1}}, {"And", {1, 7}}, {"Or", {1, 7}}, {"Xor", {1, 7}},
      {"IsNaN", {9, 13, 20}}, {"IsInf", {10, 20}}, {"Softplus", {1, 22}}, {"Mish", {18, 22}}, {"Swish", {24}},
      {"Elu", {1, 6, 22}}, {"Selu", {1, 6, 22}}, {"Celu", {12, 28}}, {"ThresholdedRelu", {10, 22}},
      {"PRelu", {1, 6, 7, 9, 16}}, {"Einsum", {12, 28}}, {"GlobalMaxPool", {1, 22}}, {"LogSoftmax", {1, 11, 13}},
      {"RMSNormalization", {23}}, {"GroupNormalization", {18, 21}}, {"InstanceNormalization", {1, 6, 22}},
      {"ReduceMax", {1, 11, 12, 13, 18, 20}}, {"ReduceMin", {1, 11, 12, 13, 18, 20}},
      {"ReduceProd", {1, 11, 13, 18}}, {"ReduceSumSquare", {1, 11, 13, 18}}, {"ReduceL1", {1, 11, 13, 18}},
      {"ReduceL2", {1, 11, 13, 18}}, {"ReduceLogSum", {1, 11, 13, 18, 28}},
      {"ReduceLogSumExp", {1, 11, 13, 18, 28}}, {"ArgMax", {1, 11, 12, 13}}, {"ArgMin", {1, 11, 12, 13}},
      {"CumSum", {11, 14}}, {"Tile", {1, 6, 13}}, {"Trilu", {14}}, {"GatherElements", {11, 13}}, {"GatherND", {11, 12, 13}},
      {"ScatterND", {11, 13, 16, 18}}, {"Range", {11, 27}},
      // Selection and sampling. TopK-10 moved k to an input and 11 added largest and sorted
      // (both adapted by its hooks), 24 widens types; ScatterElements-16 and 18 add the
      // reductions (all four implemented); OneHot-11 adds negative axes and indices, 28
      // widens types; GridSample-20 renames the modes and allows N-D (4-D implemented,
      // the rest kept opaque), 22 widens types.
      {"TopK", {1, 10, 11, 24}}, {"ScatterElements", {11, 13, 16, 18}}, {"OneHot", {9, 11, 28}},
      {"GridSample", {16, 20, 22}}, {"DFT", {17, 20}}, {"STFT", {17}},
      // Trigonometric and hyperbolic functions and Softsign: 22 widens types.
      {"Tan", {7, 22}}, {"Asin", {7, 22}}, {"Acos", {7, 22}}, {"Atan", {7, 22}}, {"Sinh", {9, 22}}, {"Cosh", {9, 22}},
      {"Asinh", {9, 22}}, {"Acosh", {9, 22}}, {"Atanh", {9, 22}}, {"Softsign", {1, 22}},
      // Size: 13 onwards widen types.
      {"Size", {1, 13, 19, 21, 23, 24, 25}},
      // Recurrent operators: isomer's form is opset 7's (earlier ones stay opaque); 14 added
      // layout (implemented), 22 widens types.
      {"LSTM", {1, 7, 14, 22}}, {"GRU", {1, 3, 7, 14, 22}}, {"RNN", {1, 7, 14, 22}},
      // Upsampling. Resize-10 is adapted by its hook (asymmetric, floor); 11 adds roi and the
      // coordinate modes, 13 makes roi and scales optional, 18 adds antialias (kept opaque),
      // axes and keep_aspect_ratio_policy, 19 half_pixel_symmetric: all implemented.
      // DepthToSpace-11 adds mode (CRD); SpaceToDepth-28 changed more than types (a node with
      // any attribute beyond blocksize is kept opaque by its hook); the rest widen types.
      // Upsample (7 to 9; deprecated at 10) is Resize-10 under its old name (the importer maps it).
      // LRN-13 widens types. Gather-1 and Flatten-1/9 are 11's forms without negative axes.
      {"LRN", {1, 13}},
      {"ConvTranspose", {1, 11, 22}}, {"Resize", {10, 11, 13, 18, 19}}, {"DepthToSpace", {1, 11, 13, 28}},
      {"SpaceToDepth", {1, 13, 28}},
      // Attention: isomer's form is 25's; 24 added nonpad_kv_seqlen and 25 the sliding
      // window, both implemented; the hooks drop 23/24's ignored 4-D head counts and refuse
      // to write what an older opset cannot say.
      {"Attention", {23, 24, 25}},
      {"RotaryEmbedding", {23}},
      // Col2Im (ops/col2im.cpp): one version, 18.
      {"Col2Im", {18}},
      // Quantization (ops/quant.cpp): 19-28 widen the types (float8, int4, int2, float8e8m0
      // scales: refused, or kept opaque), 21 added block quantization (kept opaque) and
      // output_dtype, 23 precision (float32 only); QLinearMatMul-21 widened the scales.
      {"QuantizeLinear", {10, 13, 19, 21, 23, 24, 25, 28}},
      {"DequantizeLinear", {10, 13, 19, 21, 23, 24, 25, 28}},
      {"DynamicQuantizeLinear", {11}},
      {"MatMulInteger", {10}},
      {"ConvInteger", {10}},
      {"QLinearMatMul", {10, 21}},
      {"QLinearConv", {10}}};
  EXPECT_LE(kReviewedOpset, onnx_detail::newest_opset(""));
  for (const OpDef* op : all_ops()) {
    if (!op->onnx_domain.empty()) continue;
    const std::string name(op->name);
    std::vector<int> versions;
    for (int v : onnx_detail::op_versions("", name))
      if (v <= kReviewedOpset) versions.push_back(v);
    auto it = reviewed.find(name);
    ASSERT_NE(it, reviewed.end()) << name << " is not in the reviewed list (its ONNX versions: "
                                  << ::testing::PrintToString(versions) << ")";
    EXPECT_EQ(versions, it->second) << name << ": ONNX's versions are not the ones reviewed";
  }
}

// A newer version of an operator: libonnx's older schema serves only where ONNX merely
// widened the types since.
TEST(OnnxCurrent, LibonnxSchemasServeOnlyTheVersionsTheyMatch) {
  using onnx_detail::libonnx_schema;
  using onnx_detail::op_version;
  EXPECT_EQ(op_version("", "Reshape", 28), 25);
  EXPECT_EQ(op_version("", "Reshape", 13), 13);
  EXPECT_EQ(op_version("", "Gelu", 19), 0);  // not yet an operator
  ASSERT_NE(libonnx_schema("", "Reshape", 28), nullptr);  // 19..25 only add types
  EXPECT_EQ(libonnx_schema("", "Reshape", 28)->since_version(), 14);
  EXPECT_EQ(libonnx_schema("", "ReduceMean", 18), nullptr);  // axes became an input in 18
  EXPECT_EQ(libonnx_schema("", "DequantizeLinear", 28), nullptr);  // block quantization in 21
  EXPECT_EQ(libonnx_schema("", "Cast", 24), nullptr);              // saturate in 19
  ASSERT_NE(libonnx_schema("ai.onnx", "Relu", 28), nullptr);
  EXPECT_EQ(libonnx_schema("com.example", "Relu", 1), nullptr);
}

// A graph at opset 28 built only from operators isomer knows imports natively, with
// types from isomer's own shape rules where libonnx's schemas are too old.
TEST(OnnxCurrent, NewerVersionsOfKnownOperatorsImportNatively) {
  onnx::ModelProto m = base_model(28, 14);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"2", "3", "1"});
  onnx::TensorProto axes;
  axes.set_name("axes"), axes.set_data_type(onnx::TensorProto::INT64), axes.add_dims(1), axes.add_int64_data(2);
  *g->add_initializer() = axes;
  onnx::TensorProto shape;
  shape.set_name("shape"), shape.set_data_type(onnx::TensorProto::INT64), shape.add_dims(2);
  shape.add_int64_data(3), shape.add_int64_data(2);
  *g->add_initializer() = shape;
  add_node(g, "Squeeze", {"x", "axes"}, {"sq"}, "squeeze");
  add_node(g, "ReduceMean", {"sq", "axes_1"}, {"mean"}, "mean");
  onnx::TensorProto axes1 = axes;
  axes1.set_name("axes_1"), axes1.set_int64_data(0, 1);
  *g->add_initializer() = axes1;
  add_node(g, "Reshape", {"sq", "shape"}, {"r"}, "reshape");
  auto* cast = add_node(g, "Cast", {"r"}, {"c"}, "cast");
  auto* to = cast->add_attribute();
  to->set_name("to"), to->set_type(onnx::AttributeProto::INT), to->set_i(onnx::TensorProto::DOUBLE);
  auto* rm = cast->add_attribute();  // Cast-24: acts on float8e8m0 targets only
  rm->set_name("round_mode"), rm->set_type(onnx::AttributeProto::STRING), rm->set_s("up");
  add_node(g, "Transpose", {"c"}, {"y"}, "transpose");
  set_tensor_type(g->add_output(), "y", 11, {"2", "3"});
  set_tensor_type(g->add_output(), "mean", 1, {"2", "1"});
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  EXPECT_EQ(stats.opaque_nodes, 0u) << ::testing::PrintToString(stats.opaque_reasons);
  EXPECT_EQ(graph.outputs()[0].type(), (TensorType{DType::Float64, make_shape({2, 3})}));
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  EXPECT_EQ(out.opset_import(0).version(), 28);
  bool round_mode = false;
  for (const auto& n : out.graph().node())
    for (const auto& a : n.attribute()) round_mode = round_mode || (a.name() == "round_mode" && a.s() == "up");
  EXPECT_TRUE(round_mode);
}

// An operator isomer does not know, at a version libonnx lacks (Compress-28):
// libonnx must not infer it by its old rules. Its output's type comes from the model's
// value_info where there is one; without, its readers stay opaque.
TEST(OnnxCurrent, StaleSchemasAreNotUsedForInference) {
  auto model = [](bool with_value_info) {
    onnx::ModelProto m = base_model(28, 14);
    auto* g = m.mutable_graph();
    set_tensor_type(g->add_input(), "x", 1, {"4"});
    set_tensor_type(g->add_input(), "keep", 9, {"4"});
    add_node(g, "Compress", {"x", "keep"}, {"dq"}, "dq");
    add_node(g, "Relu", {"dq"}, {"y"}, "relu");
    set_tensor_type(g->add_output(), "y", 1, {"n"});
    if (with_value_info) set_tensor_type(g->add_value_info(), "dq", 1, {"n"});
    return m;
  };
  ImportStats stats;
  import_onnx_bytes(bytes_of(model(false)), "", {}, &stats);
  EXPECT_EQ(stats.opaque_nodes, 2u);
  import_onnx_bytes(bytes_of(model(true)), "", {}, &stats);
  EXPECT_EQ(stats.opaque_nodes, 1u) << ::testing::PrintToString(stats.opaque_reasons);
}

// A convolution whose weight another node computes (a quantized model's
// DequantizeLinear) is shown to libonnx only once its weight's dims are known (a
// second inference pass), so the types after it still reach the opaque nodes.
TEST(OnnxCurrent, ConvolutionsWithComputedWeightsAreInferredInALaterPass) {
  onnx::ModelProto m = base_model(13, 7);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", 1, {"1", "1", "4", "4"});
  onnx::TensorProto wq;
  wq.set_name("wq"), wq.set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {1, 1, 3, 3}) wq.add_dims(d);
  wq.set_raw_data(std::string(9, '\x02'));
  *g->add_initializer() = wq;
  *g->add_initializer() = f32_tensor("scale", {}, {0.5f});
  add_node(g, "DequantizeLinear", {"wq", "scale"}, {"w"}, "dq_w");
  add_node(g, "Conv", {"x", "w"}, {"c"}, "conv");
  add_node(g, "QuantizeLinear", {"c", "scale"}, {"cq"}, "q_c");
  add_node(g, "DequantizeLinear", {"cq", "scale"}, {"cd"}, "dq_c");
  add_node(g, "Relu", {"cd"}, {"y"}, "relu");
  set_tensor_type(g->add_output(), "y", 1, {"1", "1", "2", "2"});
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  EXPECT_EQ(stats.opaque_nodes, 0u) << ::testing::PrintToString(stats.opaque_reasons);  // (De)QuantizeLinear are native
  EXPECT_EQ(graph.outputs()[0].node->op_type(), "Relu");
  EXPECT_EQ(graph.outputs()[0].type(), (TensorType{DType::Float32, make_shape({1, 1, 2, 2})}));
}

// ---- Element types isomer does not compute with ---------------------------------------

// float8e4m3fn (typed field), int4 (packed raw_data) and float4e2m1 (a Constant node)
// feed DequantizeLinear, which stays opaque; the tensors come back verbatim, as
// initializers.
TEST(OnnxCurrent, UnknownElementTypesStayVerbatim) {
  onnx::ModelProto m = base_model(28, 14);
  auto* g = m.mutable_graph();
  onnx::TensorProto f8;
  f8.set_name("f8"), f8.set_data_type(17), f8.add_dims(2);
  f8.add_int32_data(0x38), f8.add_int32_data(0xb8);
  *g->add_initializer() = f8;
  onnx::TensorProto i4;
  i4.set_name("i4"), i4.set_data_type(22), i4.add_dims(3), i4.set_raw_data(std::string("\x21\x03", 2));
  i4.set_doc_string("packed");
  *g->add_initializer() = i4;
  *g->add_initializer() = f32_tensor("scale", {}, {2});
  auto* c = add_node(g, "Constant", {}, {"f4"}, "f4_const");
  auto* value = c->add_attribute();
  value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(23), value->mutable_t()->add_dims(2), value->mutable_t()->set_raw_data("\x12");
  int k = 0;
  for (const char* q : {"f8", "i4", "f4"}) {
    const std::string out = "dq" + std::to_string(k++);
    add_node(g, "DequantizeLinear", {q, "scale"}, {out}, out);
    set_tensor_type(g->add_output(), out, 1, {std::string(q) == "i4" ? "3" : "2"});
  }
  ImportStats stats;
  Graph graph = import_onnx_bytes(bytes_of(m), "", {}, &stats);
  EXPECT_EQ(stats.onnx_nodes, 4u);
  EXPECT_EQ(stats.opaque_nodes, 4u);  // the Constant node and the three DequantizeLinear
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  std::map<std::string, onnx::TensorProto> inits;
  for (const auto& t : out.graph().initializer()) inits[t.name()] = t;
  ASSERT_EQ(inits.size(), 4u);
  EXPECT_EQ(inits["f8"].SerializeAsString(), f8.SerializeAsString());
  EXPECT_EQ(inits["i4"].SerializeAsString(), i4.SerializeAsString());
  EXPECT_EQ(inits["f4"].data_type(), 23);
  EXPECT_EQ(inits["f4"].raw_data(), "\x12");
  EXPECT_EQ(out.graph().node_size(), 3);
  // Through the text format too.
  Graph back = parse_graph(print_graph(graph));
  EXPECT_EQ(export_onnx_bytes(back), export_onnx_bytes(graph));
  // An attribute of such a type keeps its node opaque instead of failing the import.
  onnx::ModelProto cos = base_model(28, 14);
  set_tensor_type(cos.mutable_graph()->add_input(), "shape", 7, {"1"});
  auto* n = add_node(cos.mutable_graph(), "ConstantOfShape", {"shape"}, {"y"}, "fill");
  auto* a = n->add_attribute();
  a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(19), a->mutable_t()->add_dims(1), a->mutable_t()->set_raw_data("\x3c");
  set_tensor_type(cos.mutable_graph()->add_output(), "y", 19, {"?"});
  import_onnx_bytes(bytes_of(cos), "", {}, &stats);
  ASSERT_EQ(stats.opaque_reasons.size(), 1u);
  EXPECT_NE(stats.opaque_reasons[0].find("element type 19"), std::string::npos) << stats.opaque_reasons[0];
}

// ---- Fields this libonnx does not know -----------------------------------------------

// What onnx 1.23 writes for metadata_props / configuration, as libonnx 1.12 sees it:
// length-delimited unknown fields.
std::string string_pair(const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto e;
  e.set_key(key), e.set_value(value);
  return e.SerializeAsString();
}

template <class Proto>
void add_unknown(Proto* p, int field, const std::string& bytes) {
  p->mutable_unknown_fields()->AddLengthDelimited(field, bytes);
}

template <class Proto>
std::string unknown_of(const Proto& p) {
  std::string out;
  p.unknown_fields().SerializeToString(&out);
  return out;
}

TEST(OnnxCurrent, FieldsThisLibonnxDoesNotKnowSurvive) {
  onnx::ModelProto m = add_relu(28, 14);
  auto* g = m.mutable_graph();
  add_unknown(&m, 26, "\x0a\x04" "cfg0");                        // ModelProto.configuration
  add_unknown(g, 16, string_pair("graph", "g"));                  // GraphProto.metadata_props
  add_unknown(g->mutable_node(0), 9, string_pair("stack", "1"));  // NodeProto.metadata_props
  add_unknown(g->mutable_node(0), 10, "\x0a\x04" "cfg0");         // NodeProto.device_configurations
  g->mutable_node(0)->set_doc_string("adds w");
  add_unknown(g->mutable_input(0), 4, string_pair("in", "x"));    // ValueInfoProto.metadata_props
  add_unknown(g->mutable_output(0), 4, string_pair("out", "y"));
  set_tensor_type(g->add_value_info(), "s", 1, {"2", "3"});
  add_unknown(g->mutable_value_info(0), 4, string_pair("mid", "s"));
  add_unknown(g->mutable_initializer(0), 16, string_pair("w", "weights"));  // TensorProto.metadata_props
  // An opaque node keeps its whole NodeProto.
  add_node(g, "Custom", {"y"}, {"z"}, "custom")->set_domain("com.example");
  add_unknown(g->mutable_node(2), 9, string_pair("custom", "1"));
  auto* o = m.add_opset_import();
  o->set_domain("com.example"), o->set_version(1);
  set_tensor_type(g->add_output(), "z", 1, {"2", "3"});
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  for (const Graph& through : {graph, parse_graph(print_graph(graph))}) {
    onnx::ModelProto out = parse(export_onnx_bytes(through));
    const onnx::GraphProto& og = out.graph();
    EXPECT_EQ(unknown_of(out), unknown_of(m));
    EXPECT_EQ(unknown_of(og), unknown_of(*g));
    ASSERT_EQ(og.node_size(), 3);
    EXPECT_EQ(unknown_of(og.node(0)), unknown_of(g->node(0)));
    EXPECT_EQ(og.node(0).doc_string(), "adds w");
    EXPECT_EQ(unknown_of(og.node(1)), "");
    EXPECT_EQ(og.node(2).SerializeAsString(), g->node(2).SerializeAsString());
    EXPECT_EQ(unknown_of(og.input(0)), unknown_of(g->input(0)));
    EXPECT_EQ(unknown_of(og.output(0)), unknown_of(g->output(0)));
    ASSERT_EQ(og.value_info_size(), 1);  // s, for its metadata (z is a graph output)
    EXPECT_EQ(og.value_info(0).name(), "s");
    EXPECT_EQ(unknown_of(og.value_info(0)), unknown_of(g->value_info(0)));
    EXPECT_EQ(unknown_of(og.initializer(0)), unknown_of(g->initializer(0)));
  }
}

// ---- Export adds what its own nodes need ----------------------------------------------

// A model of vendor operators only, one of whose outputs is its input: export writes an
// Identity for it, so the model gets the ai.onnx import it did not have.
TEST(OnnxCurrent, ExportImportsTheDefaultDomainItUses) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  auto* o = m.add_opset_import();
  o->set_domain("com.example"), o->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("vendor");
  set_tensor_type(g->add_input(), "x", 1, {"2"});
  add_node(g, "Custom", {"x"}, {"y"}, "custom")->set_domain("com.example");
  set_tensor_type(g->add_output(), "y", 1, {"2"});
  set_tensor_type(g->add_output(), "x_out", 1, {"2"});
  add_node(g, "Custom", {"x"}, {"x_out"}, "custom2")->set_domain("com.example");
  Graph graph = import_onnx_bytes(bytes_of(m), "");
  onnx::ModelProto out = parse(export_onnx_bytes(graph));
  ASSERT_EQ(out.opset_import_size(), 1);  // nothing of ai.onnx written: nothing added
  // Return the input itself as a second name: that needs an Identity.
  Graph aliased = graph.with_outputs({graph.outputs()[0], graph.inputs()[0]->output(0)});
  out = parse(export_onnx_bytes(aliased));
  ASSERT_EQ(out.opset_import_size(), 2);
  EXPECT_EQ(out.opset_import(1).domain(), "");
  EXPECT_EQ(out.opset_import(1).version(), 1);
}

}  // namespace
}  // namespace isomer
