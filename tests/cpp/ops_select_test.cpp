// Tests of the entries that select or place elements by value or index (select.cpp:
// TopK, ScatterElements, OneHot) and of GridSample (grid_sample.cpp): results against
// values worked out by hand, ties and NaN in ONNX Runtime's order, negative and
// out-of-range indices, attribute checks, and the runtime's native kernels against
// the reference evaluator for every mode.
#include <cmath>

#include "ir/invalid_node.h"
#include "ops_nn_util.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {
using namespace nn_test;

Tensor i64_tensor(const Dims& d, const std::vector<int64_t>& v) { return Tensor::from_i64(DType::Int64, d, v); }

// TopK on x (a graph input) evaluated: values and indices.
std::vector<Tensor> top_k(const Tensor& x, const Attributes& attrs) {
  GraphBuilder b;
  std::vector<Value> outs = b.op("TopK", {b.input("x", x.type())}, attrs, 2);
  return evaluate(b.finish(outs, {"v", "i"}), {x});
}

void expect_ints(const Tensor& t, const std::vector<int64_t>& want) { EXPECT_EQ(t.to_i64(), want); }

TEST(OpsSelect, TopKTakesTheLargestWithTiesInIndexOrder) {
  const Tensor x = f64_tensor({2, 5}, {2, 2, 1, 2, 5, 0, 3, 3, -1, 4});
  std::vector<Tensor> r = top_k(x, {{"k", int64_t{3}}});
  expect_near(r[0], {2, 3}, {5, 2, 2, 4, 3, 3});
  expect_ints(r[1], {4, 0, 1, 4, 1, 2});
  r = top_k(x, {{"k", int64_t{2}}, {"largest", int64_t{0}}});
  expect_near(r[0], {2, 2}, {1, 2, -1, 0});
  expect_ints(r[1], {2, 0, 3, 0});
  // Along the first axis, negative axis, k = 0.
  r = top_k(x, {{"k", int64_t{1}}, {"axis", int64_t{-2}}});
  expect_near(r[0], {1, 5}, {2, 3, 3, 2, 5});
  expect_ints(r[1], {0, 1, 1, 0, 0});
  EXPECT_EQ(top_k(x, {{"k", int64_t{0}}})[0].dims(), (Dims{2, 0}));
}

TEST(OpsSelect, TopKOrdersNaNAboveEveryNumber) {
  const double nan = std::nan("");
  const Tensor x = f64_tensor({6}, {1, nan, 3, 3, nan, -1});
  std::vector<Tensor> r = top_k(x, {{"k", int64_t{4}}});
  expect_ints(r[1], {1, 4, 2, 3});
  r = top_k(x, {{"k", int64_t{6}}, {"largest", int64_t{0}}});
  expect_ints(r[1], {5, 0, 2, 3, 1, 4});
}

TEST(OpsSelect, TopKRefusesAKBeyondTheAxis) {
  EXPECT_THROW(infer("TopK", {{DType::Float32, {2, 3}}}, {{"k", int64_t{4}}}), InvalidNode);
  EXPECT_THROW(infer("TopK", {{DType::Float32, {2, 3}}}, {{"k", int64_t{-1}}}), InvalidNode);
  EXPECT_THROW(infer("TopK", {{DType::Float32, {2, 3}}}, {{"k", int64_t{1}}, {"axis", int64_t{2}}}), InvalidNode);
  EXPECT_THROW(infer("TopK", {{DType::Float32, {2, 3}}}, {{"k", int64_t{1}}, {"sorted", int64_t{2}}}), InvalidNode);
  // A symbolic axis takes any k: the run checks it.
  EXPECT_EQ(infer("TopK", {{DType::Float32, {2, Dim::sym("n")}}}, {{"k", int64_t{7}}}).shape, (Shape{2, 7}));
}

// A model may ask for the values only; the runtime then writes no indices.
TEST(OpsSelect, TopKWithTheValuesOnly) {
  const Tensor x = f64_tensor({1, 4}, {3, 1, 4, 1});
  expect_near(run("TopK", {x}, {{"k", int64_t{2}}, {"largest", int64_t{0}}}), {1, 2}, {1, 1});
  GraphBuilder b;
  Value v = b.op1("TopK", {b.input("x", {DType::Float32, {6, 9}})}, {{"k", int64_t{4}}});
  std::vector<runtime::StepInfo> steps = testing::run_against_reference(b.finish({v}, {"v"}));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "topk");
}

