#pragma once
// Checking that an optimized graph computes what the original computes: both run
// on the same random inputs (fixed, printed seed) and their outputs are compared.
// Graphs the reference evaluator can run are checked in-process; graphs with
// opaque operators are handed to ONNX Runtime (through Python) when available,
// and otherwise the check is reported as skipped with the reason — never guessed.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer {

struct CheckOptions {
  uint64_t seed = 0;
  // An output matches when max|got - want| <= tolerance * max(max|want|, 1e-6):
  // errors are measured against the output's scale, as float32 rounding errors are.
  double tolerance = 1e-3;
  std::map<std::string, int64_t> bindings;  // extents for symbolic input dims (default 1)
  bool allow_onnxruntime = true;            // delegate graphs with opaque nodes
};

struct CheckResult {
  enum class Status { Passed, Failed, Skipped };
  Status status = Status::Skipped;
  std::string reason;       // why it failed or was skipped; empty when passed
  std::string method;       // "reference evaluator" or "onnxruntime"
  double max_abs_error = 0;
  double max_rel_error = 0;  // max |got - want| / max |want|, over all outputs
  std::string worst_output;  // name of the output with the largest relative error

  std::string status_name() const;
};

// A Python interpreter that should have onnxruntime: $ISOMER_PYTHON, else the
// project's virtual environment next to the source tree, else python3 on PATH.
std::string find_python();
// The last non-empty line of a Python child's log (its error, as a rule), or "".
std::string last_log_line(const std::string& path);

// Compares two graphs with the same interface (inputs and outputs by position).
CheckResult compare_graphs(const Graph& original, const Graph& optimized, const CheckOptions& opts = {});

// Compares output tensors; fills errors and status (used by the check and by tests).
CheckResult compare_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                            const std::vector<std::string>& names, double tolerance);

}  // namespace isomer
