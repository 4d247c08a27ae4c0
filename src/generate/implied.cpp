#include "generate/implied.h"

#include <functional>
#include <utility>

#include "ops/op.h"
#include "rules/match.h"

namespace isomer::gen {
namespace {

constexpr size_t kMatchesPerRule = 16;

}  // namespace

ImpliedChecker::OpCounts ImpliedChecker::op_counts(const Graph& g) const {
  OpCounts counts(types_.size(), 0);
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op)
      if (auto it = types_.find(n->op_type()); it != types_.end() && counts[it->second] < 255) ++counts[it->second];
  return counts;
}

void ImpliedChecker::add(const Rule& rule) {
  auto push = [&](const Rule& r) {
    if (r.source.num_ops() == 0) return;  // a bare variable matches nothing
    Entry e{r, {}};
    std::unordered_map<size_t, uint8_t> needs;
    for (const PatternNode& n : r.source.nodes)
      if (n.kind == PatternNode::Kind::Op) ++needs[types_.emplace(std::string(n.op->name), types_.size()).first->second];
    e.needs.assign(needs.begin(), needs.end());
    rules_.push_back(std::move(e));
  };
  push(rule);
  if (std::optional<Rule> rev = reversed_rule(rule)) push(*rev);
}

std::unordered_set<uint64_t> ImpliedChecker::neighbours(const Graph& g) const {
  std::unordered_set<uint64_t> out;
  const OpCounts present = op_counts(g);
  GraphIndex index(g);
  for (const Entry& e : rules_) {
    // Skip a source with more operators of some type than the graph has (so a match
    // that would map two source operators onto one graph operator is not tried:
    // fewer rules found implied, never a wrong one).
    bool possible = true;
    for (const auto& [type, count] : e.needs) possible = possible && present[type] >= count;
    if (!possible) continue;
    for (const Match& m : find_matches(index, e.rule, nullptr, kMatchesPerRule)) {
      bool applied = false;
      Graph next = apply_rule(g, e.rule, m, nullptr, &applied);
      if (applied) out.insert(structural_hash(next));
    }
  }
  return out;
}

bool ImpliedChecker::implied(const Rule& rule) const {
  if (rules_.empty() || rule.verify.empty()) return false;
  RuleInstance inst = instantiate(rule, 0);
  const Graph& a = inst.source;
  const Graph& b = inst.target;
  const uint64_t ha = structural_hash(a), hb = structural_hash(b);
  if (ha == hb) return true;
  std::unordered_set<uint64_t> na = neighbours(a);
  if (na.count(hb)) return true;
  std::unordered_set<uint64_t> nb = neighbours(b);
  if (nb.count(ha)) return true;
  for (uint64_t h : na)
    if (nb.count(h)) return true;
  return false;
}

}  // namespace isomer::gen
