#include "cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "pipeline/optimize.h"
#include "runtime/runtime.h"

namespace isomer::cli {

namespace {

// "name:1,3,224,224" -> {"name", {1,3,224,224}}
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec) {
  size_t colon = spec.rfind(':');
  require(colon != std::string::npos && colon > 0, "--input-shape '" + spec + "' must look like name:1,3,224,224");
  std::vector<int64_t> dims;
  std::string rest = spec.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    require(!item.empty() && end && *end == '\0' && v >= 0,
            "--input-shape '" + spec + "': '" + item + "' is not a dimension");
    dims.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return {spec.substr(0, colon), dims};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  require(f.good(), "cannot write '" + path + "'");
  f << text;
  require(f.good(), "cannot write '" + path + "'");
}

struct OptimizeArgs {
  std::string input, output, report_json;
  std::vector<std::string> input_shapes, disabled, rules;
  std::string search = "templates";
  double budget = 10;
  uint64_t seed = 0;
  bool no_check = false;
  bool allow_nonfinite = false;
  double tolerance = 1e-3;
  std::string cost = "measured", cost_db;
};

int run_optimize(const OptimizeArgs& a) {
  // Measured costs run oneDNN: make OpenMP threads wait passively (see runtime.h).
  if (a.cost == "measured" || a.search == "backtrack") runtime::use_passive_openmp_waits();
  OptimizeOptions opts;
  opts.import.input_shapes = input_shapes_from_flags(a.input_shapes);
  std::vector<std::string> templates = template_rule_names();
  for (const std::string& name : a.disabled) {
    bool is_template = std::find(templates.begin(), templates.end(), name) != templates.end();
    (is_template ? opts.passes.disabled : opts.search_options.disabled).push_back(name);
  }
  opts.search = a.search;
  opts.rule_paths = a.rules;
  opts.search_options.budget_s = a.budget;
  opts.check = !a.no_check;
  opts.allow_nonfinite = a.allow_nonfinite;
  opts.check_options.seed = a.seed;
  opts.check_options.tolerance = a.tolerance;
  opts.cost_model = a.cost;
  opts.cost_db = a.cost_db;
  OptimizeReport report = optimize_file(a.input, a.output, opts);
  std::printf("isomer optimize %s -> %s\n\n%s", a.input.c_str(), a.output.c_str(), report.to_text().c_str());
  if (!a.report_json.empty()) write_file(a.report_json, report.to_json());
  std::printf("wrote %s\n", a.output.c_str());
  return 0;
}

struct ConvertArgs {
  std::string input, output;
  std::vector<std::string> input_shapes;
  bool external_data = false;
};

int run_convert(const ConvertArgs& a) {
  ImportOptions opts;
  opts.input_shapes = input_shapes_from_flags(a.input_shapes);
  ImportStats stats;
  Graph g = import_onnx_file(a.input, opts, &stats);
  ExportOptions eo;
  eo.external_data = a.external_data;
  export_onnx_file(g, a.output, eo);
  std::printf("%s: %zu nodes (%zu opaque) -> %s\n", a.input.c_str(), stats.onnx_nodes, stats.opaque_nodes,
              a.output.c_str());
  return 0;
}

struct ShowArgs {
  std::string input;
  std::vector<std::string> input_shapes;
};

int run_show(const ShowArgs& a) {
  ImportOptions opts;
  opts.input_shapes = input_shapes_from_flags(a.input_shapes);
  ImportStats stats;
  Graph g = import_onnx_file(a.input, opts, &stats);
  std::printf("%s: opset %lld, %zu nodes, %zu opaque\n", a.input.c_str(), static_cast<long long>(g.info().opset()),
              stats.onnx_nodes, stats.opaque_nodes);
  for (const NodePtr& in : g.inputs())
    std::printf("  input  %-24s %s\n", in->name().c_str(), to_string(in->output_types()[0]).c_str());
  for (size_t i = 0; i < g.outputs().size(); ++i)
    std::printf("  output %-24s %s\n", g.output_names()[i].c_str(), to_string(g.outputs()[i].type()).c_str());
  for (const auto& [op, n] : summarize(g).histogram) std::printf("  %-30s %zu\n", op.c_str(), n);
  for (const std::string& why : stats.opaque_reasons) std::printf("  opaque: %s\n", why.c_str());
  return 0;
}

std::function<int()> selected;

}  // namespace

std::map<std::string, std::vector<int64_t>> input_shapes_from_flags(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& s : specs) shapes.insert(parse_input_shape(s));
  return shapes;
}

void set_action(std::function<int()> action) { selected = std::move(action); }

void add_commands(CLI::App& app) {
  auto opt = std::make_shared<OptimizeArgs>();
  CLI::App* o = app.add_subcommand("optimize", "optimize a model, check it against the original, write it");
  o->add_option("input", opt->input, "model to optimize (.onnx)")->required();
  o->add_option("-o,--output", opt->output, "where to write the optimized model")->required();
  o->add_option("--report-json", opt->report_json, "write the report as JSON here");
  o->add_option("--input-shape", opt->input_shapes, "fix an input's dims, e.g. input:1,3,224,224 (repeatable)");
  o->add_option("--seed", opt->seed, "seed of the random inputs used by the check");
  o->add_option("--tolerance", opt->tolerance, "relative tolerance of the check (default 1e-3)");
  o->add_option("--disable", opt->disabled, "rule to leave out (repeatable)");
  o->add_option("--search", opt->search,
                "none, templates (default: the template passes) or backtrack (then a cost-based search over "
                "the verified rules)")
      ->check(CLI::IsMember({"none", "templates", "backtrack"}));
  o->add_option("--rules", opt->rules, "rule file or directory for --search backtrack (repeatable; default: "
                                       "isomer's shipped rules/)");
  o->add_option("--budget", opt->budget, "seconds the search may take (default 10)");
  o->add_flag("--no-check", opt->no_check, "do not compare the optimized model with the original");
  o->add_flag("--allow-nonfinite", opt->allow_nonfinite, "accept NaN/Inf weights (refused by default)");
  o->add_option("--cost", opt->cost, "cost model for the before/after time: measured (default), analytic, none")
      ->check(CLI::IsMember({"measured", "analytic", "none"}));
  o->add_option("--cost-db", opt->cost_db, "cache of measured operator costs (default ~/.cache/isomer/costs.sqlite)");
  o->callback([opt] { set_action([opt] { return run_optimize(*opt); }); });

  auto conv = std::make_shared<ConvertArgs>();
  CLI::App* c = app.add_subcommand("convert", "import and export a model without optimizing (round trip)");
  c->add_option("input", conv->input, "model (.onnx)")->required();
  c->add_option("-o,--output", conv->output, "where to write it")->required();
  c->add_option("--input-shape", conv->input_shapes, "fix an input's dims (repeatable)");
  c->add_flag("--external-data", conv->external_data, "store weights in an external data file");
  c->callback([conv] { set_action([conv] { return run_convert(*conv); }); });

  auto show = std::make_shared<ShowArgs>();
  CLI::App* s = app.add_subcommand("show", "summarize a model: inputs, outputs, operators, opaque nodes");
  s->add_option("input", show->input, "model (.onnx)")->required();
  s->add_option("--input-shape", show->input_shapes, "fix an input's dims (repeatable)");
  s->callback([show] { set_action([show] { return run_show(*show); }); });

  add_run_command(app);
  add_cost_command(app);
  add_rules_command(app);
  add_parallel_commands(app);
}

int run_selected(CLI::App&) { return selected ? selected() : 2; }

}  // namespace isomer::cli
