#pragma once
// isomer's own recurrence for LSTM, linear-before-reset GRU and RNN nodes with the
// default activations, and RNN nodes on Relu (runtime/native_recurrence.cpp); lower_rnn.cpp decides
// between it and oneDNN's recurrent primitives.
#include <cstdint>

#include "ops/rnn.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

// Whether the native recurrence can run node `n` at all: an LSTM (no peepholes, no
// input_forget), a linear-before-reset GRU or an RNN, default activations (or an
// RNN on Relu), clip
// or not, sequence_lens constant or not.
bool native_recurrence_supports(const Node& n, const RnnConfig& cfg);

// Whether it should, measured against oneDNN's primitives on this machine class
// (the rule and its numbers are in the .cpp); $ISOMER_RNN=native|onednn forces either.
bool native_recurrence_preferred(const RnnConfig& cfg, int64_t batch, int64_t hidden, int threads);

// How the recurrence spends `threads` (measured: the numbers are in the .cpp).
// Bidirectional: each direction whole on a thread of its own (they share nothing).
// Otherwise each step's product and gates are shared by a team meeting at a spin
// barrier twice a step, only while the process has its cores to itself
// (`cores_free`: its OpenMP threads spin, see runtime.h) and a step's
// multiply-adds (batch * gates * hidden^2) reach kTeamMacs.
struct RecurrenceTeams {
  int steps = 1;
  bool directions_apart = false;
};
constexpr int64_t kTeamMacs = int64_t{1} << 16;
RecurrenceTeams recurrence_teams(int threads, int64_t directions, int64_t batch, int64_t gates, int64_t hidden,
                                 bool cores_free);

// Lowers `n` (weights constant, float32) as one native step that reads and writes
// ONNX's layouts directly.
void lower_native_recurrence(Compiler& c, const Node& n, const RnnConfig& cfg, int64_t seq, int64_t batch,
                             int64_t input, int64_t hidden);

}  // namespace isomer::runtime
