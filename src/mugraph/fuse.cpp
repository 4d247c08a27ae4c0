#include "mugraph/fuse.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "check/inputs.h"
#include "ir/error.h"
#include "ir/text.h"
#include "mugraph/cost.h"
#include "mugraph/interpreter.h"
#include "mugraph/region.h"
#include "mugraph/search.h"
#include "mugraph/verify.h"
#include "mugraph/weight_bound.h"
#include "runtime/runtime.h"

namespace isomer::mugraph {

namespace {

// What region programs express (program.cpp's converter).
const std::set<std::string, std::less<>>& fusable_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "Add",     "Sub",        "Mul",     "Div",       "Max",       "Min",     "Where",     "Neg",
      "Exp",     "Sqrt",       "Erf",     "Tanh",      "Sigmoid",   "Relu",    "Log",       "Identity",
      "Dropout", "Cast",       "Reciprocal", "Pow",    "Gelu",      "Softmax", "LayerNormalization",
      "ReduceMean", "ReduceSum", "MatMul", "Gemm",     "Transpose", "Reshape", "Flatten",   "Squeeze",
      "Unsqueeze", "Expand"};
  return ops;
}

bool is_view(const Node& n) {
  static const std::set<std::string, std::less<>> v = {"Transpose", "Reshape", "Flatten", "Squeeze",
                                                       "Unsqueeze", "Expand",  "Identity", "Dropout", "Cast"};
  return v.count(n.op_type()) > 0;
}
bool is_contraction(const Node& n) { return n.op_type() == "MatMul" || n.op_type() == "Gemm"; }
bool is_reduction(const Node& n) {
  return n.op_type() == "Softmax" || n.op_type() == "LayerNormalization" || n.op_type() == "ReduceMean" ||
         n.op_type() == "ReduceSum";
}
bool weight_contraction(const Node& n) {
  return n.op_type() == "Gemm" || (n.op_type() == "MatMul" && n.inputs()[1].constant() != nullptr);
}

bool static_f32(const TensorType& t) { return t.dtype == DType::Float32 && is_static(t.shape); }

bool fusable(const Node& n) {
  if (n.kind() != NodeKind::Op || n.num_outputs() != 1 || !fusable_ops().count(n.op_type())) return false;
  if (!static_f32(n.output_types()[0])) return false;
  for (const Value& v : n.inputs())
    if (v.present() && !is_static(v.type().shape)) return false;
  return true;
}

// A constant that stays inside a body: a scalar, or an integer one (shapes, axes).
// Masks (bool or float tensors) are region inputs, as region programs need.
bool inner_constant(const Value& v) {
  const Tensor* t = v.constant();
  return t && (t->numel() == 1 || t->dtype() == DType::Int64 || t->dtype() == DType::Int32);
}

Graph body_of(const std::vector<NodePtr>& nodes, std::vector<Value>* inputs) {
  std::unordered_set<const Node*> in(nodes.size());
  for (const NodePtr& n : nodes) in.insert(n.get());
  inputs->clear();
  for (const NodePtr& n : nodes)
    for (const Value& v : n->inputs())
      if (v.present() && !in.count(v.node.get()) && !inner_constant(v) &&
          std::find(inputs->begin(), inputs->end(), v) == inputs->end())
        inputs->push_back(v);
  GraphBuilder b;
  std::unordered_map<Value, Value, ValueHash> map;
  for (size_t i = 0; i < inputs->size(); ++i)
    map[(*inputs)[i]] = b.input("in" + std::to_string(i), (*inputs)[i].type());
  for (const NodePtr& n : nodes) {
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) {
      if (!v.present()) ins.push_back(v);
      else if (auto it = map.find(v); it != map.end()) ins.push_back(it->second);
      else ins.push_back(map[v] = b.constant(*v.constant()));
    }
    map[n->output(0)] = b.op(n->op_type(), ins, n->attrs(), 1, n->name())[0];
  }
  return b.finish({map.at(nodes.back()->output(0))}, {"out"});
}

// An elementwise operator whose other operands are scalar constants (x * c, x / c).
bool is_scaling(const Node& n) {
  static const std::set<std::string, std::less<>> ops = {"Mul", "Div", "Add", "Sub"};
  if (!ops.count(n.op_type())) return false;
  int activations = 0;
  for (const Value& v : n.inputs()) {
    const Tensor* t = v.constant();
    if (!t) ++activations;
    else if (t->numel() != 1) return false;
  }
  return activations == 1;
}

