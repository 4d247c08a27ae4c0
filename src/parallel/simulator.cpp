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

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace

const char* mode_name(Mode m) { return m == Mode::Training ? "train" : "infer"; }

Simulator::Simulator(const ParallelGraph& pg, const Cluster& cluster, ComputeModel& compute, Mode mode)
    : pg_(pg), cluster_(cluster), compute_(compute), mode_(mode), n_(pg.size()) {
  const size_t blocks = static_cast<size_t>(mode == Mode::Training ? 2 * n_ + 1 : n_ + 1);
  blocks_.resize(blocks);
  block_compute_.assign(blocks, -1);
  const size_t n = static_cast<size_t>(n_);
  op_ms_.resize(n);
  sync_ms_.resize(n);
  by_compute_.resize(n);
  cache_.resize(n);
  last_use_.resize(n);
  for (int i = 0; i < n_; ++i) {
    const size_t k = pg.candidates(i).size();
    op_ms_[static_cast<size_t>(i)].assign(k, -1);
    sync_ms_[static_cast<size_t>(i)].assign(k, -1);
    OpCache& c = cache_[static_cast<size_t>(i)];
    c.nin = static_cast<int>(pg.operands(i).size());
    c.nout = static_cast<int>(pg.node(i).num_outputs());
    c.have.assign(k, 0);
    for (int o = 0; o < c.nout; ++o) {
      int last = i;
      for (const auto& [u, j] : pg.users(i, o)) last = std::max(last, u);
      last_use_[static_cast<size_t>(i)].push_back(last);
    }
  }
  for (const auto& [p, o] : pg.graph_outputs()) last_use_[static_cast<size_t>(p)][static_cast<size_t>(o)] = n_;
}

double Simulator::op_ms(int i, int c) {
  double& v = op_ms_[static_cast<size_t>(i)][static_cast<size_t>(c)];
  if (v < 0) v = compute_.op_ms(pg_, i, pg_.config(i, c));
  return v;
}

double Simulator::task_ms(int i, int c) {
  const HostOverheads& h = cluster_.host;
  double ms = op_ms(i, c) * h.compute_contention;
  if (streaming_) {
    keys(i, c);
    const OpCache& oc = cache_[static_cast<size_t>(i)];
    double w = 0;
    for (int j = 0; j < oc.nin; ++j) w += oc.weight_bytes[static_cast<size_t>(c) * static_cast<size_t>(oc.nin) + static_cast<size_t>(j)];
    ms += w / (h.weight_stream_gbytes_per_s * 1e9) * 1e3;
  }
  return ms;
}

bool Simulator::weights_stream(const Strategy& s) {
  const HostOverheads& h = cluster_.host;
  if (h.weight_stream_gbytes_per_s <= 0) return false;
  return weight_bytes(s) * cluster_.devices_per_node > h.cache_bytes;
}

const uint64_t* Simulator::keys(int i, int c) {
  OpCache& oc = cache_[static_cast<size_t>(i)];
  const size_t width = static_cast<size_t>(2 * oc.nin + 2 * oc.nout);
  if (oc.keys.empty()) {
    const size_t k = oc.have.size();
    oc.keys.resize(k * width);
    oc.out_bytes.resize(k * static_cast<size_t>(oc.nout));
    oc.weight_bytes.resize(k * static_cast<size_t>(oc.nin));
  }
  uint64_t* keys = oc.keys.data() + static_cast<size_t>(c) * width;
  if (oc.have[static_cast<size_t>(c)]) return keys;
  const OpConfig& cfg = pg_.config(i, c);
  const Mesh& mesh = pg_.mesh();
  for (int j = 0; j < oc.nin; ++j) {
    const Layout in = pg_.input_layout(i, cfg, j);
    keys[j] = in.hash();
    keys[oc.nin + j] = pg_.input_grad_layout(i, cfg, j).hash();
    double w = 0;
    if (pg_.operands(i)[static_cast<size_t>(j)].kind == Operand::Kind::Constant)
      w = numel(local_dims(pg_.in_dims(i, j), in, mesh)) * static_cast<double>(pg_.in_elem_size(i, j));
    oc.weight_bytes[static_cast<size_t>(c) * static_cast<size_t>(oc.nin) + static_cast<size_t>(j)] = w;
  }
  for (int o = 0; o < oc.nout; ++o) {
    Layout out = pg_.output_layout(i, cfg, o);
    keys[2 * oc.nin + o] = out.hash();
    oc.out_bytes[static_cast<size_t>(c) * static_cast<size_t>(oc.nout) + static_cast<size_t>(o)] =
        numel(local_dims(pg_.out_dims(i, o), out, mesh)) * static_cast<double>(pg_.elem_size(i, o));
    out.partial.clear();
    keys[2 * oc.nin + oc.nout + o] = out.hash();
  }
  oc.have[static_cast<size_t>(c)] = 1;
  return keys;
}

