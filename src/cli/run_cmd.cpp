// `isomer run MODEL.onnx`: runs a model on isomer's CPU runtime (oneDNN), with
// inputs from an .npz file or random ones (seed printed), optionally writes the
// outputs and benchmarks end-to-end latency next to ONNX Runtime's.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <nlohmann/json.hpp>

#include "check/compare.h"
#include "check/dynamic_quant_check.h"
#include "check/engines.h"
#include "check/inputs.h"
#include "check/open_dims.h"
#include "check/quant_check.h"
#include "cli/commands.h"
#include "cli/onnxruntime.h"
#include "pipeline/split_run.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "pipeline/optimize.h"
#include "bridge/bridge.h"
#include "runtime/npz.h"
#include "runtime/one_cpu_per_thread.h"
#include "runtime/runtime.h"

namespace isomer::cli {

namespace {

// `run` runs what the user asked, however long (a Loop of 10^9 iterations takes hours);
// past 10 s it says so on stderr every 30 s, so a long run is not taken for a hang.
class LongRunNotice {
 public:
  explicit LongRunNotice(std::string model)
      : model_(std::move(model)), thread_([this] {
          const auto start = std::chrono::steady_clock::now();
          auto next = start + std::chrono::seconds(10);
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_.wait_until(lock, next, [this] { return finished_; })) {
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr, "isomer: still running %s: %.0f s so far (Ctrl-C stops it)\n", model_.c_str(), s);
            next += std::chrono::seconds(30);
          }
        }) {}
  ~LongRunNotice() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    done_.notify_all();
    thread_.join();
  }
  LongRunNotice(const LongRunNotice&) = delete;
  LongRunNotice& operator=(const LongRunNotice&) = delete;

 private:
  std::string model_;
  std::mutex mu_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;  // last: starts once the members it reads exist
};

// "1 thread", "2 threads"; 0 or less: the engine's default.
std::string thread_count(int threads) {
  if (threads <= 0) return "default threads";
  return std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}


struct RunArgs {
  std::string model, inputs, outputs, report_json;
  std::vector<std::string> input_shapes;
  bool bench = false;
  int repeat = 20, warmup = 5, threads = 0;
  uint64_t seed = 0;
  bool no_fuse = false, plain = false, print_steps = false, no_onnxruntime = false, profile = false;
  double tolerance = 1e-3;  // outputs against ONNX Runtime's, relative to each output's scale
};

// An input with a default value (an initializer listed as a graph input) that the
// file does not give runs on it, as on ONNX Runtime.
std::vector<Tensor> read_inputs(const Graph& g, const std::string& path) {
  return given_inputs(g, runtime::read_npz(path), "'" + path + "'", input_defaults(g)).tensors;
}

// Random inputs, but those with a default value run on it.
std::vector<Tensor> drawn_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings) {
  ModelInputs in;
  in.tensors = seeded_random_inputs(g, seed, bindings);
  use_defaults(g, input_defaults(g), &in);
  return std::move(in.tensors);
}

runtime::NamedTensors named(const std::vector<std::string>& names, const std::vector<Tensor>& tensors) {
  runtime::NamedTensors out;
  for (size_t i = 0; i < tensors.size(); ++i) out.emplace_back(names[i], tensors[i]);
  return out;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (const NodePtr& in : g.inputs()) names.push_back(in->name());
  return names;
}

std::string latency_line(const runtime::BenchResult& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "median %.3f ms, min %.3f ms, max %.3f ms over %d repeats", r.median, r.min, r.max,
                static_cast<int>(r.ms.size()));
  return buf;
}

runtime::BenchResult bench_result(std::vector<double> ms, int warmup, int threads) {
  runtime::BenchResult r;
  r.ms = std::move(ms);
  r.warmup = warmup;
  r.threads = threads;
  if (r.ms.empty()) return r;
  r.median = runtime::median(r.ms);
  r.min = *std::min_element(r.ms.begin(), r.ms.end());
  r.max = *std::max_element(r.ms.begin(), r.ms.end());
  for (double v : r.ms) r.mean += v / static_cast<double>(r.ms.size());
  return r;
}

