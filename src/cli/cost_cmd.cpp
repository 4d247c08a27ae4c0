// `isomer cost MODEL.onnx`: what the model costs on isomer's runtime, per
// compiled step (an operator with what is fused into it, or a layout reorder) and
// in total, measured (cached in SQLite) or estimated by the roofline.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "check/open_dims.h"
#include "cli/commands.h"
#include "cost/cost.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer::cli {

namespace {

struct CostArgs {
  std::string model, kind = "measured", db, report_json;
  int threads = 0;
  bool quiet = false;
};

int run_cost(const CostArgs& a) {
  runtime::choose_openmp_waits(a.threads);  // restarts the process if needed (see runtime.h)
  Graph g = import_onnx_file(a.model);
  // Priced as `isomer run` runs it without --inputs: open dims fixed at the drawn extents.
  std::map<std::string, int64_t> opens;
  g = import_at_drawn_extents(a.model, {}, std::move(g), &opens);
  std::unique_ptr<cost::CostModel> model = cost::make_cost_model(a.kind, a.db, a.threads);
  cost::GraphCost gc = model->graph_cost(g);
  std::string db = a.db.empty() ? cost::default_db_path() : a.db;
  if (!a.quiet) {
    std::printf("%-11s %-35s %10s  %-8s %s\n", "step", "operators", "ms", "source", "node");
    for (const cost::StepCost& s : gc.steps) {
      std::string ops;
      for (const std::string& o : s.step.ops) ops += (ops.empty() ? "" : "+") + o;
      std::printf("%-11s %-35s %10.4f  %-8s %s\n", s.step.kind.c_str(), ops.c_str(), s.ms, s.source.c_str(),
                  s.step.label.c_str());
    }
  }
  std::printf("total %.3f ms (%s, %d threads; %zu steps: %zu measured now, %zu cached; inputs/outputs %.3f ms)\n",
              gc.total_ms, model->name().c_str(), gc.threads, gc.steps.size(), gc.measured_new, gc.cached, gc.io_ms);
  const double load = cost::load_average();
  if (gc.noisy)
    std::printf("note: %zu steps are priced by measurements taken on an overloaded machine (load average above %d"
                " cores; now %.2f); they are measured again once the load is lower\n",
                gc.noisy, runtime::hardware_threads(), load);
  if (!opens.empty()) std::printf("open input dims at %s\n", extents_text(opens).c_str());
  if (a.kind == "measured") std::printf("cost database: %s\n", db.c_str());
  if (!a.report_json.empty()) {
    std::ofstream f(a.report_json);
    require(f.good(), "cannot write '" + a.report_json + "'");
    f << "{\n  \"model\": \"" << json_escape(a.model) << "\",\n  \"cost_model\": \"" << model->name()
      << "\",\n  \"total_ms\": " << gc.total_ms << ",\n  \"io_ms\": " << gc.io_ms
      << ",\n  \"measured_new\": " << gc.measured_new << ",\n  \"cached\": " << gc.cached
      << ",\n  \"noisy\": " << gc.noisy << ",\n  \"load_average\": " << load
      << ",\n  \"threads\": " << gc.threads << ",\n  \"openmp_waits\": \"" << json_escape(runtime::openmp_waits())
      << "\",\n  \"cost_db\": \"" << json_escape(db) << "\",\n  \"steps\": [";
    for (size_t i = 0; i < gc.steps.size(); ++i) {
      const cost::StepCost& s = gc.steps[i];
      std::string ops;
      for (const std::string& o : s.step.ops) ops += (ops.empty() ? "" : "+") + o;
      f << (i ? ",\n" : "\n") << "    {\"kind\": \"" << s.step.kind << "\", \"ops\": \"" << json_escape(ops)
        << "\", \"node\": \"" << json_escape(s.step.label) << "\", \"ms\": " << s.ms << ", \"source\": \"" << s.source
        << "\", \"flops\": " << s.step.flops << ", \"bytes\": " << s.step.bytes << "}";
    }
    f << "\n  ]\n}\n";
    require(f.good(), "cannot write '" + a.report_json + "'");
    std::printf("wrote %s\n", a.report_json.c_str());
  }
  return 0;
}

}  // namespace

void add_cost_command(CLI::App& app) {
  auto args = std::make_shared<CostArgs>();
  CLI::App* c = app.add_subcommand("cost", "cost of a model on isomer's runtime, per step and in total");
  c->add_option("model", args->model, "model (.onnx)")->required();
  c->add_option("--cost", args->kind, "measured (timed, cached) or analytic (roofline); default measured")
      ->check(CLI::IsMember({"measured", "analytic"}));
  c->add_option("--cost-db", args->db, "cost database (default ~/.cache/isomer/costs.sqlite)");
  c->add_option("--threads", args->threads, "threads (default: every core)");
  c->add_option("--report-json", args->report_json, "write the costs as JSON here");
  c->add_flag("-q,--quiet", args->quiet, "print only the total");
  c->callback([args] { set_action([args] { return naming_model(args->model, [&] { return run_cost(*args); }); }); });
}

}  // namespace isomer::cli
