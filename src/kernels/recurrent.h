#pragma once
// The recurrent step of ONNX's cells with their default activations: h R^T for a
// few batch rows over R packed once, and the gates of one batch row, where `a`
// holds X W^T + biases and `b` h R^T, each G*H values in ONNX's gate order. The
// runtime's native recurrence (runtime/native_recurrence.cpp) calls them per step.
#include <cstdint>
#include <vector>

namespace isomer::kernels {

// A recurrent weight R [rows, K] (row-major, as ONNX stores it) in panels of 16 rows,
// k-major: element (r, k) at ((r / 16) K + k) 16 + r % 16, zero-padded to whole
// panels. The products stream it as one sequence, which the prefetcher follows.
std::vector<float> pack_rows16(const float* A, int64_t rows, int64_t K);
// y[r] = R[r, :] . x for r < rows, R packed by pack_rows16: h R^T at batch 1.
void gemv_panels(const float* packed, const float* x, float* y, int64_t rows, int64_t K);
// y[i * ldy + r] = R[r, :] . h[i] for i < N and r < rows, R packed by pack_rows16:
// h R^T at a small batch, each row's h at its own address (rows of a ragged batch
// sit at different time steps).
void gemm_panels(const float* packed, const float* const* h, int64_t N, float* y, int64_t ldy, int64_t rows,
                 int64_t K);
// The step product on integers (DynamicQuantizeLSTM's, runtime/native_recurrence.cpp):
// R [rows, K] int8 in panels of 16 rows, 4 consecutive k per 32-bit lane (AVX-512
// VNNI's u8 x s8 dot product), element (r, k) at (((r / 16) Kg + k / 4) 16 + r % 16)
// 4 + k % 4 with Kg = ceil(K / 4), zero-padded.
std::vector<int8_t> pack_rows16_s8(const int8_t* A, int64_t rows, int64_t K);
// Whether gemm_panels_u8s8 runs fast on this CPU and build (AVX-512 with VNNI; not
// with $ISOMER_NO_VNNI set).
bool integer_panels_available();
// y[i * ldy + r] = sum over k of h[i][k] * R[r, k] in int32 (exact: no saturation)
// for i < N and r < rows, R packed by pack_rows16_s8; each h[i] readable to 4 Kg
// bytes (the padding multiplies zeros).
void gemm_panels_u8s8(const int8_t* packed, const uint8_t* const* h, int64_t N, int32_t* y, int64_t ldy, int64_t rows,
                      int64_t K);
// Each gate function computes `count` hidden units; gate g of unit j is at
// a[g H + j] and b[g H + j] (H: the hidden size), so a range of units [j0, j0 +
// count) is the call with every pointer advanced by j0. A positive `clip` bounds
// every gate's input to [-clip, clip] (not LSTM's cell state, as ONNX Runtime
// does); 0 leaves them unbounded.
// LSTM, gates i o f c: c = f c + i g; h = o tanh(c). `c` is updated in place.
void lstm_gates(const float* a, const float* b, float* c, float* h, int64_t count, int64_t H, float clip = 0);
// GRU with linear_before_reset, gates z r h: h = (1 - z) tanh(a_h + r (b_h + rb)) + z h_prev.
void gru_lbr_gates(const float* a, const float* b, const float* rb, const float* h_prev, float* h, int64_t count,
                   int64_t H, float clip = 0);
// RNN: h = tanh(a + b), or Relu(a + b) with `relu` (NaN -> 0, as the reference).
void rnn_gates(const float* a, const float* b, float* h, int64_t count, float clip = 0, bool relu = false);

}  // namespace isomer::kernels
