#include "generate/implied.h"

#include <functional>

#include "ir/error.h"
#include "ops/op.h"
#include "rules/match.h"
#include "search/search.h"

namespace isomer::gen {
namespace {

uint64_t mix(uint64_t h, uint64_t x) { return h ^ (x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

constexpr size_t kMatchesPerRule = 16;

}  // namespace

uint64_t structural_hash(const Graph& g) {
  std::unordered_map<const Node*, uint64_t> memo;
  for (const NodePtr& n : g.topo_order()) {
    uint64_t h = mix(static_cast<uint64_t>(n->kind()), std::hash<std::string>{}(n->op_type()));
    switch (n->kind()) {
      case NodeKind::Input: h = mix(h, std::hash<std::string>{}(n->name())); break;
      case NodeKind::Constant: h = mix(h, n->value()->hash()); break;
      case NodeKind::Op: h = mix(h, canonical_attributes(*n).hash()); break;
      case NodeKind::Opaque: h = mix(h, n->opaque()->uid); break;
    }
    for (const Value& v : n->inputs()) {
      if (!v.present()) {
        h = mix(h, 0x5eed);
        continue;
      }
      auto it = memo.find(v.node.get());
      require(it != memo.end(), "structural_hash: operand before its producer");
      h = mix(mix(h, it->second), v.index);
    }
    memo[n.get()] = h;
  }
  uint64_t h = 0x15033e7;
  for (const Value& v : g.outputs()) h = mix(mix(h, v.node ? memo.at(v.node.get()) : 0), v.index);
  return h;
}

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
