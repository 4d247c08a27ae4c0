// The integer step product of a dynamically quantized recurrence: uint8 h times
// int8 R, summed in int32 by AVX-512 VNNI's vpdpbusd (4 products per 32-bit lane),
// as ONNX Runtime's DynamicQuantizeLSTM sums it. R is a quarter of float32 R's
// bytes, and a vpdpbusd does 64 multiply-adds where an FMA does 16.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/recurrent.h"
#include "kernels/vector_isa.h"

#ifdef ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#define ISOMER_TARGET_VNNI __attribute__((target("arch=x86-64-v4,avx512vnni")))
#endif

namespace isomer::kernels {

std::vector<int8_t> pack_rows16_s8(const int8_t* a, int64_t rows, int64_t K) {
  const int64_t groups = (K + 3) / 4, panels = (rows + 15) / 16;
  std::vector<int8_t> out(static_cast<size_t>(panels * groups * 64), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k)
      out[static_cast<size_t>((((r / 16) * groups + k / 4) * 16 + r % 16) * 4 + k % 4)] = a[r * K + k];
  return out;
}

#ifdef ISOMER_HAVE_ISA_TARGETS

bool integer_panels_available() {
  // $ISOMER_NO_VNNI takes the float products a CPU without VNNI runs (for tests).
  static const bool ok = vector_isa_available(VectorIsa::Avx512) && __builtin_cpu_supports("avx512vnni") &&
                         std::getenv("ISOMER_NO_VNNI") == nullptr;
  return ok;
}

namespace {

// PP panels times NB batch rows: per group of 4 k, PP panel loads and NB
// broadcasts of 4 h bytes feed PP * NB dot products.
template <int PP, int NB>
ISOMER_TARGET_VNNI [[gnu::always_inline]] inline void int_panels_times_rows(const int8_t* a, const uint8_t* const* h,
                                                                           int32_t* y, int64_t ldy, int64_t groups,
                                                                           int64_t n_out) {
  __m512i s[PP][NB];
  for (int q = 0; q < PP; ++q)
    for (int i = 0; i < NB; ++i) s[q][i] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i w[PP];
    for (int q = 0; q < PP; ++q) w[q] = _mm512_loadu_si512(a + (q * groups + g) * 64);
    for (int i = 0; i < NB; ++i) {
      int32_t four;
      std::memcpy(&four, h[i] + g * 4, sizeof four);
      const __m512i x = _mm512_set1_epi32(four);
      for (int q = 0; q < PP; ++q) s[q][i] = _mm512_dpbusd_epi32(s[q][i], x, w[q]);
    }
  }
  for (int q = 0; q < PP; ++q)
    for (int i = 0; i < NB; ++i) {
      const int64_t n = std::min<int64_t>(n_out - q * 16, 16);
      if (n <= 0) continue;
      const __mmask16 m = n == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
      _mm512_mask_storeu_epi32(y + i * ldy + q * 16, m, s[q][i]);
    }
}

template <int NB>
ISOMER_TARGET_VNNI [[gnu::always_inline]] inline void int_rows_over_panels(const int8_t* a, const uint8_t* const* h,
                                                                          int32_t* y, int64_t ldy, int64_t groups,
                                                                          int64_t panels, int64_t n_out) {
  constexpr int PP = NB == 1 ? 4 : 2;
  int64_t q = 0;
  for (; q + PP <= panels; q += PP)
    int_panels_times_rows<PP, NB>(a + q * groups * 64, h, y + q * 16, ldy, groups, n_out - q * 16);
  for (; q < panels; ++q) int_panels_times_rows<1, NB>(a + q * groups * 64, h, y + q * 16, ldy, groups, n_out - q * 16);
}

}  // namespace

ISOMER_TARGET_VNNI void gemm_panels_u8s8(const int8_t* packed, const uint8_t* const* h, int64_t N, int32_t* y,
                                         int64_t ldy, int64_t rows, int64_t K) {
  const int64_t groups = (K + 3) / 4, panels = (rows + 15) / 16;
  int64_t i = 0;
  for (; i + 4 <= N; i += 4) int_rows_over_panels<4>(packed, h + i, y + i * ldy, ldy, groups, panels, rows);
  for (; i + 2 <= N; i += 2) int_rows_over_panels<2>(packed, h + i, y + i * ldy, ldy, groups, panels, rows);
  for (; i < N; ++i) int_rows_over_panels<1>(packed, h + i, y + i * ldy, ldy, groups, panels, rows);
}

#else

bool integer_panels_available() { return false; }

// The same sums, one at a time: correct on any CPU, but slower than the float product.
void gemm_panels_u8s8(const int8_t* packed, const uint8_t* const* h, int64_t N, int32_t* y, int64_t ldy, int64_t rows,
                      int64_t K) {
  const int64_t groups = (K + 3) / 4;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      int32_t sum = 0;
      for (int64_t k = 0; k < groups * 4; ++k)
        sum += static_cast<int32_t>(h[i][k]) * packed[(((r / 16) * groups + k / 4) * 16 + r % 16) * 4 + k % 4];
      y[i * ldy + r] = sum;
    }
}

#endif

}  // namespace isomer::kernels
