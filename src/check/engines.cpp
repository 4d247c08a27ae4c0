#include "check/engines.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "bridge/bridge.h"
#include "check/open_dims.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/run_limit.h"
#include "onnx/onnx_io.h"
#include "runtime/one_cpu_per_thread.h"
#include "runtime/runtime.h"

namespace isomer {

std::string engine_name(Engine e) {
  switch (e) {
    case Engine::Runtime: return "isomer's runtime";
    case Engine::OnnxRuntime: return "ONNX Runtime";
    case Engine::OnnxRuntimePlain: return "ONNX Runtime (optimizations off)";
    case Engine::Reference: return "reference evaluator";
  }
  return "?";
}

namespace {

constexpr size_t kOnnxRuntimeMaxConstants = 20000;

// With EngineOptions::processor_clock the runs are timed on the clock that other
// processes on a busy machine cannot widen: the calling thread's CPU time on one
// thread, the process's on more (what the ONNX Runtime side and the search's paired
// run read). A graph with a step delegated to ONNX Runtime stays on the wall clock:
// that step computes in the helper process, which neither CPU clock here counts.
class RuntimePrepared : public Prepared {
 public:
  RuntimePrepared(std::unique_ptr<runtime::Executable> exe, bool processor_clock, bool one_cpu_per_thread)
      : exe_(std::move(exe)) {
    const auto& steps = exe_->steps();
    const bool delegated =
        std::any_of(steps.begin(), steps.end(), [](const runtime::StepInfo& s) { return s.kind == "onnxruntime"; });
    clock_ = !processor_clock || delegated ? runtime::StepClock::wall : runtime::run_clock(exe_->threads());
    // Not around a step that runs in ONNX Runtime's helper: a helper started there
    // would inherit the calling thread's one CPU.
    one_cpu_per_thread_ = one_cpu_per_thread && !delegated;
    if (one_cpu_per_thread && delegated) placement = "not pinned (a step runs in ONNX Runtime's helper)";
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RunScope scope;
    return exe_->run(inputs);
  }
  std::vector<double> time(const std::vector<Tensor>& inputs, int warmup, int repeats) override {
    RunScope scope(warmup + repeats);
    clock = clock_ == runtime::StepClock::thread ? "thread" : clock_ == runtime::StepClock::process ? "process" : "wall";
    std::optional<runtime::OneCpuPerThread> pinned;
    if (one_cpu_per_thread_) placement = pinned.emplace(exe_->threads()).note();
    return runtime::benchmark(*exe_, inputs, warmup, repeats, clock_).ms;
  }

 private:
  std::unique_ptr<runtime::Executable> exe_;
  runtime::StepClock clock_;
  bool one_cpu_per_thread_;
};

class OrtPrepared : public Prepared {
 public:
  OrtPrepared(std::shared_ptr<bridge::OrtBridge> ort, bridge::Session s, std::vector<std::string> input_names,
              bool processor_clock)
      : ort_(std::move(ort)), s_(std::move(s)), names_(std::move(input_names)), processor_clock_(processor_clock) {}
  ~OrtPrepared() override {
    try {
      ort_->free(s_.id);
    } catch (const Error&) {  // the helper is gone: nothing left to free
    }
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RunScope scope;
    std::vector<Tensor> out;
    for (auto& [name, t] : ort_->run(s_.id, named(inputs))) out.push_back(std::move(t));
    return out;
  }
  std::vector<double> time(const std::vector<Tensor>& inputs, int warmup, int repeats) override {
    RunScope scope(warmup + repeats);
    return ort_->time(s_.id, named(inputs), warmup, repeats, processor_clock_, &clock);
  }

 private:
  bridge::NamedTensors named(const std::vector<Tensor>& inputs) const {
    bridge::NamedTensors n;
    for (size_t i = 0; i < inputs.size() && i < names_.size(); ++i) n.emplace_back(names_[i], inputs[i]);
    return n;
  }
  std::shared_ptr<bridge::OrtBridge> ort_;
  bridge::Session s_;
  std::vector<std::string> names_;
  bool processor_clock_;
};

class ReferencePrepared : public Prepared {
 public:
  explicit ReferencePrepared(Graph g) : g_(std::move(g)) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RunScope scope;
    return evaluate(g_, inputs);
  }
  std::vector<double> time(const std::vector<Tensor>&, int, int) override {
    throw Error("the reference evaluator is not timed");
  }