// Whether the region `members` plus `extra` has a region program (sink: the last
// member in `order`). Views alone are checked with the operator that uses them.
bool expressible_with(const std::vector<NodePtr>& order, const std::unordered_map<const Node*, bool>& members,
                      const Node* extra) {
  std::vector<NodePtr> nodes;
  for (const NodePtr& n : order)
    if (members.count(n.get()) || n.get() == extra) nodes.push_back(n);
  std::vector<Value> inputs;
  try {
    from_body(body_of(nodes, &inputs));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::vector<Region> find_regions(const Graph& g) {
  std::vector<NodePtr> order = g.topo_order();
  std::unordered_map<const Node*, std::vector<const Node*>> consumers;
  std::unordered_set<const Node*> graph_outputs;
  for (const Value& v : g.outputs()) graph_outputs.insert(v.node.get());
  std::unordered_map<const Node*, NodePtr> owner;
  for (const NodePtr& n : order) {
    owner[n.get()] = n;
    for (const Value& v : n->inputs())
      if (v.present()) consumers[v.node.get()].push_back(n.get());
  }
  // Scores: values computed from an activation contraction through fusable
  // operators other than weight contractions (attention's logits, probabilities).
  std::unordered_set<const Node*> scores;
  for (const NodePtr& n : order) {
    if (!fusable(*n) || weight_contraction(*n)) continue;
    bool s = is_contraction(*n);
    for (const Value& v : n->inputs()) s = s || (v.present() && scores.count(v.node.get()));
    if (s) scores.insert(n.get());
  }
  std::unordered_set<const Node*> claimed;
  std::vector<Region> regions;
  // Pass 0 takes the regions that reduce something besides one weight matmul's
  // epilogue; pass 1, among what is left, a weight matmul whose operand an
  // elementwise prologue computes from two or more activations (SwiGLU's silu(g) * u
  // before the down projection, where g and u come from elsewhere): fused, the
  // joined operand never goes to memory. Pass 1 comes second so that it never takes
  // the epilogue of a region pass 0 would form (SwiGLU's gate and up projections).
  for (int pass = 0; pass < 2; ++pass)
  for (size_t i = order.size(); i-- > 0;) {
    const NodePtr& sink = order[i];
    if (claimed.count(sink.get()) || !fusable(*sink)) continue;
    // blocked: a reduction or contraction lies between the node and the sink (inclusive of the node's consumers).
    std::unordered_map<const Node*, bool> members{{sink.get(), false}};
    int contractions = is_contraction(*sink) ? 1 : 0;
    // A region contracts either with weights (RMSNorm -> MatMul, SwiGLU) or between
    // activations (attention), never both: attention stops at its projections, on
    // the input side and on the output side (GPT-2's c_proj, LLaMA's o_proj).
    int weight_contractions = weight_contraction(*sink) ? 1 : 0;
    int data_contractions = contractions - weight_contractions;
    std::unordered_set<const Node*> operand_sides;
    for (bool grew = true; grew && members.size() < 48;) {
      grew = false;
      std::vector<const Node*> current;
      for (const auto& [m, _] : members) current.push_back(m);
      for (const Node* m : current)
        for (const Value& v : m->inputs()) {
          const Node* p = v.node.get();
          if (!p || members.count(p) || claimed.count(p) || graph_outputs.count(p) || !fusable(*p)) continue;
          bool blocked = false, all_inside = true;
          for (const Node* c : consumers[p]) {
            auto it = members.find(c);
            if (it == members.end()) all_inside = false;
            else blocked = blocked || it->second || is_reduction(*c) || is_contraction(*c);
          }
          if (!all_inside) continue;
          // Operands of an activation contraction (attention's q, k, v) take views
          // and scalings only: what computes them (rotary embeddings, projections)
          // stays outside (the probabilities, computed from Q.K^T, come in). Fused, it would save one pass over q or k, small against
          // the scores, and each such operator multiplies the search's states.
          bool operand_side = false;
          for (const Node* c : consumers[p])
            operand_side = operand_side || operand_sides.count(c) ||
                           (is_contraction(*c) && !weight_contraction(*c));
          if (operand_side && !is_view(*p) && !is_scaling(*p) && !scores.count(p)) continue;
          if (is_contraction(*p) && (contractions >= 2 || (weight_contraction(*p) && blocked))) continue;
          if (is_contraction(*p) && (weight_contraction(*p) ? data_contractions > 0 : weight_contractions > 0)) continue;
          // A producer that would make the region inexpressible stays outside, e.g.
          // LLaMA's rotary embedding of k, whose cos/sin tables the rotary of q also
          // reads: one table indexed by the query and by the key position.
          if (!is_view(*p) && !expressible_with(order, members, p)) continue;
          contractions += is_contraction(*p);
          if (is_contraction(*p)) (weight_contraction(*p) ? weight_contractions : data_contractions) += 1;
          members[p] = blocked;
          if (operand_side) operand_sides.insert(p);
          grew = true;
        }
    }
    int reductions = 0, computing = 0, prologue = 0;
    for (const auto& [m, behind] : members) {
      reductions += is_reduction(*m);
      computing += !is_view(*m);
      prologue += behind && !is_view(*m) && !is_contraction(*m);
    }
    if (computing < 2) continue;
    if (pass == 0 && reductions == 0 && contractions < 2) continue;
    if (pass == 1 && (reductions > 0 || contractions != 1 || weight_contractions != 1 || prologue < 2)) continue;
    Region r;
    for (const NodePtr& n : order)
      if (members.count(n.get())) r.nodes.push_back(n);
    // The sink comes last in topological order (everything else is its ancestor).
    r.body = body_of(r.nodes, &r.inputs);
    if (pass == 1) {
      size_t activations = 0;
      for (const Value& v : r.inputs) activations += v.constant() == nullptr;
      if (activations < 2) continue;
    }
    for (const NodePtr& n : r.nodes) claimed.insert(n.get());
    regions.push_back(std::move(r));
  }
  // In topological order of their sinks.
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i].get()] = i;
  std::stable_sort(regions.begin(), regions.end(), [&](const Region& a, const Region& b) {
    return position.at(a.nodes.back().get()) < position.at(b.nodes.back().get());
  });
  return regions;
}

