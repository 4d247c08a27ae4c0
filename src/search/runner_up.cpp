#include "search/runner_up.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace isomer {

using eg::ClassId;
using eg::ENode;
using eg::ENodeKind;

std::vector<ENodeRefs> rewrite_groups(const eg::EGraph& g, const eg::Extraction& ex,
                                      const std::vector<ClassId>& roots) {
  // The classes the roots need under the choice, each once.
  std::vector<ClassId> needed;
  std::map<ClassId, size_t> index;  // needed class -> its slot
  std::vector<ClassId> stack;
  for (ClassId r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    const ClassId c = stack.back();
    stack.pop_back();
    auto it = ex.choice.find(c);
    if (it == ex.choice.end() || index.count(c)) continue;
    index.emplace(c, needed.size());
    needed.push_back(c);
    for (ClassId ch : g.cls(c).nodes.at(it->second).children)
      if (ch != eg::kNoClass) stack.push_back(g.find(ch));
  }
  auto made_by_rule = [&](ClassId c) {
    const ENode& n = g.cls(c).nodes.at(ex.choice.at(c));
    return n.origin != 0 && (n.kind == ENodeKind::Op || n.kind == ENodeKind::Proj);
  };
  // Union-find over the needed classes whose chosen e-node a rule made, joined where
  // one reads another.
  std::vector<size_t> parent(needed.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto root_of = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (ClassId c : needed) {
    if (!made_by_rule(c)) continue;
    for (ClassId ch : g.cls(c).nodes.at(ex.choice.at(c)).children) {
      if (ch == eg::kNoClass) continue;
      const ClassId k = g.find(ch);
      if (index.count(k) && made_by_rule(k)) parent[root_of(index.at(c))] = root_of(index.at(k));
    }
  }
  std::map<size_t, ENodeRefs> groups;  // by the slot of their representative
  for (ClassId c : needed)
    if (made_by_rule(c)) groups[root_of(index.at(c))].emplace_back(c, ex.choice.at(c));
  std::vector<ENodeRefs> out;
  for (auto& [unused, refs] : groups) {
    (void)unused;
    std::sort(refs.begin(), refs.end());
    out.push_back(std::move(refs));
  }
  std::sort(out.begin(), out.end(), [](const ENodeRefs& a, const ENodeRefs& b) { return a.front() < b.front(); });
  return out;
}

eg::CostTable banning(const eg::CostTable& costs, const eg::EGraph& g, const ENodeRefs& banned) {
  eg::CostTable out = costs;
  for (const auto& [c, i] : banned) {
    std::vector<double>& row = out[g.find(c)];
    if (row.size() <= i) row.resize(g.cls(c).nodes.size(), eg::kInfiniteCost);
    row[i] = eg::kInfiniteCost;
  }
  return out;
}

}  // namespace isomer