nlohmann::json latency_json(const runtime::BenchResult& r) {
  return {{"latency_ms_median", r.median}, {"latency_ms_min", r.min}, {"latency_ms_max", r.max},
          {"latency_ms_mean", r.mean},     {"repeats", r.ms.size()},  {"warmup", r.warmup}};
}

// --report-json's head: the latencies, and what ran the model on how many threads.
nlohmann::json report_json(const RunArgs& a, const runtime::BenchResult& r, const char* engine, int threads) {
  nlohmann::json j = latency_json(r);
  j["model"] = a.model;
  j["engine"] = engine;
  j["threads"] = threads;
  return j;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  require(f.good(), "cannot write '" + path + "'");
  f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  require(f.good(), "cannot write '" + path + "'");
  std::printf("wrote %s\n", path.c_str());
}

OrtRequest ort_request(const RunArgs& a, const Graph& g, const std::vector<Tensor>& inputs, bool bench, int threads) {
  OrtRequest req;
  req.model = a.model;
  req.inputs = named(input_names(g), inputs);
  req.bench = bench;
  req.warmup = a.warmup;
  req.repeat = a.repeat;
  req.threads = threads;
  return req;
}

// "inputs: random, seed 0, open dims at batch=1, seq=64": what drawn inputs were.
void print_random_inputs(const RunArgs& a, const std::string& opens) {
  std::printf("inputs: random, seed %llu%s\n", static_cast<unsigned long long>(a.seed),
              opens.empty() ? "" : (", open dims at " + opens).c_str());
}

// Runs (and benchmarks) the whole model on ONNX Runtime, for models with nodes
// the isomer runtime cannot run (opaque operators). The inputs are the ones
// isomer would use, so --inputs / --seed mean the same on both engines.
int run_on_onnxruntime(const RunArgs& a, const Graph& g, const std::vector<Tensor>& given,
                       const std::map<std::string, int64_t>& bindings, const std::string& why,
                       const std::string& opens) {
  const std::string not_runnable = "'" + a.model + "' is not runnable on the isomer runtime: " + why;
  require(!a.no_onnxruntime, not_runnable + " (--no-onnxruntime: not delegated to ONNX Runtime)");
  require(a.input_shapes.empty(), not_runnable + "; --input-shape is not supported when delegating to ONNX Runtime");
  OrtResult res;
  try {
    res = run_onnxruntime(
        ort_request(a, g, a.inputs.empty() ? drawn_inputs(g, a.seed, bindings) : given, a.bench, a.threads));
  } catch (const Error& e) {
    throw Error(not_runnable + "; ONNX Runtime could not run it either (" + e.what() + ")" +
                (a.inputs.empty() && !opens.empty()
                     ? "; the random inputs took the open input dims as " + opens +
                           ", which other dims of the model may contradict: --input-shape sets them"
                     : ""));
  }
  std::printf("%s\nrunning it on ONNX Runtime %s instead\n", not_runnable.c_str(), res.version.c_str());
  if (a.inputs.empty()) print_random_inputs(a, opens);
  for (const auto& [name, t] : res.outputs) std::printf("  output %-20s %s\n", name.c_str(), to_string(t.type()).c_str());
  if (!a.outputs.empty()) {
    runtime::write_npz(a.outputs, res.outputs);
    std::printf("wrote %s\n", a.outputs.c_str());
  }
  if (a.bench) {
    runtime::BenchResult r = bench_result(res.ms, a.warmup, a.threads);
    std::printf("latency: %s (%d warm-up, %s, ONNX Runtime)\n", latency_line(r).c_str(), a.warmup,
                thread_count(a.threads).c_str());
    if (!a.report_json.empty()) {
      nlohmann::json j = report_json(a, r, "onnxruntime", a.threads);
      j["onnxruntime"] = res.version;
      write_json(a.report_json, j);
    }
  }
  return 0;
}

