#pragma once
// Dense runs of float16 / bfloat16 converted to and from float32, vectorized where
// the CPU has conversions (F16C, AVX-512) with a scalar tail. Bit for bit the
// scalar conversions of ir/tensor.h (half_to_float, float_to_half, ...): round to
// nearest even, infinities and subnormals kept, every NaN the same quiet NaN of
// its sign. The runtime casts whole activations this way (a half model's inputs
// and outputs, every Cast to a half type inside it), so a per-element loop showed
// up as tens of times ONNX Runtime's time for the same Cast.
#include <cstdint>

#include "kernels/vector_isa.h"

namespace isomer::kernels {

// On the widest instruction set the CPU has.
void float16_to_float32(const uint16_t* src, float* dst, int64_t n);
void float32_to_float16(const float* src, uint16_t* dst, int64_t n);
void bfloat16_to_float32(const uint16_t* src, float* dst, int64_t n);
void float32_to_bfloat16(const float* src, uint16_t* dst, int64_t n);

// The same four on one instruction set the CPU has (vector_isa_available), for
// tests: Baseline is the scalar loops (bfloat16's as the compiler vectorizes them).
struct HalfConversions {
  void (*to_f16)(const float*, uint16_t*, int64_t);
  void (*from_f16)(const uint16_t*, float*, int64_t);
  void (*to_bf16)(const float*, uint16_t*, int64_t);
  void (*from_bf16)(const uint16_t*, float*, int64_t);
};
HalfConversions half_conversions(VectorIsa isa);

}  // namespace isomer::kernels
