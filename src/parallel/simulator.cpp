#include "parallel/simulator.h"

#include <algorithm>
#include <set>

#include "ir/error.h"

namespace isomer::parallel {

namespace {

constexpr int kCompute = 0, kIntra = 1, kNetwork = 2;
// Symbolic task indices, resolved when scheduling (a block's tasks move when it is
// rebuilt): the block's compute task, or the end of its move chain for input slot j.
constexpr int kComputeTask = -1;
int chain_ref(int slot) { return -2 - slot; }

double numel(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(x);
  return n;
}

// Product of the dims before `dim`: blocks of a gather along `dim` interleave unless 1.
double outer(const std::vector<int64_t>& d, int dim) {
  double n = 1;
  for (int k = 0; k < dim; ++k) n *= static_cast<double>(d[static_cast<size_t>(k)]);
  return n;
}

}  // namespace

const char* mode_name(Mode m) { return m == Mode::Training ? "train" : "infer"; }

Simulator::Simulator(const ParallelGraph& pg, const Cluster& cluster, ComputeModel& compute, Mode mode)
    : pg_(pg), cluster_(cluster), compute_(compute), mode_(mode), n_(pg.size()) {
  const size_t blocks = static_cast<size_t>(mode == Mode::Training ? 2 * n_ + 1 : n_ + 1);
  blocks_.resize(blocks);
  block_compute_.assign(blocks, -1);
  op_ms_.resize(static_cast<size_t>(n_));
  sync_ms_.resize(static_cast<size_t>(n_));
  by_compute_.resize(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) {
    op_ms_[static_cast<size_t>(i)].assign(pg.candidates(i).size(), -1);
    sync_ms_[static_cast<size_t>(i)].assign(pg.candidates(i).size(), -1);
  }
}

double Simulator::op_ms(int i, int c) {
  double& v = op_ms_[static_cast<size_t>(i)][static_cast<size_t>(c)];
  if (v < 0) v = compute_.op_ms(pg_, i, pg_.config(i, c));
  return v;
}

const std::vector<std::pair<int, double>>& Simulator::move_tasks(const Layout& from, const Layout& to,
                                                                 const std::vector<int64_t>& dims, size_t elem) {
  // 64-bit key from both layouts, the dims and the element size.
  uint64_t key = from.hash() * 0x9e3779b97f4a7c15ull ^ (to.hash() + 0x632be59bd9b4e019ull);
  for (int64_t d : dims) key = (key ^ static_cast<uint64_t>(d)) * 0x100000001b3ull;
  key = (key ^ elem) * 0xff51afd7ed558ccdull;
  auto it = move_memo_.find(key);
  if (it != move_memo_.end()) return it->second;
  std::vector<std::pair<int, double>> tasks;
  const Mesh& mesh = pg_.mesh();
  for (const CommStep& st : redistribute(from, to, dims, mesh)) {
    const double before = numel(st.local_before) * static_cast<double>(elem);
    const double after_bytes = numel(st.local_after) * static_cast<double>(elem);
    bool spans = false;
    for (int a : st.axes) spans = spans || mesh.axis(a).inter_node;
    const int link = spans ? kNetwork : kIntra;
    switch (st.kind) {
      case CommStep::Kind::Slice: tasks.emplace_back(kCompute, compute_.copy_ms(after_bytes)); break;
      case CommStep::Kind::AllReduce:
        tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::AllReduce, st.axes, before));
        break;
      case CommStep::Kind::AllGather:
        tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::AllGather, st.axes, before));
        if (outer(st.local_before, st.dim) > 1) tasks.emplace_back(kCompute, compute_.copy_ms(after_bytes));
        break;
      case CommStep::Kind::ReduceScatter:
        if (outer(st.local_before, st.dim) > 1) tasks.emplace_back(kCompute, compute_.copy_ms(before));
        tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::ReduceScatter, st.axes, before));
        break;
    }
  }
  return move_memo_.emplace(key, std::move(tasks)).first->second;
}

std::pair<int, int> Simulator::add_moves(int b, std::pair<int, int> after, const Layout& from, const Layout& to,
                                         const std::vector<int64_t>& dims, size_t elem) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  for (const auto& [res, ms] : move_tasks(from, to, dims, elem)) {
    Task t;
    t.resource = res;
    t.ms = ms;
    t.deps.push_back(after);
    blk.tasks.push_back(std::move(t));
    after = {b, static_cast<int>(blk.tasks.size()) - 1};
  }
  return after;
}

double Simulator::move_ms(const Layout& from, const Layout& to, const std::vector<int64_t>& dims, size_t elem) {
  if (from == to) return 0;
  double ms = 0;
  for (const auto& t : move_tasks(from, to, dims, elem)) ms += t.second;
  return ms;
}

