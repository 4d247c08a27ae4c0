#pragma once
// Regions no kernel can win: those whose time is almost all products with weights
// (LayerNorm or RMSNorm feeding a projection, SwiGLU's gate and up projections).
// The decision is priced (deterministic); the clock only confirms it.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/clock.h"
#include "runtime/runtime.h"

namespace isomer::mugraph {

struct Region;

// One region's test bench: its inputs (constants as constants), the body inlined
// (isomer's unfused runtime) and the region as one MuGraph node.
struct Bench {
  Graph unfused;
  std::vector<Tensor> inputs;
};

// The region's products with a weight (a constant operand of rank 2 or more) alone,
// their other operands inputs: what any kernel of the region must compute at least.
std::optional<Bench> weight_products(const Region& r);

// Graph `g` compiled as `exe`, its steps priced by their FLOPs and bytes against
// this machine's measured rates (mugraph/cost.h's Machine): contractions (matmul,
// conv, attention) at the rate the runtime's matmul reaches, other work at its
// pointwise rate, bytes at the streaming rate, plus a fixed cost per step.
// The pointwise operators a step fuses after its contraction (GELU after a
// projection) are priced per output element, at most per post-op where the step runs
// a chain of them as one activation (GPT-2's tanh GELU), and a step reads at least its
// weights; both found by the step's node names (a node without a name of its own is
// priced by the step's counts alone). The same graph always gets the same price.
double priced_ms(const Graph& g, const runtime::Executable& exe, int threads);

struct WeightBound {
  double priced_share = 0;      // priced products / priced unfused region
  double products_ms = 0, unfused_ms = 0;  // priced
  double measured_share = NAN;  // the clock's, when timed
  bool bound = false;           // priced_share at or above kWeightBoundShare
  std::string reason;           // "not searched: ..." when bound
};
// A kernel saves at most the region's time besides its weight products (the
// generated GEMM reaches 0.92-0.96 of oneDNN's) and is kept only from 3% up: at
// 93% and more nothing is left to gain.
inline constexpr double kWeightBoundShare = 0.93;

// The clock every run of a μGraph decision is timed on, never the wall clock (under
// load the wall clock read llama_block's kernels slower than the unfused region in one
// run and faster in the next): processor time (runtime/clock.h), as optimize's guard
// reads it.
using runtime::run_clock;
std::string clock_name(runtime::StepClock c);
// The median of `repeats` runs of `exe` after one warm-up, in ms on run_clock.
double median_run_ms(runtime::Executable& exe, const std::vector<Tensor>& inputs, int repeats);

// The priced decision for a region whose unfused bench `unfused_graph` compiled as
// `unfused`; null where the
// region has no weight product. With `timed` the products and the region are also
// timed (interleaved, on run_clock) and the share reported beside
// the priced one: the decision stays the priced one.
std::optional<WeightBound> weight_bound(const Region& r, const Graph& unfused_graph, runtime::Executable& unfused,
                                        const std::vector<Tensor>& inputs, const runtime::RuntimeOptions& ro,
                                        bool timed);

}  // namespace isomer::mugraph
