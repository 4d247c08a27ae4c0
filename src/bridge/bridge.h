#pragma once
// The one bridge from isomer to ONNX Runtime. Everything that runs a model on ONNX
// Runtime goes through it: the runtime's delegation of operators isomer does not
// know (runtime/delegate.h), `isomer run --bench`'s comparison (cli/onnxruntime.h),
// the check (check/compare.h) and the never-slower guard (pipeline/guard.h).
//
// ONNX Runtime is reached through Python: one helper process per isomer process
// (the project's interpreter, find_python(), running bridge/ort_bridge.py, which
// the build embeds into the library), started on first use and spoken to over a
// socket; requests are serialized. The protocol is described in ort_bridge.py:
// load a model (bytes or a path) into a session with the given options, run it on
// named tensors, time it (every sample), free it. ONNX Runtime's errors come back
// as values and are thrown here as OrtError with its message; a helper that dies
// or cannot start is an Error naming the interpreter and its last log line.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "ir/tensor.h"

namespace isomer::bridge {

// A Python interpreter that should have onnxruntime: $ISOMER_PYTHON, else the
// project's virtual environment next to the source tree, else python3 on PATH.
std::string find_python();
// The last non-empty line of a file (a Python child's error, as a rule), or "".
std::string last_log_line(const std::string& path);

// ONNX Runtime refused a model or failed to run it; the message is its own.
struct OrtError : Error {
  using Error::Error;
};

struct SessionOptions {
  int threads = 0;                    // intra-op threads; 0 = ONNX Runtime's default
  std::string optimization = "all";   // graph optimizations: none, basic, extended, all
  bool spinning = true;               // false: idle threads sleep at once (delegation)
};

// A tensor in caller memory: inputs are read from it, outputs written into it.
struct Buffer {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  char* data = nullptr;  // row-major bytes
  size_t bytes = 0;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct Session {
  int id = -1;
  std::vector<std::string> input_names;
  std::vector<TensorType> input_types;  // dims -1 where the model leaves them open
  std::vector<std::string> output_names;
  // The outputs' types as ONNX Runtime infers them: an element type code (0 where
  // it has none isomer knows) and, where ranked, per dim an extent or -1 with the
  // symbol's name (or "" where the dim is open).
  struct StatedType {
    int elem_type = 0;
    bool ranked = false;
    std::vector<int64_t> dims;
    std::vector<std::string> symbols;
  };
  std::vector<StatedType> output_types;
  // With probe inputs: the output types of runs on all-zero, all-one and
  // distinct-valued inputs of those types (the runs that succeeded; the first must).
  std::vector<std::vector<TensorType>> probes;
};

class OrtBridge {
 public:
  // The process's helper, started if needed; throws Error saying why ONNX Runtime
  // cannot be used (no interpreter, no onnxruntime module). A failed start is not
  // retried: every later call gets the same reason.
  static std::shared_ptr<OrtBridge> shared();
  ~OrtBridge();
  OrtBridge(const OrtBridge&) = delete;
  OrtBridge& operator=(const OrtBridge&) = delete;

  const std::string& version() const { return version_; }  // onnxruntime.__version__

  // Loads a serialized model, or a model file (its external data found beside it).
  // `probe_inputs` (one per model input, in order): see Session::probes.
  Session load_bytes(const std::string& model, const SessionOptions& opts,
                     const std::vector<TensorType>* probe_inputs = nullptr);
  Session load_file(const std::string& path, const SessionOptions& opts);
  void free(int id);
  // The operators ONNX Runtime registers in `domain`, each with the opset it came in.
  std::vector<std::pair<std::string, int>> operators(const std::string& domain);

  // Runs session `id` on `inputs` (by name; every model input must be given) and
  // returns its outputs in the model's order.
  NamedTensors run(int id, const NamedTensors& inputs);
  // Runs session `id` on `inputs` (in the model's input order) straight into
  // `outputs`, which must match the outputs' dtypes and dims exactly. Returns ""
  // or what did not match (nothing is written into a buffer that does not match).
  std::string run_into(int id, const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs);
  // Milliseconds of each of `repeats` runs after `warmup` untimed runs, timed in
  // the helper around the session's run (no transfer counted): on the wall clock, or
  // with `processor_clock` in processor time (the calling thread's at 1 intra-op
  // thread, else the helper process's). `clock`, if given, gets the clock read:
  // "wall", "thread" or "process".
  std::vector<double> time(int id, const NamedTensors& inputs, int warmup, int repeats, bool processor_clock = false,
                           std::string* clock = nullptr);

 private:
  OrtBridge() = default;
  static std::shared_ptr<OrtBridge> start();
  std::string request(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs);
  Session loaded(const std::string& reply);
  void send(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs);
  std::string receive_header();
  void receive_exact(char* to, size_t n);
  void wait_for_answer();  // kills the helper past a run limit's deadline
  [[noreturn]] void died(const std::string& doing);

  // run_into's last request header for a session, and its reply header parsed.
  struct RunHeaders {
    std::vector<Buffer> inputs;  // their types (no data)
    std::string request, reply;
    std::vector<size_t> lens;
    std::vector<int> dtypes;
    std::vector<std::vector<int64_t>> dims;
  };
  std::unordered_map<int, RunHeaders> run_headers_;
  int fd_ = -1;
  int pid_ = -1;
  std::string log_path_;
  std::string version_;
  std::mutex mu_;  // one request at a time
};

}  // namespace isomer::bridge
