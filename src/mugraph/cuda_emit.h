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
  std::vector<CudaRegionInput> inputs;
  std::vector<std::vector<int64_t>> output_dims;
  std::string output_name;
  std::string field_check;     // the verifier's summary at the GPU tiling
  bool skips = false;          // a skip table is baked in
  CudaKernel kernel;
};

struct CudaEmitOptions {
  double search_seconds = 10;
  CudaTilingOptions tiling;
  std::function<void(const std::string&)> progress;
};

// Throws Error if a region's GPU tiling fails verification (never expected: a
// structure is valid at every grid) or its tiles do not fit a block.
std::vector<CudaRegion> cuda_regions(const Graph& g, const CudaEmitOptions& opts);

}  // namespace isomer::mugraph
