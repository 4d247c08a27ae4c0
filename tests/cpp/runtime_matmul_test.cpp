// MatMul with a constant weight and batch dims runs as one 2-D matmul over a
// [rows, K] view of its input (oneDNN packs the weights only for that form);
// results must not change, residual accumulation must still work in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "kernels/vector_isa.h"
#include "runtime/compiler.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

Tensor random_weights(std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// Runs g fused and unfused against the reference; returns the fused steps.
// packed_gemm false: oneDNN's matmul, which these tests are about on any CPU.
std::vector<runtime::StepInfo> check(const Graph& g, bool packed_gemm = false) {
  std::vector<Tensor> inputs = random_inputs(g, 11);
  std::vector<Tensor> want = evaluate(g, inputs);
  std::vector<runtime::StepInfo> steps;
  for (bool fuse : {true, false}) {
    runtime::RuntimeOptions o;
    o.threads = 1;
    o.fuse = fuse;
    o.packed_gemm = packed_gemm;
    auto exe = runtime::compile(g, o);
    CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << (fuse ? "fused: " : "unfused: ") << r.reason;
    CheckResult again = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
    EXPECT_EQ(again.status, CheckResult::Status::Passed) << again.reason;
    if (fuse) steps = exe->steps();
  }
  return steps;
}

std::vector<const runtime::StepInfo*> matmuls(const std::vector<runtime::StepInfo>& steps) {
  std::vector<const runtime::StepInfo*> out;
  for (const runtime::StepInfo& s : steps)
    if (s.kind == "matmul") out.push_back(&s);
  return out;
}

TEST(RuntimeMatmul, BatchedInputWithConstantWeightsRunsAsOne2DMatmul) {
  // A transformer FFN: x [2, 16, 32] -> MatMul W1 [32, 64] + b1 -> Gelu -> MatMul W2 [64, 32] + b2 -> + x.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 16, 32})});
  Value h = b.op1("MatMul", {x, b.constant(random_weights({32, 64}, 1))});
  h = b.op1("Add", {h, b.constant(random_weights({64}, 2))});
  h = b.op1("Relu", {h});
  Value y = b.op1("MatMul", {h, b.constant(random_weights({1, 64, 32}, 3))});  // batch dim of 1: still 2-D
  y = b.op1("Add", {b.constant(random_weights({32}, 4)), y});
  y = b.op1("Add", {y, x});
  Graph g = b.finish({y}, {"y"});
  std::vector<runtime::StepInfo> steps = check(g);
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 2u);
  // The primitive sees [32, K] x [K, N]: src and dst are 2-D views.
  EXPECT_NE(mm[0]->signature.find("src 32x32:"), std::string::npos) << mm[0]->signature;
  EXPECT_NE(mm[0]->signature.find("dst 32x64:"), std::string::npos) << mm[0]->signature;
  EXPECT_NE(mm[1]->signature.find("src 32x64:"), std::string::npos) << mm[1]->signature;
  // Bias, activation and the residual add stay fused; no reorders. (The residual
  // is a graph input, which is never overwritten: one copy of it to accumulate into.)
  size_t reorders = 0, copies = 0;
  for (const runtime::StepInfo& s : steps) {
    reorders += s.kind == "reorder";
    copies += s.kind == "copy";
  }
  EXPECT_EQ(reorders, 0u);
  EXPECT_EQ(copies, 1u);
  EXPECT_EQ(steps.size(), 3u);
  EXPECT_NE(mm[1]->signature.find("+sum"), std::string::npos) << mm[1]->signature;
}

TEST(RuntimeMatmul, PermutedRowsAreMadeDenseForThe2DForm) {
  // nn.MultiheadAttention with batch_first: the input projection reads
  // Transpose(x, [1, 0, 2]), whose rows are not one stride apart. Run as the view it
  // was a batch of 50 products of 2 rows, each reading the whole weight; now a copy
  // makes it dense and one [100, 32] x [32, 96] product runs on packed weights.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 50, 32})});
  Value xt = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value h = b.op1("Add", {b.op1("MatMul", {xt, b.constant(random_weights({32, 96}, 1))}), b.constant(random_weights({96}, 2))});
  Graph g = b.finish({h}, {"y"});
  std::vector<runtime::StepInfo> steps = check(g);
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_NE(mm[0]->signature.find("src 100x32:"), std::string::npos) << mm[0]->signature;
  EXPECT_NE(mm[0]->signature.find("dst 100x96:"), std::string::npos) << mm[0]->signature;
}

