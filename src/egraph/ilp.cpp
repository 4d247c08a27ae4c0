// Exact extraction as an integer program, solved by CBC (see egraph/extract.h).
//
// The formulation, and why it is shaped so (the LP relaxation decides how fast CBC
// closes the gap; on NasRNN a looser one left 25% after 10 s on 487 e-nodes):
//   - Presolve. Only e-nodes the roots can reach, with finite costs, whose child
//     classes can all be computed. An e-node is dropped when another one of its class
//     costs no more and reads a subset of its child classes (commuted operands,
//     Add(a,b) beside Add(b,a), are the common case): swapping it for the other never
//     costs more and adds no edge, so no cycle. Left in, such twins let the LP take
//     half of each, and each half asks only half of its children, level after level.
//   - A binary x_j per e-node; at most one per class (an optimal choice needs no
//     more), exactly one per root class.
//   - Children, aggregated per (class, child class): the e-nodes of class c that read
//     class d, summed, are at most the e-nodes of d, summed. Valid because at most one
//     e-node of c is chosen, and tighter than one row per e-node.
//   - Acyclicity where cycles are possible at all (strongly connected components of
//     the class graph): every elementary cycle of a small component cut (see
//     cycle_row), positions with big-M for a large one; a cycle the solution still
//     contains is cut and the problem solved again.
//   - CBC's cut generators (probing, Gomory, clique, MIR, flow and knapsack covers).
//   - Warm start: the greedy choice (its dropped e-nodes swapped for what dominates
//     them) is CBC's incumbent and so its cutoff.
#include <CbcModel.hpp>
#include <CglClique.hpp>
#include <CglGomory.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CglFlowCover.hpp>
#include <CglKnapsackCover.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "egraph/extract.h"

namespace isomer::eg {
namespace {

std::vector<ClassId> child_classes(const EGraph& g, const ENode& n) {
  std::vector<ClassId> out;
  for (ClassId c : n.children)
    if (c != kNoClass) out.push_back(g.find(c));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr double kGapTolerance = 1e-3;
// Costs in microseconds: CBC's tolerances are absolute, and prices of a few
// thousandths of a millisecond vanished below them.
constexpr double kObjectiveScale = 1e3;

struct Column {
  ClassId cls;
  uint32_t index;
  double cost;
  std::vector<ClassId> children;  // distinct, canonical
};

// What is left of the e-graph for the solver (see the top of the file).
struct Problem {
  std::vector<Column> cols;
  std::map<ClassId, std::vector<int>> of_class;  // ordered: the model is deterministic
  // (class, e-node) dropped as dominated -> the index of the e-node that replaces it.
  std::map<std::pair<ClassId, uint32_t>, uint32_t> replaced;
  size_t dropped = 0;
};

Problem presolve(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs) {
  // Candidates of every class the roots can reach through finite e-nodes.
  std::map<ClassId, std::vector<Column>> cand;
  {
    std::vector<ClassId> stack;
    for (ClassId r : roots) stack.push_back(g.find(r));
    while (!stack.empty()) {
      const ClassId c = stack.back();
      stack.pop_back();
      if (cand.count(c)) continue;
      std::vector<Column>& mine = cand[c];
      auto cost_it = costs.find(c);
      const EClass& k = g.cls(c);
      for (uint32_t i = 0; i < k.nodes.size(); ++i) {
        const double cost =
            cost_it == costs.end() || i >= cost_it->second.size() ? kInfiniteCost : cost_it->second[i];
        if (cost == kInfiniteCost) continue;
        Column col{c, i, cost, child_classes(g, k.nodes[i])};
        if (std::binary_search(col.children.begin(), col.children.end(), c)) continue;  // reads itself
        for (ClassId ch : col.children) stack.push_back(ch);
        mine.push_back(std::move(col));
      }
    }
  }
  Problem p;
  // E-nodes reading a class that cannot be computed, to a fixed point.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [c, mine] : cand) {
      const size_t before = mine.size();
      std::erase_if(mine, [&](const Column& col) {
        return std::any_of(col.children.begin(), col.children.end(),
                           [&](ClassId ch) { return cand.at(ch).empty(); });
      });
      if (mine.size() != before) {
        p.dropped += before - mine.size();
        changed = true;
      }
    }
  }
  // Dominated e-nodes: cheaper (then fewer children, then the first) first; an e-node
  // goes when one kept before it costs no more and reads a subset of its classes.
  for (auto& [c, mine] : cand) {
    std::stable_sort(mine.begin(), mine.end(), [](const Column& a, const Column& b) {
      if (a.cost != b.cost) return a.cost < b.cost;
      return a.children.size() < b.children.size();
    });
    std::vector<Column> kept;
    for (Column& col : mine) {
      auto by = std::find_if(kept.begin(), kept.end(), [&](const Column& k) {
        return std::includes(col.children.begin(), col.children.end(), k.children.begin(), k.children.end());
      });
      if (by != kept.end()) {
        p.replaced[{c, col.index}] = by->index;
        ++p.dropped;
      } else {
        kept.push_back(std::move(col));
      }
    }
    mine = std::move(kept);
  }
  // What the roots reach through what is left.
  std::set<ClassId> reach;
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    const ClassId c = stack.back();
    stack.pop_back();
    if (!reach.insert(c).second) continue;
    for (const Column& col : cand.at(c))
      for (ClassId ch : col.children) stack.push_back(ch);
  }
  for (ClassId c : reach)
    for (Column& col : cand.at(c)) {
      p.of_class[c].push_back(static_cast<int>(p.cols.size()));
      p.cols.push_back(std::move(col));
    }
  return p;
}

