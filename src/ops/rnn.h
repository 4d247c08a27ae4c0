#pragma once
// The recurrent operators LSTM, GRU and RNN (ops/rnn.cpp): their attributes read
// and checked once, for the shape rule, the reference evaluator and the runtime's
// lowering (runtime/lower_rnn.cpp), which must agree on what a node means.
#include <string>
#include <string_view>
#include <vector>

#include "ir/attributes.h"

namespace isomer {

enum class RnnCell { Lstm, Gru, Rnn };

// One of ONNX's activation functions for recurrent operators, with its alpha and
// beta resolved (given or the function's default).
struct RnnActivation {
  std::string name;  // as ONNX spells it: "Sigmoid", "Tanh", "Relu", ...
  double alpha = 0, beta = 0;
  double operator()(double x) const;
};

struct RnnConfig {
  RnnCell cell = RnnCell::Lstm;
  int64_t gates = 4;        // blocks of hidden_size rows in W and R: LSTM iofc, GRU zrh, RNN i
  int64_t hidden = -1;      // hidden_size; -1 when the attribute is absent (R's dims decide)
  int64_t directions = 1;   // 2 for bidirectional
  bool reverse = false;     // direction "reverse" (a bidirectional node's second direction always is)
  int64_t layout = 0;       // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  bool has_clip = false;
  double clip = 0;
  bool input_forget = false;        // LSTM: the forget gate is 1 - the input gate
  bool linear_before_reset = false; // GRU
  // Per direction, the cell's functions in ONNX's order (LSTM f, g, h; GRU f, g; RNN f):
  // activations[d * per_direction + k].
  std::vector<RnnActivation> activations;
  int64_t per_direction = 3;

  // True when every direction uses the cell's default functions (Sigmoid/Tanh/Tanh,
  // Sigmoid/Tanh, Tanh): what fused kernels implement.
  bool default_activations() const;
  // True for an RNN whose every direction uses Relu (PyTorch's nn.RNN with
  // nonlinearity='relu'), which the runtime's native recurrence also implements.
  bool relu_rnn() const;
  int64_t max_inputs() const { return cell == RnnCell::Lstm ? 8 : 6; }
  int64_t max_outputs() const { return cell == RnnCell::Lstm ? 3 : 2; }
};

// Reads and checks the attributes of a node of operator `op` ("LSTM", "GRU" or
// "RNN"); throws Error naming the attribute and the reason for a value the
// operator does not define or isomer does not support.
RnnConfig rnn_config(std::string_view op, const Attributes& attrs);

}  // namespace isomer