TEST(RuntimeMatmul, PackedGemmRunsTheSameFusionsAsOneEpilogue) {
  // On CPUs without AVX-512 the same FFN runs on isomer's packed-weights GEMM:
  // bias, activation, the residual and a gate are one epilogue per matmul, the
  // residual read where it is (no copy).
  setenv("ISOMER_GEMM", "native", 1);
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 13, 32})});
  Value h = b.op1("MatMul", {x, b.constant(random_weights({32, 70}, 1))});
  h = b.op1("Relu", {b.op1("Add", {h, b.constant(random_weights({70}, 2))})});
  Value y = b.op1("MatMul", {h, b.constant(random_weights({1, 70, 32}, 3))});
  y = b.op1("Add", {b.op1("Add", {b.constant(random_weights({32}, 4)), y}), x});
  Value gate = b.input("gate", {DType::Float32, make_shape({26, 5})});
  Value z = b.op1("Mul", {b.op1("Sigmoid", {b.op1("Gemm", {gate, b.constant(random_weights({5, 5}, 5)),
                                                            b.constant(random_weights({26, 5}, 6))})}),
                          gate});
  Graph g = b.finish({y, z}, {"y", "z"});
  std::vector<runtime::StepInfo> steps = check(g, /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 3u);
  for (const runtime::StepInfo* s : mm) EXPECT_EQ(s->signature.rfind("gemm-packed", 0), 0u) << s->signature;
  EXPECT_EQ(steps.size(), 3u);  // no copies, no separate elementwise steps
  EXPECT_EQ(mm[2]->ops, (std::vector<std::string>{"Gemm", "Sigmoid", "Mul"}));
}

TEST(RuntimeMatmul, TransposedActivationsOnThePackedGemm) {
  // MLP-Mixer's token mixing, MatMul(Transpose(x), W) + b with a GELU exported
  // the exact way, and a Gemm with transA: A is read k-major, no copy.
  setenv("ISOMER_GEMM", "native", 1);
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 19, 40})});
  Value xt = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value h = b.op1("Add", {b.op1("MatMul", {xt, b.constant(random_weights({19, 24}, 1))}), b.constant(random_weights({24}, 2))});
  Value d = b.op1("Div", {h, b.constant(Tensor::scalar_f32(1.4142135f))});
  Value one_plus = b.op1("Add", {b.op1("Erf", {d}), b.constant(Tensor::scalar_f32(1.0f))});
  Value gelu = b.op1("Mul", {b.op1("Mul", {h, one_plus}), b.constant(Tensor::scalar_f32(0.5f))});
  Value a = b.input("a", {DType::Float32, make_shape({7, 13})});
  Value gm = b.op1("Gemm", {a, b.constant(random_weights({7, 9}, 3)), b.constant(random_weights({9}, 4))},
                   {{"transA", int64_t{1}}});
  Graph g = b.finish({gelu, gm}, {"y", "z"});
  std::vector<runtime::StepInfo> steps = check(g, /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 2u);
  for (const runtime::StepInfo* s : mm) EXPECT_NE(s->signature.find(" aT "), std::string::npos) << s->signature;
  EXPECT_NE(mm[0]->signature.find("GeluErf"), std::string::npos) << mm[0]->signature;
  EXPECT_EQ(steps.size(), 2u);
}

