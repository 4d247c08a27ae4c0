#pragma once
// The machine a μGraph is tiled for and the cost model that ranks tiled block
// graphs: bytes moved and FLOPs against rates measured on this machine.
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

struct Machine {
  int64_t l1 = 32 << 10, l2 = 512 << 10, l3 = 8 << 20;  // data cache bytes (per core for L1/L2)
  bool avx2 = false, avx512 = false, fma = false;
  int vector_floats = 4;        // floats per vector register the kernels use
  double gflops_core = 0;       // measured: the runtime's matmul (brgemm) on one core
  double vec_gflops = 0;        // measured: the runtime's pointwise step, in op_flops units
  double dram_gbps = 0;         // measured: streaming read bandwidth, one core
  double cache_gbps = 0;        // measured: the same from L2
  double exp_gps = 0;           // measured: the generated kernels' exp, G elements/s (0: no compiler)
  std::string isa() const { return avx512 ? "avx512" : avx2 ? "avx2" : "sse"; }
  std::string describe() const;
};

// Caches from /sys/devices/system/cpu/cpu0/cache, the instruction set from CPUID,
// rates measured once (in the thread's processor time) and kept in $XDG_CACHE_HOME/isomer/mugraph-machine.txt
// (~/.cache when unset); ISOMER_MUGRAPH_NO_MEASURE=1 uses fixed nominal rates
// (tests).
const Machine& machine();

// Fraction of the FMA peak the generated code's register-block product C[M x N]
// (+)= A[M x K] B[K x N] reaches on `m` (mg_gemm's blocks: the estimate prices a
// contraction by the call its kernel plan makes).
double gemm_efficiency(const Machine& m, double M, double N, double K);

struct CostEstimate {
  double ms = 0;
  double flops = 0, dram_bytes = 0;
  int64_t tiles = 0, working_set = 0;
};
// `skipped`: fraction of loop iterations a skip table removes.
CostEstimate estimate(const Program& p, const BlockGraph& g, int threads, double skipped = 0);

// estimate() with the fraction of loop iterations that constants (a causal mask)
// let the kernel skip, from skip_table(); `g` stabilized (as tilings() returns it).
double estimate_ms(const Program& p, const BlockGraph& g, int threads,
                   const std::vector<std::vector<float>>& constants);

// Tilings of a structure (grid atoms and tile sizes, loop chunk), best first by
// the estimate, at most `limit`.
std::vector<BlockGraph> tilings(const Program& p, const BlockGraph& structure, int threads, size_t limit,
                                const std::vector<std::vector<float>>& constants = {});

}  // namespace isomer::mugraph
