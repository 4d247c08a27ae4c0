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

// Bottom-up greedy with the sets of e-nodes each choice needs (extraction-gym's
// greedy-dag); `banned` e-nodes are never chosen.
std::unordered_map<ClassId, uint32_t> greedy_pass(const EGraph& g, const CostTable& costs,
                                                  const std::unordered_set<NodeKey>& banned) {
  struct Best {
    double total = kInfiniteCost;
    uint32_t index = 0;
    std::vector<NodeKey> set;  // sorted
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
        if (total < b.total - 1e-12 * (1 + std::abs(total))) {
          b = Best{total, i, std::move(set)};
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  std::unordered_map<ClassId, uint32_t> choice;
  for (const auto& [c, b] : best)
    if (b.total != kInfiniteCost) choice[c] = b.index;
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

Extraction extract_greedy(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs) {
  const auto t0 = std::chrono::steady_clock::now();
  Extraction ex;
  ex.method = "greedy";
  std::unordered_set<NodeKey> banned;
  std::unordered_map<ClassId, uint32_t> choice;
  for (int attempt = 0; attempt < 32; ++attempt) {
    choice = prune(g, greedy_pass(g, costs, banned), roots);
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
  if (choice.empty() || !find_cycle(g, choice, roots).empty()) choice = prune(g, tree_pass(g, costs), roots);
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