TEST(RuntimeMatmul, AViewOnlyTheReferenceMatmulReadsIsMadeDense) {
  // PatchTST's patch embedding: patches gathered as [B, patches, len, channels], then
  // transposed to [B, channels, patches, len] for the product: K at a stride of the
  // channel count, rows at two strides. Neither native GEMM reads that view and
  // oneDNN had only its reference matmul for it (2.4 ms for a 77x16x64 product); a
  // copy makes it dense and the packed GEMM runs it.
  setenv("ISOMER_GEMM", "native", 1);
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 11, 16, 7})});
  Value xt = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  Value h = b.op1("Add", {b.op1("MatMul", {xt, b.constant(random_weights({16, 64}, 1))}), b.constant(random_weights({64}, 2))});
  Graph g = b.finish({h}, {"y"});
  std::vector<runtime::StepInfo> steps = check(g, /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0]->signature.rfind("gemm-packed 77x16x64", 0), 0u) << mm[0]->signature;
}

TEST(RuntimeMatmul, RuntimeOperandsOnTheBatchedGemmWithAMaskedEpilogue) {
  // Attention with grouped keys: q [2, 4, 5, 8] against k [2, 1, 8, 7] (one key
  // head broadcast over 4 query heads, read through a transposed view), scaled and
  // masked by a [5, 7] mask broadcast over batch and heads: one step, the scale
  // and the mask in its epilogue; then P V with V a strided view.
  setenv("ISOMER_GEMM", "native", 1);
  GraphBuilder b;
  Value q = b.input("q", {DType::Float32, make_shape({2, 4, 5, 8})});
  Value kt = b.op1("Transpose", {b.input("k", {DType::Float32, make_shape({2, 1, 7, 8})})},
                   {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value s = b.op1("Mul", {b.op1("MatMul", {q, kt}), b.constant(Tensor::scalar_f32(0.35f))});
  Value mask = b.input("mask", {DType::Float32, make_shape({5, 7})});
  Value p = b.op1("Softmax", {b.op1("Add", {s, mask})}, {{"axis", int64_t{-1}}});
  Value v = b.op1("Transpose", {b.input("v", {DType::Float32, make_shape({2, 7, 4, 6})})},
                  {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  // The heads go back next to each other: P V is written in that layout, so the
  // Transpose and the Reshape after it are views.
  Value o = b.op1("Transpose", {b.op1("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value merged = b.op1("Reshape", {o, b.constant(Tensor::vector_i64({2, 5, 24}))});
  Graph g = b.finish({b.op1("Relu", {merged})}, {"o"});
  std::vector<runtime::StepInfo> steps = check(g, /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 2u);
  for (const runtime::StepInfo* st : mm) EXPECT_EQ(st->signature.rfind("gemm-batched", 0), 0u) << st->signature;
  EXPECT_EQ(mm[0]->ops, (std::vector<std::string>{"MatMul", "Mul", "Add"}));
  EXPECT_EQ(steps.size(), 4u);  // the two products, the softmax, the Relu: no copies of the views
}

TEST(RuntimeMatmul, HeadsOfAWideTensorOnTheBatchedGemm) {
  // Heads taken from [tokens, heads x 64] tensors (rows 512 floats apart): A's rows
  // are copied together, K^T is packed column by column, V row by row; token counts
  // that are not whole panels (12, 20) leave tails.
  setenv("ISOMER_GEMM", "native", 1);
  for (int64_t tokens : {12, 20}) {
    GraphBuilder b;
    auto heads = [&](const char* name, std::vector<int64_t> perm) {
      return b.op1("Transpose", {b.input(name, {DType::Float32, make_shape({1, tokens, 8, 64})})}, {{"perm", perm}});
    };
    Value q = heads("q", {0, 2, 1, 3}), kt = heads("k", {0, 2, 3, 1}), v = heads("v", {0, 2, 1, 3});
    Value p = b.op1("Softmax", {b.op1("MatMul", {q, kt})}, {{"axis", int64_t{-1}}});
    Graph g = b.finish({b.op1("MatMul", {p, v})}, {"o"});
    std::vector<runtime::StepInfo> steps = check(g, /*packed_gemm=*/true);
    auto mm = matmuls(steps);
    ASSERT_EQ(mm.size(), 2u);
    for (const runtime::StepInfo* st : mm) EXPECT_EQ(st->signature.rfind("gemm-batched", 0), 0u) << st->signature;
  }
  unsetenv("ISOMER_GEMM");
}

TEST(RuntimeMatmul, OtherFormsKeepTheBatchedMatmul) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 8, 16})});
  Value w = b.input("w", {DType::Float32, make_shape({2, 16, 4})});
  Value batched_w = b.op1("MatMul", {x, b.constant(random_weights({2, 16, 4}, 5))});  // weights with a batch
  Value runtime_w = b.op1("MatMul", {x, w});                                          // weights at run time
  Value xt = b.op1("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});     // A not row-major
  Value strided = b.op1("MatMul", {xt, b.constant(random_weights({16, 4}, 6))});
  Graph g = b.finish({batched_w, runtime_w, strided}, {"a", "b", "c"});
  std::vector<runtime::StepInfo> steps = check(g);
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 3u);
  EXPECT_NE(mm[0]->signature.find("src 2x8x16:"), std::string::npos) << mm[0]->signature;
  EXPECT_NE(mm[1]->signature.find("src 2x8x16:"), std::string::npos) << mm[1]->signature;
}

TEST(RuntimeMatmul, TwoDViewOfAnAccumulatorIsNotAReader) {
  // y1 = x W1 (written through a 2-D view); z = Sigmoid(y1) W2 + y1: the residual
  // add accumulates into y1's buffer in place (Sigmoid, its other reader, has run),
  // the 2-D view notwithstanding.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 8, 16})});
  Value y1 = b.op1("MatMul", {x, b.constant(random_weights({16, 16}, 7))});
  Value t = b.op1("Sigmoid", {y1});
  Value y2 = b.op1("MatMul", {t, b.constant(random_weights({16, 16}, 8))});
  Value z = b.op1("Add", {y2, y1});
  Graph g = b.finish({z}, {"z"});
  std::vector<runtime::StepInfo> steps = check(g);
  size_t copies = 0;
  for (const runtime::StepInfo& s : steps) copies += s.kind == "copy";
  EXPECT_EQ(copies, 0u);
  EXPECT_EQ(steps.size(), 3u);
}

// Gemm's constant weights are transposed and scaled once per constant, not once per
// node: an RNN's time steps share one tensor, hence one packing (one copy in cache).
TEST(RuntimeMatmul, GemmsOfOneTransposedWeightShareItsPacking) {
  const Tensor wt = random_weights({40, 24}, 5);
  GraphBuilder b;
  Value x1 = b.input("x1", {DType::Float32, make_shape({1, 24})});
  Value x2 = b.input("x2", {DType::Float32, make_shape({3, 24})});
  Value w = b.constant(wt), bias = b.constant(random_weights({40}, 6));
  Value h1 = b.op1("Gemm", {x1, w, bias}, {{"transB", int64_t{1}}});
  Value h2 = b.op1("Gemm", {x2, w, bias}, {{"transB", int64_t{1}}, {"alpha", 0.5}});
  Value h3 = b.op1("Gemm", {x2, w}, {{"transB", int64_t{1}}});
  Graph g = b.finish({h1, h2, h3}, {"h1", "h2", "h3"});
  setenv("ISOMER_GEMM", "native", 1);
  check(g, /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");

  runtime::RuntimeOptions o;
  runtime::Compiler c(g, o, dnnl::engine(dnnl::engine::kind::cpu, 0));
  const Tensor& t1 = c.gemm_weights(wt, 24, 40, /*transposed=*/true, 1.0);
  const Tensor& t2 = c.gemm_weights(wt, 24, 40, /*transposed=*/true, 1.0);
  EXPECT_EQ(t1.bytes().data(), t2.bytes().data());
  EXPECT_NE(c.gemm_weights(wt, 24, 40, true, 0.5).bytes().data(), t1.bytes().data());
  EXPECT_EQ(c.packed_weights(t1, 24, 40), c.packed_weights(t2, 24, 40));
  const std::vector<double> src = wt.to_f64(), got = t1.to_f64();
  for (int64_t i = 0; i < 24; ++i)
    for (int64_t j = 0; j < 40; ++j) ASSERT_EQ(got[static_cast<size_t>(i * 40 + j)], src[static_cast<size_t>(j * 24 + i)]);
  const Tensor& plain = c.gemm_weights(t1, 24, 40, false, 1.0);  // already MatMul's form: the tensor itself
  EXPECT_EQ(plain.bytes().data(), t1.bytes().data());
}


// GPT-2's tanh GELU as exporters write it: 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))),
// halved last (the original GPT-2 export) or first (torch 2.x's dynamo export).
Value tanh_gelu(GraphBuilder& b, Value x, bool halved_first) {
  auto k = [&](float v) { return b.constant(Tensor::scalar_f32(v)); };
  Value half = halved_first ? b.op1("Mul", {x, k(0.5f)}) : Value{};
  Value cube = b.op1("Pow", {x, k(3.0f)});
  Value inner = b.op1("Mul", {k(0.7978846f), b.op1("Add", {x, b.op1("Mul", {k(0.044715f), cube})})});
  Value one_plus = b.op1("Add", {k(1.0f), b.op1("Tanh", {inner})});
  if (halved_first) return b.op1("Mul", {half, one_plus});
  return b.op1("Mul", {k(0.5f), b.op1("Mul", {x, one_plus})});
}

TEST(RuntimeMatmul, GemmThenReshapeTakesTheTanhGeluAndTheResidualAsPostOps) {
  // GPT-2's MLP as exported: x [1, 12, 16] -> Reshape [12, 16] -> Gemm (+ c_fc bias)
  // -> Reshape [1, 12, 40] -> tanh GELU -> Reshape -> Gemm -> Reshape -> + x. The
  // views after the Gemms keep the element order: each Gemm runs 2-D with the GELU
  // (one eltwise post-op, from its decomposed form) and the residual (a sum) fused.
  for (bool halved_first : {false, true}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({1, 12, 16})});
    Value h = b.op1("Reshape", {b.op1("Relu", {x}), b.constant(Tensor::vector_i64({-1, 16}))});
    h = b.op1("Gemm", {h, b.constant(random_weights({16, 40}, 1)), b.constant(random_weights({40}, 2))});
    h = b.op1("Reshape", {h, b.constant(Tensor::vector_i64({1, 12, 40}))});
    h = tanh_gelu(b, h, halved_first);
    h = b.op1("Reshape", {h, b.constant(Tensor::vector_i64({-1, 40}))});
    Value y = b.op1("Gemm", {h, b.constant(random_weights({40, 16}, 3)), b.constant(random_weights({16}, 4))});
    y = b.op1("Reshape", {y, b.constant(Tensor::vector_i64({1, 12, 16}))});
    y = b.op1("Add", {y, b.op1("Sigmoid", {x})});
    Graph g = b.finish({y}, {"y"});
    std::vector<runtime::StepInfo> steps = check(g);
    auto mm = matmuls(steps);
    ASSERT_EQ(mm.size(), 2u);
    EXPECT_NE(mm[0]->signature.find("dst 12x40:"), std::string::npos) << mm[0]->signature;
    EXPECT_NE(mm[0]->signature.find("+elt"), std::string::npos) << mm[0]->signature;
    EXPECT_NE(mm[1]->signature.find("+sum"), std::string::npos) << mm[1]->signature;
    EXPECT_EQ(mm[0]->ops.size(), 10u) << halved_first;  // Gemm, Reshape and the GELU's 8 nodes
    EXPECT_EQ(mm[1]->ops, (std::vector<std::string>{"Gemm", "Reshape", "Add"}));
    // The other steps: the Relu and the Sigmoid only.
    EXPECT_EQ(steps.size(), 4u);
  }
}

TEST(RuntimeMatmul, AViewThatChangesTheLastDimStaysItsOwnStep) {
  // A Reshape after the Gemm that regroups the columns ([6, 8] -> [1, 12, 4]) is
  // not the product's 2-D form: it is not taken, and the result is still right.
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({6, 5})});
  Value h = b.op1("Gemm", {x, b.constant(random_weights({5, 8}, 1))});
  h = b.op1("Reshape", {h, b.constant(Tensor::vector_i64({1, 12, 4}))});
  h = tanh_gelu(b, h, true);
  Graph g = b.finish({h}, {"y"});
  std::vector<runtime::StepInfo> steps = check(g);
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0]->ops, std::vector<std::string>{"Gemm"});
}


