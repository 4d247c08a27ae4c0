// `isomer parallelize`, `isomer run-plan` and `isomer calibrate` (src/parallel).
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "parallel/calibrate.h"
#include "parallel/comm.h"
#include "parallel/execute.h"
#include "parallel/plan.h"
#include "parallel/search.h"
#include "runtime/npz.h"
#include "search/search.h"

namespace isomer::cli {

namespace {

using namespace parallel;

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt = true; }

struct ParallelizeArgs {
  std::string model, cluster, output, mode = "train", search = "unity", plan = "search";
  std::vector<std::string> input_shapes, rules;
  int64_t batch = 0;
  double budget = 60;
  size_t steps = 0, graphs = 32;
  uint64_t seed = 0;
  bool no_rules = false, skip_rank_graphs = false, quiet = false, full_simulation = false;
};

std::string row(const char* name, const SimResult& r, double dp_ms) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-22s %10.3f %10.3f %10.3f %10.3f %12.1f %s %8.2fx\n", name, r.step_ms, r.compute_ms,
                r.comm_ms, r.overlap_ms, r.memory_bytes / 1e6, r.fits ? "  " : " !", dp_ms / r.step_ms);
  return buf;
}

int run_parallelize(const ParallelizeArgs& a) {
  Cluster cluster = load_cluster(a.cluster);
  if (!cluster.device) runtime::choose_openmp_waits(cluster.threads_per_device);
  ModelOptions mo;
  mo.batch = a.batch;
  mo.input_shapes = input_shapes_from_flags(a.input_shapes);
  const Graph g = prepare_model(a.model, mo);
  std::unique_ptr<ComputeModel> compute = make_compute_model(cluster);
  ParallelSearchOptions o;
  o.algorithm = a.search == "flexflow" ? ParallelSearchOptions::Algorithm::FlexFlow : ParallelSearchOptions::Algorithm::Unity;
  o.mode = a.mode == "infer" ? Mode::Inference : Mode::Training;
  o.budget_s = a.budget;
  o.max_steps = a.steps;
  o.max_graphs = a.graphs;
  o.seed = a.seed;
  o.incremental = !a.full_simulation;
  if (o.algorithm == ParallelSearchOptions::Algorithm::Unity && !a.no_rules)
    // By default the joint rules (rules/parallel/joint.rules: rewrites that open
    // parallelizations) first, then the search's default rule set.
    o.rules = search_rules(load_rule_files(
        a.rules.empty() ? std::vector<std::string>{default_rules_path() + "/parallel/joint.rules", default_rules_path()}
                        : a.rules));
  o.interrupt = &g_interrupt;
  if (a.plan == "data") o.baseline = ParallelSearchOptions::Baseline::DataParallel;
  if (a.plan == "megatron") o.baseline = ParallelSearchOptions::Baseline::Megatron;
  const auto t0 = std::chrono::steady_clock::now();
  if (!a.quiet)
    o.progress = [t0](const std::string& line) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "[%6.1fs] %s\n", s, line.c_str());
    };
  g_interrupt = false;
  auto previous = std::signal(SIGINT, on_sigint);
  ParallelSearchReport rep = parallel_search(g, {cluster, *compute}, o);
  std::signal(SIGINT, previous);

  std::printf("isomer parallelize %s -> %s\n", a.model.c_str(), a.output.c_str());
  std::printf("cluster: %s; mesh axes:", cluster.describe().c_str());
  const Mesh& mesh = rep.best.graph->mesh();
  for (int k = 0; k < mesh.num_axes(); ++k) std::printf(" %s=%d", mesh.axes_text({k}).c_str(), mesh.axis(k).size);
  std::printf("\nmode: %s, %d operators, compute priced by %s\n\n", mode_name(o.mode), rep.best.graph->size(),
              compute->name().c_str());
  std::printf("  %-22s %10s %10s %10s %10s %12s   %8s\n", "plan", "step ms", "compute", "comm", "overlap", "MB/device",
              "vs DP");
  const double dp = rep.data_parallel.sim.step_ms;
  std::printf("%s", row("data parallelism", rep.data_parallel.sim, dp).c_str());
  if (rep.megatron) std::printf("%s", row("Megatron-style", rep.megatron->sim, dp).c_str());
  if (a.plan == "search") std::printf("%s", row(("isomer (" + a.search + ")").c_str(), rep.best.sim, dp).c_str());
  else std::printf("\nwriting the %s plan (--plan %s): no search\n", a.plan == "data" ? "data-parallel" : "Megatron-style",
                   a.plan.c_str());
  std::printf("\nsearch: %zu steps (%zu accepted), %zu rewritten graphs, stopped by %s after %.1f s; simulation "
              "%.0f us incremental vs %.0f us full\n",
              rep.steps, rep.accepted, rep.graphs, rep.stop_reason.c_str(), rep.seconds, rep.incremental_us, rep.full_us);
  if (!rep.best.rules_applied.empty()) {
    std::printf("rules applied:\n");
    for (const auto& [name, n] : rep.best.rules_applied) std::printf("  %-40s %zu\n", name.c_str(), n);
  }
  PlanMeta meta{a.model, o.mode, a.batch, a.plan == "search" ? a.search : a.plan, a.seed};
  write_plan(a.output, rep, cluster, meta, !a.skip_rank_graphs);
  std::printf("wrote %s/plan.json%s\n", a.output.c_str(),
              a.skip_rank_graphs ? "" : (", graph.onnx and " + std::to_string(mesh.devices()) + " rank graphs").c_str());
  return 0;
}

