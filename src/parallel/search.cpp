#include "parallel/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <queue>
#include <random>
#include <unordered_set>

#include "ir/error.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "rules/match.h"

namespace isomer::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What the search minimizes: the step time, plans that do not fit far behind.
double cost_of(const SimResult& r) { return r.fits ? r.step_ms : 1e9 + r.step_ms; }

// A deterministic uniform double in [0, 1) from the generator (the standard
// distributions may differ between library versions; plans must not).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }

bool interrupted(const ParallelSearchOptions& o) { return o.interrupt && o.interrupt->load(); }

// The activation input and the rank-2 weight of a product with a weight, or nullopt.
std::optional<std::pair<int, int>> weight_product(const ParallelGraph& pg, int i) {
  const Node& n = pg.node(i);
  if (n.op_type() != "MatMul" && n.op_type() != "Gemm") return std::nullopt;
  const auto& ops = pg.operands(i);
  if (ops.size() < 2 || ops[1].kind != Operand::Kind::Constant || ops[0].kind == Operand::Kind::Constant)
    return std::nullopt;
  if (n.inputs()[1].type().rank() != 2) return std::nullopt;
  return std::make_pair(0, 1);
}

int find_dim(const OpSpec& spec, char kind) {
  for (size_t p = 0; p < spec.dims.size(); ++p)
    if (spec.dims[p].kind == kind) return static_cast<int>(p);
  return -1;
}

// The dimension cutting output dim 0 (the batch), or -1.
int batch_dim(const OpSpec& spec) {
  for (size_t p = 0; p < spec.dims.size(); ++p)
    if (!spec.dims[p].out.empty() && spec.dims[p].out[0] == 0) return static_cast<int>(p);
  return -1;
}

struct Mcmc {
  const ParallelGraph& pg;
  Simulator& sim;
  const ParallelSearchOptions& o;
  Clock::time_point deadline;
  size_t steps = 0, accepted = 0;
  std::string stop = "steps";

  // Refines `s` in place; returns its result. Every other proposal is the best
  // configuration for the operator given its neighbours (when `informed`).
  double seconds = 0;

  SimResult run(Strategy& s, size_t max_steps, uint64_t seed, bool informed) {
    const auto t0 = Clock::now();
    struct Timer {
      Clock::time_point t0;
      double& out;
      ~Timer() { out = seconds_since(t0); }
    } timer{t0, seconds};
    std::mt19937_64 rng(seed);
    Strategy cur = s;
    SimResult cur_r = sim.simulate(cur), best_r = cur_r;
    double cur_cost = cost_of(cur_r), best_cost = cur_cost;
    const int n = pg.size();
    for (size_t step = 0; step < max_steps && n > 0; ++step) {
      if (interrupted(o)) {
        stop = "interrupted";
        break;
      }
      if ((step & 31) == 0 && Clock::now() > deadline) {
        stop = "time";
        break;
      }
      ++steps;
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(n));
      const int ncand = static_cast<int>(pg.candidates(i).size());
      const int c = informed && (step & 1) ? sim.best_config(cur, i) : static_cast<int>(rng() % static_cast<uint64_t>(ncand));
      const double u = uniform(rng);
      if (c == cur[static_cast<size_t>(i)]) continue;
      const int old = cur[static_cast<size_t>(i)];
      cur[static_cast<size_t>(i)] = c;
      const SimResult r = o.incremental ? sim.update(cur, {i}) : sim.simulate(cur);
      const double cost = cost_of(r);
      if (cost < cur_cost || u < std::exp(-o.alpha * (cost - cur_cost) / cur_cost)) {
        ++accepted;
        cur_cost = cost;
        cur_r = r;
        if (cost < best_cost) {
          best_cost = cost;
          best_r = r;
          s = cur;
        }
      } else {
        cur[static_cast<size_t>(i)] = old;
        if (o.incremental) sim.update(cur, {i});
      }
    }
    return best_r;
  }
};

PlanResult evaluate(std::shared_ptr<ParallelGraph> pg, Simulator& sim, Strategy s) {
  PlanResult r;
  r.sim = sim.simulate(s);
  r.graph = std::move(pg);
  r.strategy = std::move(s);
  return r;
}

