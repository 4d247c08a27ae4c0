// The runtime's lowerings of the operators current exporters add (lower_more.cpp,
// lower_einsum.cpp, the pointwise forms of the new elementwise entries) against the
// reference evaluator, fused and unfused; none of these graphs may leave a step to
// the reference kernel or ONNX Runtime.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

Tensor random_f32(std::vector<int64_t> dims, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}
Tensor ints(std::vector<int64_t> dims, std::vector<int64_t> v) { return Tensor::from_i64(DType::Int64, std::move(dims), v); }
Tensor scalar_i64(int64_t v) { return Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{v}); }
TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

// Runs `g` fused and unfused against the reference evaluator; returns the fused
// plan's step kinds.
std::vector<std::string> expect_native_and_right(const Graph& g, double tol = 1e-4) {
  std::vector<Tensor> inputs = random_inputs(g, 11);
  std::vector<Tensor> want = evaluate(g, inputs);
  std::vector<std::string> kinds;
  for (bool fuse : {true, false}) {
    runtime::RuntimeOptions o;
    o.threads = 2;
    o.fuse = fuse;
    auto exe = runtime::compile(g, o);
    CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), tol);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << (fuse ? "fused: " : "unfused: ") << r.reason;
    for (const runtime::StepInfo& s : exe->steps()) {
      EXPECT_NE(s.kind, "reference") << s.label << " (" << s.ops[0] << ") runs on the reference kernel";
      EXPECT_NE(s.kind, "onnxruntime") << s.label;
      if (fuse) kinds.push_back(s.kind);
    }
  }
  return kinds;
}

size_t count(const std::vector<std::string>& v, const std::string& k) { return std::count(v.begin(), v.end(), k); }

// An attention mask as exporters build it: positions from a CumSum of the padding
// mask, a causal Trilu, comparisons and logic, then Where and LogSoftmax.
TEST(RuntimeMore, AttentionMaskFromComparisonsAndLogic) {
  GraphBuilder b;
  Value scores = b.input("scores", f32({2, 5, 5}));
  Value pad = b.input("pad", {DType::Int64, make_shape({2, 5})});
  Value pos = b.op1("CumSum", {pad, b.constant(scalar_i64(1))});
  Value keep_pos = b.op1("Unsqueeze", {b.op1("GreaterOrEqual", {pos, b.constant(ints({}, {1}))}),
                                       b.constant(ints({1}, {1}))});
  Value ones = b.constant(Tensor::from_f64(DType::Float32, {5, 5}, std::vector<double>(25, 1.0)));
  Value causal = b.op1("Greater", {b.op1("Trilu", {ones}, {{"upper", int64_t{0}}}), b.constant(Tensor::scalar_f32(0))});
  Value mask = b.op1("And", {b.op1("Not", {b.op1("Not", {keep_pos})}), causal});
  Value masked = b.op1("Where", {mask, scores, b.constant(Tensor::scalar_f32(-1e4f))});
  Value lp = b.op1("LogSoftmax", {masked}, {{"axis", int64_t{-1}}});
  Value best = b.op1("ArgMax", {lp}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
  Graph g = b.finish({lp, best, b.op1("Xor", {mask, causal})}, {"lp", "best", "x"});
  auto kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "cumsum"), 1u);
  EXPECT_EQ(count(kinds, "argmax"), 1u);
}

// A LLaMA-style block's pieces: rotary tables from Sin/Cos at run time, RMSNorm,
// attention written as Einsum, SwiGLU-like activations, reductions.
TEST(RuntimeMore, RotaryRmsNormEinsumAttention) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 6, 8}));
  Value t = b.input("t", f32({6, 1}));
  Value freqs = b.op1("Mul", {t, b.constant(random_f32({1, 4}, 1))});
  Value emb = b.op1("Concat", {freqs, freqs}, {{"axis", int64_t{-1}}});
  Value h = b.op1("RMSNormalization", {x, b.constant(random_f32({8}, 2, 0.5, 1.5))}, {{"epsilon", 1e-6}});
  Value rot = b.op1("Add", {b.op1("Mul", {h, b.op1("Cos", {emb})}), b.op1("Mul", {h, b.op1("Sin", {emb})})});
  Value q = b.op1("Reshape", {rot, b.constant(ints({4}, {2, 6, 2, 4}))});
  Value k = b.op1("Einsum", {q, b.constant(random_f32({4, 4}, 3))}, {{"equation", std::string("bshd,de->bshe")}});
  Value s = b.op1("Einsum", {q, k}, {{"equation", std::string("bqhd,bkhd->bhqk")}});
  Value p = b.op1("Softmax", {s}, {{"axis", int64_t{-1}}});
  Value o = b.op1("Einsum", {p, k}, {{"equation", std::string("bhqk,bkhd->bqhd")}});
  Value a = b.op1("Selu", {b.op1("Elu", {o}, {{"alpha", 0.7}})});
  Value gate = b.op1("Mish", {b.op1("Softplus", {o})});
  Value m = b.op1("Mean", {a, gate, b.op1("Celu", {o}, {{"alpha", 2.0}})});
  Value r = b.op1("ReduceL2", {b.op1("PRelu", {m, b.constant(random_f32({4}, 4, 0, 0.3))})},
                  {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  Value lse = b.op1("ReduceLogSumExp", {s}, {{"axes", std::vector<int64_t>{3}}});
  Value e2 = b.op1("Einsum", {s}, {{"equation", std::string("bhqk->bqk")}});  // a sum over heads
  Graph g = b.finish({r, lse, e2, b.op1("Einsum", {q}, {{"equation", std::string("bshd->bhsd")}})}, {"r", "lse", "e2", "qt"});
  auto kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "matmul"), 3u);  // the Einsum contractions: one matmul each, no copies of q or k
}