// `run --bench`'s comparison: the same model and inputs on ONNX Runtime (all graph
// optimizations on, the same thread count), its latency next to isomer's, and
// isomer's outputs against ONNX Runtime's with its graph optimizations off (the
// model as written: ORT 1.19's Pad+AveragePool fusion drops the padding from the
// average, microsoft/onnxruntime#22177). Returns the JSON for the report; an
// unavailable ONNX Runtime is reported, not an error.
nlohmann::json compare_with_onnxruntime(const RunArgs& a, const Graph& g, const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& outputs, const runtime::BenchResult& iso,
                                        bool* mismatch) {
  OrtRequest req = ort_request(a, g, inputs, /*bench=*/true, iso.threads);
  // A quantized model is compared as deployed, with ONNX Runtime's integer kernels
  // (optimizations on), in quantization steps (check/quant_check.h).
  const bool quantized = quantizes(g);
  req.reference_outputs = !quantized;
  req.plain_outputs_too = quantized;
  const char* against = quantized ? "all graph optimizations" : "graph optimizations off";
  OrtResult res;
  try {
    res = run_onnxruntime(req);
  } catch (const Error& e) {
    std::printf("ONNX Runtime: not compared (%s)\n", e.what());
    return {{"error", e.what()}};
  }
  runtime::BenchResult r = bench_result(res.ms, a.warmup, iso.threads);
  std::printf("ONNX Runtime %s: %s (all graph optimizations, %s)\n", res.version.c_str(),
              latency_line(r).c_str(), thread_count(r.threads).c_str());
  const double ratio = iso.median / r.median;
  std::printf("isomer / ONNX Runtime: %.2fx (median latencies; below 1 is faster)\n", ratio);
  std::vector<Tensor> want, plain;
  for (const auto& [name, t] : res.outputs) want.push_back(t);
  for (const auto& [name, t] : res.plain_outputs) plain.push_back(t);
  // A quantized model's float outputs: within the tolerance or within what ONNX
  // Runtime's two configurations differ by (check/quant_check.h), said when wider.
  bool as_written = false;
  const double tolerance = quantized ? rounding_spread_tolerance(want, plain, g.output_names(), a.tolerance) : a.tolerance;
  CheckResult c = want.size() != outputs.size() ? CheckResult{}
                 : quantized ? compare_quantized_with_references(want, plain, outputs, g.output_names(), tolerance,
                                                                  output_quant_steps(g), &as_written)
                             : compare_outputs(want, outputs, g.output_names(), tolerance);
  if (tolerance > a.tolerance && c.status == CheckResult::Status::Passed) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "float outputs held to %.3g: ONNX Runtime with and without its optimizations differ by %.3g",
                  tolerance, tolerance / kSpreadFactor);
    c.reason += (c.reason.empty() ? "" : "; ") + std::string(buf);
  }
  // A dynamically quantized model whose outputs a rounding flip carried apart: ONNX
  // Runtime fed isomer's own quantizations decides (check/dynamic_quant_check.h).
  if (c.status == CheckResult::Status::Failed && want.size() == outputs.size() && quantizes_dynamically(g)) {
    EngineOptions eo;
    eo.threads = iso.threads;
    eo.bindings = bindings_of(g, inputs);
    Engines engines(eo);
    CheckResult fed = check_fed_dynamic_quantization(engines, g, inputs, outputs, a.tolerance);
    if (fed.status == CheckResult::Status::Passed) {
      c = fed;
      against = "fed isomer's own dynamic quantizations";
    } else {
      c.reason += fed.status == CheckResult::Status::Failed
                      ? "; and with ONNX Runtime fed isomer's own dynamic quantizations: " + fed.reason
                      : "; not checked layer by layer: " + fed.reason;
    }
  }
  if (want.size() != outputs.size()) {
    c.status = CheckResult::Status::Failed;
    c.reason = "ONNX Runtime gave " + std::to_string(want.size()) + " outputs, isomer " + std::to_string(outputs.size());
  }
  if (std::string random = random_outputs_reason(g); !random.empty()) {
    c = CheckResult{};
    c.reason = random;
  }
  if (as_written) against = "graph optimizations off: the model as written";
  *mismatch = c.status == CheckResult::Status::Failed;
  if (*mismatch)
    std::printf("outputs DIFFER from ONNX Runtime's (%s): %s\n", against, c.reason.c_str());
  else if (c.status == CheckResult::Status::Skipped)
    std::printf("outputs not compared with ONNX Runtime's: %s\n", c.reason.c_str());
  else
    std::printf("outputs match ONNX Runtime's (%s): max abs error %.3g, max rel error %.3g%s%s\n", against,
                c.max_abs_error, c.max_rel_error, c.reason.empty() ? "" : "; ", c.reason.c_str());
  nlohmann::json j = latency_json(r);
  j["version"] = res.version;
  j["threads"] = r.threads;
  j["ratio"] = ratio;
  j["outputs"] = {{"status", c.status_name()},
                  {"reason", c.reason},
                  {"max_abs_error", c.max_abs_error},
                  {"max_rel_error", c.max_rel_error},
                  {"tolerance", tolerance}};
  return j;
}

