#include "mugraph/cuda_emit.h"

#include <algorithm>

#include "ir/error.h"
#include "mugraph/fuse.h"
#include "mugraph/interpreter.h"
#include "mugraph/region.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"

namespace isomer::mugraph {

// Without a loop every block stages the whole K and V for the few rows that leave
// two blocks a multiprocessor; with one, a block stages each chunk once for all
// its rows, and the tiling gives it more (a tile for every two multiprocessors).
BlockGraph cuda_structure(const Program& p, const BlockGraph& cpu, const CudaTilingOptions& tiling,
                          double search_seconds, std::string* why) {
  auto say = [&](const std::string& s) {
    if (why) *why = s;
  };
  BlockGraph own = cuda_tiling(p, cpu, tiling);
  const bool fits = cuda_smem_bytes(p, own) <= kCudaSmemBudget;
  auto loop_extent = [&](const BlockGraph& s) { return s.loop_atom < 0 ? 0 : p.extent(s.loop_atom); };
  int64_t longest = 0;
  for (const BOp& op : cpu.ops)
    for (int a : op.reduce) longest = std::max(longest, p.extent(a));
  say("the CPU's");
  if (fits && loop_extent(cpu) >= longest) return own;
  SearchOptions so;
  so.max_seconds = search_seconds;
  std::vector<BlockGraph> found = search_structures(p, so, nullptr);
  std::stable_sort(found.begin(), found.end(),
                   [&](const BlockGraph& a, const BlockGraph& b) { return loop_extent(a) > loop_extent(b); });
  for (const BlockGraph& s : found) {
    if (fits && s.loop_atom < 0) break;
    BlockGraph t = cuda_tiling(p, s, tiling);
    if (cuda_smem_bytes(p, t) > kCudaSmemBudget) continue;
    const int64_t own_reads = cuda_global_reads(p, own), reads = cuda_global_reads(p, t);
    if (fits && reads >= own_reads) break;
    say((s.loop_atom < 0 ? std::string("no loop") : "a loop over a" + std::to_string(s.loop_atom)) + ": the CPU's " +
        (fits ? "reads " + std::to_string(own_reads) + " input elements, this " + std::to_string(reads)
              : "takes " + std::to_string(cuda_smem_bytes(p, own) >> 10) + " KB of shared memory a block"));
    return t;
  }
  return own;
}

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
    std::string why;
    BlockGraph gg = cuda_structure(p, *fr->kernel, opts.tiling, opts.search_seconds, &why);
    r.structure = why;
    FieldVerdict fv = verify_field(p, gg, constants, 11);
    if (!fv.ok) throw Error("μGraph CUDA: the GPU tiling of region " + r.ops + " fails the field check: " + fv.reason);
    r.field_check = fv.reason;
    std::vector<uint8_t> skip = skip_table(p, gg, constants);
    r.skips = !skip.empty();
    r.kernel_summary = gg.summary(p);
    if (opts.progress)
      opts.progress("cuda mg_region" + std::to_string(out.size()) + ": " + r.kernel_summary + " (" + r.structure + ")");
    r.kernel = generate_cuda(p, gg, skip, "mg_region" + std::to_string(out.size()));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace isomer::mugraph
