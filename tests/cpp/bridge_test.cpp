// The one bridge to ONNX Runtime (bridge/bridge.h): models by bytes and by path,
// session options, every dtype .npz holds, timing samples, errors as values.
// Needs the project's Python with onnxruntime (make deps); skipped where missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "bridge/bridge.h"
#include "ir/error.h"
#include "ir/text.h"
#include "onnx/onnx_io.h"

namespace isomer {
namespace {

std::shared_ptr<bridge::OrtBridge> ort_or_skip(std::string* why) {
  try {
    return bridge::OrtBridge::shared();
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

#define REQUIRE_BRIDGE(ort)              \
  std::string why;                       \
  auto ort = ort_or_skip(&why);          \
  if (!ort) GTEST_SKIP() << why;

TEST(Bridge, RunsEveryDtypeByNameAndBackInTheModelsOrder) {
  REQUIRE_BRIDGE(ort);
  EXPECT_FALSE(ort->version().empty());
  for (const char* type : {"f32", "f64", "f16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}) {
    // Identity on each type, two outputs in a different order from the inputs.
    std::string text = std::string("graph g(%a: ") + type + "[2,3], %b: " + type +
                       "[1]) {\n  %0 = Identity(%b)\n  %1 = Identity(%a)\n  return %0 as \"first\", %1 as \"second\"\n}";
    bridge::Session s = ort->load_bytes(export_onnx_bytes(parse_graph(text)), {.threads = 1});
    EXPECT_EQ(s.input_names, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(s.output_names, (std::vector<std::string>{"first", "second"}));
    DType t = dtype_from_name(type);
    EXPECT_EQ(s.input_types[0], (TensorType{t, make_shape({2, 3})})) << type;
    Tensor a = Tensor::from_i64(t, {2, 3}, std::vector<int64_t>{0, 1, 1, 0, 1, 1});
    Tensor b = Tensor::from_i64(t, {1}, std::vector<int64_t>{1});
    bridge::NamedTensors out = ort->run(s.id, {{"b", b}, {"a", a}});
    ASSERT_EQ(out.size(), 2u) << type;
    EXPECT_EQ(out[0].first, "first");
    EXPECT_TRUE(out[0].second.same_as(b)) << type;
    EXPECT_TRUE(out[1].second.same_as(a)) << type;
    ort->free(s.id);
  }
}

TEST(Bridge, LoadsAFileTimesEveryRunAndReportsErrorsAsValues) {
  REQUIRE_BRIDGE(ort);
  Graph g = parse_graph("graph g(%x: f32[4]) {\n  %0 = Relu(%x)\n  return %0\n}");
  const std::string path = (std::filesystem::temp_directory_path() / "isomer_bridge_test.onnx").string();
  export_onnx_file(g, path);
  for (const char* level : {"none", "basic", "extended", "all"}) {
    bridge::Session s = ort->load_file(path, {.threads = 1, .optimization = level});
    Tensor x = Tensor::from_f64(DType::Float32, {4}, std::vector<double>{-1, 2, -3, 4});
    std::vector<double> ms = ort->time(s.id, {{"x", x}}, 2, 5);
    ASSERT_EQ(ms.size(), 5u);
    for (double t : ms) EXPECT_GT(t, 0.0);
    EXPECT_EQ(ort->run(s.id, {{"x", x}})[0].second.to_f64(), (std::vector<double>{0, 2, 0, 4}));
    // A wrong input is ONNX Runtime's error, returned as a value: the helper stays.
    Tensor wrong = Tensor::from_f64(DType::Float32, {5}, std::vector<double>(5, 1.0));
    EXPECT_THROW(ort->run(s.id, {{"x", wrong}}), bridge::OrtError);
    EXPECT_EQ(ort->run(s.id, {{"x", x}}).size(), 1u);
    ort->free(s.id);
  }
  std::filesystem::remove(path);
  try {
    ort->load_bytes("not a model", {});
    FAIL() << "garbage was loaded";
  } catch (const bridge::OrtError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
  EXPECT_THROW(ort->load_bytes(export_onnx_bytes(g), {.optimization = "fastest"}), Error);
}

}  // namespace
}  // namespace isomer