TEST(RuntimeMatmul, AttentionOutputOnOneDnnIsWrittenWithItsHeadsSideBySide) {
  // On oneDNN's matmul too, P V followed by the Transpose back to [batch, seq,
  // heads, d] is written in the layout that makes the Transpose dense: the
  // Transpose and the Reshape after it are views, no reorder. A Transpose that
  // moves the last dim keeps its own step, and is still right.
  GraphBuilder b;
  Value p = b.op1("Softmax", {b.input("s", {DType::Float32, make_shape({2, 3, 5, 7})})}, {{"axis", int64_t{-1}}});
  Value v = b.op1("Transpose", {b.input("v", {DType::Float32, make_shape({2, 7, 3, 6})})},
                  {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value o = b.op1("Transpose", {b.op1("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value merged = b.op1("Reshape", {o, b.constant(Tensor::vector_i64({2, 5, 18}))});
  Value v2 = b.input("v2", {DType::Float32, make_shape({2, 3, 7, 6})});
  Value other = b.op1("Transpose", {b.op1("MatMul", {p, v2})}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Graph g = b.finish({b.op1("Relu", {merged}), b.op1("Relu", {other})}, {"o", "t"});
  std::vector<runtime::StepInfo> steps = check(g);
  auto mm = matmuls(steps);
  ASSERT_EQ(mm.size(), 2u);
  EXPECT_NE(mm[0]->signature.find("dst 2x3x5x6:s90,6,18,1"), std::string::npos) << mm[0]->signature;
  EXPECT_NE(mm[1]->signature.find("dst 2x3x5x6:s90,30,6,1"), std::string::npos) << mm[1]->signature;
  size_t reorders = 0;
  for (const runtime::StepInfo& st : steps) reorders += st.kind == "reorder";
  EXPECT_LE(reorders, 1u);  // only the Transpose that moves the last dim may need one
}

// torch's decomposed scaled_dot_product_attention: Q and K^T each times
// sqrt(scale), heads taken from [batch, seq, heads x d] by views, then a mask
// with one value per key added. The product takes both factors (its result
// scaled before the mask), and the Muls get no step of their own.
Graph scaled_attention(int64_t seq, bool mul_is_output, int64_t row_groups) {
  GraphBuilder b;
  // row_groups 3: Q and K are column blocks of one [seq, 3 x hidden] tensor (a
  // fused QKV projection), so each head's rows are 3 x hidden floats apart.
  const int64_t heads = 2, d = 16, hidden = heads * d;
  Value x = b.input("x", {DType::Float32, make_shape({1, seq, row_groups * hidden})});
  Value q, k;
  if (row_groups == 1) {
    q = x;
    k = b.input("y", {DType::Float32, make_shape({1, seq, hidden})});
  } else {
    std::vector<Value> parts = b.op("Split", {x, b.constant(Tensor::vector_i64({hidden, hidden, hidden}))},
                                    {{"axis", int64_t{2}}}, 3);
    q = parts[0];
    k = parts[1];
  }
  auto heads_of = [&](const Value& v, std::vector<int64_t> perm) {
    Value r = b.op1("Reshape", {v, b.constant(Tensor::vector_i64({1, seq, heads, d}))});
    return b.op1("Transpose", {r}, {{"perm", perm}});
  };
  Value qs = b.op1("Mul", {heads_of(q, {0, 2, 1, 3}), b.constant(Tensor::scalar_f32(0.5f))});
  Value ks = b.op1("Mul", {b.constant(Tensor::scalar_f32(0.25f)), heads_of(k, {0, 2, 3, 1})});
  Value s = b.op1("MatMul", {qs, ks});
  s = b.op1("Add", {s, b.constant(random_weights({seq}, 5))});
  Value p = b.op1("Softmax", {s}, {{"axis", int64_t{-1}}});
  if (mul_is_output) return b.finish({p, qs}, {"p", "qs"});
  return b.finish({p}, {"p"});
}

TEST(RuntimeMatmul, ScalarFactorsOfBothOperandsAreTakenByTheProduct) {
  for (int64_t seq : {8, 13}) {
    Graph g = scaled_attention(seq, /*mul_is_output=*/false, 1);
    std::vector<runtime::StepInfo> steps = check(g);
    auto mm = matmuls(steps);
    ASSERT_EQ(mm.size(), 1u);
    EXPECT_EQ(mm[0]->ops, (std::vector<std::string>{"MatMul", "Mul", "Mul", "Add"})) << mm[0]->signature;
    for (const runtime::StepInfo& st : steps) EXPECT_NE(st.kind, "pointwise") << st.signature;
    // isomer's batched GEMM takes them too, into its epilogue.
    setenv("ISOMER_GEMM", "native", 1);
    steps = check(g, /*packed_gemm=*/true);
    unsetenv("ISOMER_GEMM");
    mm = matmuls(steps);
    ASSERT_EQ(mm.size(), 1u);
    EXPECT_EQ(mm[0]->signature.rfind("gemm-batched", 0), 0u) << mm[0]->signature;
    EXPECT_EQ(mm[0]->ops, (std::vector<std::string>{"MatMul", "Mul", "Mul", "Add"})) << mm[0]->signature;
  }
}

TEST(RuntimeMatmul, ScalarFactorWithAnotherReaderOrOnAStridedViewStaysAStep) {
  // The scaled Q is also an output: its Mul runs, the product reads its result.
  std::vector<runtime::StepInfo> steps = check(scaled_attention(8, /*mul_is_output=*/true, 1));
  size_t pointwise = 0;
  for (const runtime::StepInfo& st : steps) pointwise += st.kind == "pointwise";
  EXPECT_GE(pointwise, 1u);
  // Heads of a fused QKV projection: whatever the product takes, the results hold.
  check(scaled_attention(8, /*mul_is_output=*/false, 3));
  setenv("ISOMER_GEMM", "native", 1);
  check(scaled_attention(13, /*mul_is_output=*/false, 3), /*packed_gemm=*/true);
  unsetenv("ISOMER_GEMM");
}

TEST(RuntimeMatmul, AnErfGeluAfterTheProductIsRightAsAPostOpOrItsOwnPass) {
  // BERT's FFN: MatMul + bias, the erf GELU as torch exports it (x / sqrt 2, Erf,
  // + 1, * x, * 0.5) or as ONNX's Gelu, then the second MatMul + bias + residual.
  // With AVX-512 the GELU is isomer's pointwise pass (vmath's piecewise erf), not
  // oneDNN's post-op; the results are the reference evaluator's either way.
  for (bool onnx_gelu : {false, true}) {
    GraphBuilder b;
    Value x = b.input("x", {DType::Float32, make_shape({2, 24, 32})});
    Value h = b.op1("Add", {b.op1("MatMul", {x, b.constant(random_weights({32, 96}, 1))}),
                            b.constant(random_weights({96}, 2))});
    // Scale the pre-activations into [-8, 8]: every interval of the erf table.
    h = b.op1("Mul", {h, b.constant(Tensor::scalar_f32(3.0f))});
    if (onnx_gelu) {
      h = b.op1("Gelu", {h});
    } else {
      Value e = b.op1("Erf", {b.op1("Div", {h, b.constant(Tensor::scalar_f32(1.4142135f))})});
      h = b.op1("Mul", {b.op1("Mul", {h, b.op1("Add", {e, b.constant(Tensor::scalar_f32(1.0f))})}),
                        b.constant(Tensor::scalar_f32(0.5f))});
    }
    Value y = b.op1("Add", {b.op1("MatMul", {h, b.constant(random_weights({96, 32}, 3))}),
                            b.constant(random_weights({32}, 4))});
    Graph g = b.finish({b.op1("Add", {y, x})}, {"y"});
    std::vector<runtime::StepInfo> steps = check(g);
    if (kernels::best_vector_isa() != kernels::VectorIsa::Avx512) continue;
    const std::string gelu_post_op = "+elt" + std::to_string(static_cast<int>(dnnl::algorithm::eltwise_gelu_erf)) + "(";
    bool gelu_pass = false;
    for (const runtime::StepInfo& st : steps) {
      if (st.kind == "matmul")
        EXPECT_EQ(st.signature.find(gelu_post_op), std::string::npos) << "GELU still a oneDNN post-op: " << st.signature;
      gelu_pass = gelu_pass || (st.kind == "pointwise" && st.signature.find("GeluErf") != std::string::npos);
    }
    EXPECT_TRUE(gelu_pass) << (onnx_gelu ? "Gelu" : "decomposed");
  }
}

// An inference BatchNormalization over a product's columns folds into its weights
// and bias: Gemm + BatchNorm1d on [rows, N] (a tabular MLP), MatMul on [B, T, K]
// then a Reshape to [B T, N] and BatchNorm1d (LeViT's Linear), with a bias Add
// before it; at odd sizes. No BatchNormalization step is left. A BatchNormalization
// whose channels are not the product's columns ([B, N, T]) stays a step of its own.
TEST(RuntimeMatmul, BatchNormOverTheColumnsFoldsIntoTheWeights) {
  auto bn = [](GraphBuilder& b, Value v, int64_t n, uint64_t seed) {
    Tensor var = random_weights({n}, seed + 3);
    std::vector<double> pos = var.to_f64();
    for (double& x : pos) x = 0.3 + x * x;
    return b.op1("BatchNormalization", {v, b.constant(random_weights({n}, seed)), b.constant(random_weights({n}, seed + 1)),
                                        b.constant(random_weights({n}, seed + 2)),
                                        b.constant(Tensor::from_f64(DType::Float32, {n}, pos))},
                 {{"epsilon", 1e-3}});
  };
  for (bool gemm : {true, false}) {
    SCOPED_TRACE(gemm ? "Gemm" : "MatMul + Reshape");
    GraphBuilder b;
    Value y;
    if (gemm) {
      Value x = b.input("x", {DType::Float32, make_shape({7, 13})});
      y = b.op1("Gemm", {x, b.constant(random_weights({19, 13}, 1)), b.constant(random_weights({19}, 2))},
                {{"transB", int64_t{1}}});
    } else {
      Value x = b.input("x", {DType::Float32, make_shape({2, 9, 13})});
      y = b.op1("Add", {b.op1("MatMul", {x, b.constant(random_weights({13, 19}, 1))}), b.constant(random_weights({19}, 2))});
      y = b.op1("Reshape", {y, b.constant(Tensor::from_i64(DType::Int64, {2}, std::vector<int64_t>{18, 19}))});
    }
    y = b.op1("Relu", {bn(b, y, 19, 10)});
    std::vector<runtime::StepInfo> steps = check(b.finish({y}, {"y"}));
    for (const runtime::StepInfo& s : steps) EXPECT_NE(s.kind, "batchnorm") << s.signature;
    auto mm = matmuls(steps);
    ASSERT_EQ(mm.size(), 1u);
    EXPECT_NE(std::find(mm[0]->ops.begin(), mm[0]->ops.end(), "BatchNormalization"), mm[0]->ops.end());
  }
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 9, 13})});
  Value y = b.op1("MatMul", {x, b.constant(random_weights({13, 19}, 1))});
  y = bn(b, b.op1("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), 19, 20);
  std::vector<runtime::StepInfo> steps = check(b.finish({y}, {"y"}));
  EXPECT_EQ(matmuls(steps).size(), 1u);
}

}  // namespace
}  // namespace isomer