const Simulator::Move& Simulator::priced(uint64_t key, const Layout& from, const Layout& to,
                                          const std::vector<int64_t>& dims, size_t elem) {
  Move m;
  const Mesh& mesh = pg_.mesh();
  if (from != to) {
    for (const CommStep& st : redistribute(from, to, dims, mesh)) {
      const double before = numel(st.local_before) * static_cast<double>(elem);
      const double after = numel(st.local_after) * static_cast<double>(elem);
      bool spans = false;
      for (int a : st.axes) spans = spans || mesh.axis(a).inter_node;
      const int link = spans ? kNetwork : kIntra;
      // The rank's thread calls MPI between two compiled segments (HostOverheads).
      if (st.kind != CommStep::Kind::Slice && cluster_.host.dispatch_us > 0)
        m.tasks.emplace_back(kCompute, cluster_.host.dispatch_us * 1e-3);
      switch (st.kind) {
        case CommStep::Kind::Slice: m.tasks.emplace_back(kCompute, compute_.copy_ms(after)); break;
        case CommStep::Kind::AllReduce:
          m.tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::AllReduce, st.axes, before));
          break;
        case CommStep::Kind::AllGather:
          m.tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::AllGather, st.axes, before));
          if (outer(st.local_before, st.dim) > 1) m.tasks.emplace_back(kCompute, compute_.copy_ms(after));
          break;
        case CommStep::Kind::ReduceScatter:
          if (outer(st.local_before, st.dim) > 1) m.tasks.emplace_back(kCompute, compute_.copy_ms(before));
          m.tasks.emplace_back(link, collective_ms(cluster_, mesh, Collective::ReduceScatter, st.axes, before));
          break;
      }
    }
  }
  for (const auto& t : m.tasks) m.ms += t.second;
  return moves_.emplace(key, std::move(m)).first->second;
}

const Simulator::Move& Simulator::fwd_move(int p, int pc, int po, int i, int c, int j) {
  const uint64_t from = keys(p, pc)[2 * cache_[static_cast<size_t>(p)].nin + po], to = keys(i, c)[j];
  const uint64_t key = mix(mix(mix(mix(1, static_cast<uint64_t>(p)), static_cast<uint64_t>(po)), from), to);
  auto it = moves_.find(key);
  if (it != moves_.end()) return it->second;
  return priced(key, pg_.output_layout(p, pg_.config(p, pc), po), pg_.input_layout(i, pg_.config(i, c), j),
                pg_.out_dims(p, po), pg_.elem_size(p, po));
}

const Simulator::Move& Simulator::bwd_move(int i, int c, int j, int p, int pc, int po) {
  const OpCache& pcache = cache_[static_cast<size_t>(p)];
  const uint64_t from = keys(i, c)[cache_[static_cast<size_t>(i)].nin + j];
  const uint64_t to = keys(p, pc)[2 * pcache.nin + pcache.nout + po];
  const uint64_t key = mix(mix(mix(mix(2, static_cast<uint64_t>(p)), static_cast<uint64_t>(po)), from), to);
  auto it = moves_.find(key);
  if (it != moves_.end()) return it->second;
  Layout back = pg_.output_layout(p, pg_.config(p, pc), po);
  back.partial.clear();
  return priced(key, pg_.input_grad_layout(i, pg_.config(i, c), j), back, pg_.out_dims(p, po), pg_.elem_size(p, po));
}

const Simulator::Move& Simulator::out_move(int p, int pc, int po) {
  const uint64_t from = keys(p, pc)[2 * cache_[static_cast<size_t>(p)].nin + po];
  const uint64_t key = mix(mix(mix(3, static_cast<uint64_t>(p)), static_cast<uint64_t>(po)), from);
  auto it = moves_.find(key);
  if (it != moves_.end()) return it->second;
  return priced(key, pg_.output_layout(p, pg_.config(p, pc), po), Layout::replicated(pg_.out_dims(p, po).size()),
                pg_.out_dims(p, po), pg_.elem_size(p, po));
}

double Simulator::output_gather_ms(int p, int pc, int o) { return out_move(p, pc, o).ms; }

