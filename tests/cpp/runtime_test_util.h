#pragma once
// What the runtime's tests share: random constants, and a graph run on the runtime
// (fused and unfused, twice each) against the reference evaluator.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer::testing {

inline Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// Runs `g` on the runtime, fused and unfused, against the reference evaluator (and
// each a second time: buffers are reused, not stale). Returns the fused steps.
inline std::vector<runtime::StepInfo> run_against_reference(const Graph& g, double tol = 1e-4) {
  std::vector<Tensor> inputs = random_inputs(g, 7);
  std::vector<Tensor> want = evaluate(g, inputs);
  std::vector<runtime::StepInfo> steps;
  for (bool fuse : {true, false}) {
    runtime::RuntimeOptions o;
    o.threads = 1;
    o.fuse = fuse;
    auto exe = runtime::compile(g, o);
    std::vector<Tensor> got = exe->run(inputs);
    CheckResult r = compare_outputs(want, got, g.output_names(), tol);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << (fuse ? "fused: " : "unfused: ") << r.reason;
    std::vector<Tensor> again = exe->run(inputs);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].same_as(again[i]));
    if (fuse) steps = exe->steps();
  }
  return steps;
}

// Runs `g` fused at `threads` threads, twice, against the reference evaluator;
// returns the steps.
inline std::vector<runtime::StepInfo> run_checked(const Graph& g, int threads) {
  std::vector<Tensor> inputs = random_inputs(g, 3);
  std::vector<Tensor> want = evaluate(g, inputs);
  runtime::RuntimeOptions o;
  o.threads = threads;
  auto exe = runtime::compile(g, o);
  for (int run = 0; run < 2; ++run) {
    CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << threads << " threads: " << r.reason;
  }
  return exe->steps();
}

// How many of `steps` are of `kind`.
inline size_t count_kind(const std::vector<runtime::StepInfo>& steps, const std::string& kind) {
  size_t n = 0;
  for (const runtime::StepInfo& s : steps) n += s.kind == kind;
  return n;
}

}  // namespace isomer::testing
