#include "runtime/lowering.h"

#include "runtime/lower_quant.h"

namespace isomer::runtime {

namespace {
// A float contraction inside a QDQ group runs as one integer primitive
// (lower_qdq.cpp); any other takes its float lowering.
template <LowerFn Float>
bool qdq_or(Compiler& c, const Node& n) {
  return lower_qdq_group(c, n) || Float(c, n);
}
}  // namespace

LowerFn lowering_of(Lowering l) {
  switch (l) {
    case Lowering::None: return nullptr;
    case Lowering::ReferenceOnly: return nullptr;
    case Lowering::Pointwise: return lower_pointwise;
    case Lowering::Conv: return qdq_or<lower_conv>;
    case Lowering::MatMul: return qdq_or<lower_matmul>;
    case Lowering::Gemm: return qdq_or<lower_gemm>;
    case Lowering::Pool: return lower_pool;
    case Lowering::Pad: return lower_pad;
    case Lowering::BatchNorm: return lower_batchnorm;
    case Lowering::LayerNorm: return lower_layernorm;
    case Lowering::Softmax: return lower_softmax;
    case Lowering::Reduce: return lower_reduce;
    case Lowering::Concat: return lower_concat;
    case Lowering::Identity: return lower_identity;
    case Lowering::Reshape: return lower_reshape;
    case Lowering::Transpose: return lower_transpose;
    case Lowering::Slice: return lower_slice;
    case Lowering::Split: return lower_split;
    case Lowering::Expand: return lower_expand;
    case Lowering::Gather: return lower_gather;
    case Lowering::ShapeOf: return lower_shape_of;
    case Lowering::ConstantOfShape: return lower_constant_of_shape;
    case Lowering::ArgExtreme: return lower_arg_extreme;
    case Lowering::CumSum: return lower_cumsum;
    case Lowering::GroupNorm: return lower_group_norm;
    case Lowering::Lrn: return lower_lrn;
    case Lowering::Range: return lower_range;
    case Lowering::Tile: return lower_tile;
    case Lowering::Trilu: return lower_trilu;
    case Lowering::GatherElements: return lower_gather_elements;
    case Lowering::GatherND: return lower_gather_nd;
    case Lowering::ScatterND: return lower_scatter_nd;
    case Lowering::Einsum: return lower_einsum;
    case Lowering::MuGraph: return lower_mugraph;
    case Lowering::Recurrent: return lower_recurrent;
    case Lowering::ConvTranspose: return lower_conv_transpose;
    case Lowering::Resize: return lower_resize;
    case Lowering::SpaceDepth: return lower_space_depth;
    case Lowering::Attention: return lower_attention;
    case Lowering::Rotary: return lower_rotary_embedding;
    case Lowering::Quant: return lower_quant;
    case Lowering::TopK: return lower_top_k;
    case Lowering::ScatterElements: return lower_scatter_elements;
    case Lowering::OneHot: return lower_one_hot;
    case Lowering::GridSample: return lower_grid_sample;
    case Lowering::Dft: return lower_dft;
    case Lowering::Stft: return lower_stft;
    case Lowering::Col2Im: return lower_col2im;
  }
  return nullptr;
}

}  // namespace isomer::runtime
