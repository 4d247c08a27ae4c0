#pragma once
// What `isomer parallelize` writes and `isomer run-plan` reads: a plan directory.
//
//   PLAN/plan.json    the device mesh; per operator its configuration and each
//                     tensor's layout; the parallel operators (Partition, Combine,
//                     Reduce, Replicate) between them and the collectives they run;
//                     the rules applied; the predicted step time (compute,
//                     communication, overlap), memory per device, predicted_step_ms,
//                     data_parallel_step_ms, speedup_vs_data_parallel (and the
//                     Megatron-style baseline's time for transformer blocks)
//   PLAN/graph.onnx   the model the plan is for (after algebraic rewrites), whole:
//                     run-plan's reference and the source of input names and types
//   PLAN/rankN.onnx   the graph rank N runs (parallel/lower.h), weights sliced
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "parallel/search.h"

namespace isomer::parallel {

struct ModelOptions {
  int64_t batch = 0;                                         // > 0: dim 0 of every input
  std::map<std::string, std::vector<int64_t>> input_shapes;  // name -> full shape
};

// Imports `path` with static input shapes (batch and --input-shape applied) and runs
// the template passes, so that shape computations fold into constants.
Graph prepare_model(const std::string& path, const ModelOptions& opts);

struct PlanMeta {
  std::string model;
  Mode mode = Mode::Training;
  int64_t batch = 0;
  std::string algorithm;
  uint64_t seed = 0;
};

// Writes plan.json (and graph.onnx, and the rank graphs unless `rank_graphs` is false).
// Returns the JSON text.
std::string write_plan(const std::string& dir, const ParallelSearchReport& rep, const Cluster& cluster,
                       const PlanMeta& meta, bool rank_graphs);

struct LoadedPlan {
  std::string dir;
  int devices = 0;
  std::vector<std::string> rank_files;
  std::string graph_file;
  double predicted_step_ms = 0;
  std::string mode;
};
LoadedPlan load_plan(const std::string& dir);

}  // namespace isomer::parallel
