// Reproducers found by the libFuzzer harnesses (fuzz/), minimized, one test each.
// The CLI contract for bad models (one error line, non-zero exit, nothing written) is
// tested in tests/python/test_bad_input.py; here the importer and the text parser are
// called directly. Unfixed bugs are skipped with a comment naming them.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/text.h"
#include "onnx/onnx_io.h"

namespace isomer {
namespace {

// Found by fuzz_onnx_import, minimized by libFuzzer (134 bytes). Fixed: the importer now checks
// names first. Was: a node (EyeLike, dtype=1) reads a name declared nowhere (no graph input,
// initializer or node output), in a graph without inputs or outputs. Importer::infer_types()
// (src/onnx/import.cpp:170) calls onnx::shape_inference::InferShapes first, and
// libonnx 1.12 dereferences the missing type in onnx::propagateShape: SIGSEGV. The
// importer should check that every node input is defined before shape inference.
// The CLI case is test_bad_input.py::undeclared_input_no_io.
TEST(BadInput, NodeReadsUndeclaredNameInGraphWithoutInputs) {
  onnx::ModelProto model;
  model.set_ir_version(4);
  model.add_opset_import()->set_version(9);
  onnx::NodeProto* node = model.mutable_graph()->add_node();
  node->set_op_type("EyeLike");
  node->add_input("x");
  node->add_output("y");
  for (const char* name : {"dtype", "k"}) {  // without `dtype` inference takes another path
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  }
  EXPECT_THROW(import_onnx_bytes(model.SerializeAsString(), "."), Error);
}

// Found by both fuzz_onnx_import and fuzz_text_parse (ASan: allocation-size-too-big /
// std::length_error), minimized by hand. Fixed. Was (src/ops/linear.cpp, conv_kernel): the message argument of
//   require(!attr || (*attr)[i] == d.value, "Conv kernel_shape " + to_string(*attr) + ...)
// is built before require() looks at the condition, so for a Conv WITHOUT kernel_shape
// (attr is nullopt; the common ONNX form) `*attr` reads an empty std::optional:
// undefined behaviour on every such Conv. In the sanitized build it throws
// std::length_error or aborts; in Release it happens to read an empty vector. Fix: build
// the message only when the check fails.
TEST(BadInput, ConvWithoutKernelShape) {
  Graph g = parse_graph("graph g(%x: f32[1,1,3,3]) {\n  %w = const f32[1,1,1,1] {1}\n  %0 = Conv(%x, %w)\n"
                        "  return %0\n}\n");
  EXPECT_EQ(g.num_ops(), 1u);
}

// Found by fuzz_onnx_import (UBSan: "-3.40282e+38 is outside the range of
// representable values of type 'long'" at ir/tensor.cpp:119). Fixed. Was: a Clip of
// opset 6 on an int8 input with its default bounds; the opset-6 adapter
// (ops/unary.cpp, import_clip) made the bounds -3.4e38 and 3.4e38 int8 constants
// through Tensor::from_f64, which cast them to int64: undefined. Every float-to-integer
// conversion of untrusted data now goes through ir/float_to_int.h; Clip's bounds
// saturate to the type's range (a bound beyond it bounds nothing). Since import checks
// input types against the operator's constraints, the model is refused before that:
// Clip-6 takes only float types (ONNX Runtime refuses it too). The conversion is
// still tested on Clip-6's float16, whose default bounds are beyond its range (they
// become infinities: they bound nothing).
TEST(BadInput, ClipOpset6OnInt8WithDefaultBounds) {
  onnx::ModelProto model;
  model.set_ir_version(3);
  model.add_opset_import()->set_version(6);
  onnx::GraphProto* g = model.mutable_graph();
  auto declare = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT8);
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  };
  declare(g->add_input(), "x");
  declare(g->add_output(), "y");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type("Clip");
  node->add_input("x");
  node->add_output("y");
  try {
    (void)import_onnx_bytes(model.SerializeAsString(), ".");
    ADD_FAILURE() << "Clip-6 of int8 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a valid Clip-6 node"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
  }
  for (onnx::ValueInfoProto* v : {g->mutable_input(0), g->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  Graph imported = import_onnx_bytes(model.SerializeAsString(), ".");
  const Node& clip = *imported.outputs()[0].node;
  ASSERT_EQ(clip.op_type(), "Clip");
  ASSERT_EQ(clip.inputs().size(), 3u);
  EXPECT_EQ(clip.inputs()[1].constant()->to_f64(), std::vector<double>{-HUGE_VAL});
  EXPECT_EQ(clip.inputs()[2].constant()->to_f64(), std::vector<double>{HUGE_VAL});
  (void)export_onnx_bytes(imported);
}

// Found by fuzz_onnx_import (ASan: SEGV in onnx::convPoolShapeInference, libonnx 1.12),
// from test_basic_conv_with_padding with the input's rank cut to 3. Fixed. Was: a Conv
// without kernel_shape whose weight has rank 4 and input rank 3; libonnx takes the
// kernel's dims from the weight and indexes the input's per-axis attributes with them,
// past their end, in the importer's shape inference and again when it asks whether
// ONNX accepts the node. The importer now writes kernel_shape out from the weight's
// dims first (import.cpp, make_safe_for_libonnx), which libonnx checks.
TEST(BadInput, ConvWeightOfAnotherRankThanItsInput) {
  onnx::ModelProto model;
  model.set_ir_version(6);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  auto declare = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  };
  declare(g->add_input(), "x", {1, 5, 5});
  declare(g->add_input(), "W", {1, 1, 3, 3});
  declare(g->add_output(), "y", {1, 1, 5, 5});
  onnx::NodeProto* node = g->add_node();
  node->set_op_type("Conv");
  node->add_input("x");
  node->add_input("W");
  node->add_output("y");
  try {
    import_onnx_bytes(model.SerializeAsString(), ".");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match input"), std::string::npos) << e.what();
  }
}

// Found by fuzz_onnx_import (ASan: FPE in onnx::convPoolShapeInference, libonnx 1.12).
// Fixed. Was: a Conv with strides [0, 2]; libonnx divides by the stride without
// checking it. Non-positive strides, dilations and kernel dims now keep the node from
// libonnx's shape inference; isomer's own shape rule refuses it.
TEST(BadInput, ConvWithZeroStride) {
  onnx::ModelProto model;
  model.set_ir_version(6);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  auto declare = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  };
  declare(g->add_input(), "x", {1, 1, 5, 5});
  declare(g->add_input(), "W", {1, 1, 3, 3});
  declare(g->add_output(), "y", {1, 1, 3, 2});
  onnx::NodeProto* node = g->add_node();
  node->set_op_type("Conv");
  node->add_input("x");
  node->add_input("W");
  node->add_output("y");
  onnx::AttributeProto* strides = node->add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->add_ints(0);
  strides->add_ints(2);
  EXPECT_THROW(import_onnx_bytes(model.SerializeAsString(), "."), Error);
}

