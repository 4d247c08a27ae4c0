#pragma once
// Internals of the runtime shared by the compiler (compiler.cpp), the operator
// lowerings (lower_*.cpp) and the executable (executable.cpp).
#include <dnnl.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "kernels/gemm.h"
#include "ops/op.h"
#include "runtime/lowering.h"
#include "runtime/runtime.h"

namespace isomer::runtime {

using md_t = dnnl::memory::desc;
using dims_t = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// A tensor of the compiled graph.
struct RtValue {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  md_t md;                      // its layout; empty for types oneDNN lacks (always plain then)
  size_t bytes = 0;
  std::optional<Tensor> known;  // value known at compile time (constant or folded)
  std::shared_ptr<std::vector<char>> storage;  // bytes of a constant in `md` layout
  int alias_of = -1;            // a view of another value's buffer (Reshape, Transpose, ...)
  bool accumulated = false;     // a view written in place by a residual-add (sum) post-op
  // A view made only to present an operand to the one step created with it (a
  // 2-D reading of an N-D tensor): nothing reads it later, so it never blocks
  // accumulating into its buffer afterwards.
  bool step_local = false;
  // A view starts this many bytes into its root's buffer (Slice, Split parts).
  int64_t byte_offset = 0;
  // Element strides of a value without a oneDNN md (types oneDNN lacks); empty
  // means row-major. Values with an md keep their strides in it.
  std::vector<int64_t> strides;
  std::string name;
};

// A step of the compiled graph: a oneDNN primitive or a function.
struct RtStep {
  StepInfo info;
  std::optional<dnnl::primitive> prim;
  std::vector<std::pair<int, int>> args;  // oneDNN argument -> value id
  // Set instead of prim: makes the step's function once buffers are placed; it
  // receives the address of a value's data.
  std::function<std::function<void()>(const std::function<char*(int)>& data)> make_fn;
  std::vector<int> reads, writes;         // value ids
  int team = 0;  // the threads it runs on; 0: the run's (see Compiler::TeamScope)
};

// Maps a dtype to oneDNN's, or nullopt where oneDNN has no such type.
std::optional<dt> dnnl_type(DType t);
md_t plain_md(const std::vector<int64_t>& dims, dt type);
bool is_plain(const md_t& md, const std::vector<int64_t>& dims);
// Gives the axes of extent 1 (extents: the outer extents, blocks apart) the
// strides oneDNN's format tag for the order of the other axes gives them;
// `innermost` for one innermost (the inner blocks' size). Their strides address
// nothing, but oneDNN matches a layout to its fast kernels by every stride, and
// took its reference kernel for a channels-last view of batch 1 whose batch
// stride was the channels' (SwiftFormer's permuted BatchNorm input: 118 us for
// [1, 16, 32, 32], 4 us channels-last).
void unit_axis_strides(const std::vector<int64_t>& extents, std::vector<int64_t>& strides, int64_t innermost);
// `md` with its extent-1 axes' strides so (every value's layout is made so).
md_t canonical_unit_strides(const md_t& md);
// Dims, strides and blocking of a layout, for signatures: "1x64x56x56:nChw16c".
std::string describe_md(const md_t& md);
dims_t to_dims(const std::vector<int64_t>& v);

class Compiler;

// A view that no strides express: each of its dims may stand for several strided
// dims of `src`, outermost first (a Reshape merging a broadcast's repeat axis with
// a real one: torch's repeat_kv, grouped-query attention's K and V heads repeated
// for each query head). A product reads it in place (lower_matmul: the merged dim
// split again, the repeat a broadcast); anything else gets the dense copy that a
// Reshape of such a view made before (Compiler::id makes it on first use).
struct SplitView {
  int src = -1;  // the value it reads: a strided view (element strides relative to its start)
  std::vector<int64_t> dims;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> parts;  // per dim: (extent, element stride)
  // True where some dim has more than one part (else it is an ordinary view).
  bool split() const {
    for (const auto& p : parts)
      if (p.size() > 1) return true;
    return false;
  }
};

// FNV-1a: a hash that stays the same across builds (cost database signatures).
inline uint64_t stable_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// The name a step uses for node `n` (StepInfo::nodes): its first output's name.
inline std::string node_key(const Node& n) {
  for (const std::string& o : n.output_names())
    if (!o.empty()) return o;
  return n.name();
}

// A step computing node `n` alone.
inline StepInfo step_info(const Node& n, const std::string& kind, std::string signature, double flops = 0) {
  StepInfo i;
  i.kind = kind;
  i.label = n.name();
  i.ops = {n.op_type()};
  i.nodes = {node_key(n)};
  i.signature = std::move(signature);
  i.flops = flops;
  return i;
}

// True if every input and output of `n` is float32: what oneDNN's primitives take.
inline bool all_float32(const Node& n) {
  for (const Value& v : n.inputs())
    if (v.present() && v.type().dtype != DType::Float32) return false;
  for (const TensorType& t : n.output_types())
    if (t.dtype != DType::Float32) return false;
  return true;
}

// An activation oneDNN can apply as an eltwise primitive or post-op.
struct EltwiseSpec {
  dnnl::algorithm alg;
  float alpha = 0, beta = 0;
  std::string text() const;
};

class Compiler {
 public:
  Compiler(const Graph& g, const RuntimeOptions& opts, dnnl::engine eng);