int Simulator::best_config(const Strategy& s, int i, bool with_users) {
  auto& order = by_compute_[static_cast<size_t>(i)];
  const int n = static_cast<int>(pg_.candidates(i).size());
  const double mult = mode_ == Mode::Training ? 3 : 1;
  if (order.empty()) {
    std::vector<std::pair<double, int>> keyed;
    for (int c = 0; c < n; ++c) keyed.emplace_back(mult * op_ms(i, c) + weight_sync_ms(i, c), c);
    std::stable_sort(keyed.begin(), keyed.end());
    for (const auto& k : keyed) order.push_back(k.second);
  }
  int best = s[static_cast<size_t>(i)];
  double best_ms = local_ms(s, i, best, with_users);
  for (int c : order) {
    if (mult * op_ms(i, c) + weight_sync_ms(i, c) >= best_ms) break;  // moves cost >= 0
    const double ms = local_ms(s, i, c, with_users);
    if (ms < best_ms) {
      best_ms = ms;
      best = c;
    }
  }
  return best;
}

double Simulator::local_ms(const Strategy& s, int i, int c, bool with_users) {
  const bool train = mode_ == Mode::Training;
  const OpConfig& cfg = pg_.config(i, c);
  auto scfg = [&](int k) -> const OpConfig& { return pg_.config(k, s[static_cast<size_t>(k)]); };
  double ms = (train ? 3 : 1) * op_ms(i, c) + weight_sync_ms(i, c);
  for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
    const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
    if (o.kind != Operand::Kind::Op) continue;
    const Layout out = pg_.output_layout(o.index, scfg(o.index), o.output);
    const auto& dims = pg_.out_dims(o.index, o.output);
    const size_t elem = pg_.elem_size(o.index, o.output);
    ms += move_ms(out, pg_.input_layout(i, cfg, j), dims, elem);
    if (train) {
      Layout back = out;
      back.partial.clear();
      ms += move_ms(pg_.input_grad_layout(i, cfg, j), back, dims, elem);
    }
  }
  if (!with_users) return ms;
  for (int o = 0; o < static_cast<int>(pg_.node(i).num_outputs()); ++o) {
    const Layout out = pg_.output_layout(i, cfg, o);
    const auto& dims = pg_.out_dims(i, o);
    const size_t elem = pg_.elem_size(i, o);
    Layout back = out;
    back.partial.clear();
    for (const auto& [u, j] : pg_.users(i, o)) {
      ms += move_ms(out, pg_.input_layout(u, scfg(u), j), dims, elem);
      if (train) ms += move_ms(pg_.input_grad_layout(u, scfg(u), j), back, dims, elem);
    }
    if (!train)
      for (const auto& [p, po] : pg_.graph_outputs())
        if (p == i && po == o) ms += move_ms(out, Layout::replicated(dims.size()), dims, elem);
  }
  return ms;
}

double Simulator::weight_sync_ms(int i, int c) {
  if (mode_ != Mode::Training) return 0;
  double& memo = sync_ms_[static_cast<size_t>(i)][static_cast<size_t>(c)];
  if (memo >= 0) return memo;
  double ms = 0;
  const OpConfig& cfg = pg_.config(i, c);
  for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
    if (!pg_.is_weight(i, j)) continue;
    const Layout g = pg_.input_grad_layout(i, cfg, j);
    if (g.partial.empty()) continue;
    const double bytes = numel(local_dims(pg_.in_dims(i, j), g, pg_.mesh())) * static_cast<double>(pg_.in_elem_size(i, j));
    ms += collective_ms(cluster_, pg_.mesh(), Collective::AllReduce, g.partial, bytes);
  }
  return memo = ms;
}

