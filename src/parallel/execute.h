#pragma once
// Runs one rank's graph (parallel/lower.h): the operators on isomer's runtime, the
// collectives through a Communicator. The graph is cut at its collectives: segment
// k holds the operators the k-th collective (by sequence number) needs that no
// earlier segment computed, the last segment what the outputs need; each segment is
// compiled once by the runtime (fusions, layouts, memory planning as always). Every
// rank runs the collectives in sequence order, so they meet.
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "parallel/comm.h"
#include "runtime/runtime.h"

namespace isomer::parallel {

class RankExecutor {
 public:
  RankExecutor(const Graph& rank_graph, Communicator& comm, const runtime::RuntimeOptions& opts = {});
  ~RankExecutor();
  // Outputs of the rank graph for `inputs` (one per graph input, whole).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  size_t segments() const;
  size_t collectives() const;
  // Seconds the last run spent computing and in collectives.
  double compute_seconds() const { return compute_s_; }
  double comm_seconds() const { return comm_s_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  double compute_s_ = 0, comm_s_ = 0;
};

// Runs all ranks of a plan as threads of this process (LocalGroup) on the same
// inputs; returns each rank's outputs. For tests and `run-plan --local`.
std::vector<std::vector<Tensor>> run_local(const std::vector<Graph>& rank_graphs, const std::vector<Tensor>& inputs,
                                           const runtime::RuntimeOptions& opts = {});

}  // namespace isomer::parallel
