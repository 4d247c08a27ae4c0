#pragma once
// The gates of one time step of ONNX's recurrent cells with their default
// activations, for one batch row: `a` holds X W^T + biases, `b` h R^T, each G*H
// values in ONNX's gate order. The runtime's native recurrence
// (runtime/lower_rnn.cpp) calls them between the packed GEMM's products.
#include <cstdint>
#include <vector>

namespace isomer::kernels {

// A recurrent weight R [rows, K] (row-major, as ONNX stores it) in panels of 16 rows,
// k-major: element (r, k) at ((r / 16) K + k) 16 + r % 16, zero-padded to whole
// panels. gemv_panels streams it as one sequence, which the prefetcher follows.
std::vector<float> pack_rows16(const float* A, int64_t rows, int64_t K);
// y[r] = R[r, :] . x for r < rows, R packed by pack_rows16: h R^T at batch 1.
void gemv_panels(const float* packed, const float* x, float* y, int64_t rows, int64_t K);
// Each gate function computes `count` hidden units; gate g of unit j is at
// a[g H + j] and b[g H + j] (H: the hidden size), so a range of units [j0, j0 +
// count) is the call with every pointer advanced by j0.
// LSTM, gates i o f c: c = f c + i g; h = o tanh(c). `c` is updated in place.
void lstm_gates(const float* a, const float* b, float* c, float* h, int64_t count, int64_t H);
// GRU with linear_before_reset, gates z r h: h = (1 - z) tanh(a_h + r (b_h + rb)) + z h_prev.
void gru_lbr_gates(const float* a, const float* b, const float* rb, const float* h_prev, float* h, int64_t count,
                   int64_t H);
// RNN: h = tanh(a + b).
void rnn_gates(const float* a, const float* b, float* h, int64_t count);

}  // namespace isomer::kernels
