#include "mugraph/weight_bound.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>
#include <unordered_map>

#include "check/inputs.h"
#include "mugraph/cost.h"
#include "mugraph/fuse.h"
#include "runtime/clock.h"
#include "runtime/compiler.h"

namespace isomer::mugraph {

std::optional<Bench> weight_products(const Region& r) {
  GraphBuilder b;
  std::vector<Value> outs;
  std::vector<std::string> names;
  size_t inputs = 0;
  auto is_weight = [](const Value& v) {
    return v.present() && v.node->kind() == NodeKind::Constant && v.type().shape.size() >= 2;
  };
  std::unordered_map<const Node*, Value> constants;  // the body's inputs that are constants
  for (size_t i = 0; i < r.body.inputs().size() && i < r.inputs.size(); ++i)
    if (r.inputs[i].constant()) constants[r.body.inputs()[i].get()] = b.constant(*r.inputs[i].constant());
  for (const NodePtr& n : r.body.topo_order()) {
    if (n->kind() != NodeKind::Op || (n->op_type() != "MatMul" && n->op_type() != "Gemm")) continue;
    std::vector<Value> a;
    bool weight = false;
    for (const Value& v : n->inputs()) {
      if (!v.present()) {
        a.push_back(v);
      } else if (auto it = constants.find(v.node.get()); it != constants.end()) {
        weight = weight || v.type().shape.size() >= 2;
        a.push_back(it->second);
      } else if (is_weight(v)) {
        weight = true;
        a.push_back(b.constant(*v.node->value()));
      } else {
        a.push_back(b.input("in" + std::to_string(inputs++), v.type()));
      }
    }
    if (!weight) continue;
    outs.push_back(b.op(n->op_type(), a, n->attrs(), 1, "p" + std::to_string(outs.size()))[0]);
    names.push_back("p" + std::to_string(names.size()));
  }
  if (outs.empty()) return std::nullopt;
  Bench bench;
  bench.unfused = b.finish(outs, names);
  ModelInputs mi = valid_random_inputs(bench.unfused, 7);
  if (!mi.ok()) return std::nullopt;
  bench.inputs = mi.tensors;
  return bench;
}

namespace {

// Arithmetic per element of an operator fused after a contraction, in the units of
// mugraph/cost.cpp's op_flops (Machine::vec_gflops): none for a view (a Reshape the
// step absorbs), sixteen for a transcendental function, four for a division or a
// root, one for the rest (an add, a compare).
double pointwise_flops(const std::string& op) {
  static const std::set<std::string, std::less<>> views = {"Reshape", "Transpose", "Squeeze", "Unsqueeze",
                                                           "Flatten", "Identity",  "Cast",    "Expand"};
  static const std::set<std::string, std::less<>> transcendental = {"Exp",  "Log",  "Tanh",     "Erf",
                                                                    "Sigmoid", "Gelu", "Softplus", "Mish"};
  // Pow: the exponent is a constant (a square, a cube, a root) in the regions priced.
  static const std::set<std::string, std::less<>> divide = {"Div", "Sqrt", "Reciprocal", "Pow"};
  return views.count(op) ? 0 : transcendental.count(op) ? 16 : divide.count(op) ? 4 : 1;
}

// The most arithmetic per output element, in pointwise_flops's units, of the
// epilogue a contraction step runs as its signature tells it: oneDNN post-ops
// (runtime/fusion.cpp's fusion_attr: " +eltN(..)" an activation, " +binN[..]" a
// broadcast operand, " +sum" a residual add) or the native GEMMs' pointwise program
// (" epi f32 in2: r2=Add(r0,r1) ..."); each activation or instruction at most a
// transcendental, each operand an add. The runtime runs a chain of nodes it
// recognises as one activation as one of them (GPT-2's tanh GELU, eight nodes priced
// 26 per element, is one gelu_tanh post-op). Null when the signature names none.
std::optional<double> epilogue_bound(const std::string& signature) {
  auto count = [&](std::string_view what, size_t from = 0) {
    double n = 0;
    for (size_t at = signature.find(what, from); at != std::string::npos; at = signature.find(what, at + 1)) ++n;
    return n;
  };
  double flops = 16 * count(" +elt") + count(" +bin") + count(" +sum");
  if (const size_t epi = signature.find(" epi "); epi != std::string::npos) flops += 16 * count("=", epi);
  if (flops == 0) return std::nullopt;
  return flops;
}

}  // namespace

double priced_ms(const Graph& g, const runtime::Executable& exe, int threads) {
  const Machine& m = machine();
  const double team = std::max(1, threads);
  const double gemm = m.gflops_core * 1e9 * team;  // flop/s
  const double vec = m.vec_gflops * 1e9 * team;
  const double bw = m.dram_gbps * 1e9 * std::min(team, 2.0);  // byte/s
  const double cached_bw = m.cache_gbps * 1e9 * team;           // a step's bytes within L2
  const double step_s = 1e-6;
  // Elements of each node's output and bytes of its constant operands of rank 2 or
  // more (weights), by the output's name (StepInfo::nodes).
  auto numel = [](const TensorType& t) {
    double e = 1;
    for (int64_t d : static_dims(t.shape)) e *= static_cast<double>(d);
    return e;
  };
  std::unordered_map<std::string, std::pair<double, double>> elements;
  std::set<std::string> ambiguous;  // unnamed, or named twice: priced by the step's own counts
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op || n->num_outputs() == 0 || !is_static(n->output_types()[0].shape)) continue;
    double weights = 0;
    for (const Value& v : n->inputs())
      if (v.present() && v.node->kind() == NodeKind::Constant && v.type().shape.size() >= 2 && is_static(v.type().shape))
        weights += numel(v.type()) * static_cast<double>(dtype_size(v.type().dtype));
    const std::string key = runtime::node_key(*n);
    if (key.empty() || elements.count(key)) {
      ambiguous.insert(key);
      continue;
    }
    elements[key] = {numel(n->output_types()[0]), weights};
  }
  for (const std::string& key : ambiguous) elements.erase(key);
  double s = 0;
  for (const runtime::StepInfo& st : exe.steps()) {
    if (st.boundary) continue;
    const bool contraction = st.kind == "matmul" || st.kind == "conv" || st.kind == "deconv" || st.kind == "attention";
    double epilogue = 0, weights = 0, outputs = 0;
    for (size_t i = 0; i < st.ops.size() && i < st.nodes.size(); ++i) {
      auto it = elements.find(st.nodes[i]);
      if (it == elements.end()) continue;
      weights += it->second.second;
      if (contraction && st.ops[i] != "MatMul" && st.ops[i] != "Gemm" && st.ops[i] != "Conv") {
        epilogue += it->second.first * pointwise_flops(st.ops[i]);
        outputs = std::max(outputs, it->second.first);
      }
    }
    // Per node, or per post-op where the step runs fewer (a chain as one activation).
    if (const std::optional<double> bound = epilogue_bound(st.signature); bound && epilogue > 0)
      epilogue = std::min(epilogue, *bound * outputs);
    // A step reads its weights whole, also where its bytes leave them out (the
    // runtime's one-row products count their activations only).
    const double bytes = std::max(st.bytes, weights);
    const double rate = bytes <= static_cast<double>(m.l2) * team ? cached_bw : bw;
    s += std::max(st.flops / (contraction ? gemm : vec), bytes / rate) + epilogue / vec + step_s;
  }
  return s * 1e3;
}

