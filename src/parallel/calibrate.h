#pragma once
// `isomer calibrate`: times the MPI collectives a plan uses (all-reduce, all-gather,
// reduce-scatter) over all ranks at several message sizes and fits each to the ring
// model of machine.h (time = steps * latency + factor * bytes / bandwidth), giving
// the link latency and bandwidth that reproduce what was measured (the smallest
// size, 64 bytes, pins the fixed cost of a collective). It also measures the host
// overheads of machine.h (HostOverheads: segment dispatch, compute contention
// between the ranks, weights streamed from memory). The JSON it writes is what a
// cluster link's "calibration" names.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/comm.h"
#include "parallel/machine.h"

namespace isomer::parallel {

struct CalibrateOptions {
  std::vector<int64_t> sizes{64, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};  // bytes per rank
  int repeat = 10;
  std::string link = "inter_node";
  bool host = true;  // also measure the host overheads (machine.h HostOverheads)
  int threads = 1;   // runtime threads per rank for the host measurements
};

// Runs the measurements (every rank must call it); returns the JSON text.
std::string calibrate(Communicator& comm, const CalibrateOptions& options);

// The host overheads of machine.h (every rank must call it): the "host" object.
nlohmann::ordered_json measure_host(Communicator& comm, int threads);

// Least-squares fit (on relative errors) of (bytes, ms) points to the ring model of `kind` over g ranks.
LinkModel::Fit fit_ring(Collective kind, int64_t g, const std::vector<std::pair<double, double>>& points);

}  // namespace isomer::parallel