size_t FuseReport::kept() const {
  size_t k = 0;
  for (const auto& r : regions) k += r.kept;
  return k;
}

std::string FuseReport::to_text() const {
  std::ostringstream s;
  s << "mugraph: " << regions.size() << " candidate regions, " << kept() << " fused\n";
  if (symbolic_ops > 0) {
    s << "  " << symbolic_ops << " operators left out for their symbolic dims (from";
    for (const std::string& in : symbolic_inputs) s << " " << in;
    s << "): kernels are made for static shapes; fix the dims with --input-shape";
    if (!input_shape_example.empty()) s << ", e.g. --input-shape " << input_shape_example;
    s << "\n";
  }
  char buf[96];
  for (const auto& r : regions) {
    s << "  " << (r.kept ? "fused " : "kept  ") << r.sink << " (" << r.nodes << " nodes: " << r.ops << ")";
    if (r.fused_ms >= 0 && r.unfused_ms >= 0) {
      std::snprintf(buf, sizeof buf, " fused %.3f ms, unfused %.3f ms", r.fused_ms, r.unfused_ms);
      s << buf;
    }
    std::snprintf(buf, sizeof buf, ", %zu search states in %.1f s", r.states, r.search_seconds);
    s << buf;
    if (!r.stop.empty()) s << " (" << r.stop << ")";
    s << ": " << r.reason << "\n";
    if (r.timed > 0) {
      std::snprintf(buf, sizeof buf, " over %zu candidates: Spearman %.2f; ", r.timed, r.rank_correlation);
      s << "        cost model vs clock (" << r.clock << ")" << buf << "predicted/measured ms "
        << r.predicted_vs_measured << "\n";
    }
  }
  return s.str();
}