// The strongly connected components (of more than one class) of the class graph
// (an edge from a class to each child class of its e-nodes); Tarjan's algorithm,
// iterative.
std::vector<std::vector<ClassId>> cyclic_components(const Problem& p) {
  std::unordered_map<ClassId, std::vector<ClassId>> edges;
  for (const Column& col : p.cols)
    for (ClassId ch : col.children) edges[col.cls].push_back(ch);
  std::unordered_map<ClassId, int> index, low;
  std::unordered_set<ClassId> on_stack;
  std::vector<ClassId> stack;
  std::vector<std::vector<ClassId>> out;
  int next = 0;
  for (const auto& [root, unused] : p.of_class) {
    (void)unused;
    if (index.count(root)) continue;
    std::vector<std::pair<ClassId, size_t>> work{{root, 0}};
    index[root] = low[root] = next++;
    stack.push_back(root);
    on_stack.insert(root);
    while (!work.empty()) {
      auto& [c, k] = work.back();
      const std::vector<ClassId>& es = edges[c];
      if (k < es.size()) {
        ClassId d = es[k++];
        if (!index.count(d)) {
          index[d] = low[d] = next++;
          stack.push_back(d);
          on_stack.insert(d);
          work.push_back({d, 0});
        } else if (on_stack.count(d)) {
          low[c] = std::min(low[c], index[d]);
        }
        continue;
      }
      const ClassId done = c;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
      if (low[done] != index[done]) continue;
      std::vector<ClassId> comp;
      ClassId x;
      do {
        x = stack.back();
        stack.pop_back();
        on_stack.erase(x);
        comp.push_back(x);
      } while (x != done);
      if (comp.size() > 1) out.push_back(std::move(comp));
    }
  }
  return out;
}

// Every elementary cycle of a strongly connected component (each once, listed from
// its smallest class), or nullopt when there are more than `limit` or finding them
// takes more than `steps` (then the caller orders the component by positions).
std::optional<std::vector<std::vector<ClassId>>> elementary_cycles(
    std::vector<ClassId> comp, const std::unordered_map<ClassId, std::vector<ClassId>>& next, size_t limit = 256,
    size_t steps = 200000) {
  std::sort(comp.begin(), comp.end());
  std::vector<std::vector<ClassId>> out;
  std::vector<ClassId> path;
  std::unordered_set<ClassId> on_path;
  size_t taken = 0;
  bool over = false;
  std::function<void(ClassId, ClassId)> walk = [&](ClassId s, ClassId v) {
    auto it = next.find(v);
    if (it == next.end()) return;
    for (ClassId w : it->second) {
      if (over) return;
      if (++taken > steps) {
        over = true;
        return;
      }
      if (w == s) {
        out.push_back(path);
        if (out.size() > limit) over = true;
      } else if (w > s && !on_path.count(w)) {
        path.push_back(w);
        on_path.insert(w);
        walk(s, w);
        on_path.erase(w);
        path.pop_back();
      }
    }
  };
  for (ClassId s : comp) {
    path = {s};
    on_path = {s};
    walk(s, s);
    if (over) return std::nullopt;
  }
  return out;
}