// The better of the search's starting points for one graph: data parallelism, the
// series DP's plan and Megatron's (where it applies), each on the whole mesh and
// (Unity's hierarchical step) on the devices of one node, the nodes holding copies:
// where the links between nodes are slow, no traffic between them can be best.
PlanResult best_start(const std::shared_ptr<ParallelGraph>& pg, Simulator& sim) {
  const Mesh& mesh = pg->mesh();
  uint64_t intra = 0;
  for (int a = 0; a < mesh.num_axes(); ++a)
    if (!mesh.axis(a).inter_node) intra |= uint64_t{1} << a;
  std::vector<uint64_t> masks{~uint64_t{0}};
  if (intra != (uint64_t{1} << mesh.num_axes()) - 1 && intra != 0) masks.push_back(intra);
  PlanResult best = evaluate(pg, sim, pg->data_parallel());
  for (uint64_t mask : masks) {
    sim.set_allowed_axes(mask);
    for (Strategy s : {pg->data_parallel(mask), series_dp(*pg, sim)}) {
      PlanResult r = evaluate(pg, sim, std::move(s));
      if (cost_of(r.sim) < cost_of(best.sim)) best = r;
    }
    if (std::optional<Strategy> m = megatron_strategy(*pg, sim, mask)) {
      PlanResult r = evaluate(pg, sim, *m);
      if (cost_of(r.sim) < cost_of(best.sim)) best = r;
    }
  }
  sim.set_allowed_axes(~uint64_t{0});
  return best;
}

}  // namespace

namespace {

// Megatron's assignment with tensor parallelism over the mesh axes `tp` and the batch
// over `dp`; nullopt if no product with a weight takes it.
std::optional<Strategy> megatron_with(const ParallelGraph& pg, Simulator& sim, const std::vector<int>& tp,
                                      const std::vector<int>& dp) {
  const Mesh& mesh = pg.mesh();
  uint64_t allowed = 0;
  for (int a : tp) allowed |= uint64_t{1} << a;
  for (int a : dp) allowed |= uint64_t{1} << a;
  Strategy s = pg.data_parallel(allowed);
  const uint64_t saved = sim.allowed_axes();
  sim.set_allowed_axes(allowed);
  bool any = false;
  for (int i = 0; i < pg.size(); ++i) {
    std::optional<std::pair<int, int>> wp = weight_product(pg, i);
    int chosen = -1;
    if (wp) {
      const OpSpec& spec = pg.spec(i);
      const Operand& act = pg.operands(i)[static_cast<size_t>(wp->first)];
      bool split_features = false;  // the activation arrives cut along its last dim over `tp`
      if (act.kind == Operand::Kind::Op) {
        const Layout l = pg.output_layout(act.index, pg.config(act.index, s[static_cast<size_t>(act.index)]), act.output);
        for (int a : l.dims.back()) split_features = split_features || std::find(tp.begin(), tp.end(), a) != tp.end();
      }
      OpConfig c{std::vector<std::vector<int>>(spec.dims.size())};
      const int tp_dim = find_dim(spec, split_features ? 'R' : 'P'), b = batch_dim(spec);
      if (tp_dim >= 0) {
        c.axes[static_cast<size_t>(tp_dim)] = tp;
        if (b >= 0 && b != tp_dim && spec.dims[static_cast<size_t>(b)].extent % mesh.group_size(dp) == 0)
          c.axes[static_cast<size_t>(b)] = dp;
        chosen = pg.find_config(i, c);
      }
      any = any || chosen >= 0;
    }
    if (chosen < 0) chosen = sim.best_config(s, i, false);
    s[static_cast<size_t>(i)] = chosen;
  }
  sim.set_allowed_axes(saved);
  if (!any) return std::nullopt;
  return s;
}

}  // namespace

