#include "cost/plan_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <variant>

extern char** environ;

namespace isomer::cost {

namespace {

// Length-prefixed fields, so that no name or signature can be mistaken for a
// separator.
void put(std::string& out, std::string_view s) {
  out.append(std::to_string(s.size())).append(":").append(s);
}
void put_u64(std::string& out, uint64_t v) { put(out, std::to_string(v)); }
void put_i64(std::string& out, int64_t v) { put(out, std::to_string(v)); }
void put_f64(std::string& out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_u64(out, bits);
}

struct Reader {
  const std::string& s;
  size_t at = 0;
  bool ok = true;
  std::string field() {
    if (!ok) return {};
    const size_t colon = s.find(':', at);
    if (colon == std::string::npos || colon == at || colon - at > 12) return fail();
    size_t n = 0;
    for (size_t i = at; i < colon; ++i) {
      if (s[i] < '0' || s[i] > '9') return fail();
      n = n * 10 + static_cast<size_t>(s[i] - '0');
    }
    if (colon + 1 + n > s.size()) return fail();
    std::string v = s.substr(colon + 1, n);
    at = colon + 1 + n;
    return v;
  }
  uint64_t u64() {
    const std::string f = field();
    if (!ok || f.empty()) return fail(), 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(f.c_str(), &end, 10);
    if (!end || *end) return fail(), 0;
    return v;
  }
  double f64() {
    const uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string fail() {
    ok = false;
    return {};
  }
};

constexpr const char* kPlanFormat = "isomer-plan-1";

void put_attr(std::string& out, const AttrValue& v) {
  put_u64(out, v.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) put_i64(out, x);
        else if constexpr (std::is_same_v<T, double>) put_f64(out, x);
        else if constexpr (std::is_same_v<T, std::string>) put(out, x);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          put_u64(out, x.size());
          for (int64_t e : x) put_i64(out, e);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          put_u64(out, x.size());
          for (double e : x) put_f64(out, e);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          put_u64(out, x.size());
          for (const std::string& e : x) put(out, e);
        } else {  // Tensor
          put(out, to_string(x.type()));
          put_u64(out, x.hash());
        }
      },
      v);
}

// Environment variables that change what the runtime compiles. Left out: those
// that only log, point at files, or set how threads wait (timing, not steps).
bool compile_relevant_env(std::string_view name) {
  const bool ours = name.starts_with("ISOMER_") || name.starts_with("ONEDNN_") || name.starts_with("DNNL_");
  if (!ours) return false;
  for (std::string_view skip : {"ISOMER_DEBUG", "ISOMER_COST_DB", "ISOMER_LOAD_AVERAGE", "ISOMER_PYTHON",
                                "ISOMER_OMP_REEXEC", "ISOMER_RUNNABLE_TASKS", "ONEDNN_VERBOSE", "DNNL_VERBOSE"})
    if (name.starts_with(skip)) return false;
  return true;
}

// 128 bits from two independent 64-bit hashes of the key's text.
std::string hex_digest(const std::string& text) {
  uint64_t fnv = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    fnv ^= c;
    fnv *= 0x100000001b3ULL;
  }
  const uint64_t other = std::hash<std::string>{}(text);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fnv),
                static_cast<unsigned long long>(other));
  return buf;
}

}  // namespace

const std::string& build_identity() {
  static const std::string id = [] {
    // The mapped file holding this very function: the CLI's executable or the
    // Python module's shared object, whichever linked the library.
    const auto here = reinterpret_cast<uintptr_t>(&build_identity);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      unsigned long long lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) != 2 || here < lo || here >= hi) continue;
      const size_t slash = line.find('/');
      if (slash == std::string::npos) break;
      const std::string path = line.substr(slash);
      struct stat st {};
      if (stat(path.c_str(), &st) != 0) break;
      return path + "|" + std::to_string(st.st_size) + "|" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec) + "|" + std::to_string(st.st_ino);
    }
    // Unknown: plans are kept for this process only.
    return "process:" + std::to_string(reinterpret_cast<uintptr_t>(&line)) + ":" + __DATE__ " " __TIME__;
  }();
  return id;
}

Plan plan_of(const Graph& g, const runtime::Executable& exe) {
  Plan p;
  p.steps = exe.steps();
  p.threads = exe.threads();
  // As the bytes copied in on every run (CostModel::graph_cost's io_ms).
  for (size_t i = 0; i < g.inputs().size(); ++i)
    p.input_bytes += static_cast<double>(num_elements(exe.input_dims()[i]) *
                                         static_cast<int64_t>(dtype_size(g.inputs()[i]->output_types()[0].dtype)));
  return p;
}

bool plan_keepable(const Plan& p) {
  return std::none_of(p.steps.begin(), p.steps.end(),
                      [](const runtime::StepInfo& s) { return s.kind == "mugraph-interpreted"; });
}