// Normalizations and data movement of vision and detection exports.
TEST(RuntimeMore, NormalizationsPoolsAndIndexing) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 4, 3, 3}));
  Value gn = b.op1("GroupNormalization", {x, b.constant(random_f32({4}, 1, 0.5, 1.5)), b.constant(random_f32({4}, 2))},
                   {{"num_groups", int64_t{2}}});
  Value in = b.op1("InstanceNormalization", {gn, b.constant(random_f32({4}, 3)), b.constant(random_f32({4}, 4))});
  Value gmp = b.op1("GlobalMaxPool", {in});
  Value tiled = b.op1("Tile", {gmp, b.constant(ints({4}, {1, 2, 3, 1}))});
  Value idx = b.constant(ints({2, 4, 1, 1}, {0, 7, 1, -1, 3, 2, 2, 0}));
  Value ge = b.op1("GatherElements", {tiled, idx}, {{"axis", int64_t{1}}});
  Value sc = b.op1("ScatterND", {x, b.constant(ints({2, 2}, {1, 3, 0, 0})), b.constant(random_f32({2, 3, 3}, 5))});
  Value add = b.op1("ScatterND", {sc, b.constant(ints({1, 1}, {1})), b.constant(random_f32({1, 4, 3, 3}, 6))},
                    {{"reduction", std::string("add")}});
  Value am = b.op1("ArgMin", {add}, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}});
  Value rm = b.op1("ReduceMin", {b.op1("Floor", {b.op1("Mul", {add, b.constant(Tensor::scalar_f32(3))})})},
                   {{"axes", std::vector<int64_t>{2, 3}}});
  Graph g = b.finish({ge, am, rm, b.op1("Sign", {b.op1("Round", {in})})}, {"ge", "am", "rm", "sg"});
  auto kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "groupnorm"), 2u);
  EXPECT_EQ(count(kinds, "scatter"), 2u);
}

// Activations that map to oneDNN eltwise post-ops run inside the convolution.
TEST(RuntimeMore, ConvolutionTakesMishSoftplusAndEluAsPostOps) {
  for (const char* act : {"Mish", "Softplus", "Elu"}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, 8, 10, 10}));
    Value c = b.op1("Conv", {x, b.constant(random_f32({16, 8, 3, 3}, 1)), b.constant(random_f32({16}, 2))},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Graph g = b.finish({b.op1(act, {c})}, {"y"});
    auto kinds = expect_native_and_right(g);
    EXPECT_EQ(count(kinds, "pointwise"), 0u) << act;
  }
}

// A convolutional GRU cell (RAFT's update block): a pointwise group planned from
// z * h claims Add(z * h, tanh(conv(...))) and its Tanh, then lowers the
// convolution to learn its dims; the convolution must not take the claimed Tanh
// and Add as post-ops (it did, and its own output was never bound: "did not
// produce output 0").
TEST(RuntimeMore, ConvolutionLeavesActivationsAPointwiseGroupClaimedAlone) {
  GraphBuilder b;
  Value h = b.input("h", f32({1, 8, 6, 6}));
  Value x = b.input("x", f32({1, 4, 6, 6}));
  auto conv = [&](Value in, uint64_t seed) {
    return b.op1("Conv", {in, b.constant(random_f32({8, 12, 3, 3}, seed)), b.constant(random_f32({8}, seed + 1))},
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  };
  Value hx = b.op1("Concat", {h, x}, {{"axis", int64_t{1}}});
  Value z = b.op1("Sigmoid", {conv(hx, 1)});
  Value r = b.op1("Sigmoid", {conv(hx, 3)});
  Value q = b.op1("Tanh", {conv(b.op1("Concat", {b.op1("Mul", {r, h}), x}, {{"axis", int64_t{1}}}), 5)});
  Graph g = b.finish({b.op1("Add", {b.op1("Mul", {z, h}), q})}, {"y"});
  auto kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "conv"), 3u);
}

