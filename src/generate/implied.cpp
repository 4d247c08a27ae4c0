#include "generate/implied.h"

#include <functional>

#include "ir/error.h"
#include "ops/op.h"
#include "rules/match.h"
#include "search/search.h"

namespace isomer::gen {
namespace {

constexpr size_t kMatchesPerRule = 16;

}  // namespace

uint64_t ImpliedChecker::op_bits(const Graph& g, bool add_missing) {
  uint64_t bits = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op) continue;
    auto it = bit_.find(n->op_type());
    if (it == bit_.end() && add_missing && bit_.size() < 64) it = bit_.emplace(n->op_type(), bit_.size()).first;
    if (it != bit_.end()) bits |= uint64_t{1} << it->second;
  }
  return bits;
}

uint64_t ImpliedChecker::op_bits_of(const Graph& g) const {
  uint64_t bits = 0;
  for (const NodePtr& n : g.topo_order())
    if (n->kind() == NodeKind::Op)
      if (auto it = bit_.find(n->op_type()); it != bit_.end()) bits |= uint64_t{1} << it->second;
  return bits;
}

void ImpliedChecker::add(const Rule& rule) {
  auto push = [&](const Rule& r) {
    if (r.source_pattern.num_ops() == 0) return;  // a bare variable matches nothing
    rules_.push_back({r, op_bits(r.source_pattern, true)});
  };
  push(rule);
  if (std::optional<Rule> rev = reversed_rule(rule)) push(*rev);
}

std::unordered_set<uint64_t> ImpliedChecker::neighbours(const Graph& g) const {
  std::unordered_set<uint64_t> out;
  const uint64_t present = op_bits_of(g);
  GraphIndex index(g);
  for (const Entry& e : rules_) {
    // An operator type unknown to the bit table has no bit: the matcher decides.
    if ((e.needs & present) != e.needs) continue;
    for (const Match& m : find_matches(index, e.rule, nullptr, kMatchesPerRule)) {
      bool applied = false;
      Graph next = apply_rule(g, e.rule, m, nullptr, &applied);
      if (applied) out.insert(structural_hash(next));
    }
  }
  return out;
}

bool ImpliedChecker::implied(const Rule& rule) const {
  if (rules_.empty() || rule.verify_shapes.empty()) return false;
  Graph a = rule.build_source(rule.verify_shapes[0]);
  Graph b = rule.build_target(rule.verify_shapes[0]);
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
