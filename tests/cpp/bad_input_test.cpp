// Reproducers found by the libFuzzer harnesses (fuzz/), minimized, one test each.
// The CLI contract for bad models (one error line, non-zero exit, nothing written) is
// tested in tests/python/test_bad_input.py; here the importer and the text parser are
// called directly. Unfixed bugs are skipped with a comment naming them.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <string>

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
