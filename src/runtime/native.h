#pragma once
// Steps that run isomer's own CPU kernels (src/kernels): the pointwise engine,
// copies, gathers, reductions, softmax and normalization, for what oneDNN has no
// primitive for, or only a reference implementation of.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/copy.h"
#include "kernels/pointwise.h"
#include "ops/nn_common.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

// Adds a step that calls fn with the data pointers of `reads`, then of `writes`,
// in order, on every run. The signature gets the thread count appended.
void add_native_step(Compiler& c, StepInfo info, std::vector<int> reads, std::vector<int> writes,
                     std::function<void(const std::vector<char*>& ptrs)> fn);

// A dense float32 input (reordered or copied if it is blocked or a view), or -1.
int dense_f32(Compiler& c, const Value& v);
// A new dense value for the node's output `k` (its concrete type).
int dense_output(Compiler& c, const Node& n, size_t k = 0);

// A scatter's (ScatterND, ScatterElements) reduction and its data, indices and
// updates made plain; nullopt where the native kernels do not take it (an unknown
// reduction, or one on data other than float32).
struct ScatterOperands {
  kernels::ScatterReduce reduce;
  int x, idx, upd;
};
std::optional<ScatterOperands> scatter_operands(Compiler& c, const Node& n);

// A pointwise operand or result for value `id`: its element strides seen from the
// iteration space `dims` (broadcast dims get stride 0). The value must not be
// blocked.
kernels::StridedRef strided_ref(Compiler& c, int id, const std::vector<int64_t>& dims);

// The elementwise nodes after value `v` (float32, of `dims`: a contraction's
// product being lowered) that can run as one epilogue on it: grown from v's
// consumers as a fused pointwise kernel is (a DAG, not only a chain), in
// topological order, ending in the one value the rest of the graph reads; v and
// every other value in it are read only inside. Empty if there is none.
std::vector<const Node*> plan_epilogue(Compiler& c, const Value& v, const std::vector<int64_t>& dims);

// RMS normalization as exporters decompose it, rooted at `n` (Pow(x, 2) or
// Mul(x, x)): ReduceMean over the last axis (keepdims), + eps, Sqrt, then
// Reciprocal and Mul by x (or Div of x), then perhaps a Mul by a constant weight
// per column; every value inside read only there. Lowered as one row kernel
// (kernels::normalize_rows, rms); false, having done nothing, where it does not
// match.
bool lower_rms_norm(Compiler& c, const Node& n);
// True if lower_rms_norm would take `n` (a pointwise group must leave it alone).
bool is_rms_norm_root(Compiler& c, const Node& n);
// LayerNormalization written out as exporters before opset 17 do (mean, centre, the
// RMS chain above, gamma, beta) as one normalization step, rooted at the mean of x;
// false, having done nothing, where it does not match.
bool lower_decomposed_layer_norm(Compiler& c, const Node& n);

// Rotary position embedding in its rotate-half form (lower_rope.cpp), reached from
// any of its Neg, Mul or Add nodes: one row kernel; false, having done nothing,
// where it does not match. is_rope_node: lower_rope would take `n` (a pointwise
// group must leave it alone).
bool lower_rope(Compiler& c, const Node& n);
bool is_rope_node(Compiler& c, const Node& n);

// Random operators the optimizer keeps opaque that the runtime runs itself, not on
// ONNX Runtime (lower_random.cpp: Dropout in training mode on float32 data).
// runs_natively: what the types tell; lower_random: false, having done nothing,
// where the node is not one after all.
bool runs_natively(const Node& n);
bool lower_random(Compiler& c, const Node& n);
// Vendor operators the runtime runs itself, not on ONNX Runtime (lower_vendor.cpp:
// com.microsoft's QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QGemm,
// SkipLayerNormalization and the Gelu forms); the same contract.
bool vendor_runs_natively(const Node& n);
bool lower_vendor(Compiler& c, const Node& n);
// com.microsoft Attention without past, rotary or causal mask (lower_vendor_attention.cpp).
bool ms_attention_applies(const Node& n);
bool lower_ms_attention(Compiler& c, const Node& n);

// The row-major strides of `dims`.
std::vector<int64_t> row_major(const std::vector<int64_t>& dims);

// oneDNN's data type for u8, s8 and s32 values (f32 otherwise).
dnnl::memory::data_type dnnl_int(DType t);
// The channels-last tag of a rank-3 to rank-5 tensor (nwc, nhwc, ndhwc): integer
// convolutions write their activations so.
dnnl::memory::format_tag channels_last(size_t rank);
// A step-local view of value `id` (row-major, any dtype) with oneDNN layout `md`.
int with_md(Compiler& c, int id, const std::vector<int64_t>& dims, const md_t& md);

// A convolution's output dims [batch, channels, spatial...] and oneDNN's strides,
// dilations (less one) and paddings, from the window's planned axes.
struct ConvGeometry {
  std::vector<int64_t> out;
  dims_t strides, dilations, pad_begin, pad_end;
};
ConvGeometry conv_geometry(int64_t batch, int64_t channels, const std::vector<ops::WindowAxis>& axes);
// The window over spatial extents `in` padded first by `extra` zeros (begins, then
// ends; empty: none), as axes over `in` itself: the extra padding moves into each
// axis's pad_begin and, through conv_geometry, its pad_end.
std::vector<ops::WindowAxis> plan_padded_window(const ops::Window& w, const std::vector<int64_t>& in,
                                                const std::vector<int64_t>& extra);

}  // namespace isomer::runtime