// --profile: every step timed inside whole runs (runtime::Executable::profile_steps),
// the most expensive printed first with what it computes; the JSON lists every
// step with the graph nodes it covers, which scripts/profile.py times on ONNX
// Runtime node for node.
nlohmann::json profile_steps(runtime::Executable& exe, const RunArgs& a) {
  std::vector<double> ms = exe.profile_steps(a.warmup, std::max(a.repeat, 5));
  const auto& steps = exe.steps();
  double total = 0;
  for (double m : ms) total += m;
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ms[x] > ms[y]; });
  std::printf("profile: %.3f ms over %zu steps (typical runs of %d)\n", total, steps.size(), std::max(a.repeat, 5));
  std::printf("  %9s %6s  %-11s %-32s %s\n", "ms", "share", "kind", "operators", "nodes");
  for (size_t k = 0; k < order.size() && k < 25; ++k) {
    const runtime::StepInfo& s = steps[order[k]];
    std::string ops;
    for (const std::string& o : s.ops) ops += (ops.empty() ? "" : "+") + o;
    std::printf("  %9.4f %5.1f%%  %-11s %-32s %s%s\n", ms[order[k]], 100 * ms[order[k]] / std::max(total, 1e-12),
                s.kind.c_str(), ops.substr(0, 32).c_str(), s.label.substr(0, 60).c_str(),
                s.kind == "reference" ? "  (no fast path)" : s.note.empty() ? "" : ("  (" + s.note + ")").c_str());
  }
  nlohmann::json j = nlohmann::json::array();
  for (size_t i = 0; i < steps.size(); ++i)
    j.push_back({{"ms", ms[i]},
                 {"kind", steps[i].kind},
                 {"ops", steps[i].ops},
                 {"nodes", steps[i].nodes},
                 {"label", steps[i].label},
                 {"signature", steps[i].signature},
                 {"flops", steps[i].flops},
                 {"bytes", steps[i].bytes},
                 {"note", steps[i].note}});
  return j;
}

// `opens`: the extents of the model's open input dims ("batch=1, seq=64"), where
// they were fixed (or bound) for the run.
int run_imported(const RunArgs& a, const Graph& g, const std::string& opens);

// The outputs' types, and the outputs into --outputs' file.
void print_outputs(const RunArgs& a, const Graph& g, const std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    std::printf("  output %-20s %s\n", g.output_names()[i].c_str(), to_string(outputs[i].type()).c_str());
  if (!a.outputs.empty()) {
    runtime::write_npz(a.outputs, named(g.output_names(), outputs));
    std::printf("wrote %s\n", a.outputs.c_str());
  }
}

// --print-steps: one line per compiled step, a control-flow body's indented under it.
void print_steps(const std::vector<runtime::StepInfo>& steps, int depth) {
  for (const runtime::StepInfo& s : steps) {
    std::string ops;
    for (const std::string& o : s.ops) ops += (ops.empty() ? "" : "+") + o;
    std::printf("  %*s%-11s %-28s %s%s\n", 2 * depth, "", s.kind.c_str(), ops.c_str(), s.label.c_str(),
                s.kind == "reference" ? "  (no fast path: the reference kernel)" : "");
    print_steps(s.body, depth + 1);
  }
}

