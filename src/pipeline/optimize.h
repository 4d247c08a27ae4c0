#pragma once
// The optimize pipeline shared by `isomer optimize` and `isomer.optimize()`:
// simplify with the template passes, check the result against the original, and
// report what changed. Nothing is written unless the check passed (or the user
// switched the check off).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "check/compare.h"
#include "ir/graph.h"
#include "onnx/onnx_io.h"
#include "passes/passes.h"
#include "search/search.h"

namespace isomer {

struct OptimizeOptions {
  ImportOptions import;
  PassOptions passes;
  // "none": no rewrites; "templates": the template passes; "backtrack" / "eqsat": the
  // template passes, then the cost-based backtracking search or equality saturation
  // (search/eqsat.h) over the verified rules of rule_paths (default: isomer's shipped
  // rule set, see default_rules_path()).
  std::string search = "templates";
  std::vector<std::string> rule_paths;
  SearchOptions search_options;
  bool check = true;
  CheckOptions check_options;
  // Cost of the graph before and after on isomer's runtime: "measured" (cached in
  // cost_db, default ~/.cache/isomer/costs.sqlite), "analytic", or "none".
  std::string cost_model = "measured";
  std::string cost_db;
  int cost_threads = 0;  // 0 = every core
  // Accept NaN or Inf in weight tensors (refused by default: see require_finite_weights).
  bool allow_nonfinite = false;
};

struct GraphSummary {
  size_t nodes = 0;
  size_t constant_bytes = 0;
  std::map<std::string, size_t> histogram;  // op type -> count
};

struct OptimizeReport {
  std::string input_path, output_path;
  GraphSummary before, after;
  size_t opaque_nodes = 0;
  std::vector<std::string> opaque_reasons;
  std::map<std::string, size_t> rules_applied;
  std::string search;            // the search mode that ran
  SearchStats search_stats;      // backtrack and eqsat
  size_t rules_loaded = 0;       // backtrack and eqsat: rules read from the rule files
  double optimize_seconds = 0;
  double check_seconds = 0;
  bool check_requested = true;
  CheckResult check;
  uint64_t seed = 0;
  std::string culprit;  // on a failed check: the rule whose removal makes it pass
  std::string cost_model;        // empty when not costed
  double cost_before_ms = -1;    // -1: not available (see cost_note)
  double cost_after_ms = -1;
  std::string cost_note;         // why there is no cost

  std::string to_json() const;  // the --report-json document
  std::string to_text() const;  // the table `isomer optimize` prints
};

struct OptimizeResult {
  Graph graph;
  OptimizeReport report;
};

GraphSummary summarize(const Graph& g);

// Throws Error naming the constant and its consumer if a float constant holds NaN, or
// Inf anywhere but in a single-element constant (a mask's fill value).
void require_finite_weights(const Graph& g);

// The rewriting part of the pipeline (simplify, then the search opts.search names);
// what fired goes to `applied`. Rule names in opts.passes.disabled or
// opts.search_options.disabled are left out.
Graph rewrite_graph(const Graph& g, const OptimizeOptions& opts, std::map<std::string, size_t>* applied,
                    OptimizeReport* report = nullptr);

// Optimizes an imported graph. `import_stats` describes the source model (its node
// counts as written). Never throws on a failed check: the report says so.
OptimizeResult optimize_graph(const Graph& g, const ImportStats& import_stats, const OptimizeOptions& opts);

// Imports `in_path`, optimizes, and writes `out_path` only if the check passed (or
// was switched off). Throws Error if the check failed, naming the culprit rule;
// an existing `out_path` is then left untouched.
OptimizeReport optimize_file(const std::string& in_path, const std::string& out_path, const OptimizeOptions& opts);

}  // namespace isomer
