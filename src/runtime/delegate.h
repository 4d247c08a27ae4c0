#pragma once
// Operators isomer does not understand (opaque nodes) run on ONNX Runtime while
// everything around them runs on isomer's runtime. Each opaque node, with the
// delegated nodes adjacent to it in the plan (each reading a value of the ones
// before, directly or through a reshape; see delegate.cpp), becomes an ONNX model
// (the NodeProtos verbatim, constant inputs as initializers, the other inputs at
// their concrete shapes) loaded once into a session of the ONNX Runtime bridge
// (bridge/bridge.h) with --threads' intra-op threads, which do not spin. A run
// sends the step's inputs and receives its outputs in place: one round trip to the
// helper process, however many nodes.
//
// The runtime plans buffers at compile time, so a delegated node's output types
// must follow from its input types (and constant inputs). ONNX Runtime tells
// them, by running the node on all-zero, all-one and distinct-valued inputs of
// the planned shapes (Debian's ONNX shape inference knows only the rank for some
// operators, Einsum among them); a node whose answers differ (NonZero, Unique,
// NonMaxSuppression) is not delegated, and every run checks the planned types
// again (DelegatedShapeError), so a shape that depends on data in a way the
// probes missed is an error, never a wrong result.
// Whatever cannot be delegated leaves the model to run on ONNX Runtime whole
// (`isomer run`) or unpriced (`isomer optimize`).
#include "ir/error.h"
#include "ir/graph.h"

namespace isomer::runtime {

class Compiler;

// A delegated node's outputs came back in other shapes than planned (they depend
// on the data in a way the probes did not show): the graph cannot run here.
struct DelegatedShapeError : Error {
  using Error::Error;
};

// Lowers opaque node `n`, and the delegated nodes adjacent to it, to a step that
// runs them on ONNX Runtime; throws Error naming the node when it cannot be (see
// above). Nodes ONNX Runtime will not take together run on their own.
void lower_delegated(Compiler& c, const Node& n);

}  // namespace isomer::runtime