std::string plan_key(const Graph& g, const runtime::RuntimeOptions& o) {
  std::string k;
  put(k, kPlanFormat);
  put(k, build_identity());
  // Runtime options.
  put_i64(k, o.threads);
  put_i64(k, runtime::hardware_threads());
  put_u64(k, o.bindings.size());
  for (const auto& [sym, extent] : o.bindings) {
    put(k, sym);
    put_i64(k, extent);
  }
  put_u64(k, (o.fuse ? 1 : 0) | (o.blocked_layouts ? 2 : 0) | (o.delegate_opaque ? 4 : 0) | (o.packed_gemm ? 8 : 0));
  // The environment the runtime reads, in a fixed order.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (compile_relevant_env(kv.substr(0, kv.find('=')))) env.emplace_back(kv);
  }
  std::sort(env.begin(), env.end());
  put_u64(k, env.size());
  for (const std::string& kv : env) put(k, kv);
  // The graph, node by node in its (deterministic) topological order.
  put_u64(k, static_cast<uint64_t>(g.info().ir_version));
  for (const auto& [domain, version] : g.info().opset_imports) {
    put(k, domain);
    put_i64(k, version);
  }
  std::unordered_map<const Node*, size_t> index;
  const std::vector<NodePtr> order = g.topo_order();
  for (const NodePtr& n : order) {
    index.emplace(n.get(), index.size());
    put_u64(k, static_cast<uint64_t>(n->kind()));
    put(k, n->op_type());
    put(k, n->name());
    put_u64(k, n->output_names().size());
    for (const std::string& o : n->output_names()) put(k, o);
    put_u64(k, n->num_outputs());
    for (const TensorType& t : n->output_types()) put(k, to_string(t));
    switch (n->kind()) {
      case NodeKind::Input:
        if (const std::string* t = n->onnx_type()) put(k, *t);
        else put(k, "-");
        break;
      case NodeKind::Constant: put_u64(k, n->value()->hash()); break;
      case NodeKind::Op: break;
      case NodeKind::Opaque: return {};  // run by ONNX Runtime in a helper process
    }
    put_u64(k, n->attrs().items().size());
    for (const auto& [name, v] : n->attrs().items()) {
      put(k, name);
      put_attr(k, v);
    }
    put_u64(k, n->inputs().size());
    for (const Value& v : n->inputs()) {
      if (!v.present()) {
        put(k, "_");
        continue;
      }
      put_u64(k, index.at(v.node.get()));
      put_u64(k, v.index);
    }
  }
  put(k, "inputs");
  for (const NodePtr& in : g.inputs()) put_u64(k, index.at(in.get()));
  put(k, "outputs");
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value& v = g.outputs()[i];
    put_u64(k, v.present() ? index.at(v.node.get()) : UINT64_MAX);
    put_u64(k, v.index);
    put(k, i < g.output_names().size() ? g.output_names()[i] : std::string());
  }
  return hex_digest(k);
}

std::string encode_plan(const Plan& p) {
  std::string out;
  put(out, kPlanFormat);
  put_i64(out, p.threads);
  put_f64(out, p.input_bytes);
  put_u64(out, p.steps.size());
  for (const runtime::StepInfo& s : p.steps) {
    put(out, s.kind);
    put(out, s.label);
    put(out, s.signature);
    put_u64(out, s.ops.size());
    for (const std::string& o : s.ops) put(out, o);
    put_u64(out, s.nodes.size());
    for (const std::string& n : s.nodes) put(out, n);
    put_f64(out, s.flops);
    put_f64(out, s.bytes);
    put_u64(out, s.boundary ? 1 : 0);
  }
  return out;
}

std::optional<Plan> decode_plan(const std::string& bytes) {
  Reader r{bytes};
  if (r.field() != kPlanFormat || !r.ok) return std::nullopt;
  Plan p;
  p.threads = static_cast<int>(r.u64());
  p.input_bytes = r.f64();
  const uint64_t steps = r.u64();
  if (!r.ok || steps > bytes.size()) return std::nullopt;
  p.steps.resize(steps);
  for (runtime::StepInfo& s : p.steps) {
    s.kind = r.field();
    s.label = r.field();
    s.signature = r.field();
    const uint64_t ops = r.u64();
    if (!r.ok || ops > bytes.size()) return std::nullopt;
    for (uint64_t i = 0; i < ops; ++i) s.ops.push_back(r.field());
    const uint64_t nodes = r.u64();
    if (!r.ok || nodes > bytes.size()) return std::nullopt;
    for (uint64_t i = 0; i < nodes; ++i) s.nodes.push_back(r.field());
    s.flops = r.f64();
    s.bytes = r.f64();
    s.boundary = r.u64() != 0;
    if (!r.ok) return std::nullopt;
  }
  if (!r.ok || r.at != bytes.size()) return std::nullopt;
  return p;
}

}  // namespace isomer::cost
