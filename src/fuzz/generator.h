#pragma once
// The random graph generator behind fuzz::random_graph() (random_graph.h); private
// to src/fuzz. generator.cpp holds its core: randomness, constants, the graph's
// inputs and outputs, node construction and the dispatch over recipes, with the
// recipes for single operators; generator_recipes.cpp holds the recipes for
// operator families (the operators current exporters add, convolution and
// upsampling, recurrent nets, attention, fused regions). The same seed and options
// give the same graph: every random choice is drawn from rng_ in program order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/random_graph.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"

namespace isomer::fuzz::detail {

constexpr int64_t kMaxElements = 2048;  // keeps evaluation of a fuzz model in the millisecond range

using Dims = std::vector<int64_t>;

inline Dims dims_of(const Value& v) { return static_dims(v.type().shape, "fuzz value"); }

inline int64_t numel(const Dims& d) { return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>()); }

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& opts) : rng_(seed), opts_(opts) {}

  Graph run() {
    make_inputs();
    size_t made = 0;
    for (size_t attempt = 0; made < opts_.max_ops && attempt < opts_.max_ops * 8; ++attempt)
      if (try_recipe()) ++made;
    return finish();
  }

 private:
  std::mt19937_64 rng_;
  RandomGraphOptions opts_;
  GraphBuilder b_{/*dedupe=*/false};
  std::vector<Value> floats_, ints_, bools_;
  uint64_t next_uid_ = 1;
  int next_input_ = 0;

  // --- randomness -----------------------------------------------------------------
  // A choice among none (a rank-0 value has no axis) abandons the recipe.
  int64_t rnd(int64_t n) {
    if (n <= 0) throw Error("nothing to choose from");
    return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n));
  }
  bool coin(int percent = 50) { return rnd(100) < percent; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(rng_() >> 11) * 0x1.0p-53); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(rnd(static_cast<int64_t>(v.size())))]; }
  // Recent values are picked more often, so chains get deep.
  Value pick_float() {
    size_t n = floats_.size();
    if (coin(60)) return floats_[n - 1 - static_cast<size_t>(rnd(std::min<int64_t>(3, static_cast<int64_t>(n))))];
    return pick(floats_);
  }
  Value pick_float_rank(int64_t rank);

  // --- constants --------------------------------------------------------------------
  Value fconst(const Dims& dims, double lo = -1, double hi = 1);
  Value scalar(double x) { return b_.constant(Tensor::scalar_f32(static_cast<float>(x))); }
  Value iconst(const Dims& values) { return b_.constant(Tensor::vector_i64(values)); }

  // --- graph interface ----------------------------------------------------------------
  Dims random_dims(int64_t rank);
  Value new_input(DType t, const Dims& dims);
  void make_inputs();
  // Outputs: the last value, then values nobody reads (so that little of what was
  // made is dead), then any others.
  Graph finish();

  // --- node construction ---------------------------------------------------------------
  std::vector<Value> op(std::string_view name, std::vector<Value> in, Attributes a = {}, size_t n = 0) {
    if (std::find(opts_.avoid_ops.begin(), opts_.avoid_ops.end(), name) != opts_.avoid_ops.end())
      throw Error("operator avoided");
    std::vector<Value> out = b_.op(name, std::move(in), std::move(a), n);
    for (const Value& v : out) require(numel(dims_of(v)) <= kMaxElements, "fuzz value too large");
    return out;
  }
  Value op1(std::string_view name, std::vector<Value> in, Attributes a = {}) { return op(name, std::move(in), a)[0]; }
  // A strictly positive value (>= 0.5) made from x: the domain of Log, Sqrt, Div, Pow.
  Value positive(const Value& x) { return op1("Add", {op1("Abs", {x}), scalar(0.5)}); }
  // A second operand that broadcasts against x.
  Value partner(const Value& x);
  // An opaque Asinh or Atan node of x (evaluate_with_opaque computes it).
  Value opaque(const Value& x);

  // --- recipe dispatch ----------------------------------------------------------------
  // Applies one random recipe; false if it was abandoned (the shape rules refused).
  bool try_recipe();

  // One random recipe from x, a recently made float value: the values it made.
  std::vector<Value> recipe();

  // --- recipes for operator families (generator_recipes.cpp) ---------------------------
  // Each builds one family's node(s) from x (d: x's dims), or throws Error to
  // abandon the recipe.
  // The operators current exporters add:
  Value unary_more(const Value& x);
  Value binary_more(const Value& x);
  // A bool mask from comparisons and logic, used by a Where (attention masks).
  Value compare_and_select(const Value& x);
  Value reduce_more(const Value& x, const Dims& d);
  std::vector<Value> along_axis(const Value& x, const Dims& d);
  Value normalize_more(const Value& x, const Dims& d);
  Value place_elements(const Value& x, const Dims& d);
  Value einsum_or_range(const Value& x, const Dims& d);

  // LSTM, GRU or RNN over x read as [seq, batch, input] (or, with layout 1, [batch, seq, input]).
  Value recurrent(const Value& x, const Dims& d);
  // ONNX Attention with x as the queries: 4-D [B, heads, S, D] against one or as
  // many key/value heads, or 3-D [B, S, heads * D] with the heads dividing x's last
  // dim; sometimes causal, masked, softcapped or with a past.
  Value attention(const Value& x, const Dims& d);
  // ONNX RotaryEmbedding of x (4-D [B, heads, S, head] or 3-D with num_heads), caches
  // read at constant position_ids or given per token; sometimes interleaved or partial.
  Value rotary(const Value& x, const Dims& d);
  // x plus a value the quantization operators compute from constants.
  Value quantized(const Value& x);
  // A fused μGraph region (no kernel: its body's semantics run) around a small chain.
  Value fused(const Value& x);
  Value batchnorm(const Value& x);
  Value conv(const Value& x);
  // ConvTranspose, Resize or a pixel shuffle of an [N, C, H, W] value.
  Value upsample(const Value& x);
};

}  // namespace isomer::fuzz::detail