// The greedy choice on the presolved problem: dropped e-nodes swapped for those that
// replace them, only what the roots need; empty if it does not fit.
std::unordered_map<ClassId, uint32_t> warm_choice(const EGraph& g, const Problem& p, const Extraction& warm,
                                                  const std::vector<ClassId>& roots) {
  std::unordered_map<ClassId, uint32_t> choice;
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    const ClassId c = stack.back();
    stack.pop_back();
    if (choice.count(c)) continue;
    auto w = warm.choice.find(c);
    auto cls = p.of_class.find(c);
    if (w == warm.choice.end() || cls == p.of_class.end()) return {};
    uint32_t index = w->second;
    if (auto r = p.replaced.find({c, index}); r != p.replaced.end()) index = r->second;
    auto j = std::find_if(cls->second.begin(), cls->second.end(), [&](int j) { return p.cols[j].index == index; });
    if (j == cls->second.end()) return {};
    choice[c] = index;
    for (ClassId ch : p.cols[*j].children) stack.push_back(ch);
  }
  return choice;
}

}  // namespace

std::optional<Extraction> extract_ilp(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs,
                                      const Extraction& warm, double time_limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto left = [&] {
    return time_limit_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const Problem p = presolve(g, roots, costs);
  const int n = static_cast<int>(p.cols.size());
  if (n == 0) return std::nullopt;
  for (ClassId r : roots)
    if (!p.of_class.count(g.find(r))) return std::nullopt;

  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, n);
  std::vector<double> row_lb, row_ub;
  CoinBigIndex reserved = 0;
  auto add_row = [&](const CoinPackedVector& v, double lb, double ub) {
    // Room doubled when full: appendRow alone reallocates and copies the whole matrix
    // for each row (a 200-leaf sum's 18,000 rows took 30 s to build, past any budget).
    const CoinBigIndex need = matrix.getNumElements() + v.getNumElements();
    if (matrix.getMajorDim() == matrix.getMaxMajorDim() || need > reserved) {
      reserved = std::max<CoinBigIndex>(2 * need, 1024);
      matrix.reserve(std::max(2 * matrix.getMajorDim(), 64), reserved);
    }
    matrix.appendRow(v);
    row_lb.push_back(lb);
    row_ub.push_back(ub);
  };
  // One e-node per class at most, exactly one per root class.
  std::set<ClassId> root_set;
  for (ClassId r : roots) root_set.insert(g.find(r));
  for (const auto& [c, js] : p.of_class) {
    if (js.size() < 2 && !root_set.count(c)) continue;
    CoinPackedVector v;
    for (int j : js) v.insert(j, 1.0);
    add_row(v, root_set.count(c) ? 1.0 : -COIN_DBL_MAX, 1.0);
  }
  // Edges of the class graph: (class, child class) -> the e-nodes making it.
  std::map<std::pair<ClassId, ClassId>, std::vector<int>> along;
  for (int j = 0; j < n; ++j)
    for (ClassId ch : p.cols[j].children) along[{p.cols[j].cls, ch}].push_back(j);
  // Children, aggregated per edge: sum(e-nodes making it) - sum(child class) <= 0.
  for (const auto& [edge, js] : along) {
    CoinPackedVector v;
    for (int j : js) v.insert(j, 1.0);
    for (int k : p.of_class.at(edge.second)) v.insert(k, -1.0);
    add_row(v, -COIN_DBL_MAX, 0.0);
  }
  std::vector<double> col_lb(n, 0.0), col_ub(n, 1.0), obj(n);
  for (int j = 0; j < n; ++j) obj[j] = p.cols[j].cost * kObjectiveScale;

  // Acyclicity, where cycles are possible at all (strongly connected components of
  // the class graph). A component whose elementary cycles are few (merges make small
  // ones: a concatenation of a split's parts, a projection of a merge one of its
  // inputs reads) gets one row per cycle: not all of its edges may be chosen. That is
  // exact and relaxes tightly. A larger one gets positions (Tensat's formulation, a
  // class after each child class of its component it reads, big-M on the edge, which
  // relaxes weakly: SqueezeNet's eight 4-class components took CBC 4 s so) with its
  // cycles of two and three classes cut directly.
  const std::vector<std::vector<ClassId>> components = cyclic_components(p);
  std::unordered_map<ClassId, size_t> component_of;
  for (size_t k = 0; k < components.size(); ++k)
    for (ClassId c : components[k]) component_of[c] = k;
  auto same_component = [&](ClassId a, ClassId b) {
    auto x = component_of.find(a), y = component_of.find(b);
    return x != component_of.end() && y != component_of.end() && x->second == y->second;
  };
  std::unordered_map<ClassId, std::vector<ClassId>> next;  // edges inside components
  for (const auto& [edge, js] : along)
    if (same_component(edge.first, edge.second)) next[edge.first].push_back(edge.second);
  // A cycle c_0 -> c_1 -> ... -> c_0 of the class graph, cut: the edge out of c_k is
  // chosen only if another class of the cycle chooses an e-node that leaves it,
  //   edge(c_k, c_k+1) <= sum over i != k of (y(c_i) - edge(c_i, c_i+1)),
  // y(c) the chosen e-nodes of c, one row per k. (Valid: chosen edges of the cycle are
  // at most its active classes less one; with all of them on it the cycle is
  // chosen.) The plain "not all edges" row, sum of edges <= length - 1, let the LP
  // take two thirds of each edge of a 3-cycle of free e-nodes (a concatenation of a
  // split's parts) and so a merged convolution that computes itself.
  auto cycle_row = [&](const std::vector<ClassId>& cycle) {
    const size_t len = cycle.size();
    std::vector<std::vector<int>> out(len);  // per class on the cycle: its e-nodes leaving the cycle
    for (size_t i = 0; i < len; ++i) {
      const std::vector<int>& on = along.at({cycle[i], cycle[(i + 1) % len]});
      for (int j : p.of_class.at(cycle[i]))
        if (!std::binary_search(on.begin(), on.end(), j)) out[i].push_back(j);
    }
    for (size_t k = 0; k < len; ++k) {
      CoinPackedVector v;
      for (int j : along.at({cycle[k], cycle[(k + 1) % len]})) v.insert(j, 1.0);
      for (size_t i = 0; i < len; ++i)
        if (i != k)
          for (int j : out[i]) v.insert(j, -1.0);
      add_row(v, -COIN_DBL_MAX, 0.0);
    }
  };
  struct Position {
    int column;
    double size;  // of its component: positions are 0 .. size - 1
  };
  std::unordered_map<ClassId, Position> position;
  size_t cycle_rows = 0;
  for (const std::vector<ClassId>& comp : components) {
    if (std::optional<std::vector<std::vector<ClassId>>> cycles = elementary_cycles(comp, next)) {
      for (const auto& cycle : *cycles) cycle_row(cycle);
      cycle_rows += cycles->size();
      continue;
    }
    for (ClassId c : comp) {
      const int column = n + static_cast<int>(position.size());
      position[c] = {column, static_cast<double>(comp.size())};
    }
  }
  const int n_all = n + static_cast<int>(position.size());
  matrix.setDimensions(static_cast<int>(row_lb.size()), n_all);
  col_lb.resize(n_all, 0.0);
  col_ub.resize(n_all, 0.0);
  obj.resize(n_all, 0.0);
  for (const auto& [c, pos] : position) col_ub[static_cast<size_t>(pos.column)] = pos.size - 1.0;
  // t_c - t_d >= 1 - M (1 - edge(c, d)), M the component's size.
  for (const auto& [edge, js] : along) {
    if (!same_component(edge.first, edge.second) || !position.count(edge.first)) continue;
    const Position& self = position.at(edge.first);
    CoinPackedVector v;
    v.insert(self.column, 1.0);
    v.insert(position.at(edge.second).column, -1.0);
    for (int j : js) v.insert(j, -self.size);
    add_row(v, 1.0 - self.size, COIN_DBL_MAX);
  }
  for (const auto& [a, bs] : next) {
    if (!position.count(a)) continue;
    for (ClassId b : bs) {
      if (a < b && along.count({b, a})) cycle_row({a, b});
      for (ClassId c : next[b])  // a -> b -> c -> a, each cycle once (a the smallest)
        if (c != a && a < b && a < c && along.count({c, a})) cycle_row({a, b, c});
    }
  }

  // The warm start: greedy's choice as a 0/1 vector, positions in its order.
  std::unordered_map<ClassId, uint32_t> warm_pick = warm_choice(g, p, warm, roots);
  const double warm_cost = warm_pick.empty() ? kInfiniteCost : dag_cost(g, warm_pick, roots, costs);
  std::vector<double> start(n_all, 0.0);
  if (warm_cost < kInfiniteCost) {
    for (int j = 0; j < n; ++j) {
      auto it = warm_pick.find(p.cols[j].cls);
      if (it != warm_pick.end() && it->second == p.cols[j].index) start[j] = 1.0;
    }
    std::unordered_map<ClassId, double> depth;
    std::function<double(ClassId)> visit = [&](ClassId c) -> double {
      if (auto it = depth.find(c); it != depth.end()) return it->second;
      depth[c] = 0;
      double d = 0;
      if (auto ch = warm_pick.find(c); ch != warm_pick.end())
        for (ClassId child : child_classes(g, g.cls(c).nodes[ch->second]))
          if (position.count(child) && same_component(c, child)) d = std::max(d, visit(child) + 1);
      return depth[c] = d;
    };
    for (const auto& [c, pos] : position) start[static_cast<size_t>(pos.column)] = std::min(visit(c), pos.size - 1.0);
  }
  if (std::getenv("ISOMER_DEBUG_ILP"))
    std::fprintf(stderr,
                 "ilp: %d e-nodes (%zu dropped), %zu components, %zu cycle rows, %zu ordered classes, %zu rows, "
                 "built in %.2f s of %.2f\n",
                 n, p.dropped, components.size(), cycle_rows, position.size(), row_lb.size(), time_limit_s - left(),
                 time_limit_s);

  Extraction best;
  best.method = "ilp";
  for (int round = 0; round < 50; ++round) {
    if (left() <= 0.05) {
      best.note = "time limit before a solution";
      break;
    }
    OsiClpSolverInterface solver;
    solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
    for (int j = 0; j < n; ++j) solver.setInteger(j);
    solver.messageHandler()->setLogLevel(0);
    CbcModel model(solver);
    model.setLogLevel(0);
    model.messageHandler()->setLogLevel(0);
    model.setUseElapsedTime(true);  // the limit is the search's wall-clock budget
    model.setMaximumSeconds(std::max(0.1, left()));
    // Within 0.1% of the bound is optimal enough: prices are measurements, noisier
    // than that.
    model.setAllowableFractionGap(kGapTolerance);
    // CBC's usual cut generators. Without them the bare branch and bound spent 1.5 to
    // 4 s on SqueezeNet's 200 e-nodes: the fire modules' merges leave fractional
    // flows around the concatenation-of-split cycles that cuts close at the root.
    CglProbing probing;
    probing.setUsingObjective(1);
    probing.setMaxPass(3);
    probing.setMaxProbe(100);
    probing.setMaxLook(50);
    probing.setRowCuts(3);
    CglGomory gomory;
    gomory.setLimit(300);
    CglClique clique;
    clique.setStarCliqueReport(false);
    clique.setRowCliqueReport(false);
    CglMixedIntegerRounding2 mir;
    CglFlowCover flow;
    CglKnapsackCover knapsack;
    model.addCutGenerator(&probing, -1, "Probing");
    model.addCutGenerator(&gomory, -1, "Gomory");
    model.addCutGenerator(&clique, -1, "Clique");
    model.addCutGenerator(&mir, -1, "MIR2");
    model.addCutGenerator(&flow, -1, "FlowCover");
    model.addCutGenerator(&knapsack, -1, "Knapsack");
    if (warm_cost < kInfiniteCost) model.setBestSolution(start.data(), n_all, warm_cost * kObjectiveScale, true);
    model.branchAndBound();
    const double* sol = model.bestSolution();
    if (!sol) {
      best.note = "no solution within the time limit";
      break;
    }
    std::unordered_map<ClassId, uint32_t> choice;
    for (int j = 0; j < n; ++j)
      if (sol[j] > 0.5) choice[p.cols[j].cls] = p.cols[j].index;
    std::vector<ClassId> cycle = find_cycle(g, choice, roots);
    if (!cycle.empty()) {
      // Not every edge of this cycle may be chosen together.
      cycle_row(cycle);
      ++best.cycles_cut;
      continue;
    }
    best.choice = std::move(choice);
    best.cost = dag_cost(g, best.choice, roots, costs);
    best.lower_bound = std::min(best.cost, model.getBestPossibleObjValue() / kObjectiveScale);
    best.optimal = model.isProvenOptimal() || (best.cost - best.lower_bound) <= kGapTolerance * std::abs(best.cost);
    best.gap = std::max(0.0, (best.cost - best.lower_bound) / std::max(std::abs(best.cost), 1e-12));
    break;
  }
  best.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (best.choice.empty()) return std::nullopt;
  if (best.cost > warm.cost) {
    // The solver's own incumbent lost to the warm start: keep greedy's choice and
    // report the bound against it.
    Extraction out = warm;
    out.method = "ilp";
    out.lower_bound = best.lower_bound;
    out.optimal = false;
    out.gap = std::max(0.0, (warm.cost - best.lower_bound) / std::max(std::abs(warm.cost), 1e-12));
    out.seconds = best.seconds;
    out.cycles_cut = best.cycles_cut;
    return out;
  }
  return best;
}

}  // namespace isomer::eg