 private:
  Graph g_;
};

// A directory of its own under the system's temporary directory, removed with
// everything in it when this goes.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "isomer-ort-XXXXXX").string();
    require(::mkdtemp(pattern.data()) != nullptr,
            "cannot make a temporary directory for ONNX Runtime's model: " + std::string(std::strerror(errno)));
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

bridge::Session load_on_onnxruntime(bridge::OrtBridge& ort, const Graph& g, const bridge::SessionOptions& so) {
  if (g.constant_bytes() < kLargeGraphBytes) return ort.load_bytes(export_onnx_bytes(g), so);
  // Serialized bytes, a protobuf message of them here and another in the helper
  // would each hold the weights again. The session has read them once it exists,
  // so the files can go.
  TempDir dir;
  const std::string path = (dir.path / "model.onnx").string();
  ExportOptions eo;
  eo.external_data = true;
  export_onnx_file(g, path, eo);
  return ort.load_file(path, so);
}

}  // namespace

std::unique_ptr<Prepared> prepare(const Graph& g, Engine e, const EngineOptions& opts) {
  switch (e) {
    case Engine::Runtime: {
      runtime::RuntimeOptions ro;
      ro.threads = opts.threads;
      ro.bindings = opts.bindings;
      ro.delegate_opaque = opts.allow_onnxruntime;
      std::string why;
      if (std::optional<Graph> fixed = with_input_shapes(g, opts.input_shapes);
          fixed && runtime::is_runnable(*fixed, &why, ro)) {
        try {
          return std::make_unique<RuntimePrepared>(runtime::compile(*fixed, ro), opts.processor_clock,
                                                 opts.one_cpu_per_thread);
        } catch (const Error&) {  // compiled as written below, with the dims bound
        }
      }
      require(runtime::is_runnable(g, &why, ro), why);
      return std::make_unique<RuntimePrepared>(runtime::compile(g, ro), opts.processor_clock, opts.one_cpu_per_thread);
    }
    case Engine::OnnxRuntime:
    case Engine::OnnxRuntimePlain: {
      require(opts.allow_onnxruntime, "ONNX Runtime is switched off");
      size_t constants = 0;
      for (const NodePtr& n : g.topo_order()) constants += n->kind() == NodeKind::Constant;
      require(constants <= kOnnxRuntimeMaxConstants,
              "ONNX Runtime's load time grows with the square of a model's initializers (1 s for 20000, 40 s for "
              "100000): not used for a graph of " + std::to_string(constants) + " initializers");
      auto ort = bridge::OrtBridge::shared();
      bridge::SessionOptions so;
      so.threads = opts.threads > 0 ? opts.threads : runtime::hardware_threads();
      so.optimization = e == Engine::OnnxRuntime ? "all" : "none";
      // No session's threads spin. The plain session only gives reference outputs and
      // must not take cores from isomer's runtime while that is timed; and of two
      // timed sessions alive at once (the guard's original and optimized model), the
      // one created first ran slower while the other's pool spun: on the demo model
      // at 2 threads, equal-speed graphs read 1.40x apart, by creation order alone
      // (without spinning, 0.85-0.90x both ways).
      so.spinning = false;
      std::vector<std::string> names;
      for (const NodePtr& in : g.inputs()) names.push_back(in->name());
      try {
        return std::make_unique<OrtPrepared>(ort, load_on_onnxruntime(*ort, g, so), std::move(names),
                                             opts.processor_clock);
      } catch (const bridge::OrtError& e) {
        throw Error("ONNX Runtime " + ort->version() + " refuses the model: " + e.what());
      }
    }
    case Engine::Reference: {
      std::string why;
      require(is_evaluable(g, &why), why);
      return std::make_unique<ReferencePrepared>(g);
    }
  }
  throw Error("unknown engine");
}

Prepared* Engines::get(const Graph& g, Engine e, std::string* why) {
  for (Entry& entry : entries_)
    if (entry.engine == e && same_graph(entry.graph, g)) {
      if (why) *why = entry.why;
      return entry.prepared.get();
    }
  Entry entry{g, e, nullptr, ""};
  try {
    auto f = factories_.find(e);
    entry.prepared = f != factories_.end() ? f->second(g, opts_) : prepare(g, e, opts_);
  } catch (const Error& err) {
    entry.why = err.what();
  }
  if (why) *why = entry.why;
  entries_.push_back(std::move(entry));
  return entries_.back().prepared.get();
}

void Engines::forget(const Graph& g) {
  std::erase_if(entries_, [&](const Entry& e) { return same_graph(e.graph, g); });
}

void Engines::forget(Engine e) {
  std::erase_if(entries_, [&](const Entry& entry) { return entry.engine == e; });
}

}  // namespace isomer
