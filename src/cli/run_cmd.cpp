// `isomer run MODEL.onnx`: runs a model on isomer's CPU runtime (oneDNN), with
// inputs from an .npz file or random ones (seed printed), optionally writes the
// outputs and benchmarks end-to-end latency.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "check/compare.h"
#include "cli/commands.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "runtime/npz.h"
#include "runtime/runtime.h"

namespace isomer::cli {

namespace {

struct RunArgs {
  std::string model, inputs, outputs, report_json;
  std::vector<std::string> input_shapes;
  bool bench = false;
  int repeat = 20, warmup = 5, threads = 0;
  uint64_t seed = 0;
  bool no_fuse = false, plain = false, print_steps = false, no_onnxruntime = false;
};

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o;
}

std::vector<Tensor> read_inputs(const Graph& g, const std::string& path) {
  std::vector<Tensor> inputs;
  runtime::NamedTensors given = runtime::read_npz(path);
  for (const NodePtr& in : g.inputs()) {
    const Tensor* found = nullptr;
    for (const auto& [name, t] : given)
      if (name == in->name()) found = &t;
    require(found != nullptr, "'" + path + "' has no array for input '" + in->name() + "'");
    inputs.push_back(*found);
  }
  return inputs;
}

// Runs (and benchmarks) the whole model on ONNX Runtime, for models with nodes
// the isomer runtime cannot run (opaque operators). Inputs come from the .npz
// file this process writes, so --inputs / --seed mean the same as on isomer.
const char* kOrtRunScript = R"PY(
import json, sys, time
import numpy as np
import onnxruntime as ort
model, inputs, outputs, bench, repeat, warmup, threads, report, header = sys.argv[1:10]
so = ort.SessionOptions()
if int(threads) > 0:
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
print(header.replace("@ORT@", ort.__version__), flush=True)
given = np.load(inputs)
feeds = {i.name: given[i.name] for i in sess.get_inputs()}
res = sess.run(None, feeds)
for o, v in zip(sess.get_outputs(), res):
    print("  output %-20s %s%s" % (o.name, v.dtype, list(v.shape)))
if outputs:
    np.savez(outputs, **{o.name: v for o, v in zip(sess.get_outputs(), res)})
    print("wrote %s" % outputs)
if int(bench):
    for _ in range(int(warmup)):
        sess.run(None, feeds)
    ms = []
    for _ in range(max(int(repeat), 1)):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ms.append((time.perf_counter() - t0) * 1e3)
    med = float(np.median(ms))
    print("latency: median %.3f ms, min %.3f ms, max %.3f ms over %d repeats (%s warm-up, %s threads, ONNX Runtime)"
          % (med, min(ms), max(ms), len(ms), warmup, threads if int(threads) > 0 else "default"))
    if report:
        json.dump({"model": model, "engine": "onnxruntime", "latency_ms_median": med, "latency_ms_min": min(ms),
                   "latency_ms_max": max(ms), "latency_ms_mean": float(np.mean(ms)), "repeats": len(ms),
                   "warmup": int(warmup), "threads": int(threads), "onnxruntime": ort.__version__},
                  open(report, "w"), indent=2)
        print("wrote %s" % report)
)PY";

std::string shell_quoted(const std::string& s) {
  std::string o = "'";
  for (char ch : s) o += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return o + "'";
}

int run_on_onnxruntime(const RunArgs& a, const Graph& g, const std::map<std::string, int64_t>& bindings,
                       const std::string& why) {
  namespace fs = std::filesystem;
  const std::string not_runnable = "'" + a.model + "' is not runnable on the isomer runtime: " + why;
  require(!a.no_onnxruntime, not_runnable + " (--no-onnxruntime: not delegated to ONNX Runtime)");
  require(a.input_shapes.empty(), not_runnable + "; --input-shape is not supported when delegating to ONNX Runtime");
  fs::path dir = fs::temp_directory_path() / ("isomer-run-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  std::vector<Tensor> inputs;
  if (!a.inputs.empty()) {
    inputs = read_inputs(g, a.inputs);
  } else {
    inputs = random_inputs(g, a.seed, bindings);
  }
  runtime::NamedTensors named;
  for (size_t i = 0; i < inputs.size(); ++i) named.emplace_back(g.inputs()[i]->name(), inputs[i]);
  runtime::write_npz((dir / "in.npz").string(), named);
  std::ofstream(dir / "run.py") << kOrtRunScript;
  // The script prints the header once ONNX Runtime has accepted the model.
  std::string header = not_runnable + "\nrunning it on ONNX Runtime @ORT@ instead";
  if (a.inputs.empty()) header += "\ninputs: random, seed " + std::to_string(a.seed);
  std::vector<std::string> argv = {find_python(), (dir / "run.py").string(), a.model, (dir / "in.npz").string(),
                                   a.outputs, a.bench ? "1" : "0", std::to_string(a.repeat), std::to_string(a.warmup),
                                   std::to_string(a.threads), a.report_json, header};
  std::string cmd;
  for (const std::string& arg : argv) cmd += shell_quoted(arg) + " ";
  cmd += "2> " + shell_quoted((dir / "log.txt").string());
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream log(dir / "log.txt");
    std::string line, last;
    while (std::getline(log, line))
      if (!line.empty()) last = line;
    throw Error(not_runnable + "; ONNX Runtime could not run it either (" +
                (last.empty() ? "python exited with status " + std::to_string(rc) : last) + ")");
  }
  return 0;
}