// Found by the hostile campaign (scripts/hostile_campaign.py, input_dim on a BERT
// export). Fixed. Was: an int64 graph input of [1, 2^63 - 1] elements fits 64 bits
// but its bytes do not; the runtime's buffer size wrapped to a few bytes and plan()'s
// memset ran off it (SIGSEGV). Graph inputs are now checked for bytes as node outputs are.
TEST(BadInput, GraphInputWhoseBytesOverflow) {
  try {
    parse_graph("graph g(%x: i64[1,9223372036854775807]) {\n  return %x\n}\n");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more bytes than fit in 64 bits"), std::string::npos) << e.what();
  }
  // The same elements as bytes (1 byte each) fit.
  EXPECT_NO_THROW(parse_graph("graph g(%x: u8[1,9223372036854775807]) {\n  return %x\n}\n"));
}

// Found by the hostile campaign (shape_bomb on a ResNet-18 export). Fixed. Was: a
// Reshape whose constant shape has another element count than its static input
// ([1,512,1,1] to [2147483648,512]) was kept opaque and `optimize` wrote the model
// (ONNX Runtime refuses it). It breaks Reshape's definition: the node is invalid.
TEST(BadInput, ReshapeToAnotherElementCountIsInvalid) {
  for (const char* shape : {"{2147483648, 512}", "{-1, -1}", "{-2, 256}", "{3, -1}"}) {
    const std::string text = std::string("graph g(%x: f32[1,512,1,1]) {\n  %s = const i64[2] ") + shape +
                             "\n  %0 = Reshape(%x, %s)\n  return %0\n}\n";
    try {
      parse_graph(text);
      ADD_FAILURE() << "accepted: " << shape;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot reshape"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(parse_graph("graph g(%x: f32[1,512,1,1]) {\n  %s = const i64[2] {-1, 256}\n"
                              "  %0 = Reshape(%x, %s)\n  return %0\n}\n"));
}

// Corrupt bytes give an Error, whatever they are (a few fixed shapes of corruption;
// the fuzzer tries the rest).
TEST(BadInput, CorruptBytesGiveError) {
  for (std::string bytes : {std::string(), std::string("\xff\xff\xff\xff", 4), std::string(64, '\x0a'),
                            std::string("\x3a\x80\x80\x80\x80\x10", 6)})
    EXPECT_THROW(import_onnx_bytes(bytes, "."), Error) << bytes.size() << " bytes";
}

// Text that is not a graph gives an Error naming line and column.
TEST(BadInput, BadGraphTextGivesError) {
  for (const char* text : {"", "graph", "graph g(%x: f32[2]) {\n  return %y\n}\n",
                           "graph g(%x: f32[2]) {\n  %0 = Add(%x, %0)\n  return %0\n}\n",
                           "graph g(%x: f32[-2]) {\n  return %x\n}\n",
                           "graph g(%x: f32[2], %x: f32[2]) {\n  return %x\n}\n"}) {
    try {
      parse_graph(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("line "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace isomer
