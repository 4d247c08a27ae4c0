// The weight-bound decision (mugraph/weight_bound.h): a region whose time is almost
// all products with weights is not searched, decided by a price of the compiled
// region, never by the clock, so that two runs decide alike on any load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>

#include "mugraph/cost.h"
#include "mugraph/fuse.h"
#include "mugraph/weight_bound.h"
#include "runtime/runtime.h"

namespace isomer::mugraph {
namespace {

// LayerNormalization over `hidden` then a projection to `out` features, `rows` rows.
Graph norm_projection(int64_t rows, int64_t hidden, int64_t out) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  std::vector<double> w(static_cast<size_t>(hidden * out)), gamma(static_cast<size_t>(hidden), 1.0),
      beta(static_cast<size_t>(hidden), 0.0);
  for (double& v : w) v = u(rng);
  GraphBuilder b;
  Value x = b.input("x", TensorType{DType::Float32, make_shape({rows, hidden})});
  Value n = b.op1("LayerNormalization", {x, b.constant(Tensor::from_f64(DType::Float32, {hidden}, gamma)),
                                         b.constant(Tensor::from_f64(DType::Float32, {hidden}, beta))},
                  {{"axis", int64_t{-1}}}, "norm");
  Value y = b.op1("MatMul", {n, b.constant(Tensor::from_f64(DType::Float32, {hidden, out}, w))}, {}, "proj");
  return b.finish({y}, {"y"});
}

WeightBound priced(const Graph& g) {
  std::vector<Region> regions = find_regions(g);
  EXPECT_EQ(regions.size(), 1u);
  runtime::RuntimeOptions ro;
  ro.threads = 1;
  auto exe = runtime::compile(g, ro);
  std::optional<WeightBound> w = weight_bound(regions.at(0), g, *exe, {}, ro, false);
  EXPECT_TRUE(w.has_value());
  return w.value_or(WeightBound{});
}

// The same region gets the same price every time, and no clock is read for it.
TEST(MuGraphWeightBound, ThePriceIsTheSameEveryTime) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const Graph g = norm_projection(64, 256, 4096);
  const WeightBound a = priced(g), b = priced(g);
  EXPECT_EQ(a.priced_share, b.priced_share);
  EXPECT_EQ(a.products_ms, b.products_ms);
  EXPECT_EQ(a.unfused_ms, b.unfused_ms);
  EXPECT_TRUE(std::isnan(a.measured_share));
  EXPECT_TRUE(a.bound) << a.priced_share;
  EXPECT_NE(a.reason.find("not searched: its weight products alone are priced at"), std::string::npos) << a.reason;
}

// The share follows the work: a wide projection (4096 outputs for 256 inputs) is
// almost all product; a narrow one (32) leaves the normalization a share a kernel
// can gain from, and is searched.
TEST(MuGraphWeightBound, TheShareFollowsTheProductsWork) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const WeightBound wide = priced(norm_projection(64, 256, 4096));
  const WeightBound narrow = priced(norm_projection(64, 256, 32));
  EXPECT_GT(wide.priced_share, narrow.priced_share);
  EXPECT_GE(wide.priced_share, kWeightBoundShare);
  EXPECT_LT(narrow.priced_share, kWeightBoundShare);
  EXPECT_FALSE(narrow.bound);
  EXPECT_TRUE(narrow.reason.empty());
  EXPECT_GT(wide.products_ms, narrow.products_ms);
}

// A pointwise tail after the projection is priced, per element where the runtime
// fuses it into the projection's step (a GELU): the same projection with the tail
// has a smaller share.
TEST(MuGraphWeightBound, APointwiseTailLowersTheShare) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const Graph plain = norm_projection(64, 256, 256);
  GraphBuilder b;
  std::vector<double> w(256 * 256, 0.01), gamma(256, 1.0), beta(256, 0.0);
  Value x = b.input("x", TensorType{DType::Float32, make_shape({64, 256})});
  Value n = b.op1("LayerNormalization", {x, b.constant(Tensor::from_f64(DType::Float32, {256}, gamma)),
                                         b.constant(Tensor::from_f64(DType::Float32, {256}, beta))},
                  {{"axis", int64_t{-1}}}, "norm");
  Value y = b.op1("MatMul", {n, b.constant(Tensor::from_f64(DType::Float32, {256, 256}, w))}, {}, "proj");
  Value t = b.op1("Tanh", {y}, {}, "tanh");
  Value z = b.op1("Mul", {b.op1("Sigmoid", {t}, {}, "sigmoid"), y}, {}, "mul");
  const Graph tail = b.finish({z}, {"z"});
  EXPECT_LT(priced(tail).priced_share, priced(plain).priced_share);
}

// LayerNormalization, a projection with a bias Add, then `tail` on its output (GPT-2's
// MLP before its second projection: 128 rows, 768 -> 3072).
Graph norm_projection_bias(const std::function<Value(GraphBuilder&, Value)>& tail) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  std::vector<double> w(768 * 3072), bias(3072), gamma(768, 1.0), beta(768, 0.0);
  for (double& v : w) v = u(rng);
  for (double& v : bias) v = u(rng);
  GraphBuilder b;
  Value x = b.input("x", TensorType{DType::Float32, make_shape({128, 768})});
  Value n = b.op1("LayerNormalization", {x, b.constant(Tensor::from_f64(DType::Float32, {768}, gamma)),
                                         b.constant(Tensor::from_f64(DType::Float32, {768}, beta))},
                  {{"axis", int64_t{-1}}}, "norm");
  Value y = b.op1("MatMul", {n, b.constant(Tensor::from_f64(DType::Float32, {768, 3072}, w))}, {}, "proj");
  y = b.op1("Add", {y, b.constant(Tensor::from_f64(DType::Float32, {3072}, bias))}, {}, "bias");
  return b.finish({tail(b, y)}, {"z"});
}

