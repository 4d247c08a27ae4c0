#include "pipeline/optimize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cost/cost.h"
#include "ir/error.h"
#include "runtime/runtime.h"
#include "search/eqsat.h"

namespace isomer {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string human_bytes(size_t n) {
  char buf[32];
  if (n >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  else if (n >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

// On a failed check, finds a rule whose removal makes the check pass.
std::string find_culprit(const Graph& g, const OptimizeOptions& opts, const std::map<std::string, size_t>& fired) {
  std::vector<std::string> templates = template_rule_names();
  for (const auto& [rule, count] : fired) {
    if (count == 0 || rule == "dce" || rule == "constant-to-initializer") continue;  // not switchable
    OptimizeOptions without = opts;
    if (std::find(templates.begin(), templates.end(), rule) != templates.end())
      without.passes.disabled.push_back(rule);
    else
      without.search_options.disabled.push_back(rule);
    Graph h = rewrite_graph(g, without, nullptr);
    if (compare_graphs(g, h, opts.check_options).status == CheckResult::Status::Passed) return rule;
  }
  return "";
}

}  // namespace

// NaN weights make a model compute NaN, so there is nothing to optimize or check;
// Inf in a weight tensor is as suspicious. A single-element Inf constant is the
// fill value of an attention mask (Where(mask, x, -inf)) and is legitimate.
void require_finite_weights(const Graph& g) {
  std::vector<NodePtr> order = g.topo_order();
  for (const NodePtr& n : order) {
    if (n->kind() != NodeKind::Constant || !is_float(n->value()->dtype())) continue;
    std::vector<double> v = n->value()->to_f64();
    for (size_t i = 0; i < v.size(); ++i) {
      bool nan = std::isnan(v[i]);
      if (!nan && (!std::isinf(v[i]) || v.size() == 1)) continue;
      std::string what = n->name().empty() ? "a constant" : "initializer '" + n->name() + "'";
      for (const NodePtr& user : order) {
        bool uses = false;
        for (const Value& in : user->inputs()) uses = uses || in.node == n;
        if (uses) {
          what += " (input of node '" + (user->name().empty() ? user->op_type() : user->name()) + "')";
          break;
        }
      }
      throw Error(what + " holds " + (nan ? "NaN" : "Inf") + " at element " + std::to_string(i) +
                  ": refusing to optimize a model with non-finite weights (--allow-nonfinite accepts it)");
    }
  }
}

Graph rewrite_graph(const Graph& g, const OptimizeOptions& opts, std::map<std::string, size_t>* applied,
                    OptimizeReport* report) {
  const bool search = opts.search == "backtrack" || opts.search == "eqsat";
  require(opts.search == "none" || opts.search == "templates" || search,
          "unknown search '" + opts.search + "' (choose none, templates, backtrack or eqsat)");
  if (!search && !opts.search_options.disabled.empty())
    throw Error("cannot disable rule '" + opts.search_options.disabled[0] +
                "': no template rule has that name (verified rules only run with --search backtrack or eqsat)");
  if (opts.search == "none") return g;
  PassStats stats;
  Graph out = simplify(g, opts.passes, &stats);
  if (applied) *applied = stats.applied;
  if (!search) return out;

  std::vector<std::string> paths = opts.rule_paths;
  if (paths.empty()) paths.push_back(default_rules_path());
  RuleSet set = load_rule_files(paths);
  for (const std::string& name : opts.search_options.disabled) {
    bool reversed = name.size() > 4 && name.ends_with("-rev");
    bool family = std::any_of(set.rules.begin(), set.rules.end(), [&](const Rule& r) { return r.family() == name; });
    require(set.find(name) || family || (reversed && set.find(name.substr(0, name.size() - 4))),
            "cannot disable rule '" + name + "': neither a template rule nor in the rule files");
  }
  std::vector<Rule> rules = search_rules(set, opts.search_options.disabled);
  // The search prices operators alone; the report's cost model prices whole graphs.
  std::string kind = opts.cost_model == "none" ? "analytic" : opts.cost_model;
  std::unique_ptr<cost::CostModel> model = cost::make_cost_model(kind, opts.cost_db, opts.cost_threads);
  SearchOptions so = opts.search_options;
  so.passes = opts.passes;
  SearchStats sst;
  if (opts.search == "eqsat")
    out = eqsat_search(out, rules, *model, so, &sst);
  else
    out = backtracking_search(out, rules, [&](const Node& n) { return model->op_ms(n); }, so, &sst);
  if (applied)
    for (const auto& [name, n] : sst.rules_applied) (*applied)[name] += n;
  if (report) {
    report->search_stats = sst;
    report->rules_loaded = set.rules.size();
  }
  return out;
}

GraphSummary summarize(const Graph& g) {
  GraphSummary s;
  s.histogram = g.op_histogram();
  for (const auto& [op, n] : s.histogram) s.nodes += n;
  s.constant_bytes = g.constant_bytes();
  return s;
}

OptimizeResult optimize_graph(const Graph& g, const ImportStats& import_stats, const OptimizeOptions& opts) {
  if (!opts.allow_nonfinite) require_finite_weights(g);
  OptimizeReport rep;
  rep.before.nodes = import_stats.onnx_nodes;
  rep.before.histogram = import_stats.onnx_histogram;
  rep.before.constant_bytes = g.constant_bytes();
  if (rep.before.histogram.empty()) rep.before = summarize(g);
  rep.opaque_nodes = import_stats.opaque_nodes;
  rep.opaque_reasons = import_stats.opaque_reasons;
  rep.seed = opts.check_options.seed;
  rep.check_requested = opts.check;

  auto t0 = std::chrono::steady_clock::now();
  rep.search = opts.search;
  Graph out = rewrite_graph(g, opts, &rep.rules_applied, &rep);
  rep.optimize_seconds = seconds_since(t0);
  // What the import already did: ONNX Constant nodes became constants (exported as
  // initializers), and nodes no output depends on were never part of the graph.
  auto constants = import_stats.onnx_histogram.find("Constant");
  size_t constant_nodes = constants == import_stats.onnx_histogram.end() ? 0 : constants->second;
  if (constant_nodes) rep.rules_applied["constant-to-initializer"] += constant_nodes;
  size_t imported_ops = g.num_ops();
  if (import_stats.onnx_nodes > constant_nodes + imported_ops)
    rep.rules_applied["dce"] += import_stats.onnx_nodes - constant_nodes - imported_ops;
  rep.after = summarize(out);
  if (opts.cost_model != "none") {
    std::string why;
    if (!runtime::is_runnable(g, &why) || !runtime::is_runnable(out, &why)) {
      rep.cost_note = why;
    } else {
      try {
        auto model = cost::make_cost_model(opts.cost_model, opts.cost_db, opts.cost_threads);
        rep.cost_before_ms = model->graph_ms(g);
        rep.cost_after_ms = model->graph_ms(out);
        rep.cost_model = model->name();
      } catch (const Error& e) {  // a cost is a report, never a reason to fail
        rep.cost_note = e.what();
      }
    }
  }

  if (opts.check) {
    auto t1 = std::chrono::steady_clock::now();
    rep.check = compare_graphs(g, out, opts.check_options);
    if (rep.check.status == CheckResult::Status::Failed) rep.culprit = find_culprit(g, opts, rep.rules_applied);
    rep.check_seconds = seconds_since(t1);
  } else {
    rep.check.status = CheckResult::Status::Skipped;
    rep.check.reason = "switched off with --no-check";
  }
  return {std::move(out), std::move(rep)};
}

OptimizeReport optimize_file(const std::string& in_path, const std::string& out_path, const OptimizeOptions& opts) {
  ImportStats stats;
  Graph g = import_onnx_file(in_path, opts.import, &stats);
  if (!opts.allow_nonfinite) {
    try {
      require_finite_weights(g);
    } catch (const Error& e) {
      throw Error(in_path + ": " + e.what());
    }
  }
  OptimizeResult r = optimize_graph(g, stats, opts);
  r.report.input_path = in_path;
  r.report.output_path = out_path;
  if (r.report.check.status == CheckResult::Status::Failed) {
    std::string msg = in_path + ": the optimized model does not match the original (" + r.report.check.reason + ")";
    if (!r.report.culprit.empty()) msg += "; rule '" + r.report.culprit + "' is responsible";
    throw Error(msg + "; nothing was written");
  }
  if (!out_path.empty()) export_onnx_file(r.graph, out_path);
  return r.report;
}

std::string OptimizeReport::to_json() const {
  nlohmann::ordered_json j;
  j["input"] = input_path;
  j["output"] = output_path;
  j["nodes_before"] = before.nodes;
  j["nodes_after"] = after.nodes;
  j["weight_bytes_before"] = before.constant_bytes;
  j["weight_bytes_after"] = after.constant_bytes;
  j["op_types_before"] = before.histogram;
  j["op_types_after"] = after.histogram;
  j["opaque_nodes"] = opaque_nodes;
  j["optimize_seconds"] = optimize_seconds;
  j["cost_model"] = cost_model;
  j["cost_before_ms"] = cost_before_ms >= 0 ? nlohmann::ordered_json(cost_before_ms) : nlohmann::ordered_json();
  j["cost_after_ms"] = cost_after_ms >= 0 ? nlohmann::ordered_json(cost_after_ms) : nlohmann::ordered_json();
  if (!cost_note.empty()) j["cost_note"] = cost_note;
  j["check"] = check.status_name();
  j["check_reason"] = check.reason;
  j["check_method"] = check.method;
  j["check_seconds"] = check_seconds;
  j["check_seed"] = seed;
  j["max_abs_error"] = check.max_abs_error;
  j["max_rel_error"] = check.max_rel_error;
  if (!culprit.empty()) j["culprit_rule"] = culprit;
  j["rules_applied"] = rules_applied;
  j["search"] = search;
  if (search == "backtrack" || search == "eqsat") {
    j["search_rules_loaded"] = rules_loaded;
    search_stats.to_json(j);
  }
  return j.dump(2) + "\n";
}

std::string OptimizeReport::to_text() const {
  std::ostringstream out;
  std::map<std::string, std::pair<size_t, size_t>> rows;
  for (const auto& [op, n] : before.histogram) rows[op].first = n;
  for (const auto& [op, n] : after.histogram) rows[op].second = n;
  char line[160];
  std::snprintf(line, sizeof line, "  %-28s %8s %8s\n", "operator", "before", "after");
  out << line;
  for (const auto& [op, c] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %8zu %8zu%s\n", op.c_str(), c.first, c.second,
                  c.first != c.second ? "  *" : "");
    out << line;
  }
  std::snprintf(line, sizeof line, "  %-28s %8zu %8zu\n", "total nodes", before.nodes, after.nodes);
  out << line;
  std::snprintf(line, sizeof line, "  %-28s %8s %8s\n", "weights", human_bytes(before.constant_bytes).c_str(),
                human_bytes(after.constant_bytes).c_str());
  out << line;
  if (opaque_nodes) out << "  (" << opaque_nodes << " operator(s) kept as opaque nodes)\n";
  out << "\nrules applied:\n";
  if (rules_applied.empty()) out << "  (none)\n";
  for (const auto& [rule, n] : rules_applied) {
    std::snprintf(line, sizeof line, "  %-28s %8zu\n", rule.c_str(), n);
    out << line;
  }
  std::snprintf(line, sizeof line, "\noptimized in %.3f s\n", optimize_seconds);
  out << line;
  if (search == "backtrack" || search == "eqsat") out << search_stats.to_text(rules_loaded);
  if (cost_before_ms >= 0 && cost_after_ms >= 0) {
    std::snprintf(line, sizeof line, "time on isomer's runtime (%s cost): %.3f ms -> %.3f ms (%.2fx)\n",
                  cost_model.c_str(), cost_before_ms, cost_after_ms,
                  cost_after_ms > 0 ? cost_before_ms / cost_after_ms : 1.0);
    out << line;
  } else if (!cost_note.empty()) {
    out << "time: not measured (" << cost_note << ")\n";
  }
  out << "check: " << check.status_name();
  if (check.status != CheckResult::Status::Skipped) {
    std::snprintf(line, sizeof line, " (%s, seed %llu, max abs error %.3g, max rel error %.3g)", check.method.c_str(),
                  static_cast<unsigned long long>(seed), check.max_abs_error, check.max_rel_error);
    out << line;
  }
  if (!check.reason.empty()) out << ": " << check.reason;
  out << "\n";
  return out.str();
}

}  // namespace isomer
