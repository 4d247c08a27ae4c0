#include "kernels/half.h"

#include <cstring>

#include "ir/bfloat16_bits.h"
#include "ir/tensor.h"
#include "kernels/vector_isa.h"

#ifdef ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#endif

namespace isomer::kernels {

namespace {

// --- float16: the CPU's conversion instructions -----------------------------------
// VCVTPS2PH with an explicit round-to-nearest-even immediate (not MXCSR's mode),
// which also keeps subnormal results whatever MXCSR.FTZ says; VCVTPH2PS is exact.
// A tail shorter than a vector goes through a zero-padded vector on the stack, so
// every element of a run is converted by the same instruction.

#ifdef ISOMER_HAVE_ISA_TARGETS
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

ISOMER_TARGET_AVX512 void f32_to_f16_avx512(const float* s, uint16_t* d, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), _mm512_cvtps_ph(_mm512_loadu_ps(s + j), kRound));
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    _mm256_mask_storeu_epi16(d + j, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + j), kRound));
  }
}

ISOMER_TARGET_AVX512 void f16_to_f32_avx512(const uint16_t* s, float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + j))));
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(d + j, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + j)));
  }
}

ISOMER_TARGET_AVX2 void f32_to_f16_f16c(const float* s, uint16_t* d, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), _mm256_cvtps_ph(_mm256_loadu_ps(s + j), kRound));
  if (j < n) {
    float in[8] = {};
    uint16_t out[8];
    std::memcpy(in, s + j, static_cast<size_t>(n - j) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), kRound));
    std::memcpy(d + j, out, static_cast<size_t>(n - j) * sizeof(uint16_t));
  }
}

ISOMER_TARGET_AVX2 void f16_to_f32_f16c(const uint16_t* s, float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j))));
  if (j < n) {
    uint16_t in[8] = {};
    float out[8];
    std::memcpy(in, s + j, static_cast<size_t>(n - j) * sizeof(uint16_t));
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(d + j, out, static_cast<size_t>(n - j) * sizeof(float));
  }
}
#endif

void f32_to_f16_scalar(const float* s, uint16_t* d, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = float_to_half(s[j]);
}
void f16_to_f32_scalar(const uint16_t* s, float* d, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = half_to_float(s[j]);
}

// --- bfloat16: integer arithmetic on the bits, which the compiler vectorizes -------

[[gnu::always_inline]] inline void f32_to_bf16_loop(const float* __restrict s, uint16_t* __restrict d, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = float_to_bfloat16_bits(s[j]);
}
[[gnu::always_inline]] inline void bf16_to_f32_loop(const uint16_t* __restrict s, float* __restrict d, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = bfloat16_bits_to_float(s[j]);
}

ISOMER_TARGET_AVX512 void f32_to_bf16_avx512(const float* s, uint16_t* d, int64_t n) { f32_to_bf16_loop(s, d, n); }
ISOMER_TARGET_AVX512 void bf16_to_f32_avx512(const uint16_t* s, float* d, int64_t n) { bf16_to_f32_loop(s, d, n); }
ISOMER_TARGET_AVX2 void f32_to_bf16_avx2(const float* s, uint16_t* d, int64_t n) { f32_to_bf16_loop(s, d, n); }
ISOMER_TARGET_AVX2 void bf16_to_f32_avx2(const uint16_t* s, float* d, int64_t n) { bf16_to_f32_loop(s, d, n); }
void f32_to_bf16_baseline(const float* s, uint16_t* d, int64_t n) { f32_to_bf16_loop(s, d, n); }
void bf16_to_f32_baseline(const uint16_t* s, float* d, int64_t n) { bf16_to_f32_loop(s, d, n); }

}  // namespace

// F16C is part of x86-64-v3, but is checked on its own: a CPU could report AVX2
// and FMA without it.
HalfConversions half_conversions(VectorIsa isa) {
  HalfConversions r{f32_to_f16_scalar, f16_to_f32_scalar, f32_to_bf16_baseline, bf16_to_f32_baseline};
  switch (isa) {
#ifdef ISOMER_HAVE_ISA_TARGETS
    case VectorIsa::Avx512: return {f32_to_f16_avx512, f16_to_f32_avx512, f32_to_bf16_avx512, bf16_to_f32_avx512};
    case VectorIsa::Avx2:
      r.to_bf16 = f32_to_bf16_avx2;
      r.from_bf16 = bf16_to_f32_avx2;
      if (__builtin_cpu_supports("f16c")) {
        r.to_f16 = f32_to_f16_f16c;
        r.from_f16 = f16_to_f32_f16c;
      }
      return r;
#endif
    default: return r;
  }
}

namespace {
const HalfConversions& conversions() {
  static const HalfConversions c = half_conversions(best_vector_isa());
  return c;
}
}  // namespace

void float16_to_float32(const uint16_t* src, float* dst, int64_t n) { conversions().from_f16(src, dst, n); }
void float32_to_float16(const float* src, uint16_t* dst, int64_t n) { conversions().to_f16(src, dst, n); }
void bfloat16_to_float32(const uint16_t* src, float* dst, int64_t n) { conversions().from_bf16(src, dst, n); }
void float32_to_bfloat16(const float* src, uint16_t* dst, int64_t n) { conversions().to_bf16(src, dst, n); }

}  // namespace isomer::kernels
