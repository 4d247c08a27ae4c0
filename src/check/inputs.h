#pragma once
// Inputs to run a model on, for the check, the cost model's timing and the
// never-slower guard: the user's (`--inputs IN.npz`, `inputs=` in Python) or random
// ones that the model can actually run on.
//
// Plain random values are wrong for many integer inputs: token ids index an
// embedding table, shapes and axes must agree with the data, divisors must not be
// zero. So each graph input's values are drawn by what its consumers need, read
// off the graph (through Cast, Identity, Reshape, Flatten, Squeeze, Unsqueeze and
// Expand, which keep values, and Add/Sub of a constant, which shifts them):
//   - indices (Gather, GatherElements, GatherND, ScatterElements, ScatterND,
//     OneHot): integers in [0, extent of the indexed axis);
//   - shapes and axes: Reshape's shape is the data's own dims (merged or padded
//     to the shape's length), Expand's ones, Tile's repeats in [1, 3),
//     Unsqueeze's axes 0..k-1, Squeeze's the data's unit axes, Reduce*'s and
//     Slice's axes 0..k-1, Slice's steps in [1, 3), Split's sizes the axis extent
//     shared out, CumSum's axis in [0, rank), TopK's k in [1, extent], Pad's pads
//     below the extent for reflect and edge padding;
//   - integer Div and Mod divisors: non-zero, in [1, 4); Range's delta likewise;
//     exponents of a Pow with an integer result: [0, 4);
//   - everything else: floats uniform in [-1, 1), integers in [0, 4), bools fair.
// Two consumers that need incompatible values make a valid input impossible; the
// caller then skips what needed it, saying why.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace isomer {

struct ModelInputs {
  std::vector<Tensor> tensors;              // one per graph input, in order (empty if impossible)
  std::map<std::string, int64_t> bindings;  // extents of symbolic input dims, as the tensors have them
  std::string source;                       // "random (seed 0)", "given (in.npz)"
  std::vector<std::string> notes;           // how each constrained input was drawn, and why
  std::string impossible;                   // why no valid inputs can be made; empty when they were

  bool ok() const { return impossible.empty(); }
};

// Random inputs from `seed` that respect what the consumers need (see above).
// Symbolic dims take their extents from `bindings`, else 1 (the commands that draw
// inputs for a whole model bind them first: drawn_bindings, check/open_dims.h).
ModelInputs valid_random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings = {});

// The same tensors where valid ones exist; else plain random ones (eval/evaluator.h:
// floats in [-1, 1), integers in [0, 4)), for commands that run the model anyway
// (`isomer run`, benchmarks) and report what fails.
std::vector<Tensor> seeded_random_inputs(const Graph& g, uint64_t seed,
                                         const std::map<std::string, int64_t>& bindings = {});

// The user's inputs, matched to the graph's by name: every input must be given
// with its element type, rank and static dims (symbolic dims are bound by what was
// given); float32 is taken for a bf16 input, which numpy cannot hold. Throws Error naming `what` (the file) and the input otherwise.
// An input with a default value (an initializer listed as a graph input, onnx_io.h's
// input_defaults) that is not given takes its default, as ONNX Runtime takes it.
ModelInputs given_inputs(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& given,
                         const std::string& what, const std::vector<std::pair<std::string, Tensor>>& defaults = {});

// Drawn inputs with the inputs that have a default value given it: the value the model
// runs on unless the user feeds another (its readers may need it: a shape, an index).
void use_defaults(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& defaults, ModelInputs* in);

// The extents the graph's symbolic input dims have in `tensors`.
std::map<std::string, int64_t> bindings_of(const Graph& g, const std::vector<Tensor>& tensors);

}  // namespace isomer