std::pair<int, int> Simulator::add_moves(int b, std::pair<int, int> after, const Move& m) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  for (const auto& [res, ms] : m.tasks) {
    Task t;
    t.resource = res;
    t.ms = ms;
    t.deps.push_back(after);
    blk.tasks.push_back(std::move(t));
    after = {b, static_cast<int>(blk.tasks.size()) - 1};
  }
  return after;
}

const std::vector<int>& Simulator::by_compute(int i) {
  auto& order = by_compute_[static_cast<size_t>(i)];
  if (order.empty()) {
    const double mult = mode_ == Mode::Training ? 3 : 1;
    std::vector<std::pair<double, int>> keyed;
    for (int c = 0; c < static_cast<int>(pg_.candidates(i).size()); ++c)
      keyed.emplace_back(mult * op_ms(i, c) + weight_sync_ms(i, c), c);
    std::stable_sort(keyed.begin(), keyed.end());
    for (const auto& k : keyed) order.push_back(k.second);
  }
  return order;
}

int Simulator::best_config(const Strategy& s, int i, bool with_users) {
  // The shortlist: the cheapest by their own work, and those that take a neighbour's
  // layout as it is (no move on that edge).
  std::vector<int> cands;
  for (int c : by_compute(i)) {
    if (cands.size() == kShortlist) break;
    if (pg_.uses_only(i, c, allowed_)) cands.push_back(c);
  }
  for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
    const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
    if (o.kind != Operand::Kind::Op) continue;
    for (int c : pg_.aligned_to_input(i, j, pg_.output_layout(o.index, pg_.config(o.index, s[static_cast<size_t>(o.index)]), o.output)))
      cands.push_back(c);
  }
  if (with_users)
    for (int o = 0; o < cache_[static_cast<size_t>(i)].nout; ++o)
      for (const auto& [u, j] : pg_.users(i, o))
        for (int c : pg_.aligned_to_output(i, o, pg_.input_layout(u, pg_.config(u, s[static_cast<size_t>(u)]), j)))
          cands.push_back(c);
  int best = s[static_cast<size_t>(i)];
  double best_ms = local_ms(s, i, best, with_users);
  for (int c : cands) {
    if (c == best || !pg_.uses_only(i, c, allowed_)) continue;
    const double ms = local_ms(s, i, c, with_users);
    if (ms < best_ms || (ms == best_ms && c < best)) {
      best_ms = ms;
      best = c;
    }
  }
  return best;
}

double Simulator::local_ms(const Strategy& s, int i, int c, bool with_users) {
  const bool train = mode_ == Mode::Training;
  double ms = (train ? 3 : 1) * task_ms(i, c) + weight_sync_ms(i, c);
  const auto& operands = pg_.operands(i);
  for (int j = 0; j < static_cast<int>(operands.size()); ++j) {
    const Operand& o = operands[static_cast<size_t>(j)];
    if (o.kind != Operand::Kind::Op) continue;
    const int pc = s[static_cast<size_t>(o.index)];
    ms += fwd_move(o.index, pc, o.output, i, c, j).ms;
    if (train) ms += bwd_move(i, c, j, o.index, pc, o.output).ms;
  }
  if (!with_users) return ms;
  for (int o = 0; o < cache_[static_cast<size_t>(i)].nout; ++o) {
    for (const auto& [u, j] : pg_.users(i, o)) {
      const int uc = s[static_cast<size_t>(u)];
      ms += fwd_move(i, c, o, u, uc, j).ms;
      if (train) ms += bwd_move(u, uc, j, i, c, o).ms;
    }
    if (!train && last_use_[static_cast<size_t>(i)][static_cast<size_t>(o)] == n_) ms += out_move(i, c, o).ms;
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
    ms += gradient_sync_ms(cluster_, pg_.mesh(), g.partial, bytes);
  }
  return memo = ms;
}