void Simulator::build_block(int b, const Strategy& s) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  blk.tasks.clear();
  blk.chain_end.clear();
  blk.dirty = true;
  ++stats_.blocks_rebuilt;
  auto cfg = [&](int i) -> const OpConfig& { return pg_.config(i, s[static_cast<size_t>(i)]); };
  if (b < n_) {  // forward block of op b
    const int i = b;
    std::vector<std::pair<int, int>> deps;
    for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
      const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
      if (o.kind != Operand::Kind::Op) continue;
      deps.push_back(add_moves(b, {fwd_block(o.index), kComputeTask}, pg_.output_layout(o.index, cfg(o.index), o.output),
                               pg_.input_layout(i, cfg(i), j), pg_.out_dims(o.index, o.output),
                               pg_.elem_size(o.index, o.output)));
    }
    Task t;
    t.resource = kCompute;
    t.ms = op_ms(i, s[static_cast<size_t>(i)]);
    t.deps = std::move(deps);
    blk.tasks.push_back(std::move(t));
    block_compute_[static_cast<size_t>(b)] = static_cast<int>(blk.tasks.size()) - 1;
    return;
  }
  if (b == out_block()) {  // inference: every output gathered whole
    if (mode_ == Mode::Training) return;
    for (const auto& [p, o] : pg_.graph_outputs())
      add_moves(b, {fwd_block(p), kComputeTask}, pg_.output_layout(p, cfg(p), o),
                Layout::replicated(pg_.out_dims(p, o).size()), pg_.out_dims(p, o), pg_.elem_size(p, o));
    return;
  }
  // Backward block of op i: its gradient task, then its inputs' gradients moved back.
  const int i = 2 * n_ - 1 - b;
  Task t;
  t.resource = kCompute;
  t.ms = 2 * op_ms(i, s[static_cast<size_t>(i)]);
  t.deps.push_back({fwd_block(i), kComputeTask});
  for (int o = 0; o < static_cast<int>(pg_.node(i).num_outputs()); ++o)
    for (const auto& [c, j] : pg_.users(i, o)) t.deps.push_back({bwd_block(c), chain_ref(j)});
  for (const auto& [p, o] : pg_.graph_outputs())
    if (p == i) t.deps.push_back({fwd_block(n_ - 1), kComputeTask});
  blk.tasks.push_back(std::move(t));
  block_compute_[static_cast<size_t>(b)] = 0;
  const Mesh& mesh = pg_.mesh();
  blk.chain_end.assign(pg_.operands(i).size(), 0);
  for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
    const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
    const Layout grad = pg_.input_grad_layout(i, cfg(i), j);
    if (o.kind == Operand::Kind::Op) {
      Layout to = pg_.output_layout(o.index, cfg(o.index), o.output);
      to.partial.clear();
      blk.chain_end[static_cast<size_t>(j)] =
          add_moves(b, {b, 0}, grad, to, pg_.out_dims(o.index, o.output), pg_.elem_size(o.index, o.output)).second;
    } else if (pg_.is_weight(i, j) && !grad.partial.empty()) {
      Task sync;
      bool spans = false;
      for (int a : grad.partial) spans = spans || mesh.axis(a).inter_node;
      sync.resource = spans ? kNetwork : kIntra;
      const double bytes = numel(local_dims(pg_.in_dims(i, j), grad, mesh)) * static_cast<double>(pg_.in_elem_size(i, j));
      sync.ms = collective_ms(cluster_, mesh, Collective::AllReduce, grad.partial, bytes);
      sync.deps.push_back({b, 0});
      blk.tasks.push_back(std::move(sync));
    }
  }
}

std::pair<int, int> Simulator::compute_task(int b) const { return {b, block_compute_[static_cast<size_t>(b)]}; }

SimResult Simulator::simulate(const Strategy& s) {
  require(static_cast<int>(s.size()) == n_, "strategy size does not match the graph");
  ++stats_.full;
  for (int b = 0; b < static_cast<int>(blocks_.size()); ++b) build_block(b, s);
  last_ = s;
  return schedule(0, s);
}

SimResult Simulator::update(const Strategy& s, const std::vector<int>& changed) {
  if (last_.empty()) return simulate(s);
  ++stats_.incremental;
  std::set<int> rebuild;
  for (int i : changed) {
    rebuild.insert(fwd_block(i));
    for (int o = 0; o < static_cast<int>(pg_.node(i).num_outputs()); ++o)
      for (const auto& [c, j] : pg_.users(i, o)) {
        rebuild.insert(fwd_block(c));
        if (mode_ == Mode::Training) rebuild.insert(bwd_block(c));
      }
    if (mode_ == Mode::Training) rebuild.insert(bwd_block(i));
  }
  if (mode_ == Mode::Inference) rebuild.insert(out_block());
  for (int b : rebuild) build_block(b, s);
  last_ = s;
  return schedule(*rebuild.begin(), s);
}

