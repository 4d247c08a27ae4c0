#include "mugraph/cuda_emit.h"

#include <algorithm>

#include "ir/error.h"
#include "mugraph/fuse.h"
#include "mugraph/interpreter.h"
#include "mugraph/region.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"

namespace isomer::mugraph {

std::vector<CudaRegion> cuda_regions(const Graph& g, const CudaEmitOptions& opts) {
  FuseOptions fo;
  fo.measure = false;
  fo.search_seconds = opts.search_seconds;
  fo.progress = opts.progress;
  FuseReport report;
  Graph fused = fuse_regions(g, fo, &report);
  std::vector<CudaRegion> out;
  for (const NodePtr& n : fused.topo_order()) {
    if (n->kind() != NodeKind::Op || n->op_type() != "MuGraph") continue;
    auto fr = fused_region(n->attrs());
    if (!fr->program || !fr->kernel) continue;
    const Program& p = *fr->program;
    CudaRegion r;
    std::vector<std::vector<float>> constants(p.inputs.size());
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value& v = n->inputs()[i];
      CudaRegionInput in;
      in.name = v.node->name();
      in.dims = p.inputs[i].dims;
      in.dtype = p.inputs[i].dtype;
      if (const Tensor* t = v.constant(); t && t->dtype() == DType::Float32) {
        const float* f = reinterpret_cast<const float*>(t->bytes().data());
        in.constant.assign(f, f + t->numel());
        constants[i] = in.constant;
      }
      r.inputs.push_back(std::move(in));
    }
    for (const IoTensor& o : p.outputs) r.output_dims.push_back(o.dims);
    r.output_name = n->name();
    for (const NodePtr& b : fr->body.topo_order())
      if (b->kind() == NodeKind::Op) r.ops += (r.ops.empty() ? "" : " ") + b->op_type();
    r.cpu_summary = fr->kernel->summary(p);
    // The CPU's choice, unless its tiles take more shared memory than a GPU block
    // should (a whole K and V a block, or every score of a row when the loop runs
    // over the head dimension): then the search's structure that fits and loops
    // over the longest atom (the key positions: flash attention).
    BlockGraph gg = cuda_tiling(p, *fr->kernel, opts.tiling);
    if (cuda_smem_bytes(p, gg) > kCudaSmemBudget) {
      SearchOptions so;
      so.max_seconds = opts.search_seconds;
      std::vector<BlockGraph> found = search_structures(p, so, nullptr);
      auto loop_extent = [&](const BlockGraph& s) { return s.loop_atom < 0 ? 0 : p.extent(s.loop_atom); };
      std::stable_sort(found.begin(), found.end(),
                       [&](const BlockGraph& a, const BlockGraph& b) { return loop_extent(a) > loop_extent(b); });
      for (const BlockGraph& s : found) {
        BlockGraph t = cuda_tiling(p, s, opts.tiling);
        if (cuda_smem_bytes(p, t) <= kCudaSmemBudget) {
          gg = t;
          break;
        }
      }
    }
    FieldVerdict fv = verify_field(p, gg, constants, 11);
    if (!fv.ok) throw Error("μGraph CUDA: the GPU tiling of region " + r.ops + " fails the field check: " + fv.reason);
    r.field_check = fv.reason;
    std::vector<uint8_t> skip = skip_table(p, gg, constants);
    r.skips = !skip.empty();
    r.kernel_summary = gg.summary(p);
    if (opts.progress) opts.progress("cuda mg_region" + std::to_string(out.size()) + ": " + r.kernel_summary);
    r.kernel = generate_cuda(p, gg, skip, "mg_region" + std::to_string(out.size()));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace isomer::mugraph