namespace {

Bench make_bench(const Region& r) {
  GraphBuilder b;
  std::vector<Value> ins;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const Value& v = r.inputs[i];
    ins.push_back(v.constant() ? b.constant(*v.constant()) : b.input("in" + std::to_string(i), v.type()));
  }
  std::unordered_map<const Node*, Value> map;
  for (size_t i = 0; i < r.body.inputs().size(); ++i) map[r.body.inputs()[i].get()] = ins[i];
  for (const NodePtr& n : r.body.topo_order()) {
    if (n->kind() == NodeKind::Input) continue;
    if (n->kind() == NodeKind::Constant) {
      map[n.get()] = b.constant(*n->value());
      continue;
    }
    std::vector<Value> a;
    for (const Value& v : n->inputs()) a.push_back(v.present() ? map.at(v.node.get()) : v);
    // Named, so that a step's nodes (runtime::StepInfo::nodes) name them (priced_ms).
    map[n.get()] = b.op(n->op_type(), a, n->attrs(), 1, "n" + std::to_string(map.size()))[0];
  }
  Bench bench;
  bench.unfused = b.finish({map.at(r.body.outputs()[0].node.get())}, {"out"});
  ModelInputs mi = valid_random_inputs(bench.unfused, 7);
  require(mi.ok(), "no inputs for the region: " + mi.impossible);
  bench.inputs = mi.tensors;
  return bench;
}

Graph fused_graph(const Bench& bench, const Region& r, const std::string& kernel) {
  GraphBuilder b;
  std::vector<Value> ins;
  size_t next = 0;
  for (const Value& v : r.inputs) {
    if (v.constant()) ins.push_back(b.constant(*v.constant()));
    else ins.push_back(b.input(bench.unfused.inputs()[next++]->name(), v.type()));
  }
  return b.finish(make_fused_node(b, r.body, kernel, ins, "fused"), {"out"});
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const float* x = reinterpret_cast<const float*>(a.bytes().data());
  const float* y = reinterpret_cast<const float*>(b.bytes().data());
  double mag = 1e-30, worst = 0;
  for (int64_t i = 0; i < b.numel(); ++i) mag = std::max(mag, std::abs(static_cast<double>(y[i])));
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (!std::isfinite(x[i]) && std::isfinite(y[i])) return INFINITY;
    if (std::isfinite(y[i])) worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]) / mag);
  }
  return worst;
}

// Spearman's rank correlation (average ranks for ties); NaN below 3 points.
double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 3 || y.size() != n) return NAN;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i + j) / 2) + 1;
      i = j + 1;
    }
    return r;
  };
  std::vector<double> a = ranks(x), b = ranks(y);
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += a[i] / n, mb += b[i] / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

struct Decision {
  std::string kernel;  // empty: not fused
  RegionOutcome outcome;
};

std::string region_ops(const Region& r) {
  std::string s;
  for (const NodePtr& n : r.nodes)
    if (!is_view(*n)) s += (s.empty() ? "" : " ") + n->op_type();
  return s;
}

}  // namespace

size_t first_near_fastest(const std::vector<double>& medians, double within) {
  require(!medians.empty(), "first_near_fastest: no kernel was timed");
  const double quickest = *std::min_element(medians.begin(), medians.end());
  size_t k = 0;
  while (medians[k] > quickest * (1 + within)) ++k;
  return k;
}