// Einsum operands whose labels do not merge into one dim are copied once; the
// output may be any permutation of the matmul's result.
TEST(RuntimeMore, EinsumWithUnmergeableLabelsAndPermutedOutput) {
  GraphBuilder b;
  Value a = b.input("a", f32({3, 2, 4, 5}));
  Value c = b.input("c", f32({5, 2, 6}));
  // K = (j, k) in A's order [.., j, k] but in C as [k, j, ..]; M = (i, l) interleaved.
  Value y = b.op1("Einsum", {a, c}, {{"equation", std::string("ijlk,kjn->nli")}});
  Graph g = b.finish({y}, {"y"});
  auto kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "matmul"), 1u);
}


// torch's export of scaled_dot_product_attention follows the softmax with
// Where(IsNaN(p), 0, p): rows masked whole (all -inf) give NaN, made 0. The
// softmax step does it in its own pass; rows of 19 and of 40 (a vector tail), and
// along a middle axis (a step of its own kind of loop).
TEST(RuntimeMore, SoftmaxTakesTheNanGuardAfterIt) {
  for (int64_t axis : {-1, 1}) {
    GraphBuilder b;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<double> mask(3 * 19, 0.0);
    for (int64_t j = 0; j < 19; ++j) mask[static_cast<size_t>(19 + j)] = -inf;  // row 1 masked whole
    mask[5] = -inf;
    Value x = b.input("x", f32({2, 3, 19}));
    Value s = b.op1("Add", {x, b.constant(Tensor::from_f64(DType::Float32, {3, 19}, mask))});
    Value p = b.op1("Softmax", {s}, {{"axis", axis}});
    Value guarded = b.op1("Where", {b.op1("IsNaN", {p}), b.constant(Tensor::scalar_f32(0.0f)), p});
    Value y = b.input("y", f32({2, 5, 40}));
    Value q = b.op1("Softmax", {y}, {{"axis", int64_t{-1}}});
    Value q_guarded = b.op1("Where", {b.op1("IsNaN", {q}), b.constant(Tensor::scalar_f32(0.25f)), q});
    Graph g = b.finish({guarded, q_guarded}, {"p", "q"});
    std::vector<std::string> kinds = expect_native_and_right(g);
    EXPECT_EQ(count(kinds, "softmax"), 2u);
    EXPECT_EQ(kinds.size(), 3u) << "the Add, the two softmax steps: no pass for the guards";
  }
}

TEST(RuntimeMore, ANanGuardReadByOthersStaysItsOwnStep) {
  // The softmax's result is read by another node too: the guard is not taken.
  GraphBuilder b;
  Value p = b.op1("Softmax", {b.input("x", f32({4, 9}))}, {{"axis", int64_t{-1}}});
  Value guarded = b.op1("Where", {b.op1("IsNaN", {p}), b.constant(Tensor::scalar_f32(0.0f)), p});
  Graph g = b.finish({guarded, b.op1("Relu", {p})}, {"p", "r"});
  std::vector<std::string> kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "softmax"), 1u);
  EXPECT_GE(count(kinds, "pointwise"), 1u);  // the guard (and the Relu)
}


// RMSNorm as torch exports it (LLaMA): Pow(x, 2), ReduceMean over the last axis,
// + eps, Sqrt, Reciprocal, Mul by x, Mul by the weight; or x / Sqrt(..) without a
// weight, behind an elementwise node whose group must leave the Pow alone. One
// row-kernel step each; a mean over another axis is not the pattern.
TEST(RuntimeMore, DecomposedRmsNormRunsAsOneRowKernel) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 5, 24}));
  auto mean_sq = [&](Value v, int64_t axis) {
    Value sq = b.op1("Pow", {v, b.constant(Tensor::scalar_f32(2.0f))});
    return b.op1("ReduceMean", {sq}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}});
  };
  Value r = b.op1("Sqrt", {b.op1("Add", {mean_sq(x, -1), b.constant(Tensor::scalar_f32(1e-6f))})});
  Value n1 = b.op1("Mul", {b.constant(random_f32({24}, 3)), b.op1("Mul", {x, b.op1("Reciprocal", {r})})});
  Value y = b.op1("Relu", {x});
  Value r2 = b.op1("Sqrt", {b.op1("Add", {b.constant(Tensor::scalar_f32(1e-5f)), mean_sq(y, 2)})});
  Value n2 = b.op1("Div", {y, r2});
  Value z = b.input("z", f32({2, 5, 24}));
  Value r3 = b.op1("Sqrt", {b.op1("Add", {mean_sq(z, 1), b.constant(Tensor::scalar_f32(1e-5f))})});
  Value n3 = b.op1("Div", {z, r3});  // over the middle axis: not an RMSNorm of rows
  Graph g = b.finish({n1, n2, n3}, {"a", "b", "c"});
  std::vector<std::string> kinds = expect_native_and_right(g);
  EXPECT_EQ(count(kinds, "layernorm"), 2u);
}