SimResult Simulator::schedule(int first_block, const Strategy& s) {
  const int nb = static_cast<int>(blocks_.size());
  stats_.blocks_total += static_cast<size_t>(nb);
  double free_at[3] = {0, 0, 0};
  if (first_block > 0) {
    // The state after the block before `first_block`: its start state advanced by its tasks.
    const Block& prev = blocks_[static_cast<size_t>(first_block - 1)];
    std::copy(prev.state_in, prev.state_in + 3, free_at);
    for (const Task& t : prev.tasks) free_at[t.resource] = std::max(free_at[t.resource], t.finish);
  }
  std::vector<char> moved(static_cast<size_t>(nb), 0);
  auto resolve = [&](std::pair<int, int> ref) -> const Task& {
    const Block& blk = blocks_[static_cast<size_t>(ref.first)];
    int t = ref.second;
    if (t == kComputeTask) t = block_compute_[static_cast<size_t>(ref.first)];
    else if (t <= -2) t = blk.chain_end[static_cast<size_t>(-2 - t)];
    return blk.tasks[static_cast<size_t>(t)];
  };
  for (int b = first_block; b < nb; ++b) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    bool same_state = std::equal(free_at, free_at + 3, blk.state_in);
    bool deps_moved = false;
    if (!blk.dirty && same_state) {
      for (const Task& t : blk.tasks)
        for (const auto& d : t.deps)
          if (d.first != b && moved[static_cast<size_t>(d.first)]) deps_moved = true;
      if (!deps_moved) {
        for (const Task& t : blk.tasks) free_at[t.resource] = std::max(free_at[t.resource], t.finish);
        continue;
      }
    }
    ++stats_.blocks_scheduled;
    std::copy(free_at, free_at + 3, blk.state_in);
    bool changed = !same_state || blk.dirty;
    for (size_t k = 0; k < blk.tasks.size(); ++k) {
      Task& t = blk.tasks[k];
      double ready = 0;
      for (const auto& d : t.deps) ready = std::max(ready, resolve(d).finish);
      const double start = std::max(ready, free_at[t.resource]);
      const double finish = start + t.ms;
      changed = changed || finish != t.finish || start != t.start;
      t.start = start;
      t.finish = finish;
      free_at[t.resource] = finish;
    }
    blk.dirty = false;
    moved[static_cast<size_t>(b)] = changed ? 1 : 0;
  }
  SimResult r;
  for (const Block& blk : blocks_)
    for (const Task& t : blk.tasks) {
      r.step_ms = std::max(r.step_ms, t.finish);
      (t.resource == kCompute ? r.compute_ms : r.comm_ms) += t.ms;
      ++r.tasks;
    }
  r.overlap_ms = std::max(0.0, r.compute_ms + r.comm_ms - r.step_ms);
  r.memory_bytes = memory_bytes(s);
  r.fits = r.memory_bytes <= cluster_.memory_gb * 1e9;
  return r;
}

double Simulator::memory_bytes(const Strategy& s) {
  const Mesh& mesh = pg_.mesh();
  double weights = 0;
  std::set<std::pair<const Node*, size_t>> seen;
  std::vector<std::vector<double>> out_bytes(static_cast<size_t>(n_));
  std::vector<std::vector<int>> last_use(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) {
    const OpConfig& c = pg_.config(i, s[static_cast<size_t>(i)]);
    for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
      if (pg_.operands(i)[static_cast<size_t>(j)].kind != Operand::Kind::Constant) continue;
      const Layout l = pg_.input_layout(i, c, j);
      const Node* k = pg_.node(i).inputs()[static_cast<size_t>(j)].node.get();
      if (!seen.insert({k, l.hash()}).second) continue;
      weights += numel(local_dims(pg_.in_dims(i, j), l, mesh)) * static_cast<double>(pg_.in_elem_size(i, j));
    }
    for (int o = 0; o < static_cast<int>(pg_.node(i).num_outputs()); ++o) {
      out_bytes[static_cast<size_t>(i)].push_back(numel(local_dims(pg_.out_dims(i, o), pg_.output_layout(i, c, o), mesh)) *
                                                  static_cast<double>(pg_.elem_size(i, o)));
      int last = i;
      for (const auto& [u, j] : pg_.users(i, o)) last = std::max(last, u);
      for (const auto& [p, po] : pg_.graph_outputs())
        if (p == i && po == o) last = n_;
      last_use[static_cast<size_t>(i)].push_back(last);
    }
  }
  if (mode_ == Mode::Training) {
    double acts = 0;
    for (const auto& v : out_bytes)
      for (double x : v) acts += x;
    return 4 * weights + acts;  // weights, gradients, two optimizer moments; activations kept
  }
  std::vector<std::vector<std::pair<int, int>>> frees(static_cast<size_t>(n_) + 1);
  for (int i = 0; i < n_; ++i)
    for (size_t o = 0; o < last_use[static_cast<size_t>(i)].size(); ++o)
      frees[static_cast<size_t>(last_use[static_cast<size_t>(i)][o])].emplace_back(i, static_cast<int>(o));
  double live = 0, peak = 0;
  for (int i = 0; i < n_; ++i) {
    for (double x : out_bytes[static_cast<size_t>(i)]) live += x;
    peak = std::max(peak, live);
    for (const auto& [p, o] : frees[static_cast<size_t>(i)]) live -= out_bytes[static_cast<size_t>(p)][static_cast<size_t>(o)];
  }
  return weights + peak;
}

}  // namespace isomer::parallel
