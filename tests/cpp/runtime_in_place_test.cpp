// A pointwise step overwrites an operand of its result's dims and type when nothing
// reads that operand after it (a squeeze-excitation gate multiplied over the map),
// in the map's layout (channel blocks, channels last, plain), and writes a buffer
// of its own when the map is read later or is a graph output.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

TensorType f32(std::vector<int64_t> dims) { return {DType::Float32, make_shape(dims)}; }

Value conv(GraphBuilder& b, Value x, int64_t in, int64_t out, int64_t k, uint64_t seed) {
  const int64_t p = k / 2;
  return b.op1("Conv", {x, b.constant(random_tensor({out, in, k, k}, seed)), b.constant(random_tensor({out}, seed + 1))},
               {{"pads", std::vector<int64_t>{p, p, p, p}}});
}

// The map times its squeeze-excitation gate: mean over H and W, 1x1 down, Relu,
// 1x1 up, Sigmoid.
Value excite(GraphBuilder& b, Value map, int64_t c) {
  Value pooled = b.op1("GlobalAveragePool", {map});
  Value down = b.op1("Relu", {conv(b, pooled, c, 5, 1, 11)});
  return b.op1("Mul", {map, b.op1("Sigmoid", {conv(b, down, 5, c, 1, 13)})});
}

// Runs `g` against the reference evaluator (twice: the overwritten buffer is not
// stale) and returns the signatures of its pointwise steps that compute only a Mul.
std::vector<std::string> gate_steps(const Graph& g, bool blocked) {
  std::vector<Tensor> inputs = random_inputs(g, 5);
  std::vector<Tensor> want = evaluate(g, inputs);
  runtime::RuntimeOptions o;
  o.threads = 1;
  o.blocked_layouts = blocked;
  auto exe = runtime::compile(g, o);
  for (int run = 0; run < 2; ++run) {
    CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << (blocked ? "blocked: " : "unblocked: ") << r.reason;
  }
  std::vector<std::string> sigs;
  for (const runtime::StepInfo& s : exe->steps())
    if (s.kind == "pointwise" && s.ops == std::vector<std::string>{"Mul"}) sigs.push_back(s.signature);
  return sigs;
}

bool in_place(const std::string& sig) { return sig.find(" in place") != std::string::npos; }

// 21 channels (not whole blocks of 16), batch 2, an odd map: the convolution's
// output in blocks or channels last, and a plain map (a Softmax's).
TEST(RuntimeInPlace, GateOverwritesTheMapNothingReadsLater) {
  for (bool blocked : {true, false}) {
    GraphBuilder b;
    Value x = b.input("x", f32({2, 7, 9, 11}));
    Value map = conv(b, x, 7, 21, 3, 1);
    Value y = conv(b, excite(b, map, 21), 21, 6, 1, 3);
    Value soft = b.op1("Softmax", {x}, {{"axis", int64_t{1}}});
    Value z = conv(b, excite(b, soft, 7), 7, 3, 1, 15);
    const std::vector<std::string> sigs = gate_steps(b.finish({y, z}, {"y", "z"}), blocked);
    ASSERT_EQ(sigs.size(), 2u) << ::testing::PrintToString(sigs);
    for (const std::string& s : sigs) EXPECT_TRUE(in_place(s)) << s;
  }
}

TEST(RuntimeInPlace, GateWritesItsOwnBufferWhereTheMapLivesOn) {
  for (bool blocked : {true, false}) {
    // Read again after the gate, by a convolution.
    GraphBuilder b;
    Value x = b.input("x", f32({2, 7, 9, 11}));
    Value map = conv(b, x, 7, 21, 3, 1);
    Value gated = excite(b, map, 21);
    Value y = b.op1("Add", {conv(b, gated, 21, 6, 1, 3), conv(b, map, 21, 6, 1, 5)});
    // A graph output.
    Value map2 = conv(b, x, 7, 19, 3, 7);
    Value z = conv(b, excite(b, map2, 19), 19, 4, 1, 9);
    std::vector<std::string> sigs = gate_steps(b.finish({y, z, map2}, {"y", "z", "map2"}), blocked);
    ASSERT_EQ(sigs.size(), 2u) << ::testing::PrintToString(sigs);
    for (const std::string& s : sigs) EXPECT_FALSE(in_place(s)) << s;
  }
}

// A concatenation read only by 1x1 convolutions is never made: each convolution
// reads the parts when it is lowered. One is lowered before the gate, the other
// after it: the part must stay as it was for the second.
TEST(RuntimeInPlace, GateLeavesAPartOfADeferredConcatenation) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 7, 9, 11}));
  Value p = conv(b, x, 7, 21, 3, 1);
  Value q = conv(b, x, 7, 16, 3, 3);
  Value cat = b.op1("Concat", {p, q}, {{"axis", int64_t{1}}});
  Value y1 = conv(b, cat, 37, 6, 1, 5);
  Value z = conv(b, excite(b, p, 21), 21, 4, 1, 9);
  Value y2 = conv(b, cat, 37, 3, 1, 7);
  const std::vector<std::string> sigs = gate_steps(b.finish({y1, z, y2}, {"y1", "z", "y2"}), true);
  ASSERT_EQ(sigs.size(), 1u) << ::testing::PrintToString(sigs);
  EXPECT_FALSE(in_place(sigs[0])) << sigs[0];
}

// A gated map a concatenation reads is written where the concatenation puts it
// (a buffer of its own the concatenation takes as its part), not over the map and
// then copied.
TEST(RuntimeInPlace, GateIntoAConcatenationWritesThePart) {
  for (bool blocked : {true, false}) {
    GraphBuilder b;
    Value x = b.input("x", f32({1, 7, 9, 11}));
    Value cat = b.op1("Concat", {excite(b, conv(b, x, 7, 32, 3, 1), 32), conv(b, x, 7, 16, 3, 3)}, {{"axis", int64_t{1}}});
    Graph g = b.finish({conv(b, cat, 48, 5, 3, 5)}, {"y"});
    const std::vector<std::string> sigs = gate_steps(g, blocked);
    ASSERT_EQ(sigs.size(), 1u) << ::testing::PrintToString(sigs);
    EXPECT_FALSE(in_place(sigs[0])) << sigs[0];
    runtime::RuntimeOptions o;
    o.threads = 1;
    o.blocked_layouts = blocked;
    auto exe = runtime::compile(g, o);
    std::vector<std::string> kinds;
    for (const runtime::StepInfo& s : exe->steps()) kinds.push_back(s.kind + " " + s.signature);
    EXPECT_EQ(std::count_if(kinds.begin(), kinds.end(), [](const std::string& k) { return k.rfind("copy", 0) == 0; }), 0)
        << ::testing::PrintToString(kinds);
  }
}

// The same for a residual sum a convolution accumulates in place into its addend.
TEST(RuntimeInPlace, ResidualSumLeavesAPartOfADeferredConcatenation) {
  GraphBuilder b;
  Value x = b.input("x", f32({2, 7, 9, 11}));
  Value p = conv(b, x, 7, 21, 3, 1);
  Value cat = b.op1("Concat", {p, conv(b, x, 7, 16, 3, 3)}, {{"axis", int64_t{1}}});
  Value y1 = conv(b, cat, 37, 6, 1, 5);
  Value z = conv(b, b.op1("Add", {conv(b, x, 7, 21, 1, 9), p}), 21, 4, 1, 11);
  Value y2 = conv(b, cat, 37, 3, 1, 7);
  gate_steps(b.finish({y1, z, y2}, {"y1", "z", "y2"}), true);
}

}  // namespace
}  // namespace isomer
