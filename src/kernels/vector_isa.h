#pragma once
// Explicit dispatch between vector widths. GCC's target_clones compile one body
// for several instruction sets but keep its types, so code on 8-lane vectors stays
// 8 lanes wide in the AVX-512 clone. Kernels that want 16 lanes are templates over
// the vector type, inlined into one entry point per instruction set (a
// [[gnu::target]] function) and chosen once from what the CPU reports.
#include <cstdint>

namespace isomer::kernels {

enum class VectorIsa { Baseline, Avx2, Avx512 };

// Whether this CPU (and this build) runs `isa`'s entry points.
bool vector_isa_available(VectorIsa isa);
// The widest available one, decided once.
VectorIsa best_vector_isa();
const char* vector_isa_name(VectorIsa isa);

}  // namespace isomer::kernels

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ISOMER_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define ISOMER_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define ISOMER_HAVE_ISA_TARGETS 1
#else
#define ISOMER_TARGET_AVX512
#define ISOMER_TARGET_AVX2
#endif
// Inlines every call in the function, where the targets allow it.
#define ISOMER_FLATTEN __attribute__((flatten))
