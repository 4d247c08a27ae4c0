// A run reads its inputs where the caller's tensors hold them and writes its
// outputs into the tensors it returns (no copies in or out) wherever that is safe:
// each run sees its own inputs, a returned tensor never changes afterwards (not by
// the next run, not by steps timed alone), and inputs a step would write, outputs
// that are views or inputs, and one value returned twice still come out right.
#include <gtest/gtest.h>

#include <cstring>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/text.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

std::unique_ptr<runtime::Executable> compile1(const Graph& g) {
  runtime::RuntimeOptions o;
  o.threads = 1;
  return runtime::compile(g, o);
}

void expect_matches(const Graph& g, const std::vector<Tensor>& inputs, const std::vector<Tensor>& got) {
  CheckResult r = compare_outputs(evaluate(g, inputs), got, g.output_names(), 1e-5);
  EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
}

TEST(RuntimeIo, EachRunSeesItsOwnInputsAndReturnedTensorsNeverChange) {
  const Graph g = parse_graph(R"(graph g(%x: f32[4,64], %y: f32[4,64]) {
  %a = Mul(%x, %y)
  %b = Softmax(%a) {axis=-1}
  %c = Add(%b, %x)
  %shape = const i64[2] {8, 32}
  %d = Reshape(%c, %shape)
  return %b, %d, %x
}
)");
  auto exe = compile1(g);
  std::vector<Tensor> in1 = random_inputs(g, 1), in2 = random_inputs(g, 2);
  std::vector<Tensor> out1 = exe->run(in1);
  const std::vector<Tensor> copy1 = {Tensor(out1[0].dtype(), out1[0].dims(), out1[0].bytes()),
                                     Tensor(out1[1].dtype(), out1[1].dims(), out1[1].bytes())};
  expect_matches(g, in1, out1);
  std::vector<Tensor> out2 = exe->run(in2);
  expect_matches(g, in2, out2);
  const Tensor copy2(out2[0].dtype(), out2[0].dims(), out2[0].bytes());
  exe->profile_steps(1, 5);  // steps timed alone write the arena, not a returned tensor
  for (size_t s = 0; s < exe->steps().size(); ++s) exe->time_step(s, 1, 2);
  EXPECT_TRUE(out1[0].same_as(copy1[0]));
  EXPECT_TRUE(out1[1].same_as(copy1[1]));
  EXPECT_TRUE(out2[0].same_as(copy2));
  expect_matches(g, in1, out1);
  expect_matches(g, in2, exe->run(in2));  // the same tensors again
  expect_matches(g, in1, exe->run(in1));
  // Fresh tensors with the same values as the last run's.
  std::vector<Tensor> again;
  for (const Tensor& t : in1) again.emplace_back(t.dtype(), t.dims(), t.bytes());
  expect_matches(g, in1, exe->run(again));
}

TEST(RuntimeIo, OneValueReturnedTwiceAndAnInputReturnedAsIs) {
  const Graph g = parse_graph(R"(graph g(%x: f32[3,5]) {
  %a = Relu(%x)
  return %a, %a, %x
}
)");
  auto exe = compile1(g);
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<Tensor> in = random_inputs(g, seed);
    std::vector<Tensor> out = exe->run(in);
    expect_matches(g, in, out);
    EXPECT_TRUE(out[2].same_as(in[0]));
  }
}

TEST(RuntimeIo, ResidualAddsIntoAnInputsBufferDoNotTouchTheCallersTensor) {
  // Accumulating post-ops write into their addend's buffer; an input addend must be
  // copied first, never written where the caller's tensor is.
  const Graph g = parse_graph(R"(graph g(%x: f32[1,8,6,6], %r: f32[1,8,6,6]) {
  %w = const f32[8,8,1,1] {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1}
  %c = Conv(%x, %w)
  %s = Add(%c, %r)
  %y = Relu(%s)
  return %y
}
)");
  auto exe = compile1(g);
  std::vector<Tensor> in = random_inputs(g, 5);
  const Tensor r_before(in[1].dtype(), in[1].dims(), in[1].bytes());
  for (int k = 0; k < 3; ++k) expect_matches(g, in, exe->run(in));
  EXPECT_TRUE(in[1].same_as(r_before));
}

// Returned outputs are allocated uninitialised (src/ir/bytes.h): every step that
// writes one must write all of it. Each run's outputs are overwritten with a
// pattern no step computes (NaN bytes) and dropped before the next run, so that
// the allocator hands the dirty block back to the next run's outputs; a step that
// left a byte unwritten would return the pattern.
void expect_whole_outputs_on_dirty_memory(const Graph& g, int threads = 1) {
  runtime::RuntimeOptions o;
  o.threads = threads;
  auto exe = runtime::compile(g, o);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const std::vector<Tensor> in = random_inputs(g, seed);
    std::vector<Tensor> out = exe->run(in);
    expect_matches(g, in, out);
    for (Tensor& t : out)  // the test holds the only reference to these bytes
      std::memset(const_cast<char*>(t.bytes().data()), 0xff, t.byte_size());
  }
}