std::optional<Strategy> megatron_strategy(const ParallelGraph& pg, Simulator& sim, uint64_t allowed) {
  const Mesh& mesh = pg.mesh();
  for (int i = 0; i < pg.size(); ++i)
    if (pg.node(i).op_type() == "Conv") return std::nullopt;  // Megatron is a plan for transformers and MLPs
  std::vector<int> inter, intra;
  for (int a = 0; a < mesh.num_axes(); ++a)
    if (allowed >> a & 1) (mesh.axis(a).inter_node ? inter : intra).push_back(a);
  // The tensor-parallel degree as practitioners pick it: the fastest of the node's
  // divisors (attention heads must divide it), the node's other devices and the nodes
  // cutting the batch.
  std::optional<Strategy> best;
  double best_ms = 0;
  for (size_t k = intra.size(); k >= 1; --k) {
    std::vector<int> tp(intra.end() - static_cast<long>(k), intra.end());
    std::vector<int> dp = inter;
    dp.insert(dp.end(), intra.begin(), intra.end() - static_cast<long>(k));
    std::optional<Strategy> s = megatron_with(pg, sim, tp, dp);
    if (!s) continue;
    const SimResult r = sim.simulate(*s);
    const double ms = r.fits ? r.step_ms : 1e9 + r.step_ms;
    if (!best || ms < best_ms) {
      best = s;
      best_ms = ms;
    }
  }
  return best;
}

Strategy series_dp(const ParallelGraph& pg, Simulator& sim, int top_k) {
  const int n = pg.size();
  if (n == 0) return {};
  // Values crossing each point of the topological order.
  std::vector<int> crossing(static_cast<size_t>(n), 0), only(static_cast<size_t>(n), -1);
  for (int p = 0; p < n; ++p)
    for (int o = 0; o < static_cast<int>(pg.node(p).num_outputs()); ++o) {
      int last = p;
      for (const auto& [u, j] : pg.users(p, o)) last = std::max(last, u);
      for (const auto& [q, qo] : pg.graph_outputs())
        if (q == p && qo == o) last = n - 1;
      for (int k = p; k < last; ++k) {
        ++crossing[static_cast<size_t>(k)];
        only[static_cast<size_t>(k)] = p;
      }
    }
  std::vector<int> cuts;
  for (int k = 0; k + 1 < n; ++k)
    if (crossing[static_cast<size_t>(k)] == 1 && only[static_cast<size_t>(k)] == k) cuts.push_back(k);
  cuts.push_back(n - 1);
  // Candidate states of a cut operator: the cheapest by its own work, data
  // parallelism, and "whole".
  auto states_of = [&](int i) {
    const std::vector<int>& order = sim.by_compute(i);
    std::vector<int> out;
    for (int c : order) {
      if (static_cast<int>(out.size()) == top_k) break;
      if (pg.uses_only(i, c, sim.allowed_axes())) out.push_back(c);
    }
    for (int extra : {pg.data_parallel_config(i, sim.allowed_axes()), 0})
      if (std::find(out.begin(), out.end(), extra) == out.end()) out.push_back(extra);
    return out;
  };
  Strategy work = pg.data_parallel(sim.allowed_axes());
  struct Choice {
    double cost = 0;
    int prev_state = -1;
    std::vector<int> interior;  // configurations of the segment's other operators
  };
  std::vector<std::vector<int>> states;
  std::vector<std::vector<Choice>> table;
  int begin = 0;
  for (size_t k = 0; k < cuts.size(); ++k) {
    const int end = cuts[k];
    std::vector<int> here = states_of(end);
    std::vector<Choice> best(here.size(), Choice{1e300, -1, {}});
    const size_t prev_count = k == 0 ? 1 : states[k - 1].size();
    for (size_t a = 0; a < prev_count; ++a) {
      double base = 0;
      if (k > 0) {
        work[static_cast<size_t>(cuts[k - 1])] = states[k - 1][a];
        base = table[k - 1][a].cost;
        if (base >= 1e300) continue;
      }
      // Segment interior, greedily from the cut's configuration.
      std::vector<int> interior;
      double seg = 0;
      for (int i = begin; i < end; ++i) {
        const int c = sim.best_config(work, i, false);
        work[static_cast<size_t>(i)] = c;
        interior.push_back(c);
        seg += sim.local_ms(work, i, c, false);
      }
      for (size_t b = 0; b < here.size(); ++b) {
        double cost = base + seg + sim.local_ms(work, end, here[b], false);
        if (sim.mode() == Mode::Inference)
          for (const auto& [q, qo] : pg.graph_outputs())
            if (q == end) cost += sim.output_gather_ms(q, here[b], qo);
        if (cost < best[b].cost) best[b] = {cost, static_cast<int>(a), interior};
      }
    }
    states.push_back(std::move(here));
    table.push_back(std::move(best));
    begin = end + 1;
  }
  // Back from the best final state.
  Strategy s(static_cast<size_t>(n), 0);
  size_t state = 0;
  for (size_t b = 1; b < table.back().size(); ++b)
    if (table.back()[b].cost < table.back()[state].cost) state = b;
  for (size_t k = cuts.size(); k-- > 0;) {
    const Choice& c = table[k][state];
    s[static_cast<size_t>(cuts[k])] = states[k][state];
    const int first = k == 0 ? 0 : cuts[k - 1] + 1;
    for (size_t m = 0; m < c.interior.size(); ++m) s[static_cast<size_t>(first) + m] = c.interior[m];
    if (k > 0) state = static_cast<size_t>(std::max(c.prev_state, 0));
  }
  return s;
}