namespace {

Decision decide(const Region& r, const FuseOptions& opts) {
  Decision d;
  RegionOutcome& o = d.outcome;
  o.sink = r.nodes.back()->name().empty() ? r.nodes.back()->op_type() : r.nodes.back()->name();
  o.ops = region_ops(r);
  o.nodes = r.nodes.size();
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress("mugraph " + o.sink + ": " + line);
  };
  Program p;
  try {
    p = from_body(r.body);
  } catch (const Error& e) {
    o.reason = std::string("no region program: ") + e.what();
    return d;
  }
  const int threads = opts.threads > 0 ? opts.threads : runtime::hardware_threads();
  std::vector<std::vector<float>> constants(p.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i)
    if (const Tensor* t = r.inputs[i].constant()) constants[i] = constant_values(*t);
  auto t0 = std::chrono::steady_clock::now();
  // Every decision prices the unfused region first: a region whose time is almost
  // all weight products (LayerNorm or RMSNorm feeding a projection, SwiGLU's gate and
  // up projections) cannot be won by any kernel, and searching it took 20 s.
  Bench bench;
  std::unique_ptr<runtime::Executable> unfused;
  runtime::RuntimeOptions ro;
  ro.threads = threads;
  // The decision is priced, so an untimed run takes it too (its forced kernel for
  // llama_block's RMSNorm + SwiGLU region ran 11 ms against 5.9 ms unfused).
  try {
    bench = make_bench(r);
  } catch (const Error& e) {
    o.reason = e.what();
    return d;
  }
  unfused = runtime::compile(bench.unfused, ro);
  if (std::optional<WeightBound> w = weight_bound(r, bench.unfused, *unfused, bench.inputs, ro, opts.measure)) {
    char b[160];
    std::snprintf(b, sizeof b, "weight products priced at %.0f%% of the region", 100 * w->priced_share);
    say(std::string(b) + (opts.measure ? ", measured at " + std::to_string(std::lround(100 * w->measured_share)) + "%"
                                       : ""));
    if (w->bound) {
      o.reason = w->reason;
      say(w->reason);
      return d;
    }
  }
  SearchOptions so;
  if (opts.search_states > 0) so.max_states = opts.search_states;
  so.max_seconds = opts.search_seconds;
  SearchStats st;
  std::vector<BlockGraph> structures = search_structures(p, so, &st);
  structures.insert(structures.begin(), direct_translation(p));
  o.states = st.states();
  o.stop = st.stop_text();
  if (st.timed_out()) o.stop += " (time limit: the result may differ between runs)";
  for (const LoopSearchStats& l : st.loops) {
    char b[160];
    std::snprintf(b, sizeof b, "loop %s: %zu states in %.1f s, %zu candidates, %s", l.loop.c_str(), l.states,
                  l.seconds, l.candidates, l.stop.c_str());
    say(b);
  }
  std::vector<std::pair<double, BlockGraph>> ranked;
  std::set<std::string> seen;
  for (const BlockGraph& s : structures)
    for (BlockGraph& g : tilings(p, s, threads, 2, constants))
      if (seen.insert(g.to_text(p)).second) ranked.emplace_back(estimate_ms(p, g, threads, constants), std::move(g));
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const BlockGraph*> verified;
  std::vector<double> predicted;
  std::string rejected;
  // The best few by the estimate, then a spread over the rest of the ranking: the
  // timing picks the fastest of them all and says how well the estimate ranks.
  std::vector<size_t> order;
  for (size_t i = 0; i < ranked.size(); ++i) order.push_back(i);
  const size_t best_few = std::min(ranked.size(), std::max<size_t>(1, opts.candidates / 2));
  if (opts.measure && ranked.size() > opts.candidates) {
    const size_t spread = opts.candidates - best_few;
    std::vector<size_t> pick(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(best_few));
    for (size_t j = 1; j <= spread; ++j) pick.push_back(best_few + (ranked.size() - 1 - best_few) * j / spread);
    for (size_t i : order)
      if (std::find(pick.begin(), pick.end(), i) == pick.end()) pick.push_back(i);  // fallbacks
    order = pick;
  }
  for (size_t oi : order) {
    const auto& [ms, g] = ranked[oi];
    if (verified.size() >= opts.candidates) break;
    FieldVerdict fv = verify_field(p, g, constants, 11);
    if (!fv.ok) {
      rejected = "field: " + fv.reason;
      continue;
    }
    FloatVerdict fl = float_check(p, g, constants, 11);
    if (!fl.ok) {
      rejected = "float: " + fl.reason;
      continue;
    }
    verified.push_back(&g);
    predicted.push_back(ms);
  }
  o.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  say(std::to_string(st.states()) + " states (" + o.stop + "), " + std::to_string(ranked.size()) +
      " tiled candidates, " + std::to_string(verified.size()) + " verified");
  if (verified.empty()) {
    o.reason = ranked.empty() ? "no candidate" : "no candidate passed verification (" + rejected + ")";
    return d;
  }
  if (!opts.measure) {
    d.kernel = verified[0]->to_text(p);
    o.kept = true;
    o.kernel = verified[0]->summary(p);
    o.reason = "best verified by the cost model (not timed)";
    return d;
  }
  std::vector<Tensor> want = unfused->run(bench.inputs);
  std::vector<std::unique_ptr<runtime::Executable>> fused;
  std::vector<const BlockGraph*> usable;
  std::vector<double> usable_predicted;
  for (size_t vi = 0; vi < verified.size(); ++vi) {
    const BlockGraph* g = verified[vi];
    auto exe = runtime::compile(fused_graph(bench, r, g->to_text(p)), ro);
    bool compiled = false;
    for (const auto& s : exe->steps()) compiled = compiled || s.kind == "mugraph";
    if (!compiled) {
      o.reason = "the kernel did not compile (see `isomer run --print-steps`)";
      continue;
    }
    double diff = max_rel_diff(exe->run(bench.inputs)[0], want[0]);
    if (!(diff <= 2e-3)) {
      o.reason = "compiled kernel differs from the unfused runtime by " + std::to_string(diff);
      continue;
    }
    fused.push_back(std::move(exe));
    usable.push_back(g);
    usable_predicted.push_back(predicted[vi]);
  }
  if (fused.empty()) return d;
  // Interleaved rounds in processor time (run_clock); a kernel must win on the median
  // and on the fastest round (one lucky round or a noisy median alone decides nothing).
  o.clock = clock_name(run_clock(threads));
  std::vector<std::vector<double>> times(fused.size() + 1);
  for (int round = 0; round < opts.rounds; ++round) {
    times[0].push_back(median_run_ms(*unfused, bench.inputs, 5));
    for (size_t k = 0; k < fused.size(); ++k) times[k + 1].push_back(median_run_ms(*fused[k], bench.inputs, 5));
  }
  auto fastest = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  o.unfused_ms = runtime::median(times[0]);
  std::vector<double> measured;
  for (size_t k = 0; k < fused.size(); ++k) measured.push_back(runtime::median(times[k + 1]));
  const size_t best = first_near_fastest(measured, 0.03);
  o.fused_ms = measured[best];
  {
    o.timed = measured.size();
    o.rank_correlation = spearman(usable_predicted, measured);
    char b[64];
    for (size_t k = 0; k < measured.size(); ++k) {
      std::snprintf(b, sizeof b, "%s%.3f/%.3f", k ? " " : "", usable_predicted[k], measured[k]);
      o.predicted_vs_measured += b;
      o.timed_kernels.push_back(usable[k]->summary(p));
    }
  }
  const bool wins_fastest = fastest(times[best + 1]) * opts.min_speedup <= fastest(times[0]);
  o.kernel = usable[best]->summary(p);
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.3f ms fused vs %.3f ms unfused (%.2fx)", o.fused_ms, o.unfused_ms,
                o.unfused_ms / o.fused_ms);
  say(std::string(buf) + " [" + o.kernel + "]");
  if (o.unfused_ms < o.fused_ms * opts.min_speedup || !wins_fastest) {
    o.reason = std::string("not faster: ") + buf + " [" + o.kernel + "]";
    return d;
  }
  o.kept = true;
  o.reason = std::string(buf) + " [" + o.kernel + "]";
  d.kernel = usable[best]->to_text(p);
  return d;
}