std::string clock_name(runtime::StepClock c) {
  return c == runtime::StepClock::thread    ? "thread processor time"
         : c == runtime::StepClock::process ? "process processor time"
                                            : "wall clock";
}

double median_run_ms(runtime::Executable& exe, const std::vector<Tensor>& inputs, int repeats) {
  return runtime::benchmark(exe, inputs, 1, repeats, run_clock(exe.threads())).median;
}

std::optional<WeightBound> weight_bound(const Region& r, const Graph& unfused_graph, runtime::Executable& unfused,
                                        const std::vector<Tensor>& inputs, const runtime::RuntimeOptions& ro,
                                        bool timed) {
  std::optional<Bench> products = weight_products(r);
  if (!products) return std::nullopt;
  auto alone = runtime::compile(products->unfused, ro);
  WeightBound w;
  w.products_ms = priced_ms(products->unfused, *alone, unfused.threads());
  w.unfused_ms = priced_ms(unfused_graph, unfused, unfused.threads());
  w.priced_share = w.products_ms / w.unfused_ms;
  w.bound = w.priced_share >= kWeightBoundShare;
  if (timed) {
    // The least of 5 interleaved medians: a preempted round reads slow on one side only.
    double unfused_ms = 1e300, products_ms = 1e300;
    for (int k = 0; k < 5; ++k) {
      unfused_ms = std::min(unfused_ms, median_run_ms(unfused, inputs, 3));
      products_ms = std::min(products_ms, median_run_ms(*alone, products->inputs, 3));
    }
    w.measured_share = products_ms / unfused_ms;
  }
  if (w.bound) {
    char b[256];
    std::snprintf(b, sizeof b,
                  "not searched: its weight products alone are priced at %.3f ms, %.0f%% of the unfused region's "
                  "%.3f ms: no kernel can gain enough",
                  w.products_ms, 100 * w.priced_share, w.unfused_ms);
    w.reason = b;
  }
  return w;
}

}  // namespace isomer::mugraph
