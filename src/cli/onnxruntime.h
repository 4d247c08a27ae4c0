#pragma once
// ONNX Runtime as a second engine for `isomer run`: it runs models the isomer
// runtime cannot (opaque operators), and it is what `run --bench` measures
// isomer against. It is reached through the ONNX Runtime bridge (bridge/bridge.h).
#include <string>
#include <vector>

#include "runtime/npz.h"

namespace isomer::cli {

struct OrtRequest {
  std::string model;             // .onnx path
  runtime::NamedTensors inputs;  // by input name
  // Outputs from a session with ONNX Runtime's graph optimizations off (the model
  // as written; used as the reference when comparing), else from the timed one.
  bool reference_outputs = false;
  // Also the outputs with the optimizations off, in OrtResult::plain_outputs (the
  // timed session's are in outputs).
  bool plain_outputs_too = false;
  bool bench = false;
  int warmup = 5, repeat = 20;
  int threads = 0;  // 0 = ONNX Runtime's default
};

struct OrtResult {
  std::string version;            // onnxruntime.__version__
  runtime::NamedTensors outputs;  // in the model's output order
  runtime::NamedTensors plain_outputs;  // plain_outputs_too: optimizations off
  std::vector<double> ms;         // one per timed run (bench only)
};

// Runs the request; throws Error with ONNX Runtime's message (or why the bridge
// cannot start) when the model cannot be run.
OrtResult run_onnxruntime(const OrtRequest& request);

}  // namespace isomer::cli