void Simulator::build_block(int b, const Strategy& s) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  blk.tasks.clear();
  blk.chain_end.clear();
  blk.dirty = true;
  ++stats_.blocks_rebuilt;
  auto cand = [&](int i) { return s[static_cast<size_t>(i)]; };
  if (b < n_) {  // forward block of op b: its inputs moved into place, then its compute
    const int i = b;
    std::vector<std::pair<int, int>> deps;
    for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
      const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
      if (o.kind != Operand::Kind::Op) continue;
      deps.push_back(add_moves(b, {fwd_block(o.index), kComputeTask}, fwd_move(o.index, cand(o.index), o.output, i, cand(i), j)));
    }
    Task t;
    t.resource = kCompute;
    t.ms = task_ms(i, cand(i));
    t.deps = std::move(deps);
    blk.tasks.push_back(std::move(t));
    block_compute_[static_cast<size_t>(b)] = static_cast<int>(blk.tasks.size()) - 1;
    return;
  }
  if (b == out_block()) {  // inference: every output gathered whole
    if (mode_ == Mode::Training) return;
    for (const auto& [p, o] : pg_.graph_outputs()) add_moves(b, {fwd_block(p), kComputeTask}, out_move(p, cand(p), o));
    return;
  }
  // Backward block of op i: its gradient task, then its inputs' gradients moved back
  // to their producers' layouts and its weights' gradients summed.
  const int i = 2 * n_ - 1 - b;
  Task t;
  t.resource = kCompute;
  t.ms = 2 * task_ms(i, cand(i));
  t.deps.push_back({fwd_block(i), kComputeTask});
  for (int o = 0; o < cache_[static_cast<size_t>(i)].nout; ++o) {
    for (const auto& [c, j] : pg_.users(i, o)) t.deps.push_back({bwd_block(c), chain_ref(j)});
    if (last_use_[static_cast<size_t>(i)][static_cast<size_t>(o)] == n_) t.deps.push_back({fwd_block(n_ - 1), kComputeTask});
  }
  blk.tasks.push_back(std::move(t));
  block_compute_[static_cast<size_t>(b)] = 0;
  const Mesh& mesh = pg_.mesh();
  blk.chain_end.assign(pg_.operands(i).size(), 0);
  for (int j = 0; j < static_cast<int>(pg_.operands(i).size()); ++j) {
    const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
    if (o.kind == Operand::Kind::Op) {
      blk.chain_end[static_cast<size_t>(j)] = add_moves(b, {b, 0}, bwd_move(i, cand(i), j, o.index, cand(o.index), o.output)).second;
      continue;
    }
    if (!pg_.is_weight(i, j)) continue;
    const Layout grad = pg_.input_grad_layout(i, pg_.config(i, cand(i)), j);
    if (grad.partial.empty()) continue;
    Task sync;
    bool spans = false;
    for (int a : grad.partial) spans = spans || mesh.axis(a).inter_node;
    sync.resource = spans ? kNetwork : kIntra;
    const double bytes = numel(local_dims(pg_.in_dims(i, j), grad, mesh)) * static_cast<double>(pg_.in_elem_size(i, j));
    sync.ms = gradient_sync_ms(cluster_, mesh, grad.partial, bytes);
    sync.deps.push_back({b, 0});
    blk.tasks.push_back(std::move(sync));
  }
}

SimResult Simulator::simulate(const Strategy& s) {
  require(static_cast<int>(s.size()) == n_, "strategy size does not match the graph");
  ++stats_.full;
  streaming_ = weights_stream(s);
  for (int b = 0; b < static_cast<int>(blocks_.size()); ++b) build_block(b, s);
  last_ = s;
  return schedule(0, s);
}