  void run();  // lowers the whole graph

  // --- used by the lowerings ---
  const RuntimeOptions& opts() const { return opts_; }
  // The threads the steps added now run on: the run's, or a TeamScope's team.
  int threads() const { return team_ > 0 ? team_ : opts_.threads; }
  // While one lives, the steps added run on `team` threads (where that is fewer
  // than the run's), and oneDNN plans the primitives made meanwhile for that many:
  // it fixes a primitive's thread count when it plans it.
  class TeamScope {
   public:
    TeamScope(Compiler& c, int team);
    ~TeamScope();
    TeamScope(const TeamScope&) = delete;
    TeamScope& operator=(const TeamScope&) = delete;

   private:
    Compiler& c_;
    int saved_;
  };
  const Graph& graph() const { return g_; }
  dnnl::engine& engine() { return eng_; }
  // The value id of an isomer value (lowering its producer first if needed).
  int id(const Value& v);
  RtValue& val(int id) { return values_[id]; }
  const Tensor* known(const Value& v);  // compile-time data, or nullptr
  // Like known(), but never lowers anything: nullptr unless v is a constant or
  // an already lowered compile-time value.
  const Tensor* peek_known(const Value& v);
  // True if computing v needs a node whose lowering is under way (so lowering
  // v now would be circular).
  bool depends_on_pending(const Value& v);
  // (A split view's dims and type are known without making its copy.)
  const std::vector<int64_t>& dims(const Value& v) {
    const SplitView* s = split_view(v);
    return s ? s->dims : val(id(v)).dims;
  }
  // The node's output types with every dim concrete (lowers its inputs).
  std::vector<TensorType> concrete_types(const Node& n);
  // Claims a node for a fused kernel being planned (or releases it): no other
  // kernel may take it meanwhile, and depends_on_pending sees it as under way.
  void set_pending(const Node& n, bool pending) {
    if (pending) {
      claimed_.emplace(&n, in_progress_.count(&n) > 0);
      in_progress_.insert(&n);
      return;
    }
    auto it = claimed_.find(&n);
    if (it == claimed_.end()) return;
    if (!it->second) in_progress_.erase(&n);  // keep a lowering further up the stack under way
    claimed_.erase(it);
  }
  bool is_pending(const Node& n) const { return claimed_.count(&n) > 0; }
  // Neither lowered nor claimed: a lowering may take n into its own step (a node
  // it finds after the one it lowers). A claimed node is the planning kernel's:
  // taking it would leave the values between the taken nodes unbound, which that
  // kernel still reads ('... did not produce output 0').
  bool takeable(const Node& n) const { return !lowered(n) && !is_pending(n); }
  // Binds v to a view no strides express (see SplitView): nothing is computed
  // until a consumer asks for v's value (id), or reads it in place (split_view).
  void defer_view(const Value& v, SplitView s) { split_views_[v] = std::move(s); }
  const SplitView* split_view(const Value& v) const {
    if (ids_.count(v)) return nullptr;
    auto it = split_views_.find(v);
    return it == split_views_.end() ? nullptr : &it->second;
  }
  // The id bound to v if its producer is lowered, else -1 (lowers nothing).
  int bound_id(const Value& v) const {
    auto it = ids_.find(v);
    return it == ids_.end() ? -1 : it->second;
  }
  DType dtype(const Value& v) {
    const SplitView* s = split_view(v);
    return val(s ? s->src : id(v)).dtype;
  }
  // The node's consumers: (node, input index); and whether v is a graph output.
  const std::vector<std::pair<const Node*, size_t>>& consumers(const Value& v);
  // True if every reader of v has run by now: is lowered, or is one of `within`
  // (the nodes of the step being made). A lowered node whose output is still
  // deferred reads v when that output's own readers are lowered: a concatenation
  // only 1x1 convolutions read (each reads the parts), a view no strides express
  // (made when a consumer asks for it).
  bool all_read(const Value& v, const std::function<bool(const Node*)>& within);
  bool is_output(const Value& v) const;
  // The single consumer of v if v has exactly one and is no graph output.
  const Node* sole_consumer(const Value& v);
  bool lowered(const Node& n) const { return done_.count(&n) > 0; }
  // Lowers the node computing v unless it is lowered or deferred (a view it makes
  // may stay a split view, which id() would copy): for a kernel reading v in place.
  void lower_producer(const Value& v) {
    const Node& n = *v.node;
    if ((n.kind() == NodeKind::Op || n.kind() == NodeKind::Opaque) && !deferred_.count(&n)) lower_node(n);
  }

