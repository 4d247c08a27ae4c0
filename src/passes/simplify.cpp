// The greedy template engine (passes/passes.h): rounds of constant folding + CSE and
// of template-rule rewrites until nothing changes.
#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "eval/empty_outputs.h"
#include "ir/error.h"
#include "ops/fold_cost.h"
#include "ops/op.h"
#include "ops/reference_gemm.h"
#include "ir/human_bytes.h"
#include "passes/passes.h"
#include "rules/match.h"

namespace isomer {

extern const char* const kTemplateRulesText;  // templates_rules.cpp, generated from rules/templates.rules

namespace {

constexpr std::string_view kFold = "fold-constants";
constexpr std::string_view kCse = "cse";
constexpr std::string_view kDce = "dce";

// Reads of each value: once per reader input, plus once per graph output it is.
using UseCounts = std::unordered_map<Value, size_t, ValueHash>;
UseCounts count_uses(const Graph& g) {
  UseCounts uses;
  for (const NodePtr& n : g.topo_order())
    for (const Value& v : n->inputs())
      if (v.present()) ++uses[v];
  for (const Value& v : g.outputs()) ++uses[v];
  return uses;
}

std::string scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", x);
  return buf;
}

// A fold the budget leaves to the runtime, said once per node (simplify's rounds meet
// it again): the model written stays about the input's size, and the report says why.
std::vector<Value> skip_fold(FoldBudget& budget, const Node& node, const std::string& why) {
  std::string line = describe(node) + ": " + why + " (left to the runtime)";
  if (std::find(budget.skipped.begin(), budget.skipped.end(), line) == budget.skipped.end())
    budget.skipped.push_back(std::move(line));
  return {};
}

// op(c0, c1, ...) => constant(op.fold, else op.eval, of (c0, c1, ...))
//   [deterministic op, not an op that widens constants, within `budget`: result bytes,
//    arithmetic, constant bytes added]
std::vector<Value> fold_node(const Node& node, const std::vector<Value>& in, GraphBuilder& b, FoldBudget& budget) {
  if (!node.op()->props.deterministic || node.op()->props.widens_constants) return {};
  std::vector<Tensor> args;
  std::vector<TensorType> in_types;
  size_t in_bytes = 0;
  for (const Value& v : in) {
    if (!v.present()) {
      args.emplace_back();  // an omitted optional input, as the evaluator passes it
      in_types.emplace_back();
      continue;
    }
    const Tensor* t = v.constant();
    if (!t || !is_numeric(t->dtype())) return {};
    args.push_back(*t);
    in_types.push_back(v.type());
    in_bytes += t->bytes().size();
  }
  // Size the result from the shape rule before computing it: a large Expand or
  // ConstantOfShape must not be materialized at all.
  NodePtr now = in == node.inputs() ? node.shared_from_this() : node.with_inputs(in);
  const std::vector<TensorType>& types = now->output_types();
  size_t bytes = 0;
  for (const TensorType& t : types) {
    std::optional<int64_t> numel = num_elements(t.shape);
    if (!numel || !is_numeric(t.dtype)) return {};
    bytes += static_cast<size_t>(*numel) * dtype_size(t.dtype);
  }
  if (bytes > budget.result_bytes)
    return skip_fold(budget, node, "its result of " + human_bytes(bytes) + " is past folding's " +
                                       human_bytes(budget.result_bytes));
  const std::optional<double> flops = fold_flops(node.op_type(), node.attrs(), in_types, types);
  if (!flops) return {};
  if (*flops > budget.flops)
    return skip_fold(budget, node, "its " + scientific(*flops) + " multiply-adds are past folding's " +
                                       scientific(budget.flops));
  const size_t growth = bytes > in_bytes ? bytes - in_bytes : 0;
  if (growth > budget.growth_left)
    return skip_fold(budget, node, "its result adds " + human_bytes(growth) + " of constants, past the " +
                                       human_bytes(budget.growth) + " a template pass may add");
  EvalContext ctx{node.attrs(), args, node.num_outputs()};
  const OpDef& op = *node.op();
  const std::optional<std::vector<Tensor>> empty = empty_outputs(types);
  std::vector<Tensor> results = empty ? *empty : op.fold ? op.fold(ctx) : op.eval(ctx);
  if (results.size() != node.num_outputs()) return {};
  budget.growth_left -= growth;
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string name = i < node.output_names().size() ? node.output_names()[i] : "";
    out.push_back(b.constant(std::move(results[i]), std::move(name)));
  }
  return out;
}

