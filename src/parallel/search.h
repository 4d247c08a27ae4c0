#pragma once
// Searching for a parallelization plan.
//
// FlexFlow (Jia et al., SysML 2019): Markov chain Monte Carlo over SOAP
// configurations. Start from data parallelism; each step gives one random operator a
// random configuration (or, every other step, the configuration best for it given its
// neighbours), simulates the change incrementally, and accepts it if it is faster, or
// slower with probability exp(-alpha * relative slowdown). The fastest plan seen wins.
//
// Unity (Unity, Unger et al., OSDI 2022): algebraic rewrites and parallelization in
// one search. The outer loop is a best-first search over graphs rewritten by isomer's
// verified rules (only usable verdicts, search/search.h), each graph costed by the
// step time of its best parallelization; that parallelization comes from a dynamic
// program over the graph's series cuts (points in topological order where one value
// crosses): per cut, the best cost of everything before it for each candidate layout
// of the crossing value, segments in between configured greedily from the cut's
// configuration. The best graph's plan is then refined by the MCMC above.
//
// Budgets: wall-clock seconds and steps (MCMC proposals, rewritten graphs); the search
// always stops, and stops early (with the best plan so far) when `interrupt` is set
// (Ctrl-C). With the same seed it makes the same plan whenever the step budget, not
// the clock, stops it (the report says which). Plans that do not fit in device memory
// are never chosen while one that fits exists.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parallel/simulator.h"
#include "rules/rule.h"

namespace isomer::parallel {

struct ParallelSearchOptions {
  enum class Algorithm { FlexFlow, Unity } algorithm = Algorithm::Unity;
  Mode mode = Mode::Training;
  double budget_s = 60;
  size_t max_steps = 0;        // MCMC proposals; 0 = 40 per operator (at least 2,000)
  size_t max_graphs = 32;      // Unity: rewritten graphs costed
  uint64_t seed = 0;
  double alpha = 25;           // acceptance: exp(-alpha * (new - current) / current)
  std::vector<Rule> rules;     // Unity: the algebraic rules (usable ones only are applied)
  const std::atomic<bool>* interrupt = nullptr;
  // MCMC re-simulates only what a proposal touches; false: every proposal from scratch
  // (to measure what incremental simulation saves).
  bool incremental = true;
  // A baseline instead of a search (to run and time it like a searched plan).
  enum class Baseline { None, DataParallel, Megatron } baseline = Baseline::None;
  std::function<void(const std::string&)> progress;
};

struct PlanResult {
  std::shared_ptr<ParallelGraph> graph;
  Strategy strategy;
  SimResult sim;
  std::map<std::string, size_t> rules_applied;  // algebraic rewrites on the way to this graph
};

struct ParallelSearchReport {
  PlanResult best;
  PlanResult data_parallel;
  std::optional<PlanResult> megatron;   // transformer blocks only
  std::string stop_reason;              // "steps", "time", "interrupted"
  size_t steps = 0, accepted = 0, graphs = 0;
  double seconds = 0, mcmc_seconds = 0;
  double start_ms = 0;  // the plan MCMC started from (data parallelism; Unity: its best starting point)
  SimStats sim_stats;
  // Incremental against full re-simulation, timed on this graph's proposals.
  double incremental_us = 0, full_us = 0;
};

// Everything the search needs about the machine and how to price operators.
struct SearchContext {
  const Cluster& cluster;
  ComputeModel& compute;
};

ParallelSearchReport parallel_search(const Graph& g, const SearchContext& ctx, const ParallelSearchOptions& options);

// Baselines. Data parallelism: ParallelGraph::data_parallel(). Megatron-style tensor
// parallelism for transformer blocks: the products with a weight column-parallel
// (output features cut over tensor-parallel devices of a node) when their input is
// whole, and row-parallel (the summed dimension cut, an all-reduce or reduce-scatter
// after) when their input arrives cut along its features; everything else takes the
// cheapest layout given its inputs'; the batch cut over the nodes and the node's other
// devices. The tensor-parallel degree is the fastest of the node's divisors (as one
// would pick it: attention heads must divide it). nullopt when the graph has no
// product with a weight, has convolutions, or one node has one device. `allowed`: the mesh axes it may
// use (bit a = axis a).
std::optional<Strategy> megatron_strategy(const ParallelGraph& pg, Simulator& sim, uint64_t allowed = ~uint64_t{0});

// The dynamic program over series cuts (Unity's parallelization step) for one graph.
Strategy series_dp(const ParallelGraph& pg, Simulator& sim, int top_k = 8);

}  // namespace isomer::parallel