// A region like one decided before (the same body and constant shapes, other
// weights: a transformer's layers) takes that decision without a new search:
// "not faster" as it was, a kernel once it verifies over the field and in floats
// with this region's constants. Null when it does not apply.
std::optional<Decision> reuse(const Decision& like, const Region& r) {
  Decision d = like;
  d.outcome.sink = r.nodes.back()->name().empty() ? r.nodes.back()->op_type() : r.nodes.back()->name();
  d.outcome.states = 0;
  d.outcome.stop.clear();
  d.outcome.search_seconds = 0;
  d.outcome.timed = 0;
  d.outcome.clock.clear();
  d.outcome.rank_correlation = NAN;
  d.outcome.predicted_vs_measured.clear();
  const std::string as = " (as " + like.outcome.sink + ", a region of the same shapes)";
  if (like.kernel.empty()) {
    d.outcome.reason += as;
    return d;
  }
  try {
    Program p = from_body(r.body);
    std::vector<std::vector<float>> constants(p.inputs.size());
    for (size_t i = 0; i < r.inputs.size() && i < constants.size(); ++i)
      if (const Tensor* t = r.inputs[i].constant()) constants[i] = constant_values(*t);
    BlockGraph g = parse_block_graph(p, like.kernel);
    if (!verify_field(p, g, constants, 11).ok || !float_check(p, g, constants, 11).ok) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  d.outcome.reason += as;
  return d;
}

// The decision for a region, once per process per (body, constants, options); a
// region differing from an earlier one in its constants' values only reuses its
// decision (reuse above): ViT-S/16's twelve layers searched each of their three
// regions twelve times, 320 s of which 290 were repeats.
Decision decide_cached(const Region& r, const FuseOptions& opts) {
  static std::mutex m;
  static std::map<std::string, Decision> done, by_shape;
  const std::string options = "|" + std::to_string(opts.threads) + "|" + std::to_string(opts.measure);
  std::string key = print_graph(r.body) + options;
  // Without node names (each layer names its own), with the body's interface types.
  // A collision cannot make a wrong kernel: a reused kernel is verified on this body.
  std::string shape_key = std::to_string(structural_hash(r.body)) + options;
  for (const NodePtr& in : r.body.inputs()) shape_key += "|" + to_string(in->output_types()[0]);
  for (const Value& v : r.inputs)
    if (const Tensor* t = v.constant()) {
      key += "|" + std::to_string(std::hash<std::string_view>{}(t->bytes().view()));
      shape_key += "|" + to_string(t->type());
    }
  std::optional<Decision> like;
  {
    std::lock_guard<std::mutex> lock(m);
    if (auto it = done.find(key); it != done.end()) return it->second;
    if (auto it = by_shape.find(shape_key); it != by_shape.end()) like = it->second;
  }
  std::optional<Decision> d = like ? reuse(*like, r) : std::nullopt;
  if (!d) d = decide(r, opts);
  std::lock_guard<std::mutex> lock(m);
  by_shape.emplace(shape_key, *d);
  return done[key] = *d;
}

}  // namespace

