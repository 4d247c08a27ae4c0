#pragma once
// isomer's own recurrence for LSTM, linear-before-reset GRU and RNN nodes with the
// default activations, and RNN nodes on Relu (runtime/native_recurrence.cpp); lower_rnn.cpp decides
// between it and oneDNN's recurrent primitives.
#include <atomic>
#include <cstdint>
#include <vector>

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

// Whether the node's threads still pay on the machine as it is now: the cores may have
// filled up since the graph was compiled, and a team whose second thread waits for a
// core stalls every step at its barrier (LSTM batch 1 H 512 at load 12 on 2 cores:
// 3.3-4.0 ms on a team of two against ONNX Runtime's 1.7, which runs it on one
// thread). So every kPeriod runs start with kProbe runs each of the planned threads
// (a team, directions apart, the input product shared) and of one thread for all,
// alternating, and the rest take the kind whose probes took less time in all (the
// fastest probe alone picked the team after one lucky run). Runs of one executable
// are sequential; the counters are atomic only so that concurrent runs stay well
// defined.
class ParallelProbe {
 public:
  static constexpr int64_t kProbe = 3, kPeriod = 50;
  // Whether the next run takes the planned threads (else one thread).
  bool next_runs_parallel();
  // Records how long a run took (seconds), on the planned threads or not.
  void record(bool parallel, double seconds);

 private:
  std::atomic<int64_t> runs_{0};
  std::atomic<bool> parallel_wins_{true};
  double total_[2] = {0, 0};  // one thread, planned threads: this period's probes, summed
};

// What a caller gives in place of the node's own X, W, R and B (inputs 0-3):
// DynamicQuantizeLSTM's integer weights dequantized and its input quantized and
// dequantized again (runtime/lower_quant_lstm.cpp).
struct RecurrenceGiven {
  std::vector<float> w, r;   // [D, G*H, I] and [D, G*H, H], ONNX's gate order
  std::vector<double> bias;  // [D, 2*G*H]: Wb then Rb
  int x = -1;                // the layer input's value
  int product = -1;          // or X W^T + Wb + Rb of every direction already, [T N, D G H] (then w and x unused)
  // Before each step's h R^T, h of every batch row still running (or whose
  // sequence ended at the step before) goes to uint8 on one scale and zero point
  // as DynamicQuantizeLinear finds them, and back: the rounding of ONNX Runtime's
  // DynamicQuantizeLSTM, whose step product takes h quantized so.
  bool quantize_h = false;
  int64_t h_chunk = 0;  // batch rows per range of h (ONNX Runtime on several threads); 0: the whole batch
  // With quantize_h, R's integers for the step product on integers where the CPU
  // has it (kernels::gemm_panels_u8s8), as ONNX Runtime sums it: [D, G*H, H] int8
  // (uint8 weights moved by -128, their zero points alike), per direction its zero
  // point and per row of R its scale. Empty: the product is float32's.
  std::vector<int8_t> r_int;
  std::vector<int32_t> r_zp;
  std::vector<float> r_scale;
};

// Lowers `n` (weights constant, float32) as one native step that reads and writes
// ONNX's layouts directly; X, W, R and B from `given` where it is not null.
void lower_native_recurrence(Compiler& c, const Node& n, const RnnConfig& cfg, int64_t seq, int64_t batch,
                             int64_t input, int64_t hidden, const RecurrenceGiven* given = nullptr);

}  // namespace isomer::runtime
