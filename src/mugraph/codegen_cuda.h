#pragma once
// CUDA C++ for a verified block graph (`isomer mugraph emit-cuda`): the same
// μGraph the CPU generator takes, spelled for a GPU.
//  - the grid: one CUDA block per grid tile (tiles chosen for the GPU by
//    cuda_tiling(): a structure is valid for every grid over output atoms it never
//    reduces, so only the tile sizes change, and the result is verified again);
//  - the reduction loop: a loop over chunks inside the block, accumulators in
//    shared memory, the online-softmax rule as the interpreter runs it (running
//    maxima, rescale factors, outputs unscaled), skipped chunks from a skip table
//    baked into the text (causal masks); a split loop (BlockGraph::splits) is two
//    kernels: the runs (a block per tile and split, accumulators and maxima to
//    global scratch) and the combine (rescaled sum, then the ops after the loop);
//  - a chunk's input tiles are staged behind one barrier; a contraction or sum
//    whose only user is an accumulator adds into it in its store;
//  - tiles that a contraction, a reduction or several users read live in shared
//    memory (input tiles a contraction reads are staged there with coalesced
//    loads); elementwise chains are inlined into their users, one element a thread;
//  - the stabilized exp: a warp per row (its maximum by shuffles, the rescale
//    factor, the exps and, in the loop, the row sum into its accumulator);
//  - contractions of two shared tiles: 2-D register tiles (a thread sums up to 4
//    inner x 4 outer output elements), operands read 4 reduction indices at a time
//    as float4 loads (tile rows padded to an odd multiple of 4 floats); input
//    tiles keep their tensor's axis order and are staged with float4 loads (input
//    pointers 16-byte aligned);
//  - other contractions and row reductions: register
//    tiles (a thread sums up to 4 inner x 4 outer output elements, so that each
//    operand element read serves several) or a thread per output element where
//    there are enough of them, else a warp per output (shuffle reduction), else
//    the whole block per output; constant factors of operands move to the store.
// fp32 throughout. Exported: extern "C" int <name>_launch(const void* const* in,
// void* const* out, void* stream), inputs and outputs in the program's order,
// returning the cudaError_t of the launch.
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

inline constexpr int kCudaThreads = 256;
// Shared memory a block's tiles aim for (two or more blocks a multiprocessor).
inline constexpr size_t kCudaSmemBudget = 96 << 10;
// The most a Hopper block may take.
inline constexpr size_t kCudaSmemLimit = 227 << 10;

struct CudaKernel {
  std::string name;    // C identifier prefix of the kernel and launcher
  std::string source;  // the .cu text
  BlockGraph graph;    // the block graph the text runs (its GPU tiling)
  int64_t blocks = 0;  // of the (first) kernel: tiles x splits
  int threads = kCudaThreads;
  size_t smem_bytes = 0;  // dynamic shared memory per block
};

// Shared memory (bytes) a block of `g` needs, as generate_cuda() lays it out.
size_t cuda_smem_bytes(const Program& p, const BlockGraph& g);

// Input elements the grid of `g` reads from global memory: every tile its slice
// of each input tile (a loop's input its whole extent, chunk by chunk; an input
// before a split loop once a run), again in every tile along a grid atom the
// input lacks (K and V once a block of query rows). Skipped chunks count.
int64_t cuda_global_reads(const Program& p, const BlockGraph& g);

// A GPU tiling of `g`'s structure (its ops and loop atom; stabilized): row atoms
// one index a block, other output atoms no op reduces (but the tensors'
// unit-stride ones, whole in a block) in tiles of up to 32 rows (an atom the
// loop's staged chunks lack first: GQA's query heads of a KV head), the most that
// leave, with a loop, a tile for every two multiprocessors before a split or two
// blocks a multiprocessor with it, without one, two blocks a multiprocessor (row
// atoms too, up to 4096 output elements a block). The loop in chunks of 64 (256
// where a block has fewer than 4 rows); chunks shrunk until shared memory fits 96
// KB (200 KB where there are too few blocks for two a multiprocessor anyway),
// tiles until it fits a block. A grid of fewer tiles than multiprocessors whose
// loop has more than two chunks splits it (flash-decoding, see
// BlockGraph::splits) into runs enough for about four blocks a multiprocessor,
// and keeps the 64-wide chunks.
// (cuda_tiling.cpp)
struct CudaTilingOptions {
  int64_t max_rows = 32;  // product of the non-row grid tiles (H200, causal GQA attention 32x8 heads, 1024, 2-D register tiles: 16 rows 0.442 ms, 32 rows 0.349, 64 rows 0.409)
  int64_t chunk = 64;     // the loop's chunk (before shrinking)
  int64_t sms = 132;      // multiprocessors of the target (H100 SXM, H200)
  int64_t splits = 0;     // the loop's splits: 0 from `sms`, 1 never split
  int64_t min_tiles = 0;   // with a loop, tiles (before a split) larger row tiles may leave: 0, half of `sms`
  int64_t min_blocks = 0;  // blocks (tiles x splits) larger row tiles may leave otherwise: 0, two a multiprocessor; fewer may take 200 KB of shared memory
};
BlockGraph cuda_tiling(const Program& p, const BlockGraph& g, const CudaTilingOptions& o = {});

// The .cu text for `g` (any tiling; codegen_cuda.cpp). `skip`: skip_table(p, g, constants) or empty.
// Throws Error if the block's tiles do not fit in shared memory.
CudaKernel generate_cuda(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip,
                         const std::string& name);

}  // namespace isomer::mugraph