TEST(OpsSelect, ScatterElementsCombinesAlongAnAxis) {
  const Tensor x = f64_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor idx = i64_tensor({2, 2}, {2, -3, 0, 2});
  const Tensor upd = f64_tensor({2, 2}, {10, 20, 30, 40});
  expect_near(run("ScatterElements", {x, idx, upd}, {{"axis", int64_t{1}}}), {2, 3}, {20, 2, 10, 30, 5, 40});
  // Duplicates: the later write wins; reductions combine in order.
  const Tensor dup = i64_tensor({1, 3}, {1, 1, -2});
  const Tensor u3 = f64_tensor({1, 3}, {7, 8, 9});
  expect_near(run("ScatterElements", {x, dup, u3}, {{"axis", int64_t{1}}}), {2, 3}, {1, 9, 3, 4, 5, 6});
  expect_near(run("ScatterElements", {x, dup, u3}, {{"axis", int64_t{1}}, {"reduction", std::string("add")}}), {2, 3},
              {1, 26, 3, 4, 5, 6});
  expect_near(run("ScatterElements", {x, dup, u3}, {{"axis", int64_t{1}}, {"reduction", std::string("mul")}}), {2, 3},
              {1, 1008, 3, 4, 5, 6});
  expect_near(run("ScatterElements", {x, dup, f64_tensor({1, 3}, {-7, 8, 0})},
                  {{"axis", int64_t{1}}, {"reduction", std::string("min")}}),
              {2, 3}, {1, -7, 3, 4, 5, 6});
  // Along axis 0 (the default).
  expect_near(run("ScatterElements", {x, i64_tensor({1, 2}, {1, 0}), f64_tensor({1, 2}, {0, 0})}), {2, 3},
              {1, 0, 3, 0, 5, 6});
  expect_error([&] { run("ScatterElements", {x, i64_tensor({1, 1}, {2}), f64_tensor({1, 1}, {0})}); }, "out of range");
  expect_error([&] { run("ScatterElements", {x, i64_tensor({1, 1}, {-3}), f64_tensor({1, 1}, {0})}); },
               "out of range");
  // An unknown reduction is no InvalidNode: ONNX Runtime runs it, so the importer keeps it opaque.
  expect_error([&] {
    infer("ScatterElements", {{DType::Float32, {2, 3}}, {DType::Int64, {1, 1}}, {DType::Float32, {1, 1}}},
          {{"reduction", std::string("sum")}});
  }, "reduction 'sum' is unknown");
  EXPECT_THROW(infer("ScatterElements", {{DType::Float32, {2, 3}}, {DType::Int64, {1, 1}}, {DType::Float32, {1, 1}}},
                     {{"axis", int64_t{2}}}),
               InvalidNode);
}

TEST(OpsSelect, OneHotPlacesOnValuesWithNegativeIndices) {
  const Tensor values = f64_tensor({2}, {-1, 5});
  const Tensor idx = i64_tensor({3}, {0, -1, 7});
  const Tensor depth = i64_tensor({}, {3});
  expect_near(run("OneHot", {idx, depth, values}), {3, 3}, {5, -1, -1, -1, -1, 5, -1, -1, -1});
  expect_near(run("OneHot", {idx, depth, values}, {{"axis", int64_t{0}}}), {3, 3}, {5, -1, -1, -1, -1, -1, -1, 5, -1});
  // The shape of depth's constant value; a computed depth leaves it unknown.
  GraphBuilder b;
  Value v = b.op1("OneHot", {b.input("i", {DType::Int64, {2, 4}}), b.constant(Tensor::scalar_f32(6)),
                             b.input("v", {DType::Float32, {2}})},
                  {{"axis", int64_t{1}}});
  EXPECT_EQ(v.type().shape, (Shape{2, 6, 4}));
  EXPECT_FALSE(infer("OneHot", {{DType::Int64, {2}}, {DType::Int64, {}}, {DType::Float32, {2}}}).shape[1].is_static());
  EXPECT_THROW(infer("OneHot", {{DType::Int64, {2}}, {DType::Int64, {}}, {DType::Float32, {2}}}, {{"axis", int64_t{2}}}),
               InvalidNode);
}

