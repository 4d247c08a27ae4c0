#include "egraph/extract.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_set>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer::eg {
namespace {

using NodeKey = uint64_t;  // class << 32 | index in the class
NodeKey key(ClassId c, uint32_t i) { return (static_cast<uint64_t>(c) << 32) | i; }
ClassId key_class(NodeKey k) { return static_cast<ClassId>(k >> 32); }
uint32_t key_index(NodeKey k) { return static_cast<uint32_t>(k & 0xffffffffu); }

// The distinct child classes of an e-node (canonical).
std::vector<ClassId> children_of(const EGraph& g, const ENode& n) {
  std::vector<ClassId> out;
  for (ClassId c : n.children)
    if (c != kNoClass) out.push_back(g.find(c));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double cost_of(const CostTable& costs, ClassId c, uint32_t i) {
  auto it = costs.find(c);
  return it == costs.end() || i >= it->second.size() ? kInfiniteCost : it->second[i];
}

// Only the classes the roots need.
std::unordered_map<ClassId, uint32_t> prune(const EGraph& g, const std::unordered_map<ClassId, uint32_t>& choice,
                                            const std::vector<ClassId>& roots) {
  std::unordered_map<ClassId, uint32_t> out;
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    ClassId c = stack.back();
    stack.pop_back();
    if (out.count(c)) continue;
    auto it = choice.find(c);
    if (it == choice.end()) continue;
    out[c] = it->second;
    for (ClassId ch : children_of(g, g.cls(c).nodes[it->second])) stack.push_back(ch);
  }
  return out;
}

void mix(size_t& h, size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

// What an e-node computes, hashed by content rather than by ids the order of insertion
// gave (class ids, interned attributes and tensors): its operator, attributes and
// leaf, and the terms `child_term` gives its inputs. Two equal-cost choices are
// decided by it, so that one e-graph built in another order extracts the same graph.
template <class ChildTerm>
size_t node_term(const EGraph& g, const ENode& n, ChildTerm child_term) {
  size_t h = static_cast<size_t>(n.kind);
  mix(h, n.num_outputs);
  switch (n.kind) {
    case ENodeKind::Op:
      mix(h, std::hash<std::string_view>{}(n.op->name));
      mix(h, g.attrs(n.attrs).hash());
      break;
    case ENodeKind::Constant:
      mix(h, g.tensor(n.leaf).hash());
      break;
    case ENodeKind::Input:  // by its name
    case ENodeKind::Opaque:
      mix(h, g.leaf_node(n.leaf)->hash());
      break;
    case ENodeKind::Proj:
      mix(h, n.leaf);
      break;
  }
  for (ClassId c : n.children) mix(h, c == kNoClass ? 0 : child_term(g.find(c)));
  return h;
}

// Bottom-up greedy with the sets of e-nodes each choice needs (extraction-gym's
// greedy-dag); `banned` e-nodes are never chosen. Of choices that cost the same, the
// one of the least term (node_term) is taken.
std::unordered_map<ClassId, uint32_t> greedy_pass(const EGraph& g, const CostTable& costs,
                                                  const std::unordered_set<NodeKey>& banned,
                                                  std::unordered_map<ClassId, double>* totals = nullptr) {
  struct Best {
    double total = kInfiniteCost;
    uint32_t index = 0;
    std::vector<NodeKey> set;  // sorted
    size_t term = 0;           // node_term of the choice
  };
  std::unordered_map<ClassId, Best> best;
  const std::vector<ClassId> ids = g.class_ids();
  for (int pass = 0; pass < 200; ++pass) {
    bool changed = false;
    for (ClassId c : ids) {
      const EClass& k = g.cls(c);
      for (uint32_t i = 0; i < k.nodes.size(); ++i) {
        const double own = cost_of(costs, c, i);
        if (own == kInfiniteCost || banned.count(key(c, i))) continue;
        std::vector<NodeKey> set{key(c, i)};
        bool ready = true;
        for (ClassId ch : children_of(g, k.nodes[i])) {
          auto it = best.find(ch);
          if (ch == c || it == best.end() || it->second.total == kInfiniteCost) {
            ready = false;
            break;
          }
          std::vector<NodeKey> merged;
          std::set_union(set.begin(), set.end(), it->second.set.begin(), it->second.set.end(),
                         std::back_inserter(merged));
          set = std::move(merged);
        }
        if (!ready) continue;
        // A choice that needs another e-node of this class would be cyclic.
        if (std::any_of(set.begin(), set.end(), [&](NodeKey x) { return key_class(x) == c && key_index(x) != i; }))
          continue;
        double total = 0;
        for (NodeKey x : set) total += cost_of(costs, key_class(x), key_index(x));
        Best& b = best[c];
        const double tolerance = 1e-12 * (1 + std::abs(total));
        if (total > b.total + tolerance) continue;
        const size_t term = node_term(g, k.nodes[i], [&](ClassId ch) { return best.at(ch).term; });
        if (total < b.total - tolerance || (term < b.term && b.index != i) || (b.index == i && term != b.term)) {
          b = Best{total, i, std::move(set), term};
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  std::unordered_map<ClassId, uint32_t> choice;
  for (const auto& [c, b] : best)
    if (b.total != kInfiniteCost) {
      choice[c] = b.index;
      if (totals) (*totals)[c] = b.total;
    }
  return choice;
}

// Tree-cost bottom-up with strict improvement: acyclic by construction (a class's cost
// exceeds each of its chosen children's), the fallback when repairs fail.
std::unordered_map<ClassId, uint32_t> tree_pass(const EGraph& g, const CostTable& costs) {
  std::unordered_map<ClassId, double> best;
  std::unordered_map<ClassId, uint32_t> choice;
  const std::vector<ClassId> ids = g.class_ids();
  for (bool changed = true; changed;) {
    changed = false;
    for (ClassId c : ids) {
      const EClass& k = g.cls(c);
      for (uint32_t i = 0; i < k.nodes.size(); ++i) {
        double total = cost_of(costs, c, i);
        // A small positive cost per e-node keeps zero-cost choices from forming loops.
        total += 1e-9;
        for (ClassId ch : children_of(g, k.nodes[i])) {
          auto it = best.find(ch);
          total = it == best.end() ? kInfiniteCost : total + it->second;
        }
        auto it = best.find(c);
        if (total < kInfiniteCost && (it == best.end() || total < it->second)) {
          best[c] = total;
          choice[c] = i;
          changed = true;
        }
      }
    }
  }
  return choice;
}

// Local improvement of a complete choice map (every class that has a finite choice
// holds one) by the true DAG cost of what the roots need. Greedy prices each class by
// its own best set, so it cannot see that an operator several classes could share is
// worth paying once (a merged product read through three projections costs more than
// any one of the products it replaces, less than all of them). Two kinds of move, each
// taken when the whole selection's DAG cost drops and the selection stays acyclic:
//   - switch: one needed class to another of its e-nodes;
//   - adopt: a class no chosen e-node reads yet: every needed class with an e-node that
//     reads it, directly or through up to two classes not needed yet (a projection of
//     a merged operator, then the operator that adds a bias to it), switches to that
//     e-node at once, so it is paid once for all of them (a later switch may take back
//     any one of them).
// A move is priced twice: the classes it newly needs keep their current choices (the
// bottom-up pass's), or each takes again the e-node cheapest given what is needed
// already (a projection of a merge another class pays for). Rounds over all moves
// repeat until none improves or a cap is hit. The cost of a move is kept
// incrementally: a count of chosen readers per class; a class whose count goes from 0
// to 1 joins the selection (its cost and its children's counts added), 1 to 0 leaves
// it. Every count and choice a move touches is journaled, and a move that does
// not improve (or closes a cycle) is rolled back from the journal.
class Improver {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr int kLiftDepth = 3;  // levels of readers an adoption switches

  // `estimate`: each class's bottom-up cost alone (its best set's), where known.
  Improver(const EGraph& g, const CostTable& costs, const std::unordered_map<ClassId, uint32_t>& choice,
           const std::vector<ClassId>& roots, const std::unordered_map<ClassId, double>& estimate) {
    ClassId size = 0;
    ids_ = g.class_ids();
    for (ClassId c : ids_) size = std::max(size, c + 1);
    kids_.resize(size);
    price_.resize(size);
    readers_.resize(size);
    choice_.assign(size, kNone);
    refs_.assign(size, 0);
    mark_.assign(size, 0);
    estimate_.assign(size, kInfiniteCost);
    for (const auto& [c, e] : estimate) estimate_[g.find(c)] = e;
    for (ClassId c : ids_) {
      const EClass& k = g.cls(c);
      auto it = costs.find(c);
      for (uint32_t i = 0; i < k.nodes.size(); ++i) {
        kids_[c].push_back(children_of(g, k.nodes[i]));
        price_[c].push_back(it == costs.end() || i >= it->second.size() ? kInfiniteCost : it->second[i]);
      }
    }
    for (ClassId c : ids_)
      for (uint32_t i = 0; i < kids_[c].size(); ++i)
        if (price_[c][i] != kInfiniteCost)
          for (ClassId k : kids_[c][i])
            if (k != c) readers_[k].push_back(key(c, i));
    for (const auto& [c, i] : choice) choice_[g.find(c)] = i;
    for (ClassId r : roots) roots_.push_back(g.find(r));
    for (ClassId r : roots_) acquire(r);
    journal_.clear();
    choices_.clear();
  }

  // Improves until no move does, `max_rounds` rounds, or `deadline`; the number of
  // moves taken. Each round prices every move against the current selection and takes
  // them largest saving first, each again only while it still saves (moves compete: a
  // product merged per weight and one merged per step can each replace the separate
  // products, and the first taken leaves the other nothing to free).
  size_t run(int max_rounds, std::chrono::steady_clock::time_point deadline) {
    if (missing_ > 0) return 0;
    size_t taken = 0;
    using Move = std::vector<std::pair<ClassId, uint32_t>>;
    std::vector<std::pair<double, std::pair<bool, Move>>> saving;  // saving, (rechoose, move)
    for (int round = 0; round < max_rounds; ++round) {
      saving.clear();
      // Moves are priced until the deadline; the ones priced by then are still taken.
      bool late = false;
      size_t priced = 0;
      // Each move twice: the classes it newly needs on their current choices, and on
      // choices made again given what is needed (rechoose).
      auto consider = [&](const Move& move) {
        if (late || (++priced % 64 == 0 && (late = std::chrono::steady_clock::now() > deadline))) return;
        for (bool context : {false, true}) {
          const double before = cost_;
          context_ = context;
          apply(move);
          const double delta = missing_ == 0 ? cost_ - before : kInfiniteCost;
          rollback(before);
          if (delta < -tolerance(before)) saving.push_back({delta, {context, move}});
        }
        context_ = false;
      };
      // Switches of one needed class.
      for (ClassId d : ids_) {
        if (refs_[d] == 0 || choice_[d] == kNone) continue;
        for (uint32_t j = 0; j < kids_[d].size(); ++j)
          if (j != choice_[d] && price_[d][j] != kInfiniteCost && !self_reading(d, j)) consider({{d, j}});
      }
      // Adoptions of a class not needed yet: every needed class that reads it, directly
      // or through classes not needed yet (up to kLiftDepth levels), switched to read it.
      // Of a class's e-nodes that read the adopted classes, the one with the fewest other
      // children not needed and not adopted, then the cheapest.
      Move lifted, needed;
      std::vector<ClassId> frontier, next;
      std::unordered_map<ClassId, std::pair<uint32_t, uint32_t>> best;  // class -> e-node, missing children
      for (ClassId k : ids_) {
        if (refs_[k] != 0 || choice_[k] == kNone || readers_[k].empty()) continue;
        lifted.clear();
        needed.clear();
        best.clear();
        frontier.assign(1, k);
        ++stamp_;
        mark_[k] = stamp_;  // adopted
        auto missing = [&](ClassId c, uint32_t i) {
          uint32_t n = 0;
          for (ClassId x : kids_[c][i]) n += refs_[x] == 0 && mark_[x] != stamp_;
          return n;
        };
        auto better = [&](ClassId c, uint32_t i, uint32_t m) {
          auto it = best.find(c);
          return it == best.end() || m < it->second.second ||
                 (m == it->second.second && price_[c][i] < price_[c][it->second.first]);
        };
        for (int depth = 0; depth < kLiftDepth && !frontier.empty(); ++depth) {
          best.clear();
          for (ClassId f : frontier)
            for (NodeKey r : readers_[f]) {
              const ClassId c = key_class(r);
              const uint32_t i = key_index(r);
              if (mark_[c] == stamp_ || refs_[c] != 0 || depth + 1 == kLiftDepth || self_reading(c, i)) continue;
              const uint32_t m = missing(c, i);
              if (better(c, i, m)) best[c] = {i, m};
            }
          next.clear();
          for (const auto& [c, im] : best) {
            lifted.push_back({c, im.first});
            next.push_back(c);
          }
          for (ClassId c : next) mark_[c] = stamp_;
          frontier.swap(next);
        }
        // The needed readers, now that every adopted class is known.
        best.clear();
        auto reach = [&](ClassId f) {
          for (NodeKey r : readers_[f]) {
            const ClassId c = key_class(r);
            const uint32_t i = key_index(r);
            if (refs_[c] == 0 || self_reading(c, i)) continue;
            const uint32_t m = missing(c, i);
            if (better(c, i, m)) best[c] = {i, m};
          }
        };
        reach(k);
        for (const auto& [c, i] : lifted) reach(c);
        for (const auto& [c, im] : best)
          if (choice_[c] != im.first) needed.push_back({c, im.first});
        // A single needed reader of k itself is a switch.
        if (needed.empty() || lifted.size() + needed.size() < 2) continue;
        std::sort(needed.begin(), needed.end());  // deterministic order
        // Classes not needed first: the needed ones then take them as switched.
        lifted.insert(lifted.end(), needed.begin(), needed.end());
        consider(lifted);
      }
      std::stable_sort(saving.begin(), saving.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      size_t before = taken;
      for (const auto& [delta, move] : saving) {
        context_ = move.first;
        if (attempt(move.second)) ++taken;
      }
      context_ = false;
      if (taken == before || late || std::chrono::steady_clock::now() > deadline) break;
    }
    return taken;
  }

  std::unordered_map<ClassId, uint32_t> choice() const {
    std::unordered_map<ClassId, uint32_t> out;
    for (ClassId c : ids_)
      if (choice_[c] != kNone) out[c] = choice_[c];
    return out;
  }

 private:
  bool self_reading(ClassId c, uint32_t i) const {
    return std::binary_search(kids_[c][i].begin(), kids_[c][i].end(), c);
  }

  // Counts one more chosen reader of `c` (a root counts as one).
  void acquire(ClassId c) {
    std::vector<ClassId> stack{c};
    while (!stack.empty()) {
      ClassId x = stack.back();
      stack.pop_back();
      journal_.push_back({x, refs_[x]});
      if (refs_[x]++ != 0) continue;
      if (context_) rechoose(x);
      const uint32_t i = choice_[x];
      if (i == kNone) {
        ++missing_;
        continue;
      }
      cost_ += price_[x][i];
      for (ClassId k : kids_[x][i]) stack.push_back(k);
    }
  }

  // A class joining the selection takes the e-node cheapest given what is needed
  // already: its price and, for each child not needed, that child's bottom-up cost.
  void rechoose(ClassId x) {
    auto estimate = [&](uint32_t i) {
      double e = price_[x][i];
      for (ClassId k : kids_[x][i])
        if (refs_[k] == 0) e += estimate_[k];
      return e;
    };
    uint32_t pick = choice_[x];
    double least = pick == kNone ? kInfiniteCost : estimate(pick);
    for (uint32_t i = 0; i < kids_[x].size(); ++i) {
      if (i == pick || price_[x][i] == kInfiniteCost || self_reading(x, i)) continue;
      const double e = estimate(i);
      if (e < least - tolerance(least)) {
        least = e;
        pick = i;
      }
    }
    if (pick != choice_[x]) {
      choices_.push_back({x, choice_[x]});
      choice_[x] = pick;
    }
  }

  void release(ClassId c) {
    std::vector<ClassId> stack{c};
    while (!stack.empty()) {
      ClassId x = stack.back();
      stack.pop_back();
      journal_.push_back({x, refs_[x]});
      if (--refs_[x] != 0) continue;
      const uint32_t i = choice_[x];
      if (i == kNone) {
        --missing_;
        continue;
      }
      cost_ -= price_[x][i];
      for (ClassId k : kids_[x][i]) stack.push_back(k);
    }
  }

  // Class d to its e-node j, the counts kept.
  void set(ClassId d, uint32_t j) {
    const uint32_t old = choice_[d];
    choices_.push_back({d, old});
    if (refs_[d] == 0) {
      choice_[d] = j;
      return;
    }
    for (ClassId k : kids_[d][j]) acquire(k);
    choice_[d] = j;
    cost_ += price_[d][j] - (old == kNone ? 0 : price_[d][old]);
    if (old == kNone)
      --missing_;
    else
      for (ClassId k : kids_[d][old]) release(k);
  }

  // Whether the chosen e-nodes the roots need form a cycle.
  bool cyclic() {
    ++stamp_;  // mark_ == stamp_: on the path; stamp_ + 1: done
    ++stamp_;
    const uint32_t grey = stamp_ - 1, black = stamp_;
    std::vector<std::pair<ClassId, uint32_t>> stack;  // class, next child
    for (ClassId r : roots_) {
      if (mark_[r] == black) continue;
      mark_[r] = grey;
      stack.push_back({r, 0});
      while (!stack.empty()) {
        auto& [c, next] = stack.back();
        const std::vector<ClassId>& ks = kids_[c][choice_[c]];
        if (next == ks.size()) {
          mark_[c] = black;
          stack.pop_back();
          continue;
        }
        const ClassId k = ks[next++];
        if (mark_[k] == grey) return true;
        if (mark_[k] == black) continue;
        mark_[k] = grey;
        stack.push_back({k, 0});
      }
    }
    return false;
  }

  static double tolerance(double cost) { return 1e-9 * (1 + std::abs(cost)); }

  void apply(const std::vector<std::pair<ClassId, uint32_t>>& switches) {
    for (const auto& [d, j] : switches) set(d, j);
  }

  // Undoes everything since the last commit; the cost back to `before`.
  void rollback(double before) {
    for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) refs_[it->first] = it->second;
    for (auto it = choices_.rbegin(); it != choices_.rend(); ++it) choice_[it->first] = it->second;
    journal_.clear();
    choices_.clear();
    cost_ = before;
    missing_ = 0;
  }

  // Applies the switches; keeps them if the cost drops and the result is acyclic.
  bool attempt(const std::vector<std::pair<ClassId, uint32_t>>& switches) {
    const double before = cost_;
    apply(switches);
    if (missing_ == 0 && cost_ < before - tolerance(before) && !cyclic()) {
      journal_.clear();
      choices_.clear();
      return true;
    }
    rollback(before);
    return false;
  }

  std::vector<ClassId> ids_, roots_;
  std::vector<std::vector<std::vector<ClassId>>> kids_;  // class -> e-node -> distinct child classes
  std::vector<std::vector<double>> price_;               // class -> e-node -> cost
  std::vector<std::vector<NodeKey>> readers_;            // class -> finite e-nodes of other classes reading it
  std::vector<double> estimate_;                         // class -> bottom-up cost alone
  std::vector<uint32_t> choice_, refs_, mark_;
  bool context_ = false;  // classes joining the selection choose again (rechoose)
  uint32_t stamp_ = 0;
  std::vector<std::pair<ClassId, uint32_t>> journal_, choices_;
  double cost_ = 0;
  size_t missing_ = 0;
};

}  // namespace

double dag_cost(const EGraph& g, const std::unordered_map<ClassId, uint32_t>& choice,
                const std::vector<ClassId>& roots, const CostTable& costs) {
  if (!find_cycle(g, choice, roots).empty()) return kInfiniteCost;
  double total = 0;
  std::unordered_set<ClassId> seen;
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    ClassId c = stack.back();
    stack.pop_back();
    if (!seen.insert(c).second) continue;
    auto it = choice.find(c);
    if (it == choice.end()) return kInfiniteCost;
    total += cost_of(costs, c, it->second);
    for (ClassId ch : children_of(g, g.cls(c).nodes[it->second])) stack.push_back(ch);
  }
  return total;
}

std::vector<ClassId> find_cycle(const EGraph& g, const std::unordered_map<ClassId, uint32_t>& choice,
                                const std::vector<ClassId>& roots) {
  enum Color : uint8_t { White, Grey, Black };
  std::unordered_map<ClassId, Color> color;
  std::vector<ClassId> path;
  std::vector<ClassId> cycle;
  std::function<bool(ClassId)> visit = [&](ClassId c) -> bool {
    Color& col = color[c];
    if (col == Black) return false;
    if (col == Grey) {
      auto it = std::find(path.begin(), path.end(), c);
      cycle.assign(it, path.end());
      return true;
    }
    col = Grey;
    path.push_back(c);
    auto ch = choice.find(c);
    if (ch != choice.end())
      for (ClassId child : children_of(g, g.cls(c).nodes[ch->second]))
        if (visit(child)) return true;
    path.pop_back();
    color[c] = Black;
    return false;
  };
  for (ClassId r : roots)
    if (visit(g.find(r))) return cycle;
  return {};
}

Extraction extract_greedy(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs,
                          const GreedyOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Extraction ex;
  ex.method = "greedy";
  std::unordered_set<NodeKey> banned;
  std::unordered_map<ClassId, uint32_t> full, choice;
  std::unordered_map<ClassId, double> totals;
  for (int attempt = 0; attempt < 32; ++attempt) {
    totals.clear();
    full = greedy_pass(g, costs, banned, &totals);
    choice = prune(g, full, roots);
    std::vector<ClassId> cycle = find_cycle(g, choice, roots);
    if (cycle.empty()) break;
    // Ban the most expensive choice on the cycle (a merge whose input reads its own output).
    ClassId worst = cycle[0];
    for (ClassId c : cycle)
      if (cost_of(costs, c, choice[c]) > cost_of(costs, worst, choice[worst])) worst = c;
    banned.insert(key(worst, choice[worst]));
    ++ex.cycles_cut;
    choice.clear();
  }
  if (choice.empty() || !find_cycle(g, choice, roots).empty()) {
    full = tree_pass(g, costs);
    choice = prune(g, full, roots);
    totals.clear();
  }
  ex.plain_cost = dag_cost(g, choice, roots, costs);
  if (options.improve && ex.plain_cost != kInfiniteCost) {
    const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(options.time_limit_s));
    Improver improver(g, costs, full, roots, totals);
    ex.moves = improver.run(options.max_rounds, deadline);
    if (ex.moves > 0) {
      std::unordered_map<ClassId, uint32_t> better = prune(g, improver.choice(), roots);
      // Kept only if the exact recount agrees that it is acyclic and no costlier.
      if (dag_cost(g, better, roots, costs) <= ex.plain_cost) choice = std::move(better);
    }
  }
  ex.choice = std::move(choice);
  ex.cost = dag_cost(g, ex.choice, roots, costs);
  ex.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ex;
}

std::vector<Value> build_values(const EGraph& g, const Extraction& ex, const std::vector<ClassId>& roots,
                                GraphBuilder& b, const std::function<Value(uint32_t leaf)>& inputs) {
  std::unordered_map<ClassId, std::vector<Value>> built;
  std::function<const std::vector<Value>&(ClassId)> build = [&](ClassId c) -> const std::vector<Value>& {
    c = g.find(c);
    if (auto it = built.find(c); it != built.end()) return it->second;
    auto ch = ex.choice.find(c);
    require(ch != ex.choice.end(), "extraction: a needed class has no chosen e-node");
    const ENode& n = g.cls(c).nodes[ch->second];
    std::vector<Value> ins;
    for (ClassId child : n.children) ins.push_back(child == kNoClass ? Value{} : build(child).at(0));
    std::vector<Value> outs;
    switch (n.kind) {
      case ENodeKind::Input: outs = {inputs(n.leaf)}; break;
      case ENodeKind::Constant: outs = {b.constant(g.tensor(n.leaf))}; break;
      case ENodeKind::Proj: outs = {build(n.children[0]).at(n.leaf)}; break;
      case ENodeKind::Opaque: {
        NodePtr node = b.intern(g.leaf_node(n.leaf)->with_inputs(std::move(ins)));
        for (uint32_t i = 0; i < node->num_outputs(); ++i) outs.push_back(node->output(i));
        break;
      }
      case ENodeKind::Op: outs = b.op(n.op->name, std::move(ins), g.attrs(n.attrs), n.num_outputs); break;
    }
    return built[c] = std::move(outs);
  };
  std::vector<Value> out;
  for (ClassId r : roots) out.push_back(build(r).at(0));
  return out;
}

}  // namespace isomer::eg
