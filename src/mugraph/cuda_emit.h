#pragma once
// The CUDA kernels of a model's μGraph regions (`isomer mugraph emit-cuda`): the
// regions fuse_regions() finds and chooses a verified block graph for (untimed:
// the best the cost model ranks that passes the field and float checks), each
// re-tiled for the GPU (cuda_tiling), verified again over the field at that
// tiling, and spelled as CUDA (generate_cuda).
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "mugraph/codegen_cuda.h"

namespace isomer::mugraph {

struct CudaRegionInput {
  std::string name;  // the value's node name in the model (a graph input, an initializer)
  std::vector<int64_t> dims;
  DType dtype = DType::Float32;
  std::vector<float> constant;  // its data where the model fixes it (masks, weights)
};

struct CudaRegion {
  std::string ops;             // the body's operators, in order
  std::string kernel_summary;  // the GPU block graph, summarized
  std::string cpu_summary;     // the block graph the CPU path chose
  std::string structure;       // whose structure the GPU runs, and why (cuda_structure)
  std::vector<CudaRegionInput> inputs;
  std::vector<std::vector<int64_t>> output_dims;
  std::string output_name;
  std::string field_check;     // the verifier's summary at the GPU tiling
  bool skips = false;          // a skip table is baked in
  CudaKernel kernel;
};

struct CudaEmitOptions {
  double search_seconds = 30;
  CudaTilingOptions tiling;
  std::function<void(const std::string&)> progress;
};

// The structure a region runs on the GPU, at its GPU tiling (cuda_tiling): the
// CPU's (`cpu`), unless it takes more shared memory than a block should (a whole K
// and V, or every score of a row when its loop runs over the head dimension) or,
// not looping over the longest atom it sums over, its grid reads more input from
// global memory (cuda_global_reads) than the search's structure that loops over
// that atom (flash attention's loop over the key positions): then that one, the
// first of the search's structures that fits, longest loop first. H200, BERT's 12
// heads of 128: the CPU's, no loop, 384 blocks of 4 rows each staging the whole K
// and V, 0.0169 ms; the loop's, 96 blocks of 16 rows, 0.0110. `why` says which and why.
BlockGraph cuda_structure(const Program& p, const BlockGraph& cpu, const CudaTilingOptions& tiling,
                          double search_seconds, std::string* why = nullptr);

// Throws Error if a region's GPU tiling fails verification (never expected: a
// structure is valid at every grid) or its tiles do not fit a block.
std::vector<CudaRegion> cuda_regions(const Graph& g, const CudaEmitOptions& opts);

}  // namespace isomer::mugraph