Graph fuse_regions(const Graph& g, const FuseOptions& opts, FuseReport* report) {
  std::vector<Region> regions = find_regions(g);
  if (report) {
    for (const NodePtr& n : g.topo_order())
      if (n->kind() == NodeKind::Op && n->num_outputs() == 1 && fusable_ops().count(n->op_type()) &&
          n->output_types()[0].dtype == DType::Float32 && !is_static(n->output_types()[0].shape))
        ++report->symbolic_ops;
    for (const NodePtr& in : g.inputs())
      if (const Shape& shape = in->output_types()[0].shape; !is_static(shape)) {
        report->symbolic_inputs.push_back(in->name() + to_string(shape));
        if (!report->input_shape_example.empty()) continue;
        report->input_shape_example = in->name() + ":";
        for (size_t d = 0; d < shape.size(); ++d)
          report->input_shape_example += (d ? "," : "") + std::to_string(shape[d].is_static() ? shape[d].value : 1);
      }
  }
  if (opts.progress) opts.progress("mugraph: " + std::to_string(regions.size()) + " candidate regions");
  std::unordered_map<const Node*, std::pair<const Region*, std::string>> sinks;
  for (const Region& r : regions) {
    Decision d = decide_cached(r, opts);
    if (report) report->regions.push_back(d.outcome);
    if (!d.kernel.empty()) sinks[r.nodes.back().get()] = {&r, d.kernel};
  }
  if (sinks.empty()) return g;
  // Values seen as operands so far, old -> new: every region input is an operand of
  // one of the region's nodes, and those come before the sink.
  std::unordered_map<Value, Value, ValueHash> seen;
  return rebuild(g, [&](const Node& n, const std::vector<Value>& new_inputs, GraphBuilder& b) -> std::vector<Value> {
    for (size_t i = 0; i < new_inputs.size(); ++i)
      if (n.inputs()[i].present()) seen[n.inputs()[i]] = new_inputs[i];
    auto it = sinks.find(&n);
    if (it == sinks.end()) return {};
    const Region& r = *it->second.first;
    std::vector<Value> ins;
    for (const Value& v : r.inputs) {
      auto s = seen.find(v);
      require(s != seen.end(), "a fused region's input was not rebuilt");
      ins.push_back(s->second);
    }
    return make_fused_node(b, r.body, it->second.second, ins, n.name());
  });
}

}  // namespace isomer::mugraph