// A residual Add of a transposed view (MLP-Mixer's token mixing, [channels,
// tokens] back to [tokens, channels]): the pointwise pass runs in tiles, the
// transposed operand gathered a tile at a time. Sizes that leave partial tiles.
TEST(RuntimeMore, ElementwiseOfATransposedViewRunsInTiles) {
  for (int64_t rows : {70, 19}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, rows, 150}));
    Value t = b.op1("Transpose", {b.op1("Relu", {b.input("y", f32({1, 150, rows}))})},
                    {{"perm", std::vector<int64_t>{0, 2, 1}}});
    Value sum = b.op1("Mul", {b.op1("Add", {x, t}), b.constant(random_f32({150}, 5))});
    Graph g = b.finish({sum}, {"s"});
    expect_native_and_right(g);
  }
}

// PyTorch's GroupNorm as TorchScript exports it (Reshape to [N, G, -1],
// InstanceNormalization, Reshape back, Mul and Add per channel), after
// convolutions and on a plain input: one groupnorm step per chain with the affine
// folded in, reading and writing the convolution's layout (channel blocks or
// channels last) wherever the groups allow, so no reorder runs around it. Groups
// of one, several and one per channel; channel counts not a multiple of 16. A
// GroupNormalization node reads the convolution's layout too.
TEST(RuntimeMore, ReshapedGroupNormFoldsItsAffineInTheConvolutionsLayout) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 8, 6, 5}));
  std::vector<Value> outs;
  std::vector<std::string> names;
  uint64_t seed = 20;
  const auto chain = [&](Value v, int64_t channels, int64_t groups, const std::vector<int64_t>& dims) {
    Value r = b.op1("Reshape", {v, b.constant(ints({3}, {0, groups, -1}))});
    Value n = b.op1("InstanceNormalization",
                    {r, b.constant(random_f32({groups}, seed++, 0.5, 1.5)), b.constant(random_f32({groups}, seed++))},
                    {{"epsilon", 1e-5}});
    Value back = b.op1("Reshape", {n, b.constant(ints({4}, dims))});
    Value m = b.op1("Mul", {back, b.constant(random_f32({channels, 1, 1}, seed++, 0.5, 2))});
    outs.push_back(b.op1("Add", {m, b.constant(random_f32({channels, 1, 1}, seed++))}));
    names.push_back("y" + std::to_string(outs.size()));
  };
  const std::vector<std::pair<int64_t, int64_t>> cases = {{32, 1}, {32, 2}, {32, 8}, {32, 32}, {20, 5}, {7, 7}};
  for (auto [channels, groups] : cases) {
    Value c = b.op1("Conv", {x, b.constant(random_f32({channels, 8, 3, 3}, seed++))},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    chain(c, channels, groups, {2, channels, 6, 5});
  }
  chain(b.input("p", f32({1, 6, 4, 4})), 6, 3, {-1, 6, 4, 4});
  Value c = b.op1("Conv", {x, b.constant(random_f32({32, 8, 1, 1}, seed++))});
  outs.push_back(b.op1("GroupNormalization",
                       {c, b.constant(random_f32({32}, seed++, 0.5, 1.5)), b.constant(random_f32({32}, seed++))},
                       {{"num_groups", int64_t{4}}}));
  names.push_back("gn");
  Graph g = b.finish(outs, names);
  expect_native_and_right(g);
  runtime::RuntimeOptions o;
  o.threads = 1;
  size_t norms = 0, in_layout = 0;
  for (const runtime::StepInfo& s : runtime::compile(g, o)->steps()) {
    EXPECT_NE(s.kind, "pointwise") << s.label;
    if (s.kind != "groupnorm") continue;
    ++norms;
    if (s.signature.find(" b") != std::string::npos) ++in_layout;
    if (s.ops[0] == "Reshape") EXPECT_EQ(s.ops.size(), 5u) << s.label;  // Reshape, norm, Reshape, Mul, Add
  }
  EXPECT_EQ(norms, cases.size() + 2);
  EXPECT_GE(in_layout, 5u);  // the four chains of 32 channels and the GroupNormalization
}

}  // namespace
}  // namespace isomer