// True if applying `m` removes what it matched and recomputes nothing: every used
// output of a root node is one the match replaces (else the node stays), and every
// operator matched below the roots is read only by the match (else it stays and the
// target computes it again) unless the target computes nothing (a variable or a
// constant).
bool recomputes_nothing(const Rule& rule, const Match& m, const UseCounts& uses) {
  const bool target_computes = rule.target.num_ops() > 0;
  std::unordered_set<const Node*> matched;
  for (const NodePtr& n : m.nodes) matched.insert(n.get());
  std::unordered_set<const Node*> roots;
  for (const Value& r : m.roots) roots.insert(r.node.get());
  // Reads of each matched node's outputs from inside the match.
  std::unordered_map<Value, size_t, ValueHash> inside;
  for (const NodePtr& n : m.nodes)
    for (const Value& v : n->inputs())
      if (v.present() && matched.count(v.node.get())) ++inside[v];
  for (const NodePtr& n : m.nodes) {
    const bool root = roots.count(n.get()) > 0;
    if (!root && !target_computes) continue;
    for (uint32_t i = 0; i < n->num_outputs(); ++i) {
      Value v = n->output(i);
      auto u = uses.find(v);
      size_t total = u == uses.end() ? 0 : u->second;
      if (total == 0) continue;
      if (root) {
        if (std::find(m.roots.begin(), m.roots.end(), v) == m.roots.end() && total > inside[v]) return false;
      } else if (total != inside[v]) {
        return false;
      }
    }
  }
  return true;
}

// Folding may make an output's symbolic dims static; anything else would change the
// model's interface and is a bug in a rule or a shape rule.
void check_interface(const Graph& before, const Graph& after) {
  for (size_t i = 0; i < before.outputs().size(); ++i) {
    const TensorType& a = before.outputs()[i].type();
    const TensorType& b = after.outputs()[i].type();
    bool same = a.dtype == b.dtype && a.rank() == b.rank();
    for (size_t d = 0; same && d < a.shape.size(); ++d) same = !a.shape[d].is_static() || a.shape[d] == b.shape[d];
    require(same, "simplify changed the type of graph output '" + before.output_names()[i] + "' from " +
                      to_string(a) + " to " + to_string(b));
  }
}

}  // namespace

const RuleSet& template_rules() {
  static const RuleSet set = parse_rules(kTemplateRulesText, "rules/templates.rules");
  return set;
}

std::vector<std::string> template_rule_names() {
  std::vector<std::string> names{std::string(kFold), std::string(kCse), std::string(kDce)};
  for (const Rule& r : template_rules().rules)
    if (std::find(names.begin(), names.end(), r.family()) == names.end()) names.push_back(r.family());
  return names;
}

Graph fold_constants(const Graph& g, FoldBudget& budget, bool merge_equal, std::map<std::string, size_t>& applied) {
  // Large products of weights (eqsat's reassociations: TASO BERT's 21 products of
  // 1024x1024 weights, half of its warm search) are split across the cores, and
  // float32 ones are summed in float with the runtime's kernel (OpDef::fold); the
  // weights do not depend on the thread count (ops/reference_gemm.h).
  ops::ScopedGemmThreads all_cores(0);
  return rebuild(g, [&](const Node& node, const std::vector<Value>& in, GraphBuilder& b) -> std::vector<Value> {
    if (node.kind() == NodeKind::Op) {
      std::vector<Value> folded;
      try {
        folded = fold_node(node, in, b, budget);
      } catch (const Error&) {
        folded.clear();  // an operator the evaluator rejects at these values stays
      }
      if (!folded.empty()) {
        ++applied[std::string(kFold)];
        return folded;
      }
    }
    NodePtr now = in == node.inputs() ? node.shared_from_this() : node.with_inputs(in);
    if (merge_equal) {
      NodePtr merged = b.intern(now);
      if (merged != now) ++applied[std::string(kCse)];
      now = merged;
    }
    std::vector<Value> outs;
    for (uint32_t i = 0; i < now->num_outputs(); ++i) outs.push_back(now->output(i));
    return outs;
  });
}

