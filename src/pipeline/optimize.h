#pragma once
// The optimize pipeline shared by `isomer optimize` and `isomer.optimize()`, in
// phases, each timed:
//   passes  the template passes;
//   search  the backtracking search over verified rules (--search backtrack);
//   check   the result against the original on the same inputs (check/compare.h);
//   guard   the result against the original on the target engine, for speed,
//           confirmed on the other engine (pipeline/guard.h): nothing slower
//           than the input is ever written;
//   cost    the cost model's prediction for the written graph.
// Nothing is written unless the check passed (or the user switched it off).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "check/compare.h"
#include "check/engines.h"
#include "ir/graph.h"
#include "onnx/onnx_io.h"
#include "passes/passes.h"
#include "pipeline/guard.h"
#include "search/search.h"

namespace isomer {

struct OptimizeOptions {
  ImportOptions import;
  PassOptions passes;
  // "none": no rewrites; "templates": the template passes; "backtrack" / "eqsat": the
  // template passes, then the cost-based backtracking search or equality saturation
  // (search/eqsat.h) over the verified rules of rule_paths (default: isomer's shipped
  // rule set, see default_rules_path()). eqsat is the default: over the benchmark
  // corpus it is never slower than the template passes alone (the guard keeps the
  // faster of the two) and up to 2.3x faster (NasRNN), at a second or two of search
  // once the machine's costs are cached.
  std::string search = "eqsat";
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
  // Where the optimized model will run: "isomer" (isomer's runtime) or
  // "onnxruntime" (ONNX Runtime, all graph optimizations). The check runs the
  // optimized graph there and the guard times both there.
  std::string target = "isomer";
  int threads = 0;  // of the check's and the guard's engines; 0 = every core
  bool guard = true;
  GuardOptions guard_options;  // rounds, noise floor (enabled and target are set from the above)
  // The user's inputs for the check and the guard (by input name), and where they
  // came from; empty: valid random ones (check/inputs.h) from check_options.seed.
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::string inputs_source;
  // Replace how graphs are prepared on an engine (tests: an engine on which a
  // rewrite is slow).
  std::map<Engine, Engines::Factory> engine_factories;
  // After the rewrites: fuse candidate regions into verified, compiled μGraph
  // kernels where measured faster on isomer's runtime (mugraph/fuse.h). The rule
  // name "mugraph-fuse" in the disabled lists switches it off (the guard does).
  bool mugraph = false;
  size_t mugraph_states = 0;    // search states per loop choice of one region (0: the search's default)
  double mugraph_seconds = 30;  // search time per loop choice of one region: a safety net
  bool mugraph_untimed = false; // keep verified kernels without timing each region
  // Seconds one of optimize's own runs of the model (the check, each of the guard's
  // timings, the pricing) may take (ir/run_limit.h): 0 picks it from the model's size
  // (pipeline/run_limit_default.h), < 0 sets none. Past it the rest is skipped, the
  // original is written, and the report says so.
  double run_limit_seconds = 0;
};

// "isomer" -> Engine::Runtime, "onnxruntime" -> Engine::OnnxRuntime; Error otherwise.
Engine target_engine(const std::string& target);

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
  size_t inlined_calls = 0;  // of model-local functions, at import (the "before" counts hold their bodies)
  // Overridable inputs (initializers listed as graph inputs) taken for constants at the
  // user's asking (--fold-overridable-inputs): the optimized model has no such input.
  std::vector<std::string> frozen_inputs;
  // Inputs kept with a default value (not folded): what --fold-overridable-inputs would fold.
  std::vector<std::string> overridable_inputs;
  std::map<std::string, size_t> rules_applied;
  std::string search;            // the search mode that ran
  SearchStats search_stats;      // backtrack and eqsat
  size_t rules_loaded = 0;       // backtrack and eqsat: rules read from the rule files
  double optimize_seconds = 0;
  double check_seconds = 0;
  // Wall time of each phase: passes, search, check, guard, cost.
  std::map<std::string, double> phase_seconds;
  std::string written;  // the files written and their layout (optimize_file), "" before
  std::string target;  // "isomer" or "onnxruntime"
  int threads = 0;     // of the check's and the guard's engines (0: every core)
  std::string inputs_source;             // where the check's and the guard's inputs came from
  std::vector<std::string> input_notes;  // how constrained inputs were drawn
  // The extents the open input dims had in those inputs (the runtime ran both graphs
  // with these dims fixed, check/open_dims.h); empty for a model without open dims.
  std::map<std::string, int64_t> input_extents;
  GuardResult guard;
  bool check_requested = true;
  CheckResult check;
  uint64_t seed = 0;
  std::string culprit;  // on a failed check: the rule whose removal makes it pass
  std::string cost_model;        // empty when not costed
  double cost_before_ms = -1;    // -1: not available (see cost_note)
  double cost_after_ms = -1;
  std::string cost_note;         // why there is no cost
  std::string mugraph;           // --mugraph: each candidate region and its verdict
  double run_limit_seconds = 0;      // per run of the model by the check, the guard, the pricing (0: none)
  std::string run_limit_exceeded;    // what exceeded it ("" when nothing did): what came after was skipped
  std::vector<std::string> fold_skipped;  // folds the template passes' budget left to the runtime, and why

  std::string to_json() const;  // the --report-json document
  std::string to_text() const;  // the table `isomer optimize` prints
};

struct OptimizeResult {
  Graph graph;
  OptimizeReport report;
};

GraphSummary summarize(const Graph& g);

// The first float constant that holds NaN, or Inf anywhere but in a single-element
// constant (a mask's fill value), with its consumer and the element ("" if none).
std::string nonfinite_weight(const Graph& g);

// Throws Error with nonfinite_weight's words if there is such a constant.
void require_finite_weights(const Graph& g);

// The rewriting part of the pipeline (simplify, then the search opts.search names);
// what fired goes to `applied`. Rule names in opts.passes.disabled or
// opts.search_options.disabled are left out. `templates_only` gets the graph after
// the template passes (before the search); `report` gets the phases' times and
// the search's statistics.
Graph rewrite_graph(const Graph& g, const OptimizeOptions& opts, std::map<std::string, size_t>* applied,
                    OptimizeReport* report = nullptr, Graph* templates_only = nullptr);

// Optimizes an imported graph. `import_stats` describes the source model (its node
// counts as written). Never throws on a failed check: the report says so. The
// returned graph is what the guard kept; the report's rules_applied are those
// that made it.
OptimizeResult optimize_graph(const Graph& g, const ImportStats& import_stats, const OptimizeOptions& opts);

// Imports `in_path`, optimizes, and writes `out_path` only if the check passed (or
// was switched off). Throws Error if the check failed, naming the culprit rule;
// an existing `out_path` is then left untouched.
OptimizeReport optimize_file(const std::string& in_path, const std::string& out_path, const OptimizeOptions& opts);

}  // namespace isomer
