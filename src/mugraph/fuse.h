#pragma once
// Fusing a model's regions into μGraph kernels (`isomer optimize --mugraph`).
//
// Candidate regions come from the graph by one rule for every model: grown
// backwards from a sink through operators region programs express (elementwise,
// reductions, Softmax, LayerNormalization, MatMul/Gemm, views), taking a producer
// only when every consumer of it is already inside (so the region has one output
// and nothing it computes is needed elsewhere), with at most two contractions, and
// a matmul with constant weights only where nothing but elementwise operators and
// views lie between it and the sink (RMSNorm -> MatMul, SwiGLU's two projections;
// attention stops at its projections). A region is tried if it reduces something
// besides one weight matmul's epilogue: softmax, normalization, attention, SwiGLU;
// then, among the operators left, a weight matmul whose operand an elementwise
// prologue joins from two or more activations (silu(g) * u before SwiGLU's down
// projection when g and u come from elsewhere).
//
// Each region: its program (mugraph/program.h), the search (mugraph/search.h) plus
// the direct translation, tilings ranked by the cost model, the best few verified
// over the field and in floats, compiled, checked at full size against isomer's
// unfused runtime and timed against it (interleaved rounds, medians, in processor
// time: mugraph/weight_bound.h's run_clock). A region is
// replaced by a MuGraph node only when its best kernel is correct and faster.
// Decisions are kept per process by the region's body and constants, so the
// optimize pipeline's guard re-running the rewrite does not search again.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer::mugraph {

struct FuseOptions {
  int threads = 0;              // of the timing runs (0: every core)
  size_t search_states = 0;     // per loop choice: what bounds the search (0: SearchOptions's default)
  double search_seconds = 30;   // per loop choice: a safety net (mugraph/search.h)
  size_t candidates = 6;        // kernels timed per region: the best half by the estimate, then a spread
  int rounds = 7;               // interleaved timing rounds (median and fastest must both win)
  double min_speedup = 1.03;    // unfused/fused median needed to keep a kernel
  bool measure = true;          // false: keep the best verified kernel untimed (tests)
  std::function<void(const std::string&)> progress;  // one line per step
};

struct RegionOutcome {
  std::string sink;        // the region's output node
  std::string ops;         // its operators, in order
  size_t nodes = 0;
  bool kept = false;
  std::string reason;      // why not kept, or what was kept
  std::string kernel;      // summary of the chosen block graph
  size_t states = 0;       // search states explored
  // What stopped the search: the saturation's and each loop choice's stop reason,
  // "saturated; none exhausted, k state limit". A "time limit" among them means
  // the result may differ between runs.
  std::string stop;
  double search_seconds = 0;
  double fused_ms = -1, unfused_ms = -1;
  // The cost model against the clock: Spearman's rank correlation of predicted and
  // measured times over the candidates compiled and timed (NaN: fewer than 3).
  size_t timed = 0;
  double rank_correlation = NAN;
  std::string predicted_vs_measured;  // "pred/meas ms" per timed candidate, best predicted first
  std::vector<std::string> timed_kernels;  // their summaries, in that order
  // The clock the candidates and the unfused region were timed on (mugraph/weight_bound.h's
  // run_clock: "thread processor time" on one thread); empty when nothing was timed.
  std::string clock;
};

struct FuseReport {
  std::vector<RegionOutcome> regions;
  // Operators a region could take but for their symbolic dims (kernels are made for
  // static shapes), the graph inputs those dims come from, as "name[dims]", and an
  // --input-shape value for the first of them with its symbolic dims at 1.
  size_t symbolic_ops = 0;
  std::vector<std::string> symbolic_inputs;
  std::string input_shape_example;
  size_t kept() const;
  std::string to_text() const;
};

// A candidate region: its nodes (topological order, the sink last).
struct Region {
  std::vector<NodePtr> nodes;
  std::vector<Value> inputs;  // values from outside, in first-use order
  Graph body;                 // the subgraph on the inputs (scalar and shape constants inside)
};
std::vector<Region> find_regions(const Graph& g);

Graph fuse_regions(const Graph& g, const FuseOptions& opts, FuseReport* report);

// Which of the timed kernels a region keeps, given their median times in the cost
// model's order: the first within `within` (a fraction) of the fastest median.
// Kernels that near-equal (tilings one round's noise reorders) would otherwise be
// chosen by the noise, and two runs would write different kernels.
size_t first_near_fastest(const std::vector<double>& medians, double within);

}  // namespace isomer::mugraph