TEST(RuntimeIo, LargeOutputsAreWrittenWhole) {
  // 25 MB outputs: above glibc's mmap threshold, as a transformer's logits are.
  expect_whole_outputs_on_dirty_memory(parse_graph(R"(graph g(%x: f32[2500,2500]) {
  %a = Relu(%x)
  return %a
}
)"));
  expect_whole_outputs_on_dirty_memory(parse_graph(R"(graph g(%x: f32[4,1000,1600]) {
  %a = Softmax(%x) {axis=-1}
  %b = Tanh(%x)
  return %a, %b
}
)"),
                                       2);
}

TEST(RuntimeIo, OutputsOfEveryKindOfStepAreWrittenWhole) {
  expect_whole_outputs_on_dirty_memory(parse_graph(R"(graph g(%x: f32[1,3,9,9], %m: f32[24,40], %n: f32[40,8]) {
  %w = const f32[4,3,1,1] {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}
  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]}
  %pads = const i64[8] {0, 0, 2, 1, 0, 0, 1, 2}
  %p = Pad(%x, %pads) {mode="constant"}
  %t = Transpose(%c) {perm=[0, 2, 3, 1]}
  %k = Concat(%c, %c) {axis=1}
  %ax = const i64[1] {1}
  %s = ReduceSum(%m, %ax) {keepdims=1}
  %mm = MatMul(%m, %n)
  %g = const f32[40] {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2}
  %b = const f32[40] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
  %ln = LayerNormalization(%m, %g, %b) {axis=-1}
  %i = const i64[3] {2, 0, 23}
  %ga = Gather(%m, %i) {axis=0}
  return %c, %p, %t, %k, %s, %mm, %ln, %ga
}
)"));
}

TEST(RuntimeIo, ZeroSizedOutputs) {
  const Graph g = parse_graph(R"(graph g(%x: f32[0,4], %y: f32[3,4]) {
  %a = Relu(%x)
  %b = Concat(%x, %y) {axis=0}
  return %a, %b
}
)");
  auto exe = compile1(g);
  const std::vector<Tensor> in = random_inputs(g, 3);
  const std::vector<Tensor> out = exe->run(in);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(out[0].byte_size(), 0u);
  expect_matches(g, in, out);
}

}  // namespace
}  // namespace isomer

// A timing budget: long runs are timed fewer times, never fewer than
// kMinTimedRuns nor more than asked; without a budget, exactly as asked.
TEST(RuntimeTiming, BudgetBoundsTheTimedRuns) {
  using isomer::runtime::kMinTimedRuns;
  using isomer::runtime::timed_runs;
  EXPECT_EQ(timed_runs(15, 0, 2000), 15);           // no budget: as asked
  EXPECT_EQ(timed_runs(15, 250, 0), 15);            // no warm-up run to go by
  EXPECT_EQ(timed_runs(15, 250, 0.01), 15);         // short: capped at what was asked
  EXPECT_EQ(timed_runs(15, 250, 50), 5);            // as many as the budget holds
  EXPECT_EQ(timed_runs(15, 250, 2000), kMinTimedRuns);  // long: the floor
  EXPECT_EQ(timed_runs(2, 250, 2000), 2);           // never more than asked
  EXPECT_EQ(timed_runs(0, 250, 1), 1);              // at least one
}

