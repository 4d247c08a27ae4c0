#pragma once
// The extents a model's open input dims (ONNX dim_params, dynamic axes) take where the
// model is run or timed, and the model specialised to them.
//
// isomer's runtime fuses (RMSNorm, rotary embeddings, attention, grouped-query views,
// convolution post-ops) where shapes are static, and the import folds the shape
// arithmetic of a dynamic export only when the dims are known. So wherever a model
// runs at known extents (the user's inputs, or drawn ones), it runs imported again
// with its open input dims fixed to them, as --input-shape fixes them.
//
// Drawn inputs give an open dim an extent by what its name says (the export's own
// example extents are not in the file; --input-shape overrides any of them):
//   - a batch ("batch", "batch_size", "N", "B", "bs"):            1
//   - a sequence or time axis ("seq", "sequence_length", "len",
//     "tokens", "time", "frames", "steps", "positions"):         64 (a short prefill)
//   - an image side ("height", "width", "H", "W"):              224
// A name that says none of these (dynamo's "s0", "s33", TorchScript's
// "input_ids_dynamic_axes_1") takes its role from the first node that uses it:
//   - the last axis of token ids a Gather reads from an embedding table: 64
//   - the rows of a MatMul over [..., rows, hidden], hidden static:       64
//   - the sequence axis of an LSTM, GRU or RNN:                           64
//   - a Conv's spatial axes: 2-D 224 x 224; 1-D 64; 3-D 16 x 112 x 112
//   - anything else (a batch, a dim no such node reads):                   1
// except that an integer input's dim no name or use tells takes the extent of the same
// axis of another integer input of its rank: an attention mask [s6, s81] beside token
// ids [s33, s50] draws s81 = s50's 64.
// An expression dim ("s0 + 1") follows from the names it uses. A model that does not
// import with its open dims at these (a position table shorter than 64 rows) is drawn
// with them all 1.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace isomer {

// The extent drawn inputs give an open dim named `name` (the rule above), 1 where
// the name does not say; extent_by_name: nullopt there.
int64_t drawn_extent(std::string_view name);
std::optional<int64_t> extent_by_name(std::string_view name);

// The extents that the nodes of `g` give the open dims they read (the rule above,
// by use), for dims with a plain name.
std::map<std::string, int64_t> extents_by_use(const Graph& g);

// `bound`, with the extents of inputs' default values (onnx_io.h's input_defaults),
// and the drawn extent of its name, else of its use (or 1, without `by_name`), for
// every open input dim of `g` it leaves unbound. A model that refuses the named extents (a
// position table shorter than 64 rows) is drawn with them all 1.
std::map<std::string, int64_t> drawn_bindings(const Graph& g, std::map<std::string, int64_t> bound = {},
                                              bool by_name = true);

// drawn_bindings by name where `g` imports with its open dims fixed at them
// (with_input_shapes), else with them all 1.
std::map<std::string, int64_t> importable_drawn_bindings(const Graph& g, const std::map<std::string, int64_t>& bound = {});

// Input name -> full dims, for each input of `g` with an open dim: at the extents
// `bindings` give them (anonymous dims 1, as drawn inputs have them), or as `tensors`
// (one per graph input, in order) have them. What ImportOptions::input_shapes takes.
std::map<std::string, std::vector<int64_t>> open_input_shapes(const Graph& g,
                                                              const std::map<std::string, int64_t>& bindings);
std::map<std::string, std::vector<int64_t>> open_input_shapes(const Graph& g, const std::vector<Tensor>& tensors);

// "batch=1, seq=64": the bindings as the reports state them.
std::string extents_text(const std::map<std::string, int64_t>& bindings);

// `g` exported and imported again with the dims of its inputs fixed as `shapes`
// says; nullopt where `shapes` is empty, the fixed model does not import, cannot be
// serialized in one piece (past protobuf's 2 GB), or keeps more nodes opaque than `g`
// (the runtime would hand them to ONNX Runtime). Same inputs and outputs as `g`.
std::optional<Graph> with_input_shapes(const Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes);

// While one lives (on this thread), with_input_shapes gives a graph it fixed before
// (the same nodes, the same shapes) without exporting and importing it again: one
// `optimize` of a model with open dims fixed the model three times (for the drawn
// inputs, the check and the guard, the report) and its rewrite twice. Graphs of
// kLargeGraphBytes of weights or more are not kept: each fixed copy holds its own.
class FixedGraphs {
 public:
  FixedGraphs();
  ~FixedGraphs();
  FixedGraphs(const FixedGraphs&) = delete;
  FixedGraphs& operator=(const FixedGraphs&) = delete;
  // Exports and imports done by with_input_shapes within this scope, and answers kept.
  size_t fixed() const { return fixed_; }
  size_t reused() const { return reused_; }

 private:
  friend std::optional<Graph> with_input_shapes(const Graph&, const std::map<std::string, std::vector<int64_t>>&);
  struct Entry {
    Graph original;  // kept alive, so that no other graph's nodes take its addresses
    std::map<std::string, std::vector<int64_t>> shapes;
    std::optional<Graph> fixed;
  };
  std::vector<Entry> entries_;
  FixedGraphs* outer_ = nullptr;
  size_t fixed_ = 0, reused_ = 0;
};

}  // namespace isomer