  // New intermediate value of the given layout; returns its id.
  int new_value(DType dtype, std::vector<int64_t> dims, const md_t& md, const std::string& name);
  // Binds an isomer value to a value id (the node computing it is done).
  void bind(const Value& v, int id);
  void mark_done(const Node& n) { done_.insert(&n); }
  // Value `id` in layout `md`: itself, or a reorder of it (a compile-time one for
  // constants). Reorders are shared between consumers.
  int as_layout(int id, const md_t& md, bool boundary = false);
  // Value `id` as a dense row-major buffer: itself, or a copy made by a step
  // (a oneDNN reorder for float32, the native strided copy for other types).
  // True for an unblocked view with a dim of extent > 1 and stride 0.
  bool broadcast_view(int id) const;
  int as_plain(int id, bool boundary = false);
  // Drops the shared reorder of `id` into `md` (its buffer is about to be overwritten).
  void forget_layout(int id, const md_t& md) { layout_cache_.erase({id, describe_md(md)}); }
  // The int32 copy of an integer scalar `id` (a run-time zero point, which oneDNN
  // reads as s32), shared by its readers; -1 until set_widened records one.
  int widened(int id) const {
    auto it = widened_.find(id);
    return it == widened_.end() ? -1 : it->second;
  }
  void set_widened(int id, int s32) { widened_[id] = s32; }
  // Makes value `id` (a buffer of its own, written by steps already made) a view
  // starting `byte_offset` bytes into `root`'s buffer, so that its producer writes
  // it in place (a part of a concatenation); its own views follow. False, and
  // nothing changes, when `id` is not such a value.
  bool retarget(int id, int root, int64_t byte_offset);
  // True if a step writes value `id` or a view of it (it has contents).
  bool has_writer(int id) const;
  // All of `ids` or none (a part can appear twice).
  bool retarget_all(const std::vector<int>& ids, int root, const std::vector<int64_t>& byte_offsets);
  // A fresh copy of value `id` (same layout), made by a step.
  int copy_of(int id);
  // A dense row-major copy of value `id` (any dtype, any strides), made by a
  // native step.
  int copy_strided(int id, const std::string& name);
  bool is_input(int id) const { return std::find(input_ids_.begin(), input_ids_.end(), id) != input_ids_.end(); }
  // True if some value views `root`'s buffer other than through in-place accumulation.
  bool has_views(int root) const {
    for (const RtValue& v : values_)
      if (v.alias_of == root && !v.accumulated && !v.step_local) return true;
    return false;
  }
  // A value with the same buffer and a different view (dims and md).
  int alias(int id, std::vector<int64_t> dims, const md_t& md, const std::string& name);
  // A strided view of value `id`'s buffer (any dtype): element (i0, i1, ...) at
  // byte_offset + extra_bytes + sum(i_k strides[k]) elements; strides may be 0.
  int view(int id, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t extra_bytes, const std::string& name);
  // Element strides of value `id` when it is not blocked (plain, strided or a
  // view); nullopt for a blocked oneDNN layout.
  std::optional<std::vector<int64_t>> strides_of(int id) const;
  // True if value `id` is row-major and dense (ignoring extent-1 dims).
  bool is_dense(int id) const;
  // A constant as a value (plain layout, owned storage).
  int constant_value(const Tensor& t, const std::string& name);
  // Constant weights `b` ([K, N] row-major) packed for the native GEMM, once: every
  // contraction with the same constant (an RNN's time steps) shares one copy, so
  // the weights stay in cache across them.
  std::shared_ptr<const kernels::PackedB> packed_weights(const Tensor& b, int64_t K, int64_t N);
  // Gemm's constant B ([K, N] when not transposed) as MatMul's: transposed and
  // scaled by alpha once per constant, so that every Gemm of one weight shares one
  // tensor and therefore one packing (a fresh tensor per Gemm packed the weights of
  // an RNN once per time step, and no step found them in cache).
  const Tensor& gemm_weights(const Tensor& b, int64_t K, int64_t N, bool transposed, double alpha);
  // Adds a primitive step; `reads`/`writes` are taken from `args`.
  void add_primitive(const dnnl::primitive_desc& pd, std::vector<std::pair<int, int>> args, StepInfo info) {
    add_primitive(dnnl::primitive(pd), std::move(args), std::move(info));
  }
  void add_primitive(dnnl::primitive prim, std::vector<std::pair<int, int>> args, StepInfo info);
  void add_step(RtStep step) {
    step.team = team_;
    steps_.push_back(std::move(step));
  }
  // A Concat whose every consumer takes it apart again (1x1 convolutions, each
  // computed as a sum over the parts): its output is never materialized.
  void defer_concat(const Value& out, std::vector<Value> parts) { deferred_concats_[out] = std::move(parts); }
  const std::vector<Value>* deferred_concat(const Value& v) const {
    auto it = deferred_concats_.find(v);
    return it == deferred_concats_.end() ? nullptr : &it->second;
  }

