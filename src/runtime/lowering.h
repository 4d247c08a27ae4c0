#pragma once
// The runtime's lowerings: how each operator of the table runs on isomer's CPU
// runtime. An operator's entry names its lowering (`OpDef::lower`, an
// isomer::Lowering); lowering_of maps the name to the function. Each returns false
// for an instance it has no fast path for (the reference kernel runs it then, and
// `isomer run --print-steps` marks that step).
#include <optional>

#include "ops/op.h"

namespace isomer::runtime {

class Compiler;
using LowerFn = bool (*)(Compiler& c, const Node& n);

// The function of a lowering; nullptr for Lowering::None.
LowerFn lowering_of(Lowering l);

// Contractions and their fused epilogues (lower_conv.cpp, lower_matmul.cpp).
bool lower_conv(Compiler& c, const Node& n);
// A constant-mode Pad of zeros along spatial axes only (rank 3-5, no negative
// amounts), which a convolution or pooling can take as its own padding: it reads
// `src` and pads `extra` more (begins, then ends, per spatial axis).
struct FoldedPad {
  const Node* pad = nullptr;
  Value src;
  std::vector<int64_t> extra;
};
std::optional<FoldedPad> zero_spatial_pad(Compiler& c, const Node& pad);
// lower_conv for `conv`, whose input is `pad`'s output, reading pad.src instead.
bool lower_conv_padded(Compiler& c, const Node& conv, const FoldedPad& pad);
bool lower_matmul(Compiler& c, const Node& n);
bool lower_gemm(Compiler& c, const Node& n);
// The factor of a Mul of a run-time tensor by a float scalar constant whose only
// consumer is a MatMul of two run-time operands (torch's decomposed
// scaled_dot_product_attention scales Q and K^T each by sqrt(scale)): that
// product applies it to its result, and the Mul gets no step of its own (its
// lowering waits for the MatMul, which takes it or asks for it). nullopt otherwise.
std::optional<float> matmul_operand_scale(Compiler& c, const Node& mul);
// oneDNN pooling, batch normalization, concatenation (lower_misc.cpp).
bool lower_pool(Compiler& c, const Node& n);
// A spatial ReduceMean/ReduceMax of a blocked value as global pooling (else false).
bool lower_spatial_reduce_as_pool(Compiler& c, const Node& n);
bool lower_pad(Compiler& c, const Node& n);
bool lower_batchnorm(Compiler& c, const Node& n);
bool lower_concat(Compiler& c, const Node& n);
// Views: no step at all (lower_views.cpp).
bool lower_identity(Compiler& c, const Node& n);
bool lower_reshape(Compiler& c, const Node& n);
// Folds the products and sums by a constant of one value per channel (axis 1) or
// one value (x*k, x/k, x+k, x-k) that read float32 `cur` (rank `rank`) one after
// another into weights w (oc rows) and bias b, when fusing; appends the nodes folded
// to `folded` and returns the value the last computes (`cur` when none).
Value fold_channel_affines(Compiler& c, Value cur, size_t rank, std::vector<double>& w, std::vector<double>& b,
                           int64_t oc, std::vector<const Node*>& folded);
bool lower_transpose(Compiler& c, const Node& n);
bool lower_slice(Compiler& c, const Node& n);
bool lower_split(Compiler& c, const Node& n);
bool lower_expand(Compiler& c, const Node& n);
// Fused pointwise kernels for every operator with an emit_pointwise hook
// (lower_pointwise.cpp).
bool lower_pointwise(Compiler& c, const Node& n);
// Native kernels along an axis and data movement (lower_native.cpp).
bool lower_softmax(Compiler& c, const Node& n);
bool lower_layernorm(Compiler& c, const Node& n);
// A normalization's per-column parameter: input i of n as `cols` floats (a constant
// float32 of cols entries, or of one broadcast); empty where the input is absent,
// nullopt where it is not such a constant.
std::optional<std::vector<float>> row_param(Compiler& c, const Node& n, size_t i, int64_t cols);
bool lower_reduce(Compiler& c, const Node& n);
bool lower_gather(Compiler& c, const Node& n);
bool lower_shape_of(Compiler& c, const Node& n);
bool lower_constant_of_shape(Compiler& c, const Node& n);
// Native kernels of the operators current exporters add (lower_more.cpp).
bool lower_arg_extreme(Compiler& c, const Node& n);  // ArgMax, ArgMin
bool lower_cumsum(Compiler& c, const Node& n);
bool lower_group_norm(Compiler& c, const Node& n);   // GroupNormalization, InstanceNormalization
// Reshape -> InstanceNormalization -> Reshape -> per-channel affine (PyTorch's
// GroupNorm) as one step, from its first Reshape (else false, nothing changed).
bool lower_reshaped_group_norm(Compiler& c, const Node& reshape);
bool lower_lrn(Compiler& c, const Node& n);          // LRN
bool lower_range(Compiler& c, const Node& n);
bool lower_tile(Compiler& c, const Node& n);
bool lower_trilu(Compiler& c, const Node& n);
bool lower_gather_elements(Compiler& c, const Node& n);
bool lower_gather_nd(Compiler& c, const Node& n);
// A Gather or GatherND of one matrix per index from a constant [E, P, Q] that only a
// MatMul reads (perhaps through a Transpose of its last two axes): the product over
// each expert's matrix packed once, the picked rows grouped by expert, as one step
// (lower_expert_matmul.cpp); false, having done nothing, where it does not apply.
bool lower_expert_matmul(Compiler& c, const Node& n);
bool lower_scatter_nd(Compiler& c, const Node& n);
// Einsum: one oneDNN matmul over views, or a view and a row reduction (lower_einsum.cpp).
bool lower_einsum(Compiler& c, const Node& n);
// Upsampling: ConvTranspose on oneDNN's deconvolution (lower_resample.cpp), Resize
// in its source's layout or on oneDNN's resampling where its rounding is ONNX's,
// else on isomer's own kernel (lower_resize.cpp), DepthToSpace and SpaceToDepth as
// one strided copy (lower_views.cpp).
bool lower_conv_transpose(Compiler& c, const Node& n);
bool lower_resize(Compiler& c, const Node& n);
bool lower_space_depth(Compiler& c, const Node& n);
// Fused μGraph regions: the generated kernel, checked and cached (lower_mugraph.cpp).
bool lower_mugraph(Compiler& c, const Node& n);
// LSTM, GRU and RNN: oneDNN's recurrent primitives for the default cells (lower_rnn.cpp).
bool lower_recurrent(Compiler& c, const Node& n);
// ONNX Attention: Q K^T and P V on isomer's batched GEMM, the scale, softcap, mask and
// causal frontier applied in the row softmax between them (lower_attention.cpp).
bool lower_attention(Compiler& c, const Node& n);
// Attention as exporters decompose it (MatMul, scale, mask, Softmax, MatMul), from
// its first MatMul, on the same step where that saves work (lower_attention_chain.cpp).
bool lower_attention_chain(Compiler& c, const Node& qk);
// ONNX RotaryEmbedding: kernels/rotary.h over dense operands (lower_rope.cpp).
bool lower_rotary_embedding(Compiler& c, const Node& n);
// Quantization (lower_quant.cpp): QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear on isomer's kernels (kernels/quant.h), the integer
// contractions on oneDNN's int8 primitives with int32 accumulation.
bool lower_quant(Compiler& c, const Node& n);
// Selection and placement by value or index (lower_select.cpp, kernels/select.h):
// TopK, ScatterElements, OneHot; GridSample on kernels/grid_sample.h.
bool lower_top_k(Compiler& c, const Node& n);
bool lower_scatter_elements(Compiler& c, const Node& n);
bool lower_one_hot(Compiler& c, const Node& n);
bool lower_grid_sample(Compiler& c, const Node& n);
// Col2Im (lower_select.cpp) on the kernel of ops/col2im.h.
bool lower_col2im(Compiler& c, const Node& n);
// DFT along one axis (lower_dft.cpp) on kernels/dft.h.
bool lower_dft(Compiler& c, const Node& n);
// STFT (lower_dft.cpp): its windowed frames as rows of one product (kernels/gemm.h).
bool lower_stft(Compiler& c, const Node& n);

}  // namespace isomer::runtime
