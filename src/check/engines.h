#pragma once
// The engines a graph runs on for the check and the never-slower guard:
//   Runtime           isomer's CPU runtime (runtime::compile), in this process;
//   OnnxRuntime       ONNX Runtime with all graph optimizations, as a user deploys
//                     it (through the bridge, bridge/bridge.h);
//   OnnxRuntimePlain  ONNX Runtime with graph optimizations off: the model as written;
//   Reference         isomer's reference evaluator: exact, slow, never timed.
// Engines keeps what it prepared (compiled executables, sessions), so that the
// check and the guard, which run the same graphs, prepare each only once.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer {

enum class Engine { Runtime, OnnxRuntime, OnnxRuntimePlain, Reference };

// A graph with at least this much constant data is large: each engine that prepares
// it holds its own copy of the weights, so the pipeline keeps as few prepared at once
// as it can (a 355M-parameter GPT-2 held 10 GB across isomer and ONNX Runtime's
// helper), and it goes to ONNX Runtime as a file with external data, not as bytes.
constexpr size_t kLargeGraphBytes = size_t{64} << 20;

// "isomer's runtime", "ONNX Runtime", "ONNX Runtime (optimizations off)", "reference evaluator".
std::string engine_name(Engine e);

// One graph made ready to run on one engine.
class Prepared {
 public:
  virtual ~Prepared() = default;
  // Outputs in the graph's order; throws Error when the engine cannot run it on these inputs.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) = 0;
  // Milliseconds of each of `repeats` runs after `warmup` untimed ones.
  virtual std::vector<double> time(const std::vector<Tensor>& inputs, int warmup, int repeats) = 0;

  // Set once the graph has run here (its first run pays for first-touch page
  // faults and lazy initialization; a timing needs no warm-up after that).
  bool warm = false;
  // The clock time() read last: "wall", or with EngineOptions::processor_clock
  // "thread" or "process" (bridge.h; engines.cpp for the runtime); empty before.
  std::string clock;
  // Where isomer's runtime's OpenMP threads ran while time() timed them last
  // (runtime::OneCpuPerThread::note()); empty on other engines and before.
  std::string placement;
};

struct EngineOptions {
  int threads = 0;                          // 0 = every core
  std::map<std::string, int64_t> bindings;  // extents of symbolic input dims
  // The runtime compiles a graph imported again with these inputs' dims fixed (the
  // extents the inputs have, open_dims.h): it fuses where shapes are static.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  bool allow_onnxruntime = true;            // false: no ONNX Runtime, not even for delegation
  // Timings in processor time (OrtBridge::time; the runtime's in engines.cpp): the
  // guard's, which a busy machine's other processes would otherwise widen on the wall clock.
  bool processor_clock = false;
  // isomer's runtime times its runs with its OpenMP team one thread per CPU
  // (runtime::OneCpuPerThread): the guard's, timed as `isomer run` runs on a quiet machine.
  bool one_cpu_per_thread = false;
};

class Engines {
 public:
  using Factory = std::function<std::unique_ptr<Prepared>(const Graph&, const EngineOptions&)>;

  explicit Engines(EngineOptions opts = {}) : opts_(std::move(opts)) {}
  // `g` prepared on `e` (the first call prepares it); nullptr when it cannot run
  // there, with the reason in `why`.
  Prepared* get(const Graph& g, Engine e, std::string* why = nullptr);
  // Replaces how graphs are prepared on `e`. Tests use it for an engine on which
  // some rewrite is slow.
  void set_factory(Engine e, Factory f) { factories_[e] = std::move(f); }
  bool has_factory(Engine e) const { return factories_.count(e) > 0; }
  // Drops what was prepared for `g` (it will not run again).
  void forget(const Graph& g);
  // Drops everything prepared on `e` (a large model's engine that has done its part).
  void forget(Engine e);
  // Drops everything prepared.
  void clear() { entries_.clear(); }
  const EngineOptions& options() const { return opts_; }

 private:
  struct Entry {
    Graph graph;
    Engine engine;
    std::unique_ptr<Prepared> prepared;  // null: cannot run there, see why
    std::string why;
  };
  EngineOptions opts_;
  std::map<Engine, Factory> factories_;
  std::vector<Entry> entries_;
};

// How `g` is prepared on `e` without an Engines (throws Error saying why it cannot).
std::unique_ptr<Prepared> prepare(const Graph& g, Engine e, const EngineOptions& opts);

}  // namespace isomer
