// The driver of the template passes: rounds of rebuilds until nothing fires.
//
// One round is two rebuilds of the graph:
//   1. eliminate + fold rules (values replaced by simpler or constant values), with
//      structurally equal nodes merged as they are rebuilt (CSE);
//   2. fuse rules (a single-user producer absorbed into its consumer). They run in
//      their own rebuild because "single user" must be counted on the graph being
//      rewritten: a rebuild that also replaced values by other values (Identity(x)
//      -> x) would add readers the use counts cannot see.
// Nodes left without readers disappear by themselves (the graph holds only what is
// reachable from its outputs); the driver counts them as "dce".
#include <algorithm>
#include <unordered_set>

#include "ir/error.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace isomer {

namespace {

using passes::MatchContext;
using passes::Rule;

constexpr std::string_view kCse = "cse";
constexpr std::string_view kDce = "dce";

// Replacement values must have the replaced outputs' types wherever the outputs
// are read (an unread output may be stood in for by any value of its dtype).
bool keeps_types(const MatchContext& ctx, const std::vector<Value>& replacement) {
  if (replacement.size() != ctx.node.num_outputs()) return false;
  for (size_t i = 0; i < replacement.size(); ++i) {
    const TensorType& want = ctx.output_types()[i];
    if (!replacement[i].present() || replacement[i].type().dtype != want.dtype) return false;
    if (ctx.output_used(i) && replacement[i].type() != want) return false;
  }
  return true;
}

std::unordered_set<const Node*> reachable(const Graph& g) {
  std::unordered_set<const Node*> live;
  for (const NodePtr& n : g.topo_order()) live.insert(n.get());
  return live;
}

// One rebuild of `g` with `rules`; adds what fired to `applied`.
Graph run_rules(const Graph& g, const std::vector<const Rule*>& rules, bool merge_equal, const PassOptions& opts,
                std::map<std::string, size_t>& applied) {
  const passes::UseCounts uses = passes::count_uses(g);
  // Operator nodes no rule replaced -> the node they became in the new graph.
  std::unordered_map<const Node*, NodePtr> kept;
  Graph out = rebuild(g, [&](const Node& node, const std::vector<Value>& in, GraphBuilder& b) {
    if (node.kind() == NodeKind::Op) {
      MatchContext ctx{node, in, b, uses, opts};
      for (const Rule* rule : rules) {
        std::vector<Value> replacement;
        try {
          replacement = rule->fn(ctx);
        } catch (const Error&) {
          // A pattern whose replacement the shape rules reject is simply not applied.
          replacement.clear();
        }
        if (replacement.empty() || !keeps_types(ctx, replacement)) continue;
        ++applied[std::string(rule->name)];
        return replacement;
      }
    }
    NodePtr node_now = in == node.inputs() ? node.shared_from_this() : node.with_inputs(in);
    if (merge_equal) {
      NodePtr merged = b.intern(node_now);
      if (merged != node_now) ++applied[std::string(kCse)];
      node_now = merged;
    }
    kept[&node] = node_now;
    std::vector<Value> outs;
    for (uint32_t i = 0; i < node_now->num_outputs(); ++i) outs.push_back(node_now->output(i));
    return outs;
  });
  if (out.outputs() == g.outputs()) return out;  // same outputs: the same DAG, nothing died
  const auto live = reachable(out);
  for (const auto& [before, after] : kept)
    if (!live.count(after.get())) ++applied[std::string(kDce)];
  return out;
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

std::vector<const Rule*> enabled(const std::vector<const std::vector<Rule>*>& sets, const PassOptions& opts) {
  std::vector<const Rule*> rules;
  for (const auto* set : sets)
    for (const Rule& r : *set)
      if (std::find(opts.disabled.begin(), opts.disabled.end(), r.name) == opts.disabled.end()) rules.push_back(&r);
  return rules;
}

}  // namespace

std::vector<std::string> template_rule_names() {
  std::vector<std::string> names;
  for (const Rule& r : passes::fold_rules()) names.emplace_back(r.name);
  names.emplace_back(kCse);
  names.emplace_back(kDce);
  for (const auto* set : {&passes::eliminate_rules(), &passes::fuse_rules()})
    for (const Rule& r : *set) names.emplace_back(r.name);
  return names;
}

Graph simplify(const Graph& g, const PassOptions& opts, PassStats* stats) {
  const std::vector<std::string> known = template_rule_names();
  for (const std::string& name : opts.disabled) {
    require(std::find(known.begin(), known.end(), name) != known.end(), "unknown template rule '" + name + "'");
    require(name != kDce, "rule 'dce' cannot be disabled: a graph holds only nodes reachable from its outputs");
  }
  const bool merge_equal = std::find(opts.disabled.begin(), opts.disabled.end(), kCse) == opts.disabled.end();
  const auto replace_rules = enabled({&passes::eliminate_rules(), &passes::fold_rules()}, opts);
  const auto fuse_rules = enabled({&passes::fuse_rules()}, opts);

  PassStats local;
  Graph current = g;
  while (local.iterations < opts.max_iterations) {
    ++local.iterations;
    std::map<std::string, size_t> round;
    current = run_rules(current, replace_rules, merge_equal, opts, round);
    current = run_rules(current, fuse_rules, merge_equal, opts, round);
    for (const auto& [name, n] : round) local.applied[name] += n;
    if (round.empty()) break;
  }
  check_interface(g, current);
  if (stats) *stats = std::move(local);
  return current;
}

}  // namespace isomer