  // Results for the executable.
  std::deque<RtValue> values_;  // a deque: references stay valid as values are added
  std::vector<RtStep> steps_;
  std::vector<int> input_ids_, output_ids_;
  std::vector<std::vector<int64_t>> input_dims_;

 private:
  void lower_node(const Node& n);
  void lower_fallback(const Node& n, const std::vector<TensorType>& types);
  bool try_fold(const Node& n, const std::vector<TensorType>& types);
  // Refuses `n` when one of its outputs (`types`) needs more bytes than this process
  // may have: no buffer that large can be made, and trying it fills memory first.
  void require_fits_memory(const Node& n, const std::vector<TensorType>& types) const;
  // Whether `n` reads or writes a tensor of no elements (`types`: its outputs').
  bool touches_empty(const Node& n, const std::vector<TensorType>& types);
  // Whether every one of `types` (a node's outputs) is static and of no elements.
  static bool all_empty(const std::vector<TensorType>& types);
  // `n`'s outputs as values that a step doing nothing writes.
  bool lower_nothing(const Node& n, const std::vector<TensorType>& types);

  const Graph& g_;
  RuntimeOptions opts_;
  int team_ = 0;  // see TeamScope
  dnnl::engine eng_;
  std::unordered_map<Value, int, ValueHash> ids_;
  std::unordered_map<Value, std::vector<std::pair<const Node*, size_t>>, ValueHash> consumers_;
  std::unordered_set<Value, ValueHash> outputs_;
  std::unordered_set<const Node*> done_;
  std::unordered_set<const Node*> in_progress_;
  // Nodes whose lowering waits for their consumer (a scalar factor a MatMul
  // applies itself): lowered only if something asks for their value.
  std::unordered_set<const Node*> deferred_;
  std::unordered_map<const Node*, bool> claimed_;  // planned into a kernel -> was already under way
  std::map<std::pair<int, std::string>, int> layout_cache_;
  std::unordered_map<int, int> widened_;
  // Keyed by the constant's storage, which the entry keeps alive (so the address
  // cannot be reused by another constant while the compiler runs).
  std::map<std::tuple<const char*, int64_t, int64_t>, std::pair<Tensor, std::shared_ptr<const kernels::PackedB>>>
      packed_;
  std::map<std::tuple<const char*, bool, double>, std::pair<Tensor, Tensor>> gemm_weights_;  // source kept alive
  std::vector<std::pair<const Node*, size_t>> no_consumers_;
  std::unordered_map<Value, std::vector<Value>, ValueHash> deferred_concats_;
  std::unordered_map<Value, SplitView, ValueHash> split_views_;
};

}  // namespace isomer::runtime