SimResult Simulator::update(const Strategy& s, const std::vector<int>& changed) {
  if (last_.empty() || weights_stream(s) != streaming_) return simulate(s);  // every compute task changes
  ++stats_.incremental;
  std::set<int> rebuild;
  for (int i : changed) {
    rebuild.insert(fwd_block(i));
    for (int o = 0; o < cache_[static_cast<size_t>(i)].nout; ++o)
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
  const bool blocking = cluster_.host.blocking_collectives;
  // The resources' free times after task t (a blocking collective holds the compute stream too).
  auto advance = [&](double* free_at, const Task& t) {
    free_at[t.resource] = std::max(free_at[t.resource], t.finish);
    if (blocking && t.resource != kCompute) free_at[kCompute] = std::max(free_at[kCompute], t.finish);
  };
  stats_.blocks_total += static_cast<size_t>(nb);
  double free_at[3] = {0, 0, 0};
  if (first_block > 0) {
    // The state after the block before `first_block`: its start state advanced by its tasks.
    const Block& prev = blocks_[static_cast<size_t>(first_block - 1)];
    std::copy(prev.state_in, prev.state_in + 3, free_at);
    for (const Task& t : prev.tasks) advance(free_at, t);
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
    const bool same_state = std::equal(free_at, free_at + 3, blk.state_in);
    if (!blk.dirty && same_state) {
      bool deps_moved = false;
      for (const Task& t : blk.tasks)
        for (const auto& d : t.deps) deps_moved = deps_moved || (d.first != b && moved[static_cast<size_t>(d.first)]);
      if (!deps_moved) {  // nothing it depends on changed: its times stand
        for (const Task& t : blk.tasks) advance(free_at, t);
        continue;
      }
    }
    ++stats_.blocks_scheduled;
    std::copy(free_at, free_at + 3, blk.state_in);
    bool changed = !same_state || blk.dirty;
    blk.compute_ms = blk.comm_ms = blk.last_finish = 0;
    for (Task& t : blk.tasks) {
      double ready = 0;
      for (const auto& d : t.deps) ready = std::max(ready, resolve(d).finish);
      // A blocking collective holds the compute stream as well as its link.
      const bool holds_compute = blocking && t.resource != kCompute;
      const double start = std::max({ready, free_at[t.resource], holds_compute ? free_at[kCompute] : 0.0});
      const double finish = start + t.ms;
      changed = changed || finish != t.finish || start != t.start;
      t.start = start;
      t.finish = finish;
      free_at[t.resource] = finish;
      if (holds_compute) free_at[kCompute] = finish;
      (t.resource == kCompute ? blk.compute_ms : blk.comm_ms) += t.ms;
      blk.last_finish = std::max(blk.last_finish, finish);
    }
    blk.dirty = false;
    moved[static_cast<size_t>(b)] = changed ? 1 : 0;
  }
  SimResult r;
  for (const Block& blk : blocks_) {
    r.step_ms = std::max(r.step_ms, blk.last_finish);
    r.compute_ms += blk.compute_ms;
    r.comm_ms += blk.comm_ms;
    r.tasks += blk.tasks.size();
  }
  r.overlap_ms = std::max(0.0, r.compute_ms + r.comm_ms - r.step_ms);
  r.memory_bytes = memory_bytes(s);
  r.fits = r.memory_bytes <= cluster_.memory_gb * 1e9;
  return r;
}

double Simulator::weight_bytes(const Strategy& s) {
  // Each constant's block once per layout it is used in.
  std::vector<std::tuple<const Node*, uint64_t, double>> weights;
  for (int i = 0; i < n_; ++i) {
    const int c = s[static_cast<size_t>(i)];
    const uint64_t* k = keys(i, c);
    const OpCache& oc = cache_[static_cast<size_t>(i)];
    for (int j = 0; j < oc.nin; ++j) {
      const double w = oc.weight_bytes[static_cast<size_t>(c) * static_cast<size_t>(oc.nin) + static_cast<size_t>(j)];
      if (w > 0) weights.emplace_back(pg_.node(i).inputs()[static_cast<size_t>(j)].node.get(), k[j], w);
    }
  }
  std::sort(weights.begin(), weights.end());
  double w = 0;
  for (size_t k = 0; k < weights.size(); ++k)
    if (k == 0 || std::get<0>(weights[k]) != std::get<0>(weights[k - 1]) || std::get<1>(weights[k]) != std::get<1>(weights[k - 1]))
      w += std::get<2>(weights[k]);
  return w;
}

double Simulator::memory_bytes(const Strategy& s) {
  double acts = 0, live = 0, peak = 0;
  std::vector<std::vector<std::pair<int, int>>> frees(mode_ == Mode::Inference ? static_cast<size_t>(n_) + 1 : 0);
  for (int i = 0; i < n_; ++i) {
    const int c = s[static_cast<size_t>(i)];
    keys(i, c);
    const OpCache& oc = cache_[static_cast<size_t>(i)];
    for (int o = 0; o < oc.nout; ++o) {
      const double bytes = oc.out_bytes[static_cast<size_t>(c) * static_cast<size_t>(oc.nout) + static_cast<size_t>(o)];
      acts += bytes;
      if (mode_ == Mode::Inference) {
        live += bytes;
        frees[static_cast<size_t>(last_use_[static_cast<size_t>(i)][static_cast<size_t>(o)])].emplace_back(i, o);
      }
    }
    if (mode_ == Mode::Inference) {
      peak = std::max(peak, live);
      for (const auto& [p, o] : frees[static_cast<size_t>(i)]) {
        const int pc = s[static_cast<size_t>(p)];
        const OpCache& pcache = cache_[static_cast<size_t>(p)];
        live -= pcache.out_bytes[static_cast<size_t>(pc) * static_cast<size_t>(pcache.nout) + static_cast<size_t>(o)];
      }
    }
  }
  const double w = weight_bytes(s);
  // Training keeps every activation for the backward pass, and per weight its
  // gradient and two optimizer moments.
  return mode_ == Mode::Training ? 4 * w + acts : w + peak;
}

}  // namespace isomer::parallel