// A 1x1x2x3 image sampled at points chosen to hit interior, edge and outside cases.
TEST(OpsSelect, GridSampleByHand) {
  const Tensor x = f64_tensor({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  // Centre (0, 0), the top-left corner (-1, -1), and far right (3, 0).
  const Tensor grid = f64_tensor({1, 1, 3, 2}, {0, 0, -1, -1, 3, 0});
  auto sample = [&](const char* mode, const char* pad, int64_t align) {
    return run("GridSample", {x, grid},
               {{"mode", std::string(mode)}, {"padding_mode", std::string(pad)}, {"align_corners", align}});
  };
  // align_corners=1: (-1, -1) is pixel (0, 0); the centre is (1, 0.5); x = 3 lies at column 4.
  expect_near(sample("linear", "zeros", 1), {1, 1, 1, 3}, {3.5, 1, 0});
  expect_near(sample("linear", "border", 1), {1, 1, 1, 3}, {3.5, 1, 4.5});
  expect_near(sample("linear", "reflection", 1), {1, 1, 1, 3}, {3.5, 1, 2.5});  // column 4 reflects to 0
  // align_corners=0: (-1, -1) is (-0.5, -0.5), a quarter of pixel (0, 0) under zeros.
  expect_near(sample("linear", "zeros", 0), {1, 1, 1, 3}, {3.5, 0.25, 0});
  expect_near(sample("linear", "border", 0), {1, 1, 1, 3}, {3.5, 1, 4.5});
  // Nearest rounds half to even: the centre (1, 0.5) reads row 0, column 1.
  expect_near(sample("nearest", "zeros", 1), {1, 1, 1, 3}, {2, 1, 0});
  EXPECT_THROW(infer("GridSample", {{DType::Float32, {1, 1, 2, 3}}, {DType::Float32, {1, 1, 3, 2}}},
                     {{"mode", std::string("bilinear")}}),
               InvalidNode);  // opset 16's name: the importer maps it
  EXPECT_THROW(infer("GridSample", {{DType::Float32, {1, 1, 2, 3}}, {DType::Float32, {1, 1, 3, 2}}},
                     {{"align_corners", int64_t{2}}}),
               InvalidNode);
}

// ---- the runtime's kernels -----------------------------------------------------------

std::vector<std::string> native_kinds(const Graph& g) {
  std::vector<std::string> kinds;
  for (const runtime::StepInfo& s : testing::run_against_reference(g, 1e-5)) {
    EXPECT_NE(s.kind, "reference") << s.label << " (" << s.ops[0] << ") runs on the reference kernel";
    EXPECT_NE(s.kind, "onnxruntime") << s.label;
    kinds.push_back(s.kind);
  }
  return kinds;
}

TEST(OpsSelect, RuntimeTopKMatchesTheEvaluator) {
  for (int64_t axis : {0, 1, 2}) {
    for (int64_t largest : {0, 1}) {
      GraphBuilder b;
      Value x = b.input("x", {DType::Float32, {3, 7, 5}});
      // Rounded values: many ties.
      Value r = b.op1("Round", {b.op1("Mul", {x, b.constant(Tensor::scalar_f32(2))})});
      std::vector<Value> t = b.op("TopK", {r}, {{"k", int64_t{3}}, {"axis", axis}, {"largest", largest}}, 2);
      Graph g = b.finish(t, {"v", "i"});
      std::vector<std::string> kinds = native_kinds(g);
      EXPECT_NE(std::find(kinds.begin(), kinds.end(), "topk"), kinds.end());
    }
  }
}

TEST(OpsSelect, RuntimeScatterElementsMatchesTheEvaluator) {
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, {3, 4}});
    Value idx = b.constant(i64_tensor({3, 2}, {3, -4, 0, 0, -1, 2}));
    Value upd = b.constant(testing::random_tensor({3, 2}, 3));
    Graph g = b.finish({b.op1("ScatterElements", {x, idx, upd}, {{"axis", int64_t{1}}, {"reduction", std::string(r)}})},
                       {"y"});
    std::vector<std::string> kinds = native_kinds(g);
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "scatter"), kinds.end()) << r;
  }
}

TEST(OpsSelect, RuntimeScatterElementsRefusesAnOutOfRangeIndex) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, {2, 3}});
  Value idx = b.input("i", {DType::Int64, {1, 2}});
  Graph g = b.finish({b.op1("ScatterElements", {x, idx, b.constant(testing::random_tensor({1, 2}, 1))})}, {"y"});
  runtime::RuntimeOptions o;
  o.threads = 1;
  auto exe = runtime::compile(g, o);
  const Tensor xs = testing::random_tensor({2, 3}, 2);
  EXPECT_EQ(exe->run({xs, i64_tensor({1, 2}, {1, -2})})[0].dims(), (Dims{2, 3}));
  expect_error([&] { exe->run({xs, i64_tensor({1, 2}, {0, 2})}); }, "out of range");
  expect_error([&] { exe->run({xs, i64_tensor({1, 2}, {-3, 0})}); }, "out of range");
}

TEST(OpsSelect, RuntimeOneHotMatchesTheEvaluator) {
  GraphBuilder b;
  Value idx = b.constant(i64_tensor({2, 3}, {0, 4, -1, -5, 9, 2}));
  Value values = b.input("v", {DType::Float32, {2}});
  Graph g = b.finish({b.op1("OneHot", {idx, b.constant(i64_tensor({}, {5})), values}, {{"axis", int64_t{1}}})}, {"y"});
  std::vector<std::string> kinds = native_kinds(g);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "onehot"), kinds.end());
}

TEST(OpsSelect, RuntimeGridSampleMatchesTheEvaluatorInEveryMode) {
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) {
        SCOPED_TRACE(std::string(mode) + " " + pad + " " + std::to_string(align));
        GraphBuilder b;
        Value x = b.input("x", {DType::Float32, {2, 3, 5, 6}});
        // Points reaching past the borders, where the padding modes differ.
        Value grid = b.op1("Mul", {b.input("g", {DType::Float32, {2, 4, 7, 2}}), b.constant(Tensor::scalar_f32(1.6f))});
        Graph g = b.finish({b.op1("GridSample", {x, grid},
                                  {{"mode", std::string(mode)}, {"padding_mode", std::string(pad)},
                                   {"align_corners", align}})},
                           {"y"});
        std::vector<std::string> kinds = native_kinds(g);
        EXPECT_NE(std::find(kinds.begin(), kinds.end(), "gridsample"), kinds.end());
      }
}

}  // namespace
}  // namespace isomer
