// Exact extraction as an integer program, solved by CBC (see egraph/extract.h).
#include <CbcModel.hpp>
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
#include <set>
#include <tuple>
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
constexpr double kObjectiveScale = 1e3;

struct Column {
  ClassId cls;
  uint32_t index;
  double cost;
};

// The strongly connected components (of more than one class) of the graph whose
// edges go from a class to the child classes of its selectable e-nodes (Tarjan's
// algorithm, iterative).
std::vector<std::vector<ClassId>> cyclic_components(const EGraph& g, const std::vector<Column>& cols,
                                                    const std::map<ClassId, std::vector<int>>& of_class) {
  std::unordered_map<ClassId, std::vector<ClassId>> edges;
  for (const Column& col : cols)
    for (ClassId ch : child_classes(g, g.cls(col.cls).nodes[col.index])) edges[col.cls].push_back(ch);
  std::unordered_map<ClassId, int> index, low;
  std::unordered_set<ClassId> on_stack;
  std::vector<ClassId> stack;
  std::vector<std::vector<ClassId>> out;
  int next = 0;
  for (const auto& [root, unused] : of_class) {
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

// Positions of the warm start's classes that respect its (acyclic) choice: a class
// comes after the classes its chosen e-node reads.
// `order`: class -> (its position column, its component's size, the component).
using Order = std::unordered_map<ClassId, std::tuple<int, double, size_t>>;
bool same_component(const Order& order, ClassId a, ClassId b) {
  auto x = order.find(a), y = order.find(b);
  return x != order.end() && y != order.end() && std::get<2>(x->second) == std::get<2>(y->second);
}

void warm_positions(const EGraph& g, const Extraction& warm, const Order& order, std::vector<double>& start) {
  std::unordered_map<ClassId, double> depth;
  std::function<double(ClassId)> visit = [&](ClassId c) -> double {
    if (auto it = depth.find(c); it != depth.end()) return it->second;
    depth[c] = 0;
    double d = 0;
    auto ch = warm.choice.find(c);
    if (ch != warm.choice.end())
      for (ClassId child : child_classes(g, g.cls(c).nodes[ch->second]))
        if (same_component(order, c, child)) d = std::max(d, visit(child) + 1);
    return depth[c] = d;
  };
  for (const auto& [c, t] : order)
    start[static_cast<size_t>(std::get<0>(t))] = std::min(visit(c), std::get<1>(t) - 1.0);
}

}  // namespace

std::optional<Extraction> extract_ilp(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs,
                                      const Extraction& warm, double time_limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto left = [&] {
    return time_limit_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Columns: the selectable e-nodes of every class the roots can reach.
  std::vector<Column> cols;
  std::map<ClassId, std::vector<int>> of_class;
  {
    std::unordered_set<ClassId> seen;
    std::vector<ClassId> stack;
    for (ClassId r : roots) stack.push_back(g.find(r));
    while (!stack.empty()) {
      ClassId c = stack.back();
      stack.pop_back();
      if (!seen.insert(c).second) continue;
      auto cost_it = costs.find(c);
      const EClass& k = g.cls(c);
      for (uint32_t i = 0; i < k.nodes.size(); ++i) {
        double cost = cost_it == costs.end() || i >= cost_it->second.size() ? kInfiniteCost : cost_it->second[i];
        if (cost == kInfiniteCost) continue;
        of_class[c].push_back(static_cast<int>(cols.size()));
        cols.push_back({c, i, cost});
        for (ClassId ch : child_classes(g, k.nodes[i])) stack.push_back(ch);
      }
    }
  }
  const int n = static_cast<int>(cols.size());
  if (n == 0) return std::nullopt;
  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, n);
  std::vector<double> row_lb, row_ub;
  auto add_row = [&](const CoinPackedVector& v, double lb, double ub) {
    matrix.appendRow(v);
    row_lb.push_back(lb);
    row_ub.push_back(ub);
  };
  for (ClassId r : roots) {
    CoinPackedVector v;
    for (int j : of_class[g.find(r)]) v.insert(j, 1.0);
    if (v.getNumElements() == 0) return std::nullopt;
    add_row(v, 1.0, COIN_DBL_MAX);
  }
  // A chosen e-node needs a chosen e-node in each child class: sum(child) - x >= 0.
  for (int j = 0; j < n; ++j) {
    for (ClassId ch : child_classes(g, g.cls(cols[j].cls).nodes[cols[j].index])) {
      CoinPackedVector v;
      for (int k : of_class[ch])
        if (k != j) v.insert(k, 1.0);
      v.insert(j, -1.0);
      add_row(v, 0.0, COIN_DBL_MAX);
    }
  }
  std::vector<double> col_lb(n, 0.0), col_ub(n, 1.0), obj(n);
  // In microseconds: CBC's tolerances are absolute, and prices of a few thousandths of
  // a millisecond vanished below them.
  for (int j = 0; j < n; ++j) obj[j] = cols[j].cost * kObjectiveScale;
  // Acyclicity up front (Tensat's formulation), where cycles are possible at all: a
  // position t_c per class of a strongly connected component of the class graph, and
  // a chosen e-node comes after each child class of its component,
  // t_c - t_child >= 1 - M (1 - x_j). Rewrites make such components (a merge whose
  // input reads one of its projections); cutting their cycles one solve at a time
  // took SqueezeNet's ILP past its time limit.
  const std::vector<std::vector<ClassId>> components = cyclic_components(g, cols, of_class);
  Order order;
  for (size_t k = 0; k < components.size(); ++k)
    for (ClassId c : components[k])
      order[c] = {n + static_cast<int>(order.size()), static_cast<double>(components[k].size()), k};
  const int n_all = n + static_cast<int>(order.size());
  matrix.setDimensions(static_cast<int>(row_lb.size()), n_all);
  std::vector<double> t_ub(order.size());
  for (const auto& [c, t] : order) {
    (void)c;
    t_ub[static_cast<size_t>(std::get<0>(t) - n)] = std::get<1>(t) - 1.0;
  }
  for (double ub : t_ub) {
    col_lb.push_back(0.0);
    col_ub.push_back(ub);
    obj.push_back(0.0);
  }
  for (int j = 0; j < n; ++j) {
    auto self = order.find(cols[j].cls);
    if (self == order.end()) continue;
    for (ClassId ch : child_classes(g, g.cls(cols[j].cls).nodes[cols[j].index])) {
      if (!same_component(order, cols[j].cls, ch)) continue;
      const double m = std::get<1>(self->second);
      CoinPackedVector v;
      v.insert(std::get<0>(self->second), 1.0);
      v.insert(std::get<0>(order.at(ch)), -1.0);
      v.insert(j, -m);
      add_row(v, 1.0 - m, COIN_DBL_MAX);
    }
  }
  // The order constraints alone relax weakly (a chosen fraction of an e-node barely
  // constrains the positions), so every cycle of two or three classes is also cut
  // directly: of the e-nodes along it (in each class, those reading the next class),
  // not all its edges may be chosen. Merges make mostly such short cycles (a
  // concatenation of a split's parts; a projection of a merge an input reads).
  {
    std::map<std::pair<ClassId, ClassId>, std::vector<int>> along;  // edge -> e-nodes making it
    for (int j = 0; j < n; ++j)
      for (ClassId ch : child_classes(g, g.cls(cols[j].cls).nodes[cols[j].index]))
        if (same_component(order, cols[j].cls, ch)) along[{cols[j].cls, ch}].push_back(j);
    auto cut = [&](const std::vector<ClassId>& cycle) {
      CoinPackedVector v;
      for (size_t i = 0; i < cycle.size(); ++i)
        for (int j : along.at({cycle[i], cycle[(i + 1) % cycle.size()]})) v.insert(j, 1.0);
      add_row(v, -COIN_DBL_MAX, static_cast<double>(cycle.size()) - 1.0);
    };
    for (const auto& [edge, js] : along) {
      (void)js;
      const auto [a, b] = edge;
      if (a < b && along.count({b, a})) cut({a, b});
      for (const auto& [edge2, js2] : along) {  // a -> b -> c -> a, each cycle once (a smallest)
        (void)js2;
        if (edge2.first != b || edge2.second == a) continue;
        const ClassId c = edge2.second;
        if (a < b && a < c && along.count({c, a})) cut({a, b, c});
      }
    }
  }
  // The warm start: the greedy choice as a 0/1 vector, positions in its order.
  std::vector<double> start(n_all, 0.0);
  for (int j = 0; j < n; ++j) {
    auto it = warm.choice.find(cols[j].cls);
    if (it != warm.choice.end() && it->second == cols[j].index) start[j] = 1.0;
  }
  warm_positions(g, warm, order, start);

  Extraction best;
  best.method = "ilp";
  for (int round = 0; round < 20; ++round) {
    if (left() <= 0.05) {
      best.note = "time limit before a solution";
      break;
    }
    OsiClpSolverInterface solver;
    solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
    for (int j = 0; j < n; ++j) solver.setInteger(j);
    if (std::getenv("ISOMER_DEBUG_ILP"))
      std::fprintf(stderr, "ilp: %d e-nodes, %zu ordered classes in %zu components, %zu rows\n", n, order.size(),
                   components.size(), row_lb.size());
    solver.messageHandler()->setLogLevel(0);
    CbcModel model(solver);
    model.setLogLevel(0);
    model.messageHandler()->setLogLevel(0);
    model.setUseElapsedTime(true);  // the limit is the search's wall-clock budget
    model.setMaximumSeconds(std::max(0.1, left()));
    // Within 0.1% of the bound is optimal enough: prices are measurements, noisier
    // than that, and proving the last fraction took NasRNN's ILP past its limit.
    model.setAllowableFractionGap(kGapTolerance);
    if (warm.cost < kInfiniteCost) model.setBestSolution(start.data(), n_all, warm.cost * kObjectiveScale, true);
    model.branchAndBound();
    const double* sol = model.bestSolution();
    if (!sol) {
      best.note = "no solution within the time limit";
      break;
    }
    // One chosen e-node per class: the cheapest of those the solution selects.
    std::unordered_map<ClassId, uint32_t> choice;
    std::unordered_map<ClassId, double> chosen_cost;
    for (int j = 0; j < n; ++j) {
      if (sol[j] < 0.5) continue;
      auto it = chosen_cost.find(cols[j].cls);
      if (it == chosen_cost.end() || cols[j].cost < it->second) {
        choice[cols[j].cls] = cols[j].index;
        chosen_cost[cols[j].cls] = cols[j].cost;
      }
    }
    std::vector<ClassId> cycle = find_cycle(g, choice, roots);
    if (!cycle.empty()) {
      // Not all the e-nodes on this cycle may be chosen together.
      CoinPackedVector v;
      for (ClassId c : cycle)
        for (int j : of_class[c])
          if (cols[j].index == choice[c]) v.insert(j, 1.0);
      add_row(v, -COIN_DBL_MAX, static_cast<double>(cycle.size()) - 1.0);
      ++best.cycles_cut;
      continue;
    }
    best.choice = std::move(choice);
    best.cost = dag_cost(g, best.choice, roots, costs);
    best.lower_bound = model.getBestPossibleObjValue() / kObjectiveScale;
    best.optimal = model.isProvenOptimal() || (best.cost - best.lower_bound) <= kGapTolerance * std::abs(best.cost);
    best.gap = best.optimal ? 0.0
                            : std::max(0.0, (best.cost - best.lower_bound) / std::max(std::abs(best.cost), 1e-12));
    break;
  }
  best.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (best.choice.empty()) return std::nullopt;
  if (best.cost > warm.cost) {
    // The solver's own incumbent lost to the warm start (it was cut off): keep greedy's
    // choice and report the bound.
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