// Runs a model whose later nodes' shapes depend on the data as a head on the isomer
// runtime and a tail on ONNX Runtime (pipeline/split_run.h). Nothing where the model
// does not split, or the head does not compile or the tail does not load or run:
// the model then runs on ONNX Runtime whole, as before.
std::optional<int> run_split(const RunArgs& a, const Graph& g, const runtime::RuntimeOptions& ro,
                             const std::vector<Tensor>& inputs, const std::string& why, const std::string& opens) {
  std::unique_ptr<SplitExecutable> split;
  std::vector<Tensor> head_out, outputs;
  bridge::NamedTensors feeds;
  try {
    split = SplitExecutable::make(g, ro, a.threads);
    if (!split) return std::nullopt;
    outputs = split->run(inputs, &head_out, &feeds);
  } catch (const Error&) {
    return std::nullopt;
  }
  const SplitModel* s = &split->split();
  runtime::Executable* exe = &split->head();
  bridge::OrtBridge* ort = &split->onnxruntime();
  const size_t head_nodes = s->head_nodes, tail_nodes = s->tail_nodes;
  std::printf("'%s' is not runnable whole on the isomer runtime: %s\n", a.model.c_str(), why.c_str());
  std::printf("split where the shapes start to depend on the data: %zu nodes run on the isomer runtime (%zu steps, "
              "%s), the other %zu, from %s on, on ONNX Runtime %s as one model\n",
              s->head_nodes, exe->steps().size(), thread_count(exe->threads()).c_str(), s->tail_nodes,
              s->first_tail_node.c_str(), ort->version().c_str());
  if (a.inputs.empty()) print_random_inputs(a, opens);
  if (a.print_steps) {
    print_steps(exe->steps(), 0);
    std::printf("  %-11s %-28s the other %zu nodes\n", "onnxruntime", "(the tail)", s->tail_nodes);
  }
  print_outputs(a, g, outputs);
  // --profile times the head's steps (the tail is one ONNX Runtime session).
  nlohmann::json profile;
  if (a.profile) profile = profile_steps(*exe, a);
  if (!a.bench) {
    if (!a.report_json.empty()) write_json(a.report_json, {{"model", a.model}, {"threads", exe->threads()},
                                                           {"profile", profile}, {"tail_nodes", s->tail_nodes}});
    return 0;
  }
  // A run's latency: the head's on the isomer runtime plus the tail's on ONNX Runtime.
  runtime::BenchResult head = runtime::benchmark(*exe, inputs, a.warmup, a.repeat);
  const std::vector<double> tail_ms = ort->time(split->tail_id(), feeds, a.warmup, a.repeat);
  std::vector<double> ms = head.ms;
  for (size_t i = 0; i < ms.size() && i < tail_ms.size(); ++i) ms[i] += tail_ms[i];
  runtime::BenchResult r = bench_result(ms, head.warmup, head.threads);
  std::printf("latency: %s (%d warm-up, %s; head median %.3f ms on the isomer runtime)\n", latency_line(r).c_str(),
              r.warmup, thread_count(r.threads).c_str(), head.median);
  if (g.constant_bytes() >= kLargeGraphBytes) split.reset();
  bool mismatch = false;
  nlohmann::json ort_json = compare_with_onnxruntime(a, g, inputs, outputs, r, &mismatch);
  if (!a.report_json.empty()) {
    nlohmann::json j = report_json(a, r, "isomer+onnxruntime", r.threads);
    j["head_latency_ms_median"] = head.median;
    j["head_nodes"] = head_nodes;
    j["tail_nodes"] = tail_nodes;
    j["onnxruntime"] = ort_json;
    if (!profile.is_null()) j["profile"] = profile;
    write_json(a.report_json, j);
  }
  require(!mismatch, "isomer's outputs differ from ONNX Runtime's on '" + a.model + "' (see above)");
  return 0;
}

