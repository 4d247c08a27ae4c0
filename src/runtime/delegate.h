#pragma once
// Operators isomer does not understand (opaque nodes) run on ONNX Runtime, one
// node at a time, while everything around them runs on isomer's runtime. Each
// opaque node becomes a one-node ONNX model (its NodeProto verbatim, constant
// inputs as initializers, the other inputs at their concrete shapes) loaded once
// into a helper process: the project's Python (find_python()) with onnxruntime,
// spoken to over a socket. A run sends the node's inputs and receives its outputs.
//
// The runtime plans buffers at compile time, so a delegated node's output types
// must follow from its input types (and constant inputs). ONNX Runtime tells
// them, by running the node on all-zero, all-one and distinct-valued inputs of
// the planned shapes (Debian's ONNX shape inference knows only the rank for some
// operators, Einsum among them); a node whose answers differ (NonZero, Unique,
// NonMaxSuppression) is not delegated, and every run checks the planned types
// again (DelegatedShapeError), so a shape that depends on data in a way the
// probes missed is an error, never a wrong result.
// Whatever cannot be delegated leaves the model to run on ONNX Runtime whole
// (`isomer run`) or unpriced (`isomer optimize`).
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace isomer::runtime {

class Compiler;

// A delegated node's outputs came back in other shapes than planned (they depend
// on the data in a way the probes did not show): the graph cannot run here.
struct DelegatedShapeError : Error {
  using Error::Error;
};

// The helper process. One per isomer process, started on first use, shared by
// every executable of the process; requests are serialized.
class OrtWorker {
 public:
  // The process's worker, started if needed; throws Error saying why ONNX Runtime
  // cannot be used (no interpreter, no onnxruntime module).
  static std::shared_ptr<OrtWorker> get();
  ~OrtWorker();
  OrtWorker(const OrtWorker&) = delete;
  OrtWorker& operator=(const OrtWorker&) = delete;

  const std::string& version() const { return version_; }
  // Loads a serialized ONNX model into a session of `threads` intra-op threads
  // (0 = ONNX Runtime's default) and runs it on all-zero and on all-one inputs of
  // the given types (its inputs in order): `probes` gets the output types of each
  // run that succeeded (the first must). Returns the model's handle; throws ONNX
  // Runtime's message if it refuses the model.
  int load(const std::string& model_bytes, int threads, const std::vector<TensorType>& inputs,
           std::vector<std::vector<TensorType>>* probes);

  struct Buffer {
    DType dtype;
    std::vector<int64_t> dims;
    char* data;    // the tensor's bytes, row-major
    size_t bytes;
  };
  // Runs model `id` on `inputs` (in the model's input order); its outputs must have
  // exactly the dtypes and dims of `outputs`, into whose buffers they are copied.
  void run(int id, const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs, const std::string& who);

 private:
  OrtWorker() = default;
  static std::shared_ptr<OrtWorker> start();
  void send(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs);
  std::string receive_header();
  void receive_exact(char* to, size_t n);
  [[noreturn]] void died(const std::string& doing);

  int fd_ = -1;
  int pid_ = -1;
  std::string log_path_;
  std::string version_;
  std::mutex mu_;  // one request at a time
};

// Lowers opaque node `n` to a step that runs it on ONNX Runtime; throws Error
// naming the node when it cannot be (see above).
void lower_delegated(Compiler& c, const Node& n);

}  // namespace isomer::runtime