ParallelSearchReport parallel_search(const Graph& g, const SearchContext& ctx, const ParallelSearchOptions& o) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.budget_s));
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  const Mesh mesh(ctx.cluster);
  ParallelSearchReport rep;
  auto pg0 = std::make_shared<ParallelGraph>(g, mesh);
  auto sim0 = std::make_unique<Simulator>(*pg0, ctx.cluster, ctx.compute, o.mode);
  rep.data_parallel = evaluate(pg0, *sim0, pg0->data_parallel());
  if (std::optional<Strategy> m = megatron_strategy(*pg0, *sim0)) rep.megatron = evaluate(pg0, *sim0, *m);
  say("data parallelism: " + std::to_string(rep.data_parallel.sim.step_ms) + " ms");
  const size_t max_steps = o.max_steps ? o.max_steps : std::max<size_t>(2000, 40 * static_cast<size_t>(pg0->size()));
  if (o.baseline != ParallelSearchOptions::Baseline::None) {
    if (o.baseline == ParallelSearchOptions::Baseline::Megatron) {
      require(rep.megatron.has_value(), "no Megatron-style plan for this graph (it needs products with weights, no "
                                        "convolutions, and several devices per node)");
      rep.best = *rep.megatron;
    } else {
      rep.best = rep.data_parallel;
    }
    rep.stop_reason = "baseline";
    rep.seconds = seconds_since(start);
    return rep;
  }

  PlanResult chosen;
  std::unique_ptr<Simulator> chosen_sim;
  if (o.algorithm == ParallelSearchOptions::Algorithm::FlexFlow) {
    chosen = rep.data_parallel;
    chosen_sim = std::move(sim0);
  } else {
    // Unity: best-first over rewritten graphs, each costed by its DP plan.
    chosen = best_start(pg0, *sim0);
    chosen_sim = std::move(sim0);
    say("series DP: " + std::to_string(chosen.sim.step_ms) + " ms");
    struct Entry {
      double cost;
      size_t order;
      Graph graph;
      std::map<std::string, size_t> path;
      bool operator<(const Entry& e) const { return cost != e.cost ? cost > e.cost : order > e.order; }
    };
    std::priority_queue<Entry> queue;
    std::unordered_set<uint64_t> seen{structural_hash(g)};
    queue.push({cost_of(chosen.sim), 0, g, {}});
    size_t order = 1;
    const auto rewrite_deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(0.4 * o.budget_s));
    while (!queue.empty() && rep.graphs < o.max_graphs && !o.rules.empty()) {
      if (interrupted(o) || Clock::now() > rewrite_deadline) break;
      Entry e = queue.top();
      queue.pop();
      GraphIndex index(e.graph);
      for (const Rule& rule : o.rules) {
        if (rep.graphs >= o.max_graphs || Clock::now() > rewrite_deadline || interrupted(o)) break;
        // The rule at every match at once (a block repeated n times gets the rewrite
        // in each block: one graph, not n steps of the queue), then at single matches
        // (one pattern can be a gain in one place and a loss in another: attention's
        // scale and GELU's 1/sqrt(2) are both a product, a bias and a division).
        const std::vector<Match> all = find_matches(index, rule, nullptr, 64);
        std::vector<std::pair<const Match*, Graph>> candidates;
        size_t everywhere = 0;
        if (all.size() >= 2) {
          // Matches that overlap (one's variable is another's root: successive layers
          // of a chain) cannot be rewritten in one rebuild: keep each match that can
          // join the ones kept so far.
          std::vector<std::pair<const Rule*, const Match*>> kept;
          std::optional<Graph> next;
          for (const Match& m : all) {
            kept.emplace_back(&rule, &m);
            try {
              ApplyInfo info;
              Graph g2 = apply_rules(e.graph, kept, &info);
              if (!info.applied.back()) throw Error("not applied");
              next = std::move(g2);
              everywhere = kept.size();
            } catch (const Error&) {
              kept.pop_back();
            }
          }
          if (everywhere >= 2) candidates.emplace_back(nullptr, std::move(*next));
        }
        for (size_t k = 0; k < all.size() && k < 4; ++k) {
          bool applied = false;
          Graph next = apply_rule(e.graph, rule, all[k], nullptr, &applied);
          if (applied) candidates.emplace_back(&all[k], std::move(next));
        }
        for (auto& [match, rewritten] : candidates) {
          Graph next = simplify(rewritten);
          if (!seen.insert(structural_hash(next)).second) continue;
          ++rep.graphs;
          auto pg = std::make_shared<ParallelGraph>(next, mesh);
          auto sim = std::make_unique<Simulator>(*pg, ctx.cluster, ctx.compute, o.mode);
          PlanResult r = best_start(pg, *sim);
          r.rules_applied = e.path;
          r.rules_applied[rule.name] += match ? 1 : everywhere;
          say("graph " + std::to_string(rep.graphs) + ": " + rule.name + (match ? "" : " (every match)") + " -> " +
              std::to_string(r.sim.step_ms) + " ms");
          if (cost_of(r.sim) < cost_of(chosen.sim)) {
            say("rewrite " + rule.name + ": " + std::to_string(r.sim.step_ms) + " ms");
            chosen = r;
            chosen_sim = std::move(sim);
          }
          queue.push({cost_of(r.sim), order++, next, r.rules_applied});
          if (rep.graphs >= o.max_graphs) break;
        }
      }
    }
  }
  // MCMC refinement of the chosen graph's plan.
  rep.start_ms = chosen.sim.step_ms;
  Mcmc mcmc{*chosen.graph, *chosen_sim, o, deadline};
  Strategy s = chosen.strategy;
  SimResult r = mcmc.run(s, max_steps, o.seed, o.algorithm == ParallelSearchOptions::Algorithm::Unity);
  if (cost_of(r) < cost_of(chosen.sim)) {
    chosen.strategy = s;
    chosen.sim = chosen_sim->simulate(s);
  }
  rep.steps = mcmc.steps;
  rep.mcmc_seconds = mcmc.seconds;
  rep.accepted = mcmc.accepted;
  rep.stop_reason = mcmc.stop;
  if (interrupted(o)) rep.stop_reason = "interrupted";
  // Never worse than the baselines.
  if (cost_of(rep.data_parallel.sim) < cost_of(chosen.sim)) chosen = rep.data_parallel;
  rep.best = chosen;
  rep.sim_stats = chosen_sim->stats();
  chosen_sim.reset();
  // Incremental against full re-simulation, on single-operator changes of the plan.
  {
    std::mt19937_64 rng(o.seed ^ 0x51u);
    Strategy probe = chosen.strategy;
    const ParallelGraph& pg = *chosen.graph;
    Simulator sim(pg, ctx.cluster, ctx.compute, o.mode);
    const int trials = 40;
    double inc = 0, full = 0;
    for (int t = 0; t < trials && pg.size() > 0; ++t) {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(pg.size()));
      Strategy next = probe;
      next[static_cast<size_t>(i)] = static_cast<int>(rng() % pg.candidates(i).size());
      sim.simulate(next);  // both timings below see the same memoized costs
      sim.simulate(probe);
      auto t0 = Clock::now();
      sim.update(next, {i});
      inc += seconds_since(t0);
      t0 = Clock::now();
      sim.simulate(next);
      full += seconds_since(t0);
      probe = std::move(next);
    }
    rep.incremental_us = inc / trials * 1e6;
    rep.full_us = full / trials * 1e6;
  }
  rep.seconds = seconds_since(start);
  return rep;
}

}  // namespace isomer::parallel
