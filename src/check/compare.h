#pragma once
// Checking that an optimized graph computes what the original computes: both run
// on the same inputs (check/inputs.h: random with a printed seed, drawn so that the
// model can run on them, or the user's) and their outputs are compared.
//
// The graphs run on two different engines (check/engines.h), the fast ones where
// they can, so that the check costs about two runs of the model, not minutes of
// the reference evaluator:
//   - the optimized graph on the target engine (what the user will run it on, and
//     what the guard times anyway): isomer's runtime, or ONNX Runtime with all
//     graph optimizations;
//   - the original on the other one: ONNX Runtime with graph optimizations off
//     (the model as written) when the target is isomer's runtime, isomer's runtime
//     when the target is ONNX Runtime.
// Two engines, never one, because a kernel bug shared by both runs could hide a
// wrong rewrite (an engine that ignored a Conv's pads would find a rewrite that
// dropped them correct). Where an engine cannot run a graph the next one is
// used, the reference evaluator last. When the outputs differ, the reference
// evaluator runs both graphs and decides: the rewrite is wrong only if the
// graphs differ there too (an engine's bug is reported, not blamed on a rule).
// A check that cannot run (no valid inputs, an original that no engine runs on
// them) is skipped with the reason, never guessed.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "check/engines.h"
#include "check/inputs.h"
#include "ir/graph.h"

namespace isomer {

struct CheckOptions {
  uint64_t seed = 0;
  // An output matches when max|got - want| <= tolerance * max(max|want|, 1e-6):
  // errors are measured against the output's scale, as float32 rounding errors are.
  // Half-precision outputs: at least 8 epsilons of their type (float16 7.8e-3,
  // bfloat16 6.3e-2), the rounding they carry.
  double tolerance = 1e-3;
  std::map<std::string, int64_t> bindings;  // extents for symbolic input dims (default 1)
  bool allow_onnxruntime = true;            // use ONNX Runtime (engine, delegation)
  Engine target = Engine::Runtime;          // where the optimized graph runs (Runtime or OnnxRuntime)
};

struct CheckResult {
  enum class Status { Passed, Failed, Skipped };
  Status status = Status::Skipped;
  std::string reason;       // why it failed or was skipped; empty when passed
  std::string method;       // "<engine> against <engine>": where the optimized and the original ran
  double max_abs_error = 0;
  double max_rel_error = 0;  // max |got - want| / max |want|, over all outputs
  std::string worst_output;  // name of the output with the largest relative error
  // Failed only because the engine that ran the rewrite computes it wrongly (and the
  // original right) while the reference evaluator finds the graphs equal.
  bool engine_fault = false;

  std::string status_name() const;
};

// Compares two graphs with the same interface (inputs and outputs by position) on
// `inputs` (see above); what runs is prepared through, and kept in, `engines`.
CheckResult check_graphs(Engines& engines, const Graph& original, const Graph& optimized, const ModelInputs& inputs,
                         const CheckOptions& opts);

// Why two runs of `g` cannot be compared: a node whose outputs are drawn at random
// (Random*, Bernoulli, Multinomial, Dropout in training mode with a ratio that is not
// a constant 0); "" where there is none.
std::string random_outputs_reason(const Graph& g);

// The same on valid random inputs from opts.seed, with engines of its own.
CheckResult compare_graphs(const Graph& original, const Graph& optimized, const CheckOptions& opts = {});

// Compares output tensors; fills errors and status (used by the check and by tests).
// NaN in the same element of both is not a match: such elements are left out and
// counted in `reason`, and an output NaN at every element makes the result Skipped.
CheckResult compare_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                            const std::vector<std::string>& names, double tolerance);

}  // namespace isomer
