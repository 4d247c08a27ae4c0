#include "parallel/execute.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "parallel/box.h"
#include "parallel/lower.h"

namespace isomer::parallel {

namespace {

using Clock = std::chrono::steady_clock;

struct Segment {
  std::vector<Value> inputs;   // values of the rank graph the segment reads
  std::vector<Value> outputs;  // values it computes that others read
  std::unique_ptr<runtime::Executable> exe;
};

struct CollectiveStep {
  const Node* node = nullptr;
  CollectiveInfo info;
};

}  // namespace

struct RankExecutor::Impl {
  Graph graph;
  Communicator& comm;
  std::vector<Segment> segments;          // segments[k] runs before collective k (the last: outputs)
  std::vector<CollectiveStep> collectives;

  Impl(const Graph& g, Communicator& c) : graph(g), comm(c) {}

  Tensor value_of(const std::unordered_map<Value, Tensor, ValueHash>& env, const Value& v) const {
    if (const Tensor* t = v.constant()) return *t;
    auto it = env.find(v);
    require(it != env.end(), "internal: run-plan value not computed yet");
    return it->second;
  }

  Tensor run_collective(const CollectiveStep& c, const Tensor& x) {
    const std::vector<int>& group = c.info.ranks;
    const size_t g = group.size(), elem = dtype_size(x.dtype());
    const std::vector<int64_t>& dims = x.dims();
    if (c.info.kind == "AllReduce") {
      std::string data = x.bytes().str();
      comm.all_reduce_sum(group, data.data(), static_cast<size_t>(x.numel()), x.dtype());
      return Tensor(x.dtype(), dims, std::move(data));
    }
    const size_t d = static_cast<size_t>(c.info.axis);
    require(d < dims.size(), describe(*c.node) + ": axis out of range");
    int64_t outer = 1;
    for (size_t k = 0; k < d; ++k) outer *= dims[k];
    if (c.info.kind == "AllGather") {
      std::vector<int64_t> out_dims = dims;
      out_dims[d] *= static_cast<int64_t>(g);
      std::string gathered(x.byte_size() * g, '\0');
      comm.all_gather(group, x.bytes().data(), x.byte_size(), gathered.data());
      if (outer == 1) return Tensor(x.dtype(), out_dims, std::move(gathered));
      std::string out(gathered.size(), '\0');
      std::vector<int64_t> zero(dims.size(), 0), at(dims.size(), 0);
      for (size_t p = 0; p < g; ++p) {
        at[d] = static_cast<int64_t>(p) * dims[d];
        copy_box(gathered.data() + p * x.byte_size(), dims, zero, out.data(), out_dims, at, dims, elem);
      }
      return Tensor(x.dtype(), out_dims, std::move(out));
    }
    // ReduceScatter: the blocks along `d` made contiguous, then summed and scattered.
    require(dims[d] % static_cast<int64_t>(g) == 0, describe(*c.node) + ": axis not divisible by the group");
    std::vector<int64_t> block = dims;
    block[d] /= static_cast<int64_t>(g);
    const size_t block_bytes = x.byte_size() / g;
    std::string staged;
    const char* in = x.bytes().data();
    if (outer != 1) {
      staged.assign(x.byte_size(), '\0');
      std::vector<int64_t> zero(dims.size(), 0), at(dims.size(), 0);
      for (size_t p = 0; p < g; ++p) {
        at[d] = static_cast<int64_t>(p) * block[d];
        copy_box(x.bytes().data(), dims, at, staged.data() + p * block_bytes, block, zero, block, elem);
      }
      in = staged.data();
    }
    std::string out(block_bytes, '\0');
    comm.reduce_scatter_sum(group, in, out.data(), static_cast<size_t>(x.numel()) / g, x.dtype());
    return Tensor(x.dtype(), block, std::move(out));
  }
};

RankExecutor::RankExecutor(const Graph& rank_graph, Communicator& comm, const runtime::RuntimeOptions& opts)
    : impl_(std::make_unique<Impl>(rank_graph, comm)) {
  Impl& m = *impl_;
  const std::vector<NodePtr> order = rank_graph.topo_order();
  for (const NodePtr& n : order)
    if (is_collective(*n)) m.collectives.push_back({n.get(), collective_info(*n)});
  std::sort(m.collectives.begin(), m.collectives.end(),
            [](const CollectiveStep& a, const CollectiveStep& b) { return a.info.seq < b.info.seq; });
  for (size_t k = 0; k < m.collectives.size(); ++k)
    require(m.collectives[k].info.seq == static_cast<int>(k), "rank graph: collective sequence numbers must be 0.." +
                                                                   std::to_string(m.collectives.size() - 1));
  // Segment of each operator node: the first collective (or the outputs) that needs it.
  std::unordered_map<const Node*, int> seg;
  std::vector<const Node*> stack;
  auto claim = [&](const Node* root, int k) {
    stack.push_back(root);
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
      if (is_collective(*n) || seg.count(n)) continue;
      seg[n] = k;
      for (const Value& v : n->inputs())
        if (v.present()) stack.push_back(v.node.get());
    }
  };
  const int K = static_cast<int>(m.collectives.size());
  for (int k = 0; k < K; ++k) claim(m.collectives[static_cast<size_t>(k)].node->inputs().at(0).node.get(), k);
  for (const Value& v : rank_graph.outputs()) claim(v.node.get(), K);
  // Values read outside the segment that computes them.
  std::unordered_set<Value, ValueHash> read_elsewhere(rank_graph.outputs().begin(), rank_graph.outputs().end());
  for (const NodePtr& n : order) {
    const int here = is_collective(*n) ? -1 : (seg.count(n.get()) ? seg[n.get()] : -2);
    for (const Value& v : n->inputs()) {
      if (!v.present() || !seg.count(v.node.get())) continue;
      if (seg[v.node.get()] != here) read_elsewhere.insert(v);
    }
  }
  m.segments.resize(static_cast<size_t>(K) + 1);
  for (int k = 0; k <= K; ++k) {
    Segment& s = m.segments[static_cast<size_t>(k)];
    GraphBuilder b(false);
    std::unordered_map<Value, Value, ValueHash> map;
    auto mapped = [&](const Value& v) -> Value {
      if (!v.present()) return v;
      auto it = map.find(v);
      if (it != map.end()) return it->second;
      Value nv = v.constant() ? b.constant(*v.constant())
                              : b.input("v" + std::to_string(s.inputs.size()), v.type());
      if (!v.constant()) s.inputs.push_back(v);
      return map.emplace(v, nv).first->second;
    };
    std::vector<Value> outs;
    for (const NodePtr& n : order) {
      auto it = seg.find(n.get());
      if (it == seg.end() || it->second != k) continue;
      std::vector<Value> ins;
      for (const Value& v : n->inputs()) ins.push_back(mapped(v));
      std::vector<Value> res = n->kind() == NodeKind::Opaque
                                   ? b.opaque(*n->opaque(), ins, n->output_types(), n->name())
                                   : b.op(n->op_type(), ins, n->attrs(), n->num_outputs(), n->name());
      for (uint32_t o = 0; o < res.size(); ++o) {
        map[n->output(o)] = res[o];
        if (read_elsewhere.count(n->output(o))) {
          s.outputs.push_back(n->output(o));
          outs.push_back(res[o]);
        }
      }
    }
    if (outs.empty()) continue;
    std::vector<std::string> names;
    for (size_t o = 0; o < outs.size(); ++o) names.push_back("o" + std::to_string(o));
    s.exe = runtime::compile(b.finish(outs, names), opts);
  }
}

