#pragma once
// Quantization arithmetic, stated once: the operator table's reference semantics
// (ops/quant.cpp) and the runtime's steps (runtime/lower_quant.cpp) both call these,
// so the two cannot round differently. Everything is float32, as ONNX's reference
// and ONNX Runtime compute it: x / scale, rounded half to even, plus the zero
// point, saturated to the type's range (NaN saturates to the low end, as ONNX
// Runtime's vector max does).
#include <cmath>
#include <cstdint>

namespace isomer::kernels {

// The integer types quantized tensors use.
enum class QType : uint8_t { U8, S8, U16, S16, S32 };

inline int32_t qmin(QType t) {
  return t == QType::U8 || t == QType::U16 ? 0 : t == QType::S8 ? -128 : t == QType::S16 ? -32768 : INT32_MIN;
}
inline int32_t qmax(QType t) {
  return t == QType::U8 ? 255 : t == QType::S8 ? 127 : t == QType::U16 ? 65535 : t == QType::S16 ? 32767 : INT32_MAX;
}

// One element: saturate(round(v) + zp) for an already scaled value v.
inline int32_t saturate_round(float v, int32_t zp, int32_t lo, int32_t hi) {
  const float r = std::nearbyint(v) + static_cast<float>(zp);
  if (!(r >= static_cast<float>(lo))) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(r);
}

// A tensor seen as [outer, channels, inner] around the quantization axis; scale and
// zero point have `channels` entries (1 for per-tensor quantization).
struct QShape {
  int64_t outer = 1, channels = 1, inner = 1;
};

// y = saturate(round(x / scale[c]) + zp[c]); zp may be nullptr (0). `team` threads.
void quantize(const float* x, void* y, QType t, const QShape& s, const float* scale, const int32_t* zp, int team = 1);
// quantize per tensor of x [outer, channels, inner] (row-major) into y [outer, inner,
// channels] (channels-last): the same values, transposed as they are written. t U8 or
// S8, channels and inner multiples of 16; false (nothing written) otherwise.
bool quantize_to_channels_last(const float* x, void* y, QType t, int64_t outer, int64_t channels, int64_t inner,
                               float scale, int32_t zp, int team = 1);
// y = (x - zp[c]) * scale[c], x of type t (S32 included).
void dequantize(const void* x, QType t, float* y, const QShape& s, const float* scale, const int32_t* zp, int team = 1);

// DynamicQuantizeLinear's parameters for n floats: the range [min(x, 0), max(x, 0)]
// mapped onto uint8 (scale 1 for an all-zero range, as ONNX Runtime does).
struct DynamicParams {
  float scale = 1;
  uint8_t zero_point = 0;
};
DynamicParams dynamic_params(const float* x, int64_t n, int team = 1);

// Requantizes int32 accumulators [rows, cols] (plus bias[col] when given):
// y = saturate(round(float(acc + bias) * mult) + zp), mult per column (per_col) or one.
void requantize(const int32_t* acc, void* y, QType t, int64_t rows, int64_t cols, const int32_t* bias,
                const float* mult, bool per_col, int32_t zp, int team = 1);

// Products of weights moved by zero points z[col], corrected (oneDNN's integer
// convolutions and matmuls take no weight zero point): row r's int32 products at
// acc + r * acc_stride, its window sums of the input at sums + r * sum_stride (one
// per row, or with sum_per_col one per column). y = acc - z * sum + bias, wrapping
// as the accumulation does; for t other than S32 then requantized as requantize()
// does (mult per column with per_col). bias has `cols` entries.
struct ZeroPointRows {
  const int32_t* acc = nullptr;
  const int32_t* sums = nullptr;
  int64_t acc_stride = 0, sum_stride = 0;
  bool sum_per_col = false;
};
void correct_zero_points(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, const int32_t* bias,
                         void* y, QType t, const float* mult, bool per_col, int32_t y_zp, int team = 1);
// The float32 form (dynamically quantized convolutions: ONNX Runtime's Cast, Mul,
// Add and Relu after ConvInteger, each rounded as there): y = float(acc - z * sum)
// * scale (scale[j] with per_col) + add[j], then + residual[r * cols + j] where
// given (a residual block's sum), then max(y, 0) with relu.
void correct_zero_points_scaled(const ZeroPointRows& in, int64_t rows, int64_t cols, const int32_t* zp, float* y,
                                const float* scale, bool per_col, const float* add, const float* residual, bool relu,
                                int team = 1);

// y[i] = table[byte of x[i]] over n bytes (u8 or s8 data; the table indexed by the
// byte, so s8's -1 at 255): ONNX Runtime's lookup-table operators (QLinearSigmoid,
// QLinearLeakyRelu, the requantized inputs of QLinearConcat).
void lookup(const uint8_t* table, const void* x, void* y, int64_t n, int team = 1);

// A concatenation row by row: output row r (of the parts' widths together, in
// bytes) is each part's row r in turn, mapped through its table where it has one.
struct ConcatPart {
  const void* data = nullptr;
  int64_t width = 0;
  const uint8_t* table = nullptr;
};
void concat_rows(const ConcatPart* parts, size_t count, int64_t rows, void* y, int team = 1);

// ONNX Runtime's QLinearAveragePool over u8 or s8 x [batch, channels, in...] (or
// channels-last [batch, in..., channels]): the average of x's dequantized values in
// each window, quantized: saturate(round(sum(x - zx) * sx / count / sy) + zy), count
// the window's positions inside x, or with include_pad the whole kernel (as ONNX
// Runtime counts it, also past the end padding in ceil mode).
// Up to three spatial axes; unused ones have extent 1.
struct PoolAxis {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, pad_begin = 0;
};
struct QLinearPool {
  int64_t batch = 1, channels = 1;
  PoolAxis axes[3];
  bool channels_last = false, include_pad = false;
  float sx = 1, sy = 1;
  int32_t zx = 0, zy = 0;
};
void qlinear_average_pool(const void* x, void* y, QType t, const QLinearPool& p, int team = 1);

// ONNX Runtime's QLinearAdd (mul false) and QLinearMul over n output elements of
// u8 or s8, output element i reading operand element (i / run) % period (run 1 and
// period n: elementwise; run n: a scalar; run the spatial size and period the
// channels: a per-channel gate, repeated over the batch):
//   Add: c = (a - za) * ra + (b - zb) * rb,  ra = sa / sc, rb = sb / sc
//   Mul: c = (a - za) * (b - zb) * ra,       ra = sa * sb / sc
// rounded half to even, plus zc, saturated.
struct QLinearBinary {
  bool mul = false;
  float ra = 1, rb = 1;
  int32_t za = 0, zb = 0, zc = 0;
};
struct Broadcast {
  int64_t run = 1, period = 1;
};
void qlinear_binary(const void* a, const void* b, void* c, QType t, int64_t n, Broadcast ab, Broadcast bb,
                    const QLinearBinary& p, int team = 1);

// ONNX Runtime's QLinearGlobalAveragePool: each of `rows` rows of `size` u8 or s8
// values (an image's channel), read `stride` apart (1 for NCHW; the channel count
// for NHWC, rows then consecutive per image), becomes
// round((sum - zx * size) * scale) + zy, saturated, scale = sx / (sy * size).
void qlinear_mean(const void* x, void* y, QType t, int64_t images, int64_t channels, int64_t size,
                  bool channels_last, float scale, int32_t zx, int32_t zy, int team = 1);

}  // namespace isomer::kernels