Graph simplify(const Graph& g, const PassOptions& opts, PassStats* stats) {
  const std::vector<std::string> known = template_rule_names();
  for (const std::string& name : opts.disabled) {
    require(std::find(known.begin(), known.end(), name) != known.end(), "unknown template rule '" + name + "'");
    require(name != kDce, "rule 'dce' cannot be disabled: a graph holds only nodes reachable from its outputs");
  }
  auto disabled = [&](std::string_view name) {
    return std::find(opts.disabled.begin(), opts.disabled.end(), name) != opts.disabled.end();
  };
  const bool merge_equal = !disabled(kCse);
  const bool fold = !disabled(kFold);
  // Rules by the operator at their root, in file order.
  std::unordered_map<std::string, std::vector<const Rule*>> by_root;
  for (const Rule& r : template_rules().rules) {
    if (disabled(r.family()) || r.num_outputs() != 1 || (opts.defer_to_search && (r.leave_to_search || r.templates_only))) continue;
    const PatternNode& root = r.source.nodes[static_cast<size_t>(r.source.outputs[0].node)];
    by_root[std::string(root.op->name)].push_back(&r);
  }

  PassStats local;
  Graph current = g;
  FoldBudget budget{opts.fold_limit_bytes, opts.fold_flops_limit, opts.fold_growth_bytes, opts.fold_growth_bytes, {}};
  FoldBudget merge_only{0, 0, 0, 0, {}};
  std::set<std::pair<const Rule*, const Node*>> failed;
  std::vector<NodePtr> keep_alive;  // the nodes `failed` names stay valid
  while (local.iterations < opts.max_iterations) {
    ++local.iterations;
    std::map<std::string, size_t> round;
    current = fold ? fold_constants(current, budget, merge_equal, round)
                   : (merge_equal ? fold_constants(current, merge_only, true, round) : current);
    const UseCounts uses = count_uses(current);
    std::vector<Match> chosen_matches;
    std::vector<const Rule*> chosen_rules;
    std::unordered_set<const Node*> claimed;
    const std::vector<NodePtr> order = current.topo_order();
    for (const NodePtr& n : order) {
      if (n->kind() != NodeKind::Op || claimed.count(n.get())) continue;
      auto it = by_root.find(n->op_type());
      if (it == by_root.end()) continue;
      for (const Rule* rule : it->second) {
        if (failed.count({rule, n.get()})) continue;
        std::optional<Match> m = match_at(*rule, n->output(rule->source.outputs[0].output));
        if (!m) continue;
        // A match that rewrites only its roots (its target computes nothing) leaves
        // the rest for other matches.
        std::vector<const Node*> claims;
        if (rule->target.num_ops() > 0)
          for (const NodePtr& x : m->nodes) claims.push_back(x.get());
        else
          for (const Value& r : m->roots) claims.push_back(r.node.get());
        bool overlaps = std::any_of(claims.begin(), claims.end(), [&](const Node* x) { return claimed.count(x) > 0; });
        if (overlaps || !recomputes_nothing(*rule, *m, uses)) continue;
        claimed.insert(claims.begin(), claims.end());
        chosen_rules.push_back(rule);
        chosen_matches.push_back(std::move(*m));
        break;
      }
    }
    if (!chosen_matches.empty()) {
      std::vector<std::pair<const Rule*, const Match*>> pairs;
      for (size_t i = 0; i < chosen_matches.size(); ++i) pairs.emplace_back(chosen_rules[i], &chosen_matches[i]);
      ApplyInfo info;
      Graph next = apply_rules(current, pairs, &info, merge_equal);
      std::unordered_set<const Node*> replaced;
      for (size_t i = 0; i < pairs.size(); ++i) {
        if (!info.applied[i]) {
          // Its target does not build here (a fold not applicable at these values):
          // not chosen again while the node lives.
          const NodePtr& root = chosen_matches[i].roots[0].node;
          failed.insert({chosen_rules[i], root.get()});
          keep_alive.push_back(root);
          continue;
        }
        ++round[chosen_rules[i]->family()];
        for (const Value& r : chosen_matches[i].roots) replaced.insert(r.node.get());
      }
      if (info.merged) round[std::string(kCse)] += info.merged;
      std::unordered_set<const Node*> live;
      for (const NodePtr& n : next.topo_order()) live.insert(n.get());
      for (const auto& [before, after] : info.kept)
        if (before->kind() == NodeKind::Op && !replaced.count(before) && !live.count(after.get())) ++round[std::string(kDce)];
      current = std::move(next);
    }
    for (const auto& [name, n] : round) local.applied[name] += n;
    if (round.empty()) break;
  }
  check_interface(g, current);
  local.fold_skipped = std::move(budget.skipped);
  if (stats) *stats = std::move(local);
  return current;
}

}  // namespace isomer