// Whether the inputs file feeds an input that has a default value (an initializer
// the graph also lists as an input, onnx_io.h).
bool feeds_a_default(const Graph& g, const RunArgs& a) {
  const std::vector<std::pair<std::string, Tensor>> defaults = input_defaults(g);
  if (defaults.empty() || a.inputs.empty()) return false;
  const runtime::NamedTensors given = runtime::read_npz(a.inputs);
  for (const auto& d : defaults)
    for (const auto& t : given)
      if (t.first == d.first) return true;
  return false;
}

int run_model(const RunArgs& a) {
  runtime::choose_openmp_waits(a.threads);  // restarts the process if needed (see runtime.h)
  if (!a.outputs.empty()) require_output_path(a.outputs, "--outputs");
  if (!a.report_json.empty()) require_output_path(a.report_json, "--report-json");
  ImportOptions io;
  io.input_shapes = input_shapes_from_flags(a.input_shapes);
  Graph g = import_onnx_file(a.model, io);
  // A run that feeds none of the inputs with a default value computes with those
  // values, so they are constants for it, as the runtime then folds and packs them
  // (a Conv whose weight was an input ran on the reference kernel, 6x slower); a run
  // that feeds one keeps every such input an input.
  if (!input_defaults(g).empty() && !feeds_a_default(g, a)) {
    io.freeze_overridable_inputs = true;
    g = import_onnx_file(a.model, io);
  }
  // The model imported again with its open input dims fixed to the extents of the
  // given inputs, or of the drawn ones (check/open_dims.h names them): the runtime's
  // fusions (RMSNorm, rotary embeddings, attention) match static shapes only, so an
  // export with dynamic batch and sequence axes otherwise ran unfused.
  std::map<std::string, int64_t> opens;
  if (a.inputs.empty()) {
    g = import_at_drawn_extents(a.model, io, std::move(g), &opens);
  } else {
    const std::vector<Tensor> given = read_inputs(g, a.inputs);
    opens = bindings_of(g, given);
    if (std::optional<Graph> fixed = import_fixed(a.model, io, open_input_shapes(g, given))) g = std::move(*fixed);
  }
  const int rc = run_imported(a, g, extents_text(opens));
  // Like ONNX Runtime, `run` computes with NaN or Inf weights as given (`optimize`
  // refuses them); after a run that worked (a failure says one thing), the user hears
  // of them: the outputs they reach are NaN or Inf, and where NaN meets Relu or MaxPool,
  // oneDNN's kernels return the other operand (IEEE maxNum) where ONNX Runtime's Relu
  // keeps the NaN.
  if (std::string what = nonfinite_weight(g); rc == 0 && !what.empty())
    std::fprintf(stderr,
                 "isomer: warning: %s: %s: outputs it reaches may be NaN or Inf, and NaN that meets Relu or MaxPool "
                 "becomes a number here (ONNX Runtime may keep it)\n",
                 a.model.c_str(), what.c_str());
  return rc;
}

