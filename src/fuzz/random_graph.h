#pragma once
// Random models for differential fuzzing of the optimizer. random_graph() builds a
// valid graph from the operator table: small static shapes, a mix of every native
// operator, shared subexpressions (the builder does not merge, so CSE has work),
// multi-output nodes (Split, Dropout with mask), constant subgraphs (for folding),
// the patterns the template passes look for (Conv+BatchNormalization, transpose
// pairs, no-op reshapes, ...) and opaque nodes. Every node goes through the
// validating constructors, so a node the shape rules reject is simply not made.
//
// Opaque nodes are ONNX `Asinh`/`Atan` (operators isomer does not know): the fuzz
// evaluator below computes them, so graphs with barriers can still be compared
// in-process. Values that feed Log/Sqrt/Div/Pow are made positive first, and Exp's
// input is clipped, so outputs stay finite and comparisons mean something.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer::fuzz {

struct RandomGraphOptions {
  size_t max_ops = 20;     // operator recipes to apply (each may add helper nodes)
  size_t max_outputs = 3;  // graph outputs besides the last value made
  bool opaque = true;      // add opaque (Asinh/Atan) nodes
  bool int_input = true;   // sometimes add an int64 input (Equal/Where/Gather paths)
  std::vector<std::string> avoid_ops;  // operators not to make (e.g. ones a consumer lacks)
};

// Deterministic for a given seed and options.
Graph random_graph(uint64_t seed, const RandomGraphOptions& opts = {});

// Like isomer::evaluate, but also evaluates the opaque Asinh/Atan nodes random_graph makes.
std::vector<Tensor> evaluate_with_opaque(const Graph& g, const std::vector<Tensor>& inputs);

// Outcome of running one graph through a transformation and comparing outputs.
struct Mismatch {
  bool judged = false;  // false: the original could not be evaluated or gave Inf/NaN
  bool found = false;
  std::string what;  // "output 2 ('y'): max error 0.5 (tolerance 1e-3)" or the Error text
};

using Transform = std::function<Graph(const Graph&)>;

// Runs `transform` on `g` and compares both graphs' outputs on random inputs from
// `seed` (all outputs, by position). An Error thrown by the transform, or by evaluating
// the transformed graph when the original evaluates, is a mismatch too.
Mismatch differential_check(const Graph& g, const Transform& transform, uint64_t seed, double tolerance = 1e-3);

// Shrinks a graph while `still_fails` holds: keeps one output, then repeatedly removes
// an operator node, either cutting it off (its outputs become fresh graph inputs) or
// bypassing it (an input of the same type takes its place), and drops inputs nobody
// reads. Returns the smallest graph found (at least `g` itself).
Graph minimize(const Graph& g, const std::function<bool(const Graph&)>& still_fails);

// Names of the native operators random_graph can make (for coverage tests).
std::vector<std::string> generated_op_types();

}  // namespace isomer::fuzz
