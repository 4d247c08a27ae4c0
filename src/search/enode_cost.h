#pragma once
// Prices of e-nodes for extraction, consistent with the price of a whole graph.
//
// The cost model prices a graph by compiling it the way the runtime runs it and
// summing its steps (cost/cost.h): a Relu or bias after a convolution is a post-op
// of the convolution's step, a Reshape, Transpose or channel Split is a view with no
// step, a Concat is written in place by its producers (or read in parts by the 1x1
// convolutions after it), weights are laid out at compile time. An e-node priced as
// an operator alone sees none of that: SqueezeNet 1.1's e-nodes, priced alone, added
// up to many times the price of the graph they came from.
//
// So e-nodes are priced from the plan of the input graph first:
//   - Context prices. The input graph is priced whole (the same call, and the same
//     cached step measurements, as the price of any graph). Each step's cost goes to
//     the node it computes (a fused step's to its head: the post-ops cost nothing;
//     a reorder's to the node whose value it converts); views and in-place
//     concatenations have no step and cost nothing. An e-node whose signature
//     (operator, attributes, input types, which inputs are constants, small constant
//     values) is that of an input graph node costs the mean of those nodes' shares;
//     an elementwise one's, apart for those reading a convolution or product (run
//     fused into it) and the others (a pass of their own).
//     Extracting the input graph unchanged therefore costs what the plan says, less
//     what belongs to no node (copying the inputs in and outputs out).
//   - New e-nodes (shapes or operators the input graph lacks: merged convolutions,
//     concatenated weights) are priced alone on the runtime, each signature once per
//     pricer (the step costs in the cost database are reused, only new steps are
//     timed); an elementwise e-node that reads a convolution or product costs what it
//     adds fused into it. These are then scaled by the ratio of context prices to
//     prices alone of the input graph's nodes of that operator that read the same
//     value (those a merge replaces; for one reading a Concat that no input node
//     reads, those reading the Concat's parts: a sum of convolutions merged), else of
//     that operator anywhere in the graph (its calibration: a few of them priced
//     alone when an e-node first needs it), so that both kinds of price are on one
//     scale.
//   - Constant computations (folded at optimization time), inputs, constants and
//     projections cost nothing.
//   - An e-node that would be priced alone is not, when another e-node of its class
//     that reads no value it does not read already costs less than a lower bound of
//     its price (its arithmetic at kRateMargin times the fastest rate a step of the
//     input's plan reached, scaled as a price alone would be): no extraction can be
//     cheaper for choosing it, so its bound stands for its price (ResNeXt-50's 1x1
//     convolutions enlarged to 3x3 ones, each timed alone for nothing, were half of
//     its cold pricing). So is a merge whose value only its projections read (directly,
//     or through a Split of it), when the values it serves, each computed by a priced
//     e-node that reads no value the merge does not read, cost less together than its
//     bound (those enlarged convolutions merged into one of 384 channels). One
//     that its bound does not rule out is timed alone only until its runs show it
//     dearer than what it would replace (TASO's BERT's four products merged into
//     one, 8% dearer than the four: one timed run of 84 ms, not three).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cost/cost.h"
#include "egraph/egraph.h"
#include "egraph/extract.h"

namespace isomer {

// Seconds from `t` to now on the steady clock (the search's and the pricer's timings).
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// How much faster than the fastest step of the input's plan an operator alone is
// assumed never to run, per arithmetic operation of its steps (the plan's
// contractions reach the cores' peak; another algorithm, such as Winograd's, does
// fewer operations). The enlarged 3x3 convolutions of ResNeXt-50 were priced 6 to 8
// times their bound at 4; their 1x1 originals cost 0.6 to 0.9 of it at 2.
constexpr double kRateMargin = 2;

struct PlanShare {
  double ms = 0;                  // what the plan's steps charge to the nodes with this signature
  size_t nodes = 0;               // how many nodes
  double mean() const { return nodes ? ms / static_cast<double>(nodes) : 0; }
};

class ENodePricer {
 public:
  using Progress = std::function<void(const std::string&)>;
  explicit ENodePricer(cost::CostModel& model, Progress progress = {});

  // Learns the context prices from the plan of `g` (the input graph); returns that
  // plan's price (total, as CostModel::graph_cost).
  double learn(const Graph& g);
  // The price of every e-node of `eg` (extract.h's cost table).
  eg::CostTable table(eg::EGraph& eg);

  // What the learned plans charged to no node (inputs and outputs copied, boundary
  // layout conversions, steps naming no node of the graph).
  double unattributed_ms() const { return unattributed_ms_; }
  size_t priced_alone() const { return alone_.size(); }  // distinct signatures priced alone
  double seconds_alone() const { return seconds_alone_; }
  // E-nodes priced by their lower bound, without timing (see above).
  size_t bounded() const { return bounded_; }
  // Context prices over prices alone of the input graph's nodes of operator `op`
  // (a few, priced alone on first use); nullopt if the input has none to sample.
  std::optional<double> calibration(const std::string& op);

  // The signature of an e-node: equal when the runtime would run two alike (see above).
  static std::string signature(eg::EGraph& eg, const eg::ENode& n);
  // What context prices are kept under: the signature, and for an elementwise
  // operator whether it reads a convolution or product (which it runs fused into).
  static std::string context_key(eg::EGraph& eg, const eg::ENode& n);

 private:
  // `dominated_above` (when not negative): the price above which `n` is never
  // chosen (what its class or the values it serves cost another way); timing it
  // alone ends once its runs show it above that (CostModel::op_ms's `enough_ms`).
  double price(eg::EGraph& eg, const eg::ENode& n, double dominated_above = -1);
  double alone(eg::EGraph& eg, const eg::ENode& n, double enough_ms = 0);
  double scale(eg::EGraph& eg, const eg::ENode& n);
  std::optional<double> fused(eg::EGraph& eg, const eg::ENode& n);
  // Whether price(n) would time something: not a context price, not priced before.
  bool needs_timing(eg::EGraph& eg, const eg::ENode& n);
  // A lower bound of price(n) from its arithmetic (nullopt: none known).
  std::optional<double> lower_bound(eg::EGraph& eg, const eg::ENode& n);
  std::vector<Value> synthetic_inputs(eg::EGraph& eg, const eg::ENode& n, GraphBuilder& b);
  const Tensor& zeros(const TensorType& t);
  void calibrate(const Graph& g);

  cost::CostModel& model_;
  Progress progress_;
  std::unordered_map<std::string, PlanShare> context_;  // by signature
  std::unordered_map<std::string, double> alone_;       // by signature (and fused pairs)
  std::map<std::string, double> calibration_;           // by operator, once computed
  std::unique_ptr<eg::EGraph> plan_;                     // the input graph, for calibration samples
  std::map<std::string, std::vector<eg::ENode>> samples_;  // by operator: e-nodes of plan_
  std::unordered_map<std::string, Tensor> zeros_;
  std::unordered_map<std::string, double> flops_;       // by signature
  double unattributed_ms_ = 0;
  double seconds_alone_ = 0;
  double flops_per_ms_ = 0;  // the fastest rate a contraction step of the input's plan reached
  size_t bounded_ = 0;
  size_t reported_ = 0;
};

}  // namespace isomer
