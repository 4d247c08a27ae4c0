// MuGraph nodes (src/mugraph): the fused region's generated kernel as one step.
// The kernel is checked against the node's body over the verification field before
// it is used (a saved kernel is never trusted as written), compiled or loaded from
// the kernel cache, and interpreted when no compiler is available.
#include <cstdlib>
#include <map>
#include <mutex>

#include "ir/error.h"
#include "mugraph/codegen.h"
#include "mugraph/cost.h"
#include "mugraph/interpreter.h"
#include "mugraph/kernel_cache.h"
#include "mugraph/region.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Verdicts of the field check, once per (body, kernel, constants) in a process.
bool kernel_verified(const mugraph::Program& p, const mugraph::BlockGraph& g,
                     const std::vector<std::vector<float>>& constants, std::string* why) {
  static std::mutex m;
  static std::map<std::string, std::pair<bool, std::string>> done;
  std::string key = p.to_string() + g.to_text(p);
  for (const auto& c : constants) key += std::to_string(c.size()) + ":" + std::string(reinterpret_cast<const char*>(c.data()), c.size() * 4);
  {
    std::lock_guard<std::mutex> lock(m);
    if (auto it = done.find(key); it != done.end()) {
      *why = it->second.second;
      return it->second.first;
    }
  }
  mugraph::FieldVerdict v = mugraph::verify_field(p, g, constants, 7);
  std::lock_guard<std::mutex> lock(m);
  done[key] = {v.ok, v.reason};
  *why = v.reason;
  return v.ok;
}

}  // namespace

bool lower_mugraph(Compiler& c, const Node& n) {
  auto region = mugraph::fused_region(n.attrs());
  // No kernel (or a body that is no region program): the body's reference semantics run.
  if (!region->program || region->kernel_text.empty()) return false;
  const mugraph::Program& p = *region->program;
  // The node must see the shapes the kernel was made for.
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (c.dims(n.inputs()[i]) != p.inputs[i].dims) return false;
  std::vector<std::vector<float>> constants(p.inputs.size());
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (const Tensor* t = c.known(n.inputs()[i])) constants[i] = mugraph::constant_values(*t);
  mugraph::BlockGraph g;
  std::string note, why;
  if (region->kernel && kernel_verified(p, *region->kernel, constants, &why)) {
    g = *region->kernel;
  } else {
    // No kernel, or one that does not compute the body: the body's direct translation.
    note = region->kernel ? " (saved kernel rejected: " + why + ")" : " (" + region->error + ")";
    mugraph::BlockGraph s = mugraph::direct_translation(p);
    std::vector<mugraph::BlockGraph> t = mugraph::tilings(p, s, c.opts().threads, 1, constants);
    if (t.empty()) return false;
    g = t[0];
    if (!kernel_verified(p, g, constants, &why)) return false;
  }
  std::vector<uint8_t> skip = mugraph::skip_table(p, g, constants);
  std::string source = mugraph::generate_source(p, g, skip);
  std::string load_error = "ISOMER_MUGRAPH_NO_COMPILE is set";
  const char* no_compile = std::getenv("ISOMER_MUGRAPH_NO_COMPILE");
  std::shared_ptr<const mugraph::CompiledKernel> kernel;
  if (!no_compile || std::string(no_compile) != "1") kernel = mugraph::load_kernel(source, &load_error);

  std::vector<int> reads;
  for (const Value& v : n.inputs()) reads.push_back(c.as_plain(c.id(v)));
  std::vector<int> writes;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    int o = c.new_value(DType::Float32, p.outputs[k].dims, plain_md(p.outputs[k].dims, dt::f32), n.name());
    c.bind(n.output(static_cast<uint32_t>(k)), o);
    writes.push_back(o);
  }
  mugraph::CostEstimate est = mugraph::estimate(p, g, c.opts().threads);
  StepInfo info = step_info(n, kernel ? "mugraph" : "mugraph-interpreted",
                            "mugraph " + std::to_string(std::hash<std::string>{}(source)) + (kernel ? "" : " interp"),
                            est.flops);
  info.ops.clear();
  for (const NodePtr& b : region->body.topo_order())
    if (b->kind() == NodeKind::Op) info.ops.push_back(b->op_type());
  info.label = n.name() + " [" + g.summary(p) + "]" + note + (kernel ? "" : " (interpreted: " + load_error + ")");
  const int threads = c.opts().threads;
  if (kernel) {
    const size_t ni = reads.size();
    add_native_step(c, info, reads, writes, [kernel, ni, threads](const std::vector<char*>& ptrs) {
      std::vector<const void*> in(ptrs.begin(), ptrs.begin() + static_cast<std::ptrdiff_t>(ni));
      std::vector<void*> out(ptrs.begin() + static_cast<std::ptrdiff_t>(ni), ptrs.end());
      kernel->run(in.data(), out.data(), threads);
    });
    return true;
  }
  // The interpreter, in double, when no kernel can be compiled.
  auto prog = std::make_shared<const mugraph::Program>(p);
  auto graph = std::make_shared<const mugraph::BlockGraph>(g);
  const size_t ni = reads.size();
  add_native_step(c, info, reads, writes, [prog, graph, skip, ni](const std::vector<char*>& ptrs) {
    mugraph::Buffers<double> in, out;
    for (size_t k = 0; k < ni; ++k) {
      const mugraph::IoTensor& t = prog->inputs[k];
      int64_t count = 1;
      for (int64_t d : t.dims) count *= d;
      std::vector<double> v(static_cast<size_t>(count));
      if (t.dtype == DType::Bool)
        for (int64_t e = 0; e < count; ++e) v[static_cast<size_t>(e)] = reinterpret_cast<const uint8_t*>(ptrs[k])[e] != 0;
      else
        for (int64_t e = 0; e < count; ++e) v[static_cast<size_t>(e)] = reinterpret_cast<const float*>(ptrs[k])[e];
      in.push_back(std::move(v));
    }
    for (const mugraph::IoTensor& t : prog->outputs) {
      int64_t count = 1;
      for (int64_t d : t.dims) count *= d;
      out.emplace_back(static_cast<size_t>(count), 0.0);
    }
    mugraph::interpret(*prog, *graph, in, out, {}, skip);
    for (size_t k = 0; k < out.size(); ++k)
      for (size_t e = 0; e < out[k].size(); ++e)
        reinterpret_cast<float*>(ptrs[ni + k])[e] = static_cast<float>(out[k][e]);
  });
  return true;
}

}  // namespace isomer::runtime