RankExecutor::~RankExecutor() = default;

size_t RankExecutor::segments() const {
  size_t n = 0;
  for (const Segment& s : impl_->segments) n += s.exe != nullptr;
  return n;
}

size_t RankExecutor::collectives() const { return impl_->collectives.size(); }

std::vector<Tensor> RankExecutor::run(const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  require(inputs.size() == m.graph.inputs().size(), "run-plan: " + std::to_string(m.graph.inputs().size()) +
                                                          " inputs expected, got " + std::to_string(inputs.size()));
  std::unordered_map<Value, Tensor, ValueHash> env;
  for (size_t k = 0; k < inputs.size(); ++k) env[m.graph.inputs()[k]->output(0)] = inputs[k];
  compute_s_ = comm_s_ = 0;
  for (size_t k = 0; k < m.segments.size(); ++k) {
    Segment& s = m.segments[k];
    if (s.exe) {
      auto t = Clock::now();
      std::vector<Tensor> ins;
      for (const Value& v : s.inputs) ins.push_back(m.value_of(env, v));
      std::vector<Tensor> outs = s.exe->run(ins);
      for (size_t o = 0; o < outs.size(); ++o) env[s.outputs[o]] = std::move(outs[o]);
      compute_s_ += std::chrono::duration<double>(Clock::now() - t).count();
    }
    if (k < m.collectives.size()) {
      auto t = Clock::now();
      const CollectiveStep& c = m.collectives[k];
      env[c.node->output(0)] = m.run_collective(c, m.value_of(env, c.node->inputs().at(0)));
      comm_s_ += std::chrono::duration<double>(Clock::now() - t).count();
    }
  }
  std::vector<Tensor> out;
  for (const Value& v : m.graph.outputs()) out.push_back(m.value_of(env, v));
  return out;
}

std::vector<std::vector<Tensor>> run_local(const std::vector<Graph>& rank_graphs, const std::vector<Tensor>& inputs,
                                           const runtime::RuntimeOptions& opts) {
  const int n = static_cast<int>(rank_graphs.size());
  LocalGroup group(n);
  std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::unique_ptr<RankExecutor>> exes(static_cast<size_t>(n));
  // Compile first (the runtime's compiler is not shared between threads here), then run together.
  for (int r = 0; r < n; ++r)
    exes[static_cast<size_t>(r)] = std::make_unique<RankExecutor>(rank_graphs[static_cast<size_t>(r)], group.rank(r), opts);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        outs[static_cast<size_t>(r)] = exes[static_cast<size_t>(r)]->run(inputs);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return outs;
}

}  // namespace isomer::parallel
