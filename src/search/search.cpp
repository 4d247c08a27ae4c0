#include "search/search.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ops/op.h"
#include "rules/match.h"

namespace isomer {

namespace {

// Identity of a graph for the "seen" set: structural, so that the same graph
// reached through two orders of rewrites is expanded once (Node::hash mixes operand
// addresses, which differ between rebuilds). A collision can only make the search
// skip a graph, never apply a wrong rewrite.
size_t graph_hash(const Graph& g) { return structural_hash(g); }

// What an operator's cost depends on: operator, attributes, input types and which
// inputs are constants, not where the inputs come from (a rewrite gives every node
// downstream a new structural hash, but not a new cost).
size_t cost_signature(const Node& n) {
  auto mix = [](size_t& h, size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  size_t h = std::hash<std::string>{}(n.op_type());
  mix(h, n.attrs().hash());
  for (const Value& v : n.inputs()) {
    mix(h, v.present() ? 1 : 0);
    if (!v.present()) continue;
    const TensorType& t = v.type();
    mix(h, static_cast<size_t>(t.dtype));
    for (const Dim& d : t.shape) mix(h, d.is_static() ? static_cast<size_t>(d.value) : std::hash<std::string>{}(d.symbol));
    mix(h, v.node->kind() == NodeKind::Constant ? 7 : 3);
  }
  return h;
}

// Sum of operator costs, memoized by cost signature across all graphs of one search.
// Operators whose inputs are all constants cost nothing: the cleanup folds them
// (a rule that concatenates two weights leaves such a Concat).
class GraphCoster {
 public:
  explicit GraphCoster(const OpCostFn& op_cost) : op_cost_(op_cost) {}
  double operator()(const Graph& g) {
    double total = 0;
    for (const NodePtr& n : g.topo_order()) {
      if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
      if (n->kind() == NodeKind::Op && folds(*n)) continue;
      size_t key = cost_signature(*n);
      auto it = memo_.find(key);
      if (it == memo_.end()) it = memo_.emplace(key, op_cost_(*n)).first;
      total += it->second;
    }
    return total;
  }

 private:
  static bool folds(const Node& n) {
    for (const Value& v : n.inputs())
      if (v.present() && v.node->kind() != NodeKind::Constant) return false;
    return n.op()->props.deterministic;
  }
  const OpCostFn& op_cost_;
  std::unordered_map<size_t, double> memo_;
};

struct Candidate {
  double cost;
  size_t order;  // insertion order: ties go to the earlier graph (deterministic)
  Graph graph;
  std::map<std::string, size_t> path;  // rules applied from the input to here
};

struct CheaperFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.cost != b.cost ? a.cost > b.cost : a.order > b.order;
  }
};

Graph clean_up(const Graph& g, const PassOptions& passes, std::map<std::string, size_t>& path) {
  PassStats stats;
  Graph out = simplify(g, passes, &stats);
  for (const auto& [name, n] : stats.applied) path[name] += n;
  return out;
}

}  // namespace

std::vector<Rule> search_rules(const RuleSet& set, const std::vector<std::string>& disabled) {
  auto is_disabled = [&](const std::string& name) {
    std::string family = name.substr(0, name.find('/'));
    return std::find(disabled.begin(), disabled.end(), name) != disabled.end() ||
           std::find(disabled.begin(), disabled.end(), family) != disabled.end();
  };
  std::vector<Rule> out;
  for (const Rule& r : set.rules) {
    if (!r.usable() || r.templates_only) continue;
    if (!is_disabled(r.name)) out.push_back(r);
    if (std::optional<Rule> rev = reversed_rule(r); rev && !is_disabled(rev->name)) out.push_back(std::move(*rev));
  }
  return out;
}

Graph backtracking_search(const Graph& g, const std::vector<Rule>& rules, const OpCostFn& op_cost,
                          const SearchOptions& options, SearchStats* stats) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  SearchStats st;
  st.strategy = "backtrack";
  st.rules_used = rules.size();
  GraphCoster cost(op_cost);

  std::priority_queue<Candidate, std::vector<Candidate>, CheaperFirst> queue;
  std::unordered_set<size_t> seen{graph_hash(g)};
  size_t order = 0;
  Candidate best{cost(g), order++, g, {}};
  st.cost_before = best.cost;
  queue.push(best);

  while (!queue.empty()) {
    if (elapsed() >= options.budget_s || st.expanded >= options.max_expansions) {
      st.budget_exhausted = true;
      st.stop = elapsed() >= options.budget_s ? StopReason::TimeLimit : StopReason::IterationLimit;
      break;
    }
    Candidate cur = queue.top();
    queue.pop();
    ++st.expanded;
    // Candidates are queued as the rewrite left them and cleaned up (folding,
    // CSE, DCE) only when expanded: most are never expanded.
    cur.graph = clean_up(cur.graph, options.passes, cur.path);
    GraphIndex index(cur.graph);
    for (const Rule& rule : rules) {
      if (elapsed() >= options.budget_s) break;
      for (const Match& m : find_matches(index, rule, &st.rules, options.max_matches_per_rule)) {
        bool applied = false;
        Graph next = apply_rule(cur.graph, rule, m, &st.rules, &applied);
        if (!applied) continue;
        ++st.generated;
        if (!seen.insert(graph_hash(next)).second) {
          ++st.duplicates;
          continue;
        }
        double c = cost(next);
        if (!(c < options.alpha * best.cost)) {
          ++st.pruned;
          continue;
        }
        Candidate cand{c, order++, std::move(next), cur.path};
        ++cand.path[rule.name];
        if (c < best.cost) best = cand;
        queue.push(std::move(cand));
      }
    }
    // Bound memory: keep the cheapest candidates only.
    if (queue.size() > options.max_queue) {
      std::vector<Candidate> keep;
      while (!queue.empty() && keep.size() < options.max_queue / 2) {
        keep.push_back(queue.top());
        queue.pop();
      }
      queue = {};
      for (Candidate& c : keep) queue.push(std::move(c));
    }
  }
  best.graph = clean_up(best.graph, options.passes, best.path);
  st.cost_after = cost(best.graph);
  st.rules_applied = best.path;
  st.seconds = elapsed();
  if (stats) *stats = st;
  return best.graph;
}

