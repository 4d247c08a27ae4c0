#include "kernels/vector_isa.h"

namespace isomer::kernels {

bool vector_isa_available(VectorIsa isa) {
#ifdef ISOMER_HAVE_ISA_TARGETS
  switch (isa) {
    case VectorIsa::Avx512:
      // x86-64-v4's set: the entry points are compiled for all of it.
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512cd");
    case VectorIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::Baseline: return true;
  }
  return false;
#else
  return isa == VectorIsa::Baseline;
#endif
}

VectorIsa best_vector_isa() {
  static const VectorIsa best = vector_isa_available(VectorIsa::Avx512) ? VectorIsa::Avx512
                                : vector_isa_available(VectorIsa::Avx2) ? VectorIsa::Avx2
                                                                        : VectorIsa::Baseline;
  return best;
}

const char* vector_isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return "avx512";
    case VectorIsa::Avx2: return "avx2";
    case VectorIsa::Baseline: return "baseline";
  }
  return "?";
}

}  // namespace isomer::kernels
