#pragma once
// Shared by the quantization lowerings: lower_quant.cpp (quantize, dequantize,
// dynamic quantization), lower_quant_contract.cpp (the integer contractions on
// oneDNN) and lower_qdq.cpp (QDQ groups run as one integer primitive).
#include <optional>
#include <vector>

#include "kernels/quant.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

std::optional<kernels::QType> quant_type(DType t);
// The thread team a kernel step uses (the runtime's thread count).
int quant_team(Compiler& c);

// A compile-time scale and zero point (inputs `scale` and `zp` of `n`, the zero
// point optional: 0), as float32 and int32; nullopt if either is a run-time value.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zp;
};
std::optional<QuantParams> constant_quant_params(Compiler& c, const Node& n, size_t scale, size_t zp);
// One scalar scale and zero point (inputs 1 and 2 of a QuantizeLinear or
// DequantizeLinear), both constant; nullopt otherwise.
std::optional<std::pair<float, int32_t>> scalar_quant_params(Compiler& c, const Node& n);

// True if x's elements fill its memory with no gaps, so that a step mapping element
// to element may run over them in memory order and write its result in x's layout
// (`strides`: x's, from Compiler::strides_of).
bool fills_its_memory(const RtValue& x, const std::optional<std::vector<int64_t>>& strides);

// A new row-major value (with a oneDNN layout only for float32).
int plain_output(Compiler& c, DType t, const std::vector<int64_t>& dims, const std::string& name);

bool lower_matmul_integer(Compiler& c, const Node& n);
bool lower_qlinear_matmul(Compiler& c, const Node& n);
bool lower_integer_conv(Compiler& c, const Node& n);  // ConvInteger, QLinearConv
// com.microsoft DynamicQuantizeLSTM on the native recurrence, in ONNX Runtime's
// quantization steps (lower_quant_lstm.cpp); false, having changed nothing, for
// forms it does not take (peepholes, input_forget, other activations, weights or
// quantization parameters computed at run time).
bool lower_dynamic_quantize_lstm(Compiler& c, const Node& n);

// A float Conv, Gemm or MatMul in a QDQ group: DequantizeLinear of a quantized
// activation and of constant int8 weights (and an int32 bias) in, a
// QuantizeLinear (perhaps after a Relu) out. Runs it as one oneDNN integer
// primitive that requantizes as ONNX Runtime's QLinearConv does; false, having
// changed nothing, where `n` is no such group (lower_qdq.cpp).
bool lower_qdq_group(Compiler& c, const Node& n);
// A zero Pad between a DequantizeLinear and a QuantizeLinear of one scalar scale
// and zero point, read (through a DequantizeLinear of the same) only by QDQ
// convolutions: in integers it pads with the zero point, which each convolution
// takes as its own padding. True if every convolution took it (nothing of the
// chain is computed then); false if some did not (the Pad must run for them).
bool lower_qdq_pad_into_convs(Compiler& c, const Node& pad);
// A DequantizeLinear (one scalar scale and zero point) read by chains of views
// (Reshape, Transpose, ...), Slices, Gathers or Expands that end in a
// QuantizeLinear of the same parameters and type: each such result is that chain
// run on the integers (lower_qdq_moves.cpp).
// True if nothing else reads the DequantizeLinear (it is done); false if something
// does, the DequantizeLinear then to be lowered for it as usual.
bool lower_qdq_views(Compiler& c, const Node& dq);

// A DequantizeLinear (one scalar scale and zero point) read only by an Add or Mul
// of a float32 constant (one value, or one per last-axis column) read only by a
// QuantizeLinear of one scalar scale and zero point: the three as one step, in
// their roundings (lower_qdq_affine.cpp). False, having changed nothing, otherwise.
bool lower_qdq_affine(Compiler& c, const Node& dq);

// An integer convolution on oneDNN: x (u8/s8, run time) with a constant zero
// point, weights s8 constant with zero point 0, an optional int32 bias, and either
// int32 output (no scales), requantized output y = sat(round(acc * scale[m]) + y_zp)
// with an optional Relu first, or float32 output scaled at run time (out_scale_value).
// Returns the output value (channels-last) or -1.
struct IntConv {
  int x = -1;
  int32_t x_zp = 0;
  int x_zp_value = -1;  // or a run-time u8/s8 scalar value
  Tensor w;  // s8, [M, C/group, k...]
  std::vector<int32_t> bias;
  std::vector<float> scales;  // empty: int32 output
  DType y_type = DType::Int32;
  int32_t y_zp = 0;
  bool relu = false;
  std::vector<int64_t> extra_pads;  // padding by the zero point before the node's own (begins, then ends)
  // Or float32 output: acc times a run-time float32 scale (one, or one per output
  // channel), then a constant float32 per channel added, then an activation.
  int out_scale_value = -1;
  std::optional<Tensor> add_after;  // [M]
  // Then a run-time float32 value of the output's dims added (a residual block's
  // sum), before the activation.
  int residual = -1;
  std::optional<EltwiseSpec> act_after;
};
int add_integer_conv(Compiler& c, const Node& n, const IntConv& spec);

// An integer matmul on oneDNN: a [rows, K] (u8/s8, run time) with zero point a_zp
// (a constant, or the run-time scalar value a_zp_value if >= 0), b [K, N] constant
// (s8 or u8) with a constant zero point, output int32, float32 scaled by
// out_scale_value (a run-time float32 scalar, or one per column) or requantized as
// IntConv's.
struct IntMatMul {
  int a = -1;
  int32_t a_zp = 0;
  int a_zp_value = -1;
  Tensor b;
  int32_t b_zp = 0;
  std::vector<int32_t> bias;
  std::vector<float> scales;  // constant output scales (1 or N); empty: none
  int out_scale_value = -1;   // run-time float32 output scale: 1 or N values
  std::optional<Tensor> add_after;  // float32 [N] added to the scaled float32 result
  std::optional<EltwiseSpec> act_after;  // applied to the float32 result last
  DType y_type = DType::Int32;
  int32_t y_zp = 0;
  bool relu = false;
};
// Returns the [rows, N] output value (row-major), or -1.
int add_integer_matmul(Compiler& c, const Node& n, const IntMatMul& spec);
// A 2-D tensor of one-byte elements, transposed ([N, K] weights read as [K, N]).
Tensor transposed_bytes(const Tensor& w);
// u8 weights as s8: w - zp == (w - 128) - (zp - 128), exactly (zp per tensor or per
// output channel, moved with them); s8 weights as they are.
Tensor as_s8(const Tensor& w, std::vector<int32_t>& zp);

// Products whose weights had zero points z[m] (oneDNN takes none for weights):
// sum (x - xz)(w - z) = sum (x - xz) w - z[m] sum (x - xz). Row r's products are at
// acc + r * stride; column m's sum of x - xz at (sums, or acc itself where sums < 0)
// + sum_offset + r * stride + m * sum_step.
struct ZeroPointSums {
  int acc = -1, sums = -1;
  int64_t stride = 0, sum_offset = 0, sum_step = 0;
};
// A native step writing y (dims `od`, [.., columns at od[1], ..] in `y_md`): the
// corrected int32 products, or with `scales` the bias added and requantized to
// y_type as oneDNN does (round half to even, y_zp, saturated). Returns y.
int add_zero_point_correction(Compiler& c, const Node& n, const ZeroPointSums& z, const std::vector<int64_t>& od,
                              const md_t& y_md, const std::vector<int32_t>& w_zp, const std::vector<int32_t>& bias,
                              const std::vector<float>& scales, DType y_type, int32_t y_zp);

}  // namespace isomer::runtime