void SearchStats::to_json(nlohmann::ordered_json& j) const {
  j["search_strategy"] = strategy;
  j["search_stop_reason"] = eg::stop_reason_name(stop);
  j["search_rules_used"] = rules_used;
  j["search_seconds"] = seconds;
  j["search_budget_exhausted"] = budget_exhausted;
  j["search_cost_before_ms"] = cost_before;
  j["search_cost_after_ms"] = cost_after;
  nlohmann::ordered_json per_rule = nlohmann::ordered_json::object();
  for (const auto& [name, c] : rules)
    if (c.matches || c.applications) per_rule[name] = {{"matches", c.matches}, {"applications", c.applications}};
  j["search_rule_counts"] = per_rule;
  if (strategy == "backtrack") {
    j["search_expanded"] = expanded;
    j["search_generated"] = generated;
  } else {
    j["search_cpu_seconds"] = cpu_seconds;
    j["search_regions"] = regions;
    j["search_iterations"] = iterations;
    j["search_egraph_nodes"] = egraph_nodes;
    j["search_egraph_classes"] = egraph_classes;
    j["search_saturation_seconds"] = saturation_seconds;
    j["search_extraction_seconds"] = extraction_seconds;
    j["search_pricing_seconds"] = pricing_seconds;
    j["search_priced_alone"] = priced_alone;
    j["search_timed_runs"] = timed_runs;
    j["search_graphs_compiled"] = graphs_compiled;
    j["search_extractor"] = extractor;
    j["search_extraction_gap"] = extraction_gap;
    j["search_extraction_optimal"] = extraction_optimal;
    j["search_greedy_cost_ms"] = greedy_cost;
    j["search_greedy_plain_cost_ms"] = greedy_plain_cost;
    j["search_greedy_seconds"] = greedy_seconds;
    j["search_ilp_cost_ms"] = ilp_cost;
    j["search_kept_input"] = kept_input;
    j["search_measured_ratio"] = measured_ratio;
    j["search_measured_ratio_high"] = measured_ratio_high;
    j["search_measured_noise"] = measured_noise;
    j["search_measured_verdict"] = measured_ratio >= 0 ? cost::paired_verdict_name(measured_verdict) : "";
    j["search_runner_ups"] = runner_ups;
  }
}

std::string SearchStats::to_text(size_t rules_loaded) const {
  char line[512];
  if (strategy == "backtrack") {
    std::snprintf(line, sizeof line,
                  "search: %zu rules loaded, %zu usable (reversals included), %zu graphs expanded, "
                  "%zu rewrites, %.2f s, stopped: %s\n",
                  rules_loaded, rules_used, expanded, generated, seconds, eg::stop_reason_name(stop));
    return line;
  }
  // A negative cost: nothing was priced (no rule changed the e-graph).
  char cost_text[120];
  if (cost_before < 0)
    std::snprintf(cost_text, sizeof cost_text, "no rule applied: input kept");
  else
    std::snprintf(cost_text, sizeof cost_text, "%.3f ms -> %.3f ms%s", cost_before, cost_after,
                  kept_input ? " (not cheaper by the minimum gain: input kept)" : "");
  std::string costs = cost_text;
  if (measured_ratio >= 0) {
    char ran[120];
    std::snprintf(ran, sizeof ran, "; run against the input: %.3fx its time (rounds up to %.3fx, noise +-%.1f%%: %s)",
                  measured_ratio, measured_ratio_high, 100 * measured_noise, cost::paired_verdict_name(measured_verdict));
    costs += ran;
  }
  if (runner_ups > 0) costs += "; runner-up extractions judged: " + std::to_string(runner_ups);
  std::snprintf(line, sizeof line,
                "search: eqsat over %zu rules (%zu loaded), %zu region(s), %zu iterations, e-graph %zu nodes / %zu "
                "classes, stopped: %s, saturation %.2f s, extraction %.2f s (%s%s; pricing %.2f s, %zu shapes priced alone), "
                "%s\n",
                rules_used, rules_loaded, regions, iterations, egraph_nodes, egraph_classes, eg::stop_reason_name(stop),
                saturation_seconds, extraction_seconds, extractor.c_str(),
                extractor == "ilp" ? (extraction_optimal ? ", optimal"
                                                         : (", gap " + std::to_string(extraction_gap * 100).substr(0, 5) + "%").c_str())
                                   : "",
                pricing_seconds, priced_alone, costs.c_str());
  return line;
}

RuleSet load_rule_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && e.path().extension() == ".rules") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      require(fs::exists(p, ec), "rule file '" + p + "' does not exist");
      files.push_back(p);
    }
  }
  RuleSet all;
  std::unordered_set<std::string> names;
  for (const std::string& f : files) {
    RuleSet s = load_rules(f);
    for (Rule& r : s.rules) {
      require(names.insert(r.name).second, f + ": rule '" + r.name + "' is defined twice");
      all.rules.push_back(std::move(r));
    }
  }
  return all;
}

std::string default_rules_path() {
  if (const char* env = std::getenv("ISOMER_RULES"); env && *env) return env;
#ifdef ISOMER_SOURCE_DIR
  return std::string(ISOMER_SOURCE_DIR) + "/rules";
#else
  return "rules";
#endif
}

}  // namespace isomer