struct RunPlanArgs {
  std::string plan, inputs, outputs, report_json;
  uint64_t seed = 0;
  int threads = 1, repeat = 0, warmup = 3;
  bool local = false, check = false;
  double tolerance = 1e-3;
};

std::vector<Tensor> plan_inputs(const Graph& g, const RunPlanArgs& a) {
  if (a.inputs.empty()) return random_inputs(g, a.seed);
  runtime::NamedTensors given = runtime::read_npz(a.inputs);
  std::vector<Tensor> out;
  for (const NodePtr& in : g.inputs()) {
    const Tensor* t = nullptr;
    for (const auto& [name, v] : given)
      if (name == in->name()) t = &v;
    require(t != nullptr, "'" + a.inputs + "' has no array for input '" + in->name() + "'");
    require(t->type() == in->output_types()[0], "'" + a.inputs + "': input '" + in->name() + "' is " +
                                                    to_string(t->type()) + ", the plan needs " +
                                                    to_string(in->output_types()[0]));
    out.push_back(*t);
  }
  return out;
}

double max_rel_error(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64(), y = b.to_f64();
  double scale = 1e-12, err = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::abs(x[i] - y[i]));
  return err / scale;
}

int run_plan(const RunPlanArgs& a) {
  const LoadedPlan plan = load_plan(a.plan);
  const Graph ref = import_onnx_file(plan.graph_file);
  const std::vector<Tensor> inputs = plan_inputs(ref, a);
  runtime::RuntimeOptions ro;
  ro.threads = a.threads;
  ro.delegate_opaque = false;
  runtime::set_threads(a.threads);
  std::vector<Tensor> outputs;
  int rank = 0;
  std::vector<double> step_ms;
  double compute_s = 0, comm_s = 0;
  if (a.local) {
    std::vector<Graph> ranks;
    for (const std::string& f : plan.rank_files) ranks.push_back(import_onnx_file(f));
    outputs = run_local(ranks, inputs, ro)[0];
  } else {
    std::unique_ptr<Communicator> comm = mpi_communicator();
    rank = comm->rank();
    require(comm->size() == plan.devices, "the plan is for " + std::to_string(plan.devices) + " ranks, mpirun started " +
                                              std::to_string(comm->size()) + " (mpirun -np " +
                                              std::to_string(plan.devices) + ")");
    RankExecutor exe(import_onnx_file(plan.rank_files[static_cast<size_t>(rank)]), *comm, ro);
    outputs = exe.run(inputs);
    std::vector<double> mine;
    for (int k = 0; k < a.warmup + a.repeat && a.repeat > 0; ++k) {
      comm->barrier();
      const double t = comm->wtime();
      exe.run(inputs);
      if (k >= a.warmup) {
        mine.push_back((comm->wtime() - t) * 1e3);
        compute_s += exe.compute_seconds();
        comm_s += exe.comm_seconds();
      }
    }
    if (a.repeat > 0) {
      // A step ends when the slowest rank is done: the per-step maximum over ranks.
      std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
      std::vector<std::string> all = comm->all_gather_strings(bytes);
      step_ms.assign(mine.size(), 0);
      for (const std::string& s : all)
        for (size_t k = 0; k < step_ms.size(); ++k) step_ms[k] = std::max(step_ms[k], reinterpret_cast<const double*>(s.data())[k]);
    }
    comm->barrier();
  }
  bool ok = true;
  if (rank == 0) {
    std::printf("isomer run-plan %s: %d ranks%s\n", a.plan.c_str(), plan.devices, a.local ? " (threads of one process)" : "");
    if (a.check) {
      auto exe = runtime::compile(ref, ro);
      std::vector<Tensor> want = exe->run(inputs);
      for (size_t o = 0; o < want.size(); ++o) {
        const double err = max_rel_error(outputs[o], want[o]);
        std::printf("  output %-20s max rel error %.3g against one process\n", ref.output_names()[o].c_str(), err);
        ok = ok && err <= a.tolerance;
      }
      std::printf("check: %s\n", ok ? "passed" : "FAILED");
    }
    std::vector<double> sorted = step_ms;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    if (!sorted.empty())
      std::printf("step: median %.3f ms, min %.3f, max %.3f over %zu runs (rank 0: %.3f ms computing, %.3f ms in "
                  "collectives per run); predicted %.3f ms\n",
                  median, sorted.front(), sorted.back(), sorted.size(), compute_s * 1e3 / sorted.size(),
                  comm_s * 1e3 / sorted.size(), plan.predicted_step_ms);
    if (!a.outputs.empty()) {
      runtime::NamedTensors named;
      for (size_t o = 0; o < outputs.size(); ++o) named.emplace_back(ref.output_names()[o], outputs[o]);
      runtime::write_npz(a.outputs, named);
    }
    if (!a.report_json.empty()) {
      nlohmann::ordered_json j;
      j["plan"] = a.plan;
      j["ranks"] = plan.devices;
      j["predicted_step_ms"] = plan.predicted_step_ms;
      j["measured_step_ms"] = median;
      j["step_ms"] = step_ms;
      j["compute_ms_rank0"] = sorted.empty() ? 0 : compute_s * 1e3 / sorted.size();
      j["collectives_ms_rank0"] = sorted.empty() ? 0 : comm_s * 1e3 / sorted.size();
      j["check"] = a.check ? (ok ? "passed" : "failed") : "skipped";
      std::ofstream f(a.report_json);
      f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  return ok ? 0 : 1;
}

struct CalibrateArgs {
  std::string output, link = "inter_node";
  std::vector<int64_t> sizes;
  int repeat = 10, threads = 1;
  bool no_host = false;
};

int run_calibrate(const CalibrateArgs& a) {
  std::unique_ptr<Communicator> comm = mpi_communicator();
  CalibrateOptions o;
  if (!a.sizes.empty()) o.sizes = a.sizes;
  o.repeat = a.repeat;
  o.link = a.link;
  o.threads = a.threads;
  o.host = !a.no_host;
  const std::string text = calibrate(*comm, o);
  if (comm->rank() == 0) {
    std::ofstream f(a.output);
    require(f.good(), "cannot write '" + a.output + "'");
    f << text;
    std::printf("%s", text.c_str());
    std::printf("wrote %s\n", a.output.c_str());
  }
  comm->barrier();
  return 0;
}

}  // namespace

void add_parallel_commands(CLI::App& app) {
  auto p = std::make_shared<ParallelizeArgs>();
  CLI::App* c = app.add_subcommand("parallelize", "find a parallelization plan for a cluster and write it (with the "
                                                  "per-rank graphs run-plan runs)");
  c->add_option("model", p->model, "model (.onnx)")->required();
  c->add_option("--cluster", p->cluster, "the machine: cluster.json (see docs/parallel.md)")->required();
  c->add_option("-o,--output", p->output, "plan directory to write")->required();
  c->add_option("--mode", p->mode, "infer (forward) or train (a training step; default)")
      ->check(CLI::IsMember({"infer", "train"}));
  c->add_option("--batch", p->batch, "batch size: dim 0 of every input");
  c->add_option("--input-shape", p->input_shapes, "fix an input's dims, e.g. x:8,128,768 (repeatable)");
  c->add_option("--budget", p->budget, "seconds the search may take (default 60)");
  c->add_option("--steps", p->steps, "MCMC proposals (default: 40 per operator, at least 2000)");
  c->add_option("--graphs", p->graphs, "unity: rewritten graphs to cost (default 32)");
  c->add_option("--seed", p->seed, "seed of the search");
  c->add_option("--search", p->search, "unity (rewrites + DP + MCMC, default) or flexflow (MCMC from data parallelism)")
      ->check(CLI::IsMember({"unity", "flexflow"}));
  c->add_option("--rules", p->rules, "unity: rule file or directory (repeatable; default: isomer's rules/parallel/joint.rules, then rules/)");
  c->add_flag("--no-rules", p->no_rules, "unity without algebraic rewrites (parallelization only)");
  c->add_option("--plan", p->plan, "search (default), or write a baseline: data (data parallelism) or megatron")
      ->check(CLI::IsMember({"search", "data", "megatron"}));
  c->add_flag("--skip-rank-graphs", p->skip_rank_graphs, "write plan.json and graph.onnx only (simulated clusters)");
  c->add_flag("--quiet,-q", p->quiet, "no progress lines on stderr");
  c->add_flag("--full-simulation", p->full_simulation,
              "simulate every MCMC proposal from scratch (to measure what incremental simulation saves)");
  c->callback([p] { set_action([p] { return run_parallelize(*p); }); });

  auto r = std::make_shared<RunPlanArgs>();
  CLI::App* rp = app.add_subcommand("run-plan", "run a plan: one rank per MPI process (mpirun -np N isomer run-plan "
                                                "PLAN/), each on isomer's runtime, collectives on MPI");
  rp->add_option("plan", r->plan, "plan directory (from isomer parallelize)")->required();
  rp->add_option("--inputs", r->inputs, "inputs as .npz keyed by input name (default: random from --seed)");
  rp->add_option("--outputs", r->outputs, "write the outputs here (.npz; rank 0)");
  rp->add_option("--seed", r->seed, "seed of the random inputs");
  rp->add_option("--threads", r->threads, "threads per rank (default 1)");
  rp->add_option("--bench", r->repeat, "time N steps (after --warmup) and print the median step time");
  rp->add_option("--warmup", r->warmup, "untimed steps before --bench (default 3)");
  rp->add_flag("--check", r->check, "compare the outputs with graph.onnx run in one process");
  rp->add_option("--tolerance", r->tolerance, "--check: relative tolerance (default 1e-3)");
  rp->add_flag("--local", r->local, "run every rank as a thread of this process (no MPI)");
  rp->add_option("--report-json", r->report_json, "write the timings and the check as JSON (rank 0)");
  rp->callback([r] { set_action([r] { return run_plan(*r); }); });

  auto k = std::make_shared<CalibrateArgs>();
  CLI::App* ca = app.add_subcommand("calibrate", "fit latency and bandwidth of MPI collectives on this machine "
                                                 "(mpirun -np N isomer calibrate -o calib.json)");
  ca->add_option("-o,--output", k->output, "calibration JSON to write (a cluster link's \"calibration\")")->required();
  ca->add_option("--sizes", k->sizes, "message sizes in bytes per rank (default 64 B .. 16 MiB)")->delimiter(',');
  ca->add_option("--repeat", k->repeat, "timed repetitions per size (default 10)");
  ca->add_option("--link", k->link, "which link class the ranks are connected by (default inter_node)")
      ->check(CLI::IsMember({"inter_node", "intra_node"}));
  ca->add_option("--threads", k->threads, "runtime threads per rank for the host measurements (default 1, as run-plan)");
  ca->add_flag("--no-host", k->no_host, "collectives only: skip the host overheads (dispatch, contention, weight streaming)");
  ca->callback([k] { set_action([k] { return run_calibrate(*k); }); });
}

}  // namespace isomer::cli