namespace isomer {
namespace {

TEST(RuntimeIo, RepeatedAndKnownStepsCanBeLeftOutOfTimedRunsOnlyWhereAllValuesAreFloat) {
  // Three equal products, then one of another shape that reads the third.
  auto weight = [](int64_t n) { return Tensor::from_f64(DType::Float32, {64, n}, std::vector<double>(64 * n, 0.01)); };
  GraphBuilder gb;
  Value x = gb.input("x", {DType::Float32, make_shape({64, 64})});
  for (int k = 0; k < 3; ++k) x = gb.op1("MatMul", {x, gb.constant(weight(64))});
  const Graph g = gb.finish({gb.op1("MatMul", {x, gb.constant(weight(32))})}, {"y"});
  auto exe = compile1(g);
  ASSERT_EQ(exe->steps().size(), 4u);
  ASSERT_EQ(exe->steps()[1].signature, exe->steps()[0].signature);
  ASSERT_EQ(exe->steps()[2].signature, exe->steps()[0].signature);
  ASSERT_NE(exe->steps()[3].signature, exe->steps()[0].signature);
  // The second repeats the first; the third does too, but the last product, which
  // runs, reads what it writes.
  const std::vector<bool> skip = exe->steps_to_skip();
  EXPECT_EQ(skip, (std::vector<bool>{false, true, false, false}));
  exe->run(random_inputs(g, 1));
  const std::vector<double> ms = exe->profile_steps(0, 2, 0, &skip);
  for (size_t s = 0; s < skip.size(); ++s)
    if (skip[s]) EXPECT_EQ(ms[s], 0.0) << s;
    else EXPECT_GT(ms[s], 0.0) << s;
  // The first three known already: only the last runs, with the step feeding it.
  EXPECT_EQ(exe->steps_to_skip([](size_t i) { return i < 3; }), (std::vector<bool>{true, true, false, false}));

  // Indices read by a Gather: a step whose producer did not run could read any
  // bytes as indices, so nothing is left out.
  GraphBuilder hb;
  Value y = hb.input("x", {DType::Float32, make_shape({64, 64})});
  Value idx = hb.input("i", {DType::Int64, make_shape({8})});
  for (int k = 0; k < 3; ++k) y = hb.op1("MatMul", {y, hb.constant(weight(64))});
  const Graph h = hb.finish({hb.op1("Gather", {y, idx}, {{"axis", int64_t{0}}})}, {"g"});
  auto hexe = compile1(h);
  const std::vector<bool> none = hexe->steps_to_skip([](size_t) { return true; });
  EXPECT_EQ(none, std::vector<bool>(hexe->steps().size(), false));
}

TEST(RuntimeIo, AStepLeftOutOfTimedRunsStillMakesTheNextReadCold) {
  // A small product a, then a large one (about 40 MB moved, more than any core's
  // L2, with the addition before it) that depends on it and that a timed run leaves
  // out, then a small product of a plus the large one's mean: a whole run reads a
  // cold there, so a run leaving the large one out must too. With a small product
  // in the middle, nothing is cold.
  auto weight = [](int64_t k, int64_t n) { return Tensor::from_f64(DType::Float32, {k, n}, std::vector<double>(k * n, 0.01)); };
  for (const bool large : {true, false}) {
    const int64_t rows = large ? 2048 : 4, width = large ? 1024 : 16;
    GraphBuilder gb;
    Value x = gb.input("x", {DType::Float32, make_shape({64, 64})});
    Value z = gb.input("z", {DType::Float32, make_shape({rows, width})});
    Value a = gb.op1("MatMul", {x, gb.constant(weight(64, 64))});
    Value shifted = gb.op1("Add", {z, gb.op1("ReduceMean", {a}, {{"keepdims", int64_t{0}}})});
    Value middle_out = gb.op1("MatMul", {shifted, gb.constant(weight(width, width))});
    Value mean = gb.op1("ReduceMean", {middle_out}, {{"keepdims", int64_t{0}}});
    Value c = gb.op1("Add", {gb.op1("MatMul", {a, gb.constant(weight(64, 32))}), mean});
    const Graph g = gb.finish({c}, {"c"});
    auto exe = compile1(g);
    // The products by their arithmetic (the compiler may order independent steps
    // either way).
    size_t first = 0, middle = 0, reader = 0, products = 0;
    for (size_t i = 0; i < exe->steps().size(); ++i) {
      const runtime::StepInfo& st = exe->steps()[i];
      if (st.kind != "matmul") continue;
      ++products;
      if (st.flops == 2.0 * 64 * 64 * 64) first = i;
      else if (st.flops == 2.0 * 64 * 64 * 32) reader = i;
      else middle = i;
    }
    ASSERT_EQ(products, 3u);
    ASSERT_LT(first, reader);
    // Everything but the first and last products is known (the middle one and any
    // conversions of the outputs).
    const std::vector<bool> skip = exe->steps_to_skip([&](size_t i) { return i != first && i != reader; });
    std::string listing;
    for (size_t i = 0; i < skip.size(); ++i) listing += exe->steps()[i].kind + (skip[i] ? "(left out) " : " ");
    ASSERT_TRUE(skip[middle]) << listing;
    ASSERT_FALSE(skip[reader]) << listing;
    const std::vector<bool> cold = exe->cold_reads(skip);
    EXPECT_EQ(cold[reader], large);
    // The first step that runs reads the weights cold where a whole run moves more
    // than the caches hold.
    const size_t runs_first = static_cast<size_t>(std::find(skip.begin(), skip.end(), false) - skip.begin());
    EXPECT_EQ(cold[runs_first], large);
    EXPECT_FALSE(cold[middle]) << "a step left out is not timed";
    // Timed so, the steps that run take time and the one left out none.
    exe->run(random_inputs(g, 1));
    const std::vector<double> ms = exe->profile_steps(0, 2, 0, &skip);
    EXPECT_EQ(ms[middle], 0.0);
    EXPECT_GT(ms[reader], 0.0);
  }
}

}  // namespace
}  // namespace isomer