int run_imported(const RunArgs& a, const Graph& g, const std::string& opens) {
  require(a.bench || a.profile || a.report_json.empty(), "--report-json needs --bench or --profile");
  // Drawn inputs take open dims (where the fixed model did not import) at the extents
  // open_dims.h names.
  std::map<std::string, int64_t> bindings = a.inputs.empty() ? drawn_bindings(g) : std::map<std::string, int64_t>{};
  std::vector<Tensor> inputs;
  if (!a.inputs.empty()) {
    inputs = read_inputs(g, a.inputs);
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Shape& s = g.inputs()[i]->output_types()[0].shape;
      for (size_t d = 0; d < s.size() && d < inputs[i].dims().size(); ++d)
        if (!s[d].is_static() && !s[d].symbol.empty()) bindings[s[d].symbol] = inputs[i].dims()[d];
    }
  }
  runtime::RuntimeOptions ro;
  ro.threads = a.threads;
  ro.fuse = !a.no_fuse;
  ro.blocked_layouts = !a.plain;
  ro.bindings = bindings;
  ro.delegate_opaque = !a.no_onnxruntime;
  // Operators isomer does not know run on ONNX Runtime node by node; a model the
  // isomer runtime cannot run after all (a shape it cannot know before running, a
  // delegated node whose output shape depends on data) runs on ONNX Runtime whole.
  const bool random = inputs.empty();
  LongRunNotice notice(a.model);
  std::string why;
  std::unique_ptr<runtime::Executable> exe;
  std::vector<Tensor> outputs;
  if (runtime::is_runnable(g, &why, ro)) {
    try {
      exe = runtime::compile(g, ro);
      if (random) inputs = drawn_inputs(g, a.seed, ro.bindings);
      outputs = exe->run(inputs);
    } catch (const Error& e) {
      why = e.what();
      exe.reset();
    }
  }
  if (!exe && !a.no_onnxruntime && a.input_shapes.empty()) {
    if (random && inputs.empty()) inputs = drawn_inputs(g, a.seed, ro.bindings);
    if (std::optional<int> rc = run_split(a, g, ro, inputs, why, opens)) return *rc;
  }
  if (!exe) return run_on_onnxruntime(a, g, random ? std::vector<Tensor>{} : inputs, bindings, why, opens);
  if (random) print_random_inputs(a, opens);
  std::printf("%s: %zu steps, %s, buffers %.1f MB (%.1f MB unshared)\n", a.model.c_str(), exe->steps().size(),
              thread_count(exe->threads()).c_str(), static_cast<double>(exe->arena_bytes()) / 1e6,
              static_cast<double>(exe->value_bytes()) / 1e6);
  // Steps inside control-flow bodies count as the main graph's do.
  size_t reference = 0, delegated = 0;
  std::set<std::string> delegated_nodes, delegated_keys;  // by name; by an output's name (StepInfo::nodes)
  std::vector<std::string> delegated_in_bodies;
  std::function<void(const std::vector<runtime::StepInfo>&, const std::string&)> count =
      [&](const std::vector<runtime::StepInfo>& steps, const std::string& body_of) {
        for (const runtime::StepInfo& s : steps) {
          reference += s.kind == "reference";
          delegated += s.kind == "onnxruntime";
          if (s.kind == "onnxruntime" && body_of.empty()) {
            delegated_nodes.insert(s.label);
            delegated_keys.insert(s.nodes.begin(), s.nodes.end());
          }
          else if (s.kind == "onnxruntime")
            delegated_in_bodies.push_back(s.label + " (" + s.ops.front() + ") in the body of " + body_of);
          count(s.body, s.label);
        }
      };
  count(exe->steps(), "");
  if (reference) std::printf("  %zu steps run on reference kernels\n", reference);
  if (delegated) {
    // Each opaque node, or each run of adjacent ones, is one such step; say why each is opaque.
    std::printf("  %zu steps run on ONNX Runtime %s, for the nodes isomer keeps opaque:\n", delegated,
                bridge::OrtBridge::shared()->version().c_str());
    for (const NodePtr& n : g.topo_order()) {
      const auto& outs = n->output_names();
      const bool listed = delegated_nodes.count(n->name()) ||
                          std::any_of(outs.begin(), outs.end(), [&](const std::string& o) { return delegated_keys.count(o); });
      if (n->kind() != NodeKind::Opaque || !listed) continue;
      std::string note;
      for (const runtime::StepInfo& s : exe->steps())
        if (s.kind == "onnxruntime" && !s.note.empty() && s.label == n->name()) note = " (" + s.note + ")";
      std::printf("    %s%s\n", describe_opaque(*n).c_str(), note.c_str());
    }
    for (const std::string& s : delegated_in_bodies) std::printf("    %s\n", s.c_str());
  }
  if (a.print_steps) print_steps(exe->steps(), 0);
  print_outputs(a, g, outputs);
  nlohmann::json profile;
  if (a.profile) profile = profile_steps(*exe, a);
  if (!a.bench) {
    if (!a.report_json.empty()) {
      nlohmann::json j;
      j["model"] = a.model;
      j["threads"] = exe->threads();
      j["profile"] = profile;
      write_json(a.report_json, j);
    }
    return 0;
  }
  runtime::BenchResult r;
  std::string placement;
  {
    // With isomer's short spin, each thread on a CPU of its own (one_cpu_per_thread.h).
    runtime::RunPlacement pinned(*exe);
    placement = pinned.note();
    r = runtime::benchmark(*exe, inputs, a.warmup, a.repeat);
  }
  std::printf("latency: %s (%d warm-up, %s)\n", latency_line(r).c_str(), r.warmup, thread_count(r.threads).c_str());
  std::printf("OpenMP waits: %s\n", runtime::openmp_waits().c_str());
  std::printf("OpenMP threads: %s\n", placement.c_str());
  bool mismatch = false;
  nlohmann::json ort;
  const size_t steps = exe->steps().size();
  // A large model's compiled graph (its packed weights) goes before ONNX Runtime's
  // helper loads the weights once more.
  if (g.constant_bytes() >= kLargeGraphBytes) exe.reset();
  if (!a.no_onnxruntime) ort = compare_with_onnxruntime(a, g, inputs, outputs, r, &mismatch);
  if (!a.report_json.empty()) {
    nlohmann::json j = report_json(a, r, "isomer", r.threads);
    j["openmp_waits"] = runtime::openmp_waits();
    j["openmp_threads"] = placement;
    j["steps"] = steps;
    j["input_extents"] = opens;
    j["reference_steps"] = reference;
    j["onnxruntime_steps"] = delegated;
    j["cpu"] = runtime::cpu_model();
    j["onednn"] = runtime::dnnl_version();
    if (!ort.is_null()) j["onnxruntime"] = ort;
    if (!profile.is_null()) j["profile"] = profile;
    write_json(a.report_json, j);
  }
  require(!mismatch, "isomer's outputs differ from ONNX Runtime's on '" + a.model + "' (see above)");
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* r = app.add_subcommand("run", "run a model on isomer's CPU runtime (oneDNN); optionally benchmark it");
  r->add_option("model", args->model, "model (.onnx)")->required();
  r->add_option("--inputs", args->inputs, "inputs as .npz keyed by input name (default: random, seed printed)");
  r->add_option("--outputs", args->outputs, "write the outputs here (.npz keyed by output name)");
  r->add_option("--seed", args->seed, "seed of the random inputs");
  r->add_option("--input-shape", args->input_shapes, "fix an input's dims, e.g. input:1,3,224,224 (repeatable)");
  r->add_flag("--bench", args->bench, "time end-to-end latency");
  r->add_option("--repeat", args->repeat, "timed runs for --bench (default 20)");
  r->add_option("--warmup", args->warmup, "untimed runs before timing (default 5)");
  r->add_option("--threads", args->threads, "threads (default: every core)");
  r->add_option("--report-json", args->report_json, "write the --bench results as JSON here");
  r->add_flag("--no-fuse", args->no_fuse, "do not fuse post-ops or fold BatchNormalization");
  r->add_flag("--plain-layouts", args->plain, "keep every tensor in plain row-major layout");
  r->add_flag("--print-steps", args->print_steps, "list the compiled steps");
  r->add_flag("--profile", args->profile,
              "time every step inside whole runs and list the most expensive (with --report-json: every step, with "
              "the graph nodes it computes)");
  r->add_flag("--no-onnxruntime", args->no_onnxruntime,
              "never use ONNX Runtime: fail on models the isomer runtime cannot run, and --bench does not "
              "compare with it");
  r->add_option("--tolerance", args->tolerance,
                "--bench: largest error against ONNX Runtime's outputs, relative to each output's scale "
                "(default 1e-3)");
  r->callback([args] { set_action([args] { return naming_model(args->model, [&] { return run_model(*args); }); }); });
}

}  // namespace isomer::cli
