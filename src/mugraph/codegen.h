#pragma once
// C++ for a tiled block graph: one function that runs the grid's tiles as OpenMP
// tasks over the cores, with the thread level built by rule:
//  - elementwise chains fused into one loop nest per materialized tile, inner loops
//    `omp simd` with branch-free vector math (kernels/vmath.h, embedded);
//  - contractions as register-blocked micro-kernels (GCC vector extensions at the
//    width the compiling machine has: AVX-512 or AVX2), operands read in place
//    where their strides allow and packed into tiles where not;
//  - an accumulator fed by a contraction or a reduction is accumulated into
//    directly; the online-softmax rule as running maxima and rescales;
//  - a skip table from constant inputs (causal masks) baked in.
// Planning (codegen_plan.h: storage, loop orders, micro-kernel and vector choices)
// is apart from writing the text (codegen_emitter.h: codegen.cpp and
// codegen_reductions.cpp, values through codegen_expr.h); the text is the kernel
// cache's key, so a refactor must leave it byte-identical.
// Exported symbols: isomer_mugraph_run(const void* const* in, void* const* out,
// int threads) and isomer_mugraph_key() (the cache key, checked after loading).
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

std::string generate_source(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip);

}  // namespace isomer::mugraph
