#pragma once
// ONNX control flow (If, Loop, Scan) run natively. The node stays opaque in the IR (the
// optimizer never looks inside a body, and export writes it back verbatim); here each
// body is imported as a graph of its own at the concrete types it will see
// (onnx/body_model.h) and compiled once into an Executable of this runtime, with the
// values it reads from enclosing graphs as extra inputs (or, where they are known when
// compiling, as constants of the body: weights are packed once, as in the main graph).
//
// If runs the branch its condition picks (only that one, when the condition is known
// when compiling). Loop runs its body until the trip count or the condition ends it,
// carrying values from one iteration to the next and writing each iteration's scan
// outputs into their slice of the stacked output. Scan (opset 9 on) feeds its body one
// slice of each scan input per iteration, along its axis and in its direction, and
// writes each scan output's slice likewise (a slice along axis 0 is read and written
// in place).
//
// The runtime plans every buffer when compiling, so the node's output types must not
// depend on the data. Native when:
//  - If: both branches give the same output types, or the condition is known;
//  - Loop: the loop-carried values keep their shapes, or the trip count is known when
//    compiling (a constant M, and a condition that never ends the loop early: absent or
//    true, and passed through or constant true by the body), in which case the body is
//    compiled once per distinct set of carried shapes; scan outputs need that known
//    trip count too (their length is it);
//  - Scan: its states keep their shapes (its trip count is the scan inputs' length).
// Otherwise (and for sequence or optional values, or half-precision ones) the node runs
// on ONNX Runtime as before (runtime/delegate.h), and its step says why (StepInfo::note).
#include <string>

#include "ir/graph.h"

namespace isomer::runtime {

class Compiler;

// If, Loop or Scan of the default domain, kept opaque by the importer.
bool is_control_flow(const Node& n);

// Lowers control-flow node `n` to a native step; returns "" when it did, else why not
// (and nothing that reads the node's outputs has been bound).
std::string lower_control_flow(Compiler& c, const Node& n);

}  // namespace isomer::runtime
