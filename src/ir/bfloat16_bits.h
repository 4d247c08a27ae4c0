#pragma once
// float32 <-> bfloat16 on bits, inline: ir/tensor.cpp's scalar conversions and
// kernels/half.cpp's loops (which the compiler vectorizes) share them.
#include <bit>
#include <cstdint>

namespace isomer {

inline float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Round to nearest even; a NaN stays a NaN of its sign (made quiet).
inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace isomer
