#pragma once
// A model whose later nodes have shapes that depend on the data (detection
// post-processing: NonZero, a TopK whose k is computed, NonMaxSuppression) cannot
// be planned whole by the runtime, which fixes every buffer when it compiles.
// `isomer run` then splits it where the shapes stop being known: the head (every
// node whose inputs come from the head, the model's inputs or constants, and whose
// output shapes are static) runs on the isomer runtime, and the tail (the rest)
// runs on ONNX Runtime as one model, fed the model's inputs and the head's values
// it reads. The backbone of a detector is the head; its box decoding and
// suppression are the tail.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bridge/bridge.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer {

struct SplitModel {
  Graph head;                  // the model's inputs -> the values the tail reads and the outputs it makes
  std::string tail;            // serialized ONNX model: the model's inputs, then the head's values, by name
  std::vector<std::string> tail_outputs;  // the model's outputs the tail makes (the rest are the head's)
  // Per output of the model: where it comes from, the head's output of that index or,
  // at -1, the tail's of the same name.
  std::vector<int> from_head;
  size_t head_nodes = 0, tail_nodes = 0;  // operator nodes on each side
  std::string first_tail_node;            // describe() of the tail's first node: where the shapes stop
};

// `g` with its constant subgraphs evaluated and nothing else rewritten: the shape
// arithmetic an exporter writes on static dims (a detector's padding to a multiple of 32 from the
// image's Shape, through Cast, Div and Ceil) becomes constants, and the shapes it
// decides become static, so more of the model plans (or all of it). A node the import
// kept opaque because such an operand was computed (the RPN's TopK of a Faster R-CNN,
// its k from the anchors' count) is imported again once that operand is a constant.
Graph fold_constants_only(const Graph& g);

// The split of `g`, or nothing where the head would compute nothing (no operator
// node) or the tail would make none of the outputs (then nothing is data-dependent).
std::optional<SplitModel> split_at_dynamic_shapes(const Graph& g);

// A split made ready to run (`isomer run` and `isomer.run`): the head compiled for
// the isomer runtime, the tail loaded in ONNX Runtime with `threads` threads.
class SplitExecutable {
 public:
  // Nothing where `g` (constants folded) does not split or the head is not runnable;
  // throws Error where the head does not compile or the tail does not load.
  static std::unique_ptr<SplitExecutable> make(const Graph& g, const runtime::RuntimeOptions& ro, int threads);
  ~SplitExecutable();
  SplitExecutable(const SplitExecutable&) = delete;
  SplitExecutable& operator=(const SplitExecutable&) = delete;

  // The model's outputs, in its order; `head_out` and `feeds` (where given) get the
  // head's outputs and the tail's inputs, to time the two again.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, std::vector<Tensor>* head_out = nullptr,
                          bridge::NamedTensors* feeds = nullptr);

  const SplitModel& split() const { return split_; }
  runtime::Executable& head() { return *head_; }
  bridge::OrtBridge& onnxruntime() { return *ort_; }
  int tail_id() const { return tail_.id; }

 private:
  SplitExecutable() = default;
  Graph model_;
  SplitModel split_;
  std::unique_ptr<runtime::Executable> head_;
  std::shared_ptr<bridge::OrtBridge> ort_;
  bridge::Session tail_;
};

}  // namespace isomer
