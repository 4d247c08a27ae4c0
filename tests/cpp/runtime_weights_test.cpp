// How much memory compiled graphs hold for their weights: a constant a step reads
// as it is shares the graph's bytes, and the packed copy of a MatMul's weights is
// shared by every compiled graph whose weights are the same tensor (the check and
// the guard compile the input and its rewrite, both holding the same weights).
#include <gtest/gtest.h>
#include <malloc.h>

#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

// Bytes of the heap in use (small blocks and mmapped ones): what allocations hold,
// exactly, unlike the resident set, which counts pages touched and not yet returned.
size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Compiles `g` twice (one thread) and runs both on `inputs`: the bytes the second
// compile added to the heap while the first still lives, after checking both give
// the same outputs, also once the first is gone.
size_t second_compile_bytes(const Graph& g, const std::vector<Tensor>& inputs) {
  runtime::RuntimeOptions o;
  o.threads = 1;
  auto first = runtime::compile(g, o);
  const std::vector<Tensor> want = first->run(inputs);
  const size_t before = heap_in_use();
  auto second = runtime::compile(g, o);
  const size_t grown = heap_in_use() - before;
  const std::vector<Tensor> got = second->run(inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) EXPECT_TRUE(got[i].same_as(want[i]));
  first.reset();
  EXPECT_TRUE(second->run(inputs)[0].same_as(want[0]));  // what it shared outlives the first
  return grown;
}

// An embedding table read by Gather (a constant a step reads directly) feeding a
// MatMul with constant weights (packed for the native GEMM).
Graph embedding_and_projection(int64_t vocab, int64_t width, int64_t out) {
  GraphBuilder b;
  Value ids = b.input("ids", {DType::Int64, make_shape({4})});
  Value table = b.constant(random_tensor({vocab, width}, 11), "table");
  Value h = b.op1("Gather", {table, ids}, {{"axis", int64_t{0}}});
  Value y = b.op1("MatMul", {h, b.constant(random_tensor({width, out}, 12), "w")});
  return b.finish({y}, {"y"});
}

TEST(RuntimeWeights, CompiledGraphsShareTheGraphsWeights) {
  const int64_t vocab = 2048, width = 512, out = 1024;
  const size_t weight_bytes = static_cast<size_t>(width * out) * 4;   // 2 MiB
  Graph g = embedding_and_projection(vocab, width, out);
  const std::vector<Tensor> inputs = {Tensor::from_i64(DType::Int64, {4}, std::vector<int64_t>{0, 5, 2047, 9})};
  const size_t grown = second_compile_bytes(g, inputs);
  // A copy of the table or a second packing of the weights would each add megabytes.
  EXPECT_LT(grown, weight_bytes / 2) << "the second compile of the same graph holds " << grown << " more bytes";
  testing::run_against_reference(g);
}

// A half-precision model computes in float32: the float32 form of its weights is
// made once, and so is its packing, while a compiled graph holds them.
TEST(RuntimeWeights, HalfWeightsAreWidenedAndPackedOnce) {
  const int64_t k = 512, n = 1024;
  auto half = [](const Tensor& t) { return Tensor::from_f64(DType::Float16, t.dims(), t.to_f64()); };
  GraphBuilder b;
  Value x = b.input("x", {DType::Float16, make_shape({128, k})});
  Value y = b.op1("MatMul", {x, b.constant(half(random_tensor({k, n}, 15)), "w")});
  Graph g = b.finish({y}, {"y"});
  const size_t grown = second_compile_bytes(g, {half(random_tensor({128, k}, 16))});
  // Widened (2 MiB) and packed (2 MiB) again would each pass this.
  EXPECT_LT(grown, static_cast<size_t>(k * n) * 4 / 2) << "the second compile holds " << grown << " more bytes";
}

// Each compile's share of the packed weights lives as long as it runs: a graph
// compiled after the others are gone packs its weights anew, and runs correctly.
TEST(RuntimeWeights, PackedWeightsOutliveTheCompilerThatMadeThem) {
  const std::vector<Tensor> inputs = {Tensor::from_i64(DType::Int64, {4}, std::vector<int64_t>{1, 2, 3, 4})};
  runtime::RuntimeOptions o;
  o.threads = 1;
  std::vector<Tensor> want;
  {
    Graph g = embedding_and_projection(64, 32, 48);
    want = runtime::compile(g, o)->run(inputs);
  }
  std::unique_ptr<runtime::Executable> exe;
  {
    Graph g = embedding_and_projection(64, 32, 48);  // same seeds: the same weights, new tensors
    exe = runtime::compile(g, o);
  }
  Graph other = embedding_and_projection(64, 32, 16);  // may reuse the freed addresses
  auto exe_other = runtime::compile(other, o);
  const std::vector<Tensor> got = exe->run(inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].same_as(want[0]));
  EXPECT_EQ(exe_other->run(inputs)[0].dims(), (std::vector<int64_t>{4, 16}));
}

}  // namespace
}  // namespace isomer