// GPT-2's tanh GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), is eight nodes
// the runtime runs as one activation after the projection: it is priced as one
// activation (a Tanh alone), not node by node (26 per element: GPT-2's MLP region
// priced at 91%, measured 92-94%, and was searched 12-30 s to lose).
TEST(MuGraphWeightBound, AnActivationChainIsPricedAsTheOneActivationItRunsAs) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  auto scalar = [](GraphBuilder& b, double v) {
    return b.constant(Tensor::from_f64(DType::Float32, {}, std::vector<double>{v}));
  };
  const Graph gelu = norm_projection_bias([&](GraphBuilder& b, Value x) {
    Value cube = b.op1("Pow", {x, scalar(b, 3.0)}, {}, "pow");
    Value inner = b.op1("Add", {x, b.op1("Mul", {scalar(b, 0.044715), cube}, {}, "mul")}, {}, "add_1");
    Value t = b.op1("Tanh", {b.op1("Mul", {scalar(b, 0.7978845608), inner}, {}, "mul_1")}, {}, "tanh");
    Value h = b.op1("Mul", {x, b.op1("Add", {scalar(b, 1.0), t}, {}, "add_2")}, {}, "mul_2");
    return b.op1("Mul", {scalar(b, 0.5), h}, {}, "mul_3");
  });
  const Graph tanh = norm_projection_bias([](GraphBuilder& b, Value x) { return b.op1("Tanh", {x}, {}, "tanh"); });
  runtime::RuntimeOptions ro;
  ro.threads = 1;
  auto gelu_exe = runtime::compile(gelu, ro);
  ASSERT_EQ(gelu_exe->steps().size(), 2u) << "the GELU is no longer one post-op of the projection's step";
  const WeightBound g = priced(gelu), t = priced(tanh);
  EXPECT_NEAR(g.unfused_ms, t.unfused_ms, 1e-9 * t.unfused_ms);
  EXPECT_EQ(g.products_ms, t.products_ms);
  EXPECT_TRUE(g.bound) << g.priced_share;
}

// A one-row product (ViT's class token into its head) is bound by reading its
// weight, which the runtime's step does not count among its bytes: the weight's
// bytes are priced, and the region is not searched (ViT-S/16's two such regions took
// 30 s and 14 s of search to lose).
TEST(MuGraphWeightBound, AOneRowProductReadsItsWeight) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const WeightBound w = priced(norm_projection(1, 384, 1536));
  EXPECT_TRUE(w.bound) << w.priced_share;
  EXPECT_GE(w.products_ms, 384.0 * 1536 * 4 / (machine().dram_gbps * 1e9) * 1e3);
}

// The decision reads no clock, so an untimed run (--mugraph-untimed) takes it too:
// it searched such regions and kept the cost model's kernel (llama_block's RMSNorm +
// SwiGLU region: 11 ms against 5.9 ms unfused).
TEST(MuGraphWeightBound, AnUntimedRunDoesNotSearchAWeightBoundRegion) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const Graph g = norm_projection(64, 256, 4096);
  FuseOptions o;
  o.threads = 1;
  o.measure = false;
  FuseReport report;
  Graph out = fuse_regions(g, o, &report);
  ASSERT_EQ(report.regions.size(), 1u);
  EXPECT_FALSE(report.regions[0].kept) << report.to_text();
  EXPECT_EQ(report.regions[0].states, 0u) << report.to_text();
  EXPECT_NE(report.regions[0].reason.find("not searched"), std::string::npos) << report.to_text();
  EXPECT_EQ(out.op_histogram().count("MuGraph"), 0u);
}

// The price ranks regions in the order of their work: more rows, a wider projection
// or a longer reduction each cost more (an order, never a time).
TEST(MuGraphWeightBound, PricesRankRegionsByTheirWork) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  runtime::RuntimeOptions ro;
  ro.threads = 1;
  auto price = [&](int64_t rows, int64_t hidden, int64_t out) {
    const Graph g = norm_projection(rows, hidden, out);
    return priced_ms(g, *runtime::compile(g, ro), 1);
  };
  const std::vector<double> by_rows = {price(1, 256, 512), price(16, 256, 512), price(64, 256, 512),
                                       price(256, 256, 512)};
  const std::vector<double> by_out = {price(16, 256, 64), price(16, 256, 512), price(16, 256, 4096)};
  const std::vector<double> by_hidden = {price(16, 64, 512), price(16, 256, 512), price(16, 1024, 512)};
  for (const auto* v : {&by_rows, &by_out, &by_hidden})
    for (size_t i = 1; i < v->size(); ++i) EXPECT_LT((*v)[i - 1], (*v)[i]) << i;
}

}  // namespace
}  // namespace isomer::mugraph
