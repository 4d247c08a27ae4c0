// `isomer optimize IN.onnx -o OUT.onnx`: the optimize pipeline (pipeline/optimize.h)
// on a file. It prints the report; it writes the model only when the check passed
// (or was switched off), and what it writes is never slower than the input on the
// target engine (the guard).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "ir/error.h"
#include "mugraph/search.h"
#include "pipeline/optimize.h"
#include "runtime/npz.h"
#include "runtime/runtime.h"

namespace isomer::cli {

namespace {

struct OptimizeArgs {
  std::string input, output, report_json, inputs;
  std::vector<std::string> input_shapes, disabled, rules;
  std::string search = "eqsat";
  double budget = 10;
  // --search eqsat
  size_t iter_limit = 30, node_limit = 20000, region_ops = 400;
  std::string extractor = "ilp";
  double ilp_time = 10;
  uint64_t seed = 0;
  bool no_check = false, no_guard = false, guard_target_only = false;
  bool allow_nonfinite = false, fold_overridable_inputs = false;
  double tolerance = 1e-3;
  std::string cost = "measured", cost_db;
  std::string target = "isomer";
  int threads = 0;
  bool mugraph = false, mugraph_untimed = false;
  size_t mugraph_states = 0;
  double mugraph_seconds = 30;
  double run_limit = 0;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  require(f.good(), "cannot write '" + path + "'");
  f << text;
  require(f.good(), "cannot write '" + path + "'");
}

int run_optimize(const OptimizeArgs& a) {
  // The guard and the measured costs time oneDNN: choose how OpenMP threads wait
  // (restarts the process if needed, see runtime.h). The guard times with the waits
  // `isomer run` takes on a quiet machine, so that its verdict does not depend on what
  // else was runnable the moment optimize started (its report names them).
  const bool guard_times_runtime = !a.no_guard && (a.target == "isomer" || !a.guard_target_only);
  if (guard_times_runtime) runtime::choose_openmp_waits(a.threads, /*as_on_a_quiet_machine=*/true);
  else if (a.cost == "measured" || a.search == "backtrack" || a.search == "eqsat")
    runtime::use_passive_openmp_waits();
  OptimizeOptions opts;
  opts.import.input_shapes = input_shapes_from_flags(a.input_shapes);
  opts.import.freeze_overridable_inputs = a.fold_overridable_inputs;
  std::vector<std::string> templates = template_rule_names();
  for (const std::string& name : a.disabled) {
    bool is_template = std::find(templates.begin(), templates.end(), name) != templates.end();
    (is_template ? opts.passes.disabled : opts.search_options.disabled).push_back(name);
  }
  opts.search = a.search;
  opts.rule_paths = a.rules;
  opts.search_options.budget_s = a.budget;
  opts.search_options.iteration_limit = a.iter_limit;
  opts.search_options.node_limit = a.node_limit;
  opts.search_options.region_ops = a.region_ops;
  opts.search_options.extractor = a.extractor;
  opts.search_options.ilp_time_s = a.ilp_time;
  opts.check = !a.no_check;
  opts.guard = !a.no_guard;
  opts.guard_options.confirm_other = !a.guard_target_only;
  opts.target = a.target;
  opts.threads = a.threads;
  opts.mugraph = a.mugraph;
  opts.mugraph_states = a.mugraph_states;
  opts.mugraph_seconds = a.mugraph_seconds;
  opts.mugraph_untimed = a.mugraph_untimed;
  opts.allow_nonfinite = a.allow_nonfinite;
  require(std::isfinite(a.run_limit), "--run-limit " + std::to_string(a.run_limit) + " is not a number of seconds");
  opts.run_limit_seconds = a.run_limit;
  opts.check_options.seed = a.seed;
  opts.check_options.tolerance = a.tolerance;
  opts.cost_model = a.cost;
  opts.cost_db = a.cost_db;
  opts.cost_threads = a.threads;
  require(std::isfinite(a.budget) && a.budget >= 0,
          "--budget " + std::to_string(a.budget) + " is not a number of seconds (finite, at least 0)");
  require_output_path(a.output, "-o");
  if (!a.report_json.empty()) require_output_path(a.report_json, "--report-json");
  if (!a.inputs.empty()) {
    opts.inputs = runtime::read_npz(a.inputs);
    opts.inputs_source = a.inputs;
  }
  OptimizeReport report = optimize_file(a.input, a.output, opts);
  std::printf("isomer optimize %s -> %s\n\n%s", a.input.c_str(), a.output.c_str(), report.to_text().c_str());
  if (!a.report_json.empty()) write_file(a.report_json, report.to_json());
  std::printf("wrote %s\n", a.output.c_str());
  return 0;
}

}  // namespace

void add_optimize_command(CLI::App& app) {
  auto opt = std::make_shared<OptimizeArgs>();
  CLI::App* o = app.add_subcommand("optimize", "optimize a model, check it against the original, write it");
  o->add_option("input", opt->input, "model to optimize (.onnx)")->required();
  o->add_option("-o,--output", opt->output, "where to write the optimized model")->required();
  o->add_option("--report-json", opt->report_json, "write the report as JSON here");
  o->add_option("--input-shape", opt->input_shapes, "fix an input's dims, e.g. input:1,3,224,224 (repeatable)");
  o->add_flag("--fold-overridable-inputs", opt->fold_overridable_inputs,
              "take initializers the model also lists as graph inputs (defaults a user may override) for "
              "constants, so that they fold; the optimized model loses those inputs, and the report names them "
              "(default: they stay inputs with their default values)");
  o->add_option("--target", opt->target,
                "engine the model will run on: isomer (default: isomer's runtime) or onnxruntime (ONNX Runtime, "
                "all graph optimizations); the guard writes nothing slower there")
      ->check(CLI::IsMember({"isomer", "onnxruntime"}));
  o->add_option("--threads", opt->threads, "threads of the check's and the guard's engines (default: every core)");
  o->add_option("--inputs", opt->inputs,
                "inputs for the check and the guard, .npz keyed by input name (default: random ones the model "
                "can run on, from --seed)");
  o->add_option("--seed", opt->seed, "seed of the random inputs used by the check and the guard");
  o->add_option("--tolerance", opt->tolerance, "relative tolerance of the check (default 1e-3)");
  o->add_option("--disable", opt->disabled, "rule to leave out (repeatable)");
  o->add_option("--search", opt->search,
                "eqsat (default: the template passes, then equality saturation over the verified rules with exact "
                "extraction), templates (the template passes alone), backtrack (TASO's cost-based search) or none")
      ->check(CLI::IsMember({"none", "templates", "backtrack", "eqsat"}));
  o->add_option("--rules", opt->rules, "rule file or directory for --search (repeatable; default: "
                                       "isomer's shipped rules/)");
  o->add_option("--budget", opt->budget, "seconds the search may take (default 10)");
  o->add_option("--iter-limit", opt->iter_limit, "eqsat: saturation iterations per region (default 30)");
  o->add_option("--node-limit", opt->node_limit, "eqsat: e-nodes per region (default 20000)");
  o->add_option("--region-ops", opt->region_ops, "eqsat: operators per region of a large model (default 400)");
  o->add_option("--extractor", opt->extractor, "eqsat: greedy, or ilp (exact, CBC; default)")
      ->check(CLI::IsMember({"greedy", "ilp"}));
  o->add_option("--ilp-time", opt->ilp_time, "eqsat: seconds the ILP may take per region (default 10)");
  o->add_flag("--mugraph", opt->mugraph,
              "fuse attention, normalization, SwiGLU and softmax regions into generated kernels found by the "
              "μGraph search (verified, compiled, kept where measured faster; written as ai.isomer.mugraph "
              "functions whose body is the original subgraph)");
  o->add_option("--mugraph-states", opt->mugraph_states,
                "search states per loop choice of one region (default " +
                    std::to_string(mugraph::SearchOptions{}.max_states) +
                    "): the bound that makes the same model give the same kernels on any machine");
  o->add_option("--mugraph-seconds", opt->mugraph_seconds,
                "search seconds per loop choice of one region, a safety net past the state bound (default 30; the "
                "report says 'time limit' where it stopped a search, whose result may then differ between runs)");
  o->add_flag("--mugraph-untimed", opt->mugraph_untimed,
              "with --mugraph: keep each region's best verified kernel by the cost model without timing it against "
              "the unfused runtime; then nothing but the guard's timing of the whole model catches a kernel slower "
              "than the operators it replaces (and with --no-guard nothing does); regions priced as almost all weight "
              "products are still not searched");
  o->add_flag("--no-check", opt->no_check, "do not compare the optimized model with the original");
  o->add_flag("--no-guard", opt->no_guard,
              "do not time the optimized model against the original (it is written even if slower)");
  o->add_flag("--guard-target-only", opt->guard_target_only,
              "time only on the --target engine: do not confirm on the other one (isomer's runtime <-> ONNX "
              "Runtime) that the written model is not slower there");
  o->add_flag("--allow-nonfinite", opt->allow_nonfinite, "accept NaN/Inf weights (refused by default)");
  o->add_option("--run-limit", opt->run_limit,
                "seconds one run of the model by the check, the guard or the pricing may take; past it they are "
                "skipped and the original is written (default 0: from the model's size, at least 10 s; < 0: none)");
  o->add_option("--cost", opt->cost, "cost model for the predicted before/after time: measured (default), analytic, none")
      ->check(CLI::IsMember({"measured", "analytic", "none"}));
  o->add_option("--cost-db", opt->cost_db, "cache of measured operator costs (default ~/.cache/isomer/costs.sqlite)");
  o->callback([opt] { set_action([opt] { return naming_model(opt->input, [&] { return run_optimize(*opt); }); }); });
}

}  // namespace isomer::cli