int run_model(const RunArgs& a) {
  runtime::choose_openmp_waits(a.threads);  // restarts the process if needed (see runtime.h)
  ImportOptions io;
  io.input_shapes = input_shapes_from_flags(a.input_shapes);
  Graph g = import_onnx_file(a.model, io);
  require(a.bench || a.report_json.empty(), "--report-json needs --bench");
  std::map<std::string, int64_t> bindings;
  if (!a.inputs.empty()) {
    std::vector<Tensor> given = read_inputs(g, a.inputs);
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Shape& s = g.inputs()[i]->output_types()[0].shape;
      for (size_t d = 0; d < s.size() && d < given[i].dims().size(); ++d)
        if (!s[d].is_static() && !s[d].symbol.empty()) bindings[s[d].symbol] = given[i].dims()[d];
    }
  }
  std::string why;
  const bool runnable = runtime::is_runnable(g, &why);  // fills `why` before the message is built
  if (!runnable) return run_on_onnxruntime(a, g, bindings, why);

  std::vector<Tensor> inputs;
  if (!a.inputs.empty()) inputs = read_inputs(g, a.inputs);
  runtime::RuntimeOptions ro;
  ro.threads = a.threads;
  ro.fuse = !a.no_fuse;
  ro.blocked_layouts = !a.plain;
  ro.bindings = bindings;
  std::unique_ptr<runtime::Executable> exe = runtime::compile(g, ro);
  if (inputs.empty()) {
    inputs = random_inputs(g, a.seed, ro.bindings);
    std::printf("inputs: random, seed %llu\n", static_cast<unsigned long long>(a.seed));
  }
  std::vector<Tensor> outputs = exe->run(inputs);
  std::printf("%s: %zu steps, %d threads, buffers %.1f MB (%.1f MB unshared)\n", a.model.c_str(), exe->steps().size(),
              exe->threads(), static_cast<double>(exe->arena_bytes()) / 1e6,
              static_cast<double>(exe->value_bytes()) / 1e6);
  size_t reference = 0;
  for (const runtime::StepInfo& s : exe->steps()) reference += s.kind == "reference";
  if (reference) std::printf("  %zu steps run on reference kernels\n", reference);
  if (a.print_steps)
    for (const runtime::StepInfo& s : exe->steps()) {
      std::string ops;
      for (const std::string& o : s.ops) ops += (ops.empty() ? "" : "+") + o;
      std::printf("  %-10s %-28s %s\n", s.kind.c_str(), ops.c_str(), s.label.c_str());
    }
  for (size_t i = 0; i < outputs.size(); ++i)
    std::printf("  output %-20s %s\n", g.output_names()[i].c_str(), to_string(outputs[i].type()).c_str());
  if (!a.outputs.empty()) {
    runtime::NamedTensors named;
    for (size_t i = 0; i < outputs.size(); ++i) named.emplace_back(g.output_names()[i], outputs[i]);
    runtime::write_npz(a.outputs, named);
    std::printf("wrote %s\n", a.outputs.c_str());
  }
  if (a.bench) {
    runtime::BenchResult r = runtime::benchmark(*exe, inputs, a.warmup, a.repeat);
    std::printf("latency: median %.3f ms, min %.3f ms, max %.3f ms over %d repeats (%d warm-up, %d threads)\n", r.median,
                r.min, r.max, static_cast<int>(r.ms.size()), r.warmup, r.threads);
    std::printf("OpenMP waits: %s\n", runtime::openmp_waits().c_str());
    if (!a.report_json.empty()) {
      std::ofstream f(a.report_json);
      require(f.good(), "cannot write '" + a.report_json + "'");
      f << "{\n  \"model\": \"" << json_escape(a.model) << "\",\n  \"engine\": \"isomer\",\n  \"latency_ms_median\": " << r.median
        << ",\n  \"latency_ms_min\": " << r.min << ",\n  \"latency_ms_max\": " << r.max
        << ",\n  \"latency_ms_mean\": " << r.mean << ",\n  \"repeats\": " << r.ms.size()
        << ",\n  \"warmup\": " << r.warmup << ",\n  \"threads\": " << r.threads << ",\n  \"openmp_waits\": \""
        << json_escape(runtime::openmp_waits()) << "\",\n  \"steps\": "
        << exe->steps().size() << ",\n  \"reference_steps\": " << reference << ",\n  \"cpu\": \""
        << json_escape(runtime::cpu_model()) << "\",\n  \"onednn\": \"" << runtime::dnnl_version() << "\"\n}\n";
      require(f.good(), "cannot write '" + a.report_json + "'");
      std::printf("wrote %s\n", a.report_json.c_str());
    }
  } else {
    require(a.report_json.empty(), "--report-json needs --bench");
  }
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
  r->add_flag("--no-onnxruntime", args->no_onnxruntime,
              "fail on models the isomer runtime cannot run instead of running them on ONNX Runtime");
  r->callback([args] { set_action([args] { return run_model(*args); }); });
}

}  // namespace isomer::cli
