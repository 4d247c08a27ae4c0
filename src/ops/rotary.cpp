// ONNX RotaryEmbedding (opset 23 on): shape rule and float reference semantics;
// the rotation itself is stated once, in kernels/rotary.h. Like Attention it has no
// field or symbolic semantics here, so rules and the e-graph treat it as opaque but
// known, and the runtime runs it as one row kernel instead of handing it to ONNX
// Runtime.
//
// Inputs: X ([B, H, S, head] or [B, S, hidden] with num_heads), cos_cache and
// sin_cache ([max_position, rot/2] with position_ids [B, S], else [B, S, rot/2]);
// a 1 in place of B or S broadcasts, as ONNX's reference implementation does.
// Attributes: interleaved (0), rotary_embedding_dim (0: head_size), num_heads.
#include "ops/rotary.h"

#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

kernels::RotaryShape rotary_shape(const Attributes& attrs, const std::vector<int64_t>& x,
                                  const std::vector<int64_t>& cos, const std::vector<int64_t>* positions) {
  kernels::RotaryShape g;
  require_valid(x.size() == 3 || x.size() == 4, "RotaryEmbedding input " + to_string(x) + " must be 3-D or 4-D");
  g.batch = x[0];
  g.interleaved = attrs.get_int("interleaved", 0) != 0;
  g.positions = positions != nullptr;
  if (x.size() == 4) {
    g.heads_first = true;
    g.heads = x[1], g.seq = x[2], g.head = x[3];
  } else {
    const int64_t heads = attrs.get_int("num_heads", 0);
    require_valid(heads > 0 && x[2] % heads == 0,
                  "RotaryEmbedding on 3-D input " + to_string(x) + " needs num_heads dividing its hidden size");
    g.heads = heads, g.seq = x[1], g.head = x[2] / heads;
  }
  const int64_t dim = attrs.get_int("rotary_embedding_dim", 0);
  g.rot = dim == 0 ? g.head : dim;
  require_valid(g.rot > 0 && g.rot % 2 == 0 && g.rot <= g.head,
                "RotaryEmbedding rotary_embedding_dim " + std::to_string(g.rot) + " must be even and at most the head size " +
                    std::to_string(g.head));
  const size_t cache_rank = positions ? 2 : 3;
  require_valid(cos.size() == cache_rank && cos.back() == g.rot / 2,
                "RotaryEmbedding cos_cache " + to_string(cos) + " must be " + (positions ? "[max_position, " : "[B, S, ") +
                    std::to_string(g.rot / 2) + "]");
  // The [B, S] grid of positions (or of cache rows), each extent B (S) or 1.
  const std::vector<int64_t> grid = positions ? *positions : std::vector<int64_t>{cos[0], cos[1]};
  require_valid(grid.size() == 2 && (grid[0] == g.batch || grid[0] == 1) && (grid[1] == g.seq || grid[1] == 1),
                std::string("RotaryEmbedding ") + (positions ? "position_ids " + to_string(grid) : "cos_cache " + to_string(cos)) +
                    " must be [B, S" + (positions ? "]" : ", rot/2]") + " (or 1 for B or S) for input " + to_string(x));
  g.grid_batch = grid[0], g.grid_seq = grid[1];
  g.cache_rows = positions ? cos[0] : g.grid_batch * g.grid_seq;
  return g;
}

namespace {

std::vector<TensorType> infer(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &cos = ctx.in(1), &sin = ctx.in(2);
  require_float(x, "RotaryEmbedding input");
  require_valid(cos.dtype == x.dtype && sin.dtype == x.dtype, "RotaryEmbedding caches must have the input's type");
  require_valid(cos.rank() == sin.rank(), "RotaryEmbedding cos_cache and sin_cache differ in rank");
  const bool positions = ctx.has_input(3);
  if (positions)
    require_valid(ctx.in(3).dtype == DType::Int64 && ctx.in(3).rank() == 2, "RotaryEmbedding position_ids must be int64 [B, S]");
  if (is_static(x.shape) && is_static(cos.shape) && (!positions || is_static(ctx.in(3).shape))) {
    const std::vector<int64_t> pos = positions ? static_dims(ctx.in(3).shape) : std::vector<int64_t>{};
    rotary_shape(ctx.attrs, static_dims(x.shape), static_dims(cos.shape), positions ? &pos : nullptr);
  }
  return {x};
}

std::vector<Tensor> eval(const EvalContext& ctx) {
  const Tensor &x = ctx.in(0), &cos = ctx.in(1), &sin = ctx.in(2);
  const bool positions = ctx.has_input(3);
  const kernels::RotaryShape g =
      rotary_shape(ctx.attrs, x.dims(), cos.dims(), positions ? &ctx.in(3).dims() : nullptr);
  require_valid(sin.dims() == cos.dims(), "RotaryEmbedding sin_cache " + to_string(sin.dims()) + " differs from cos_cache " +
                                              to_string(cos.dims()));
  std::vector<int64_t> pos;
  if (positions) pos = ctx.in(3).to_i64();
  const std::vector<double> xv = x.to_f64(), cv = cos.to_f64(), sv = sin.to_f64();
  std::vector<double> y(xv.size());
  const int64_t bad = kernels::rotary_rows(g, xv.data(), cv.data(), sv.data(), pos.data(), y.data(), 0, g.rows());
  require(bad < 0, "RotaryEmbedding position " + std::to_string(bad) + " is outside the caches' " +
                       std::to_string(g.cache_rows) + " rows");
  return {Tensor::from_f64(x.dtype(), x.dims(), y)};
}

}  // namespace

OpDef def_RotaryEmbedding() {
  OpDef d;
  d.name = "RotaryEmbedding";
  d.min_inputs = 3;
  d.max_inputs = 4;
  d.min_opset = 23;
  d.attributes = {{"interleaved", "int"}, {"rotary_embedding_dim", "int"}, {"num_heads", "int"}};
  d.infer = infer;
  d.eval = eval;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "interleaved", int64_t{0});
    set_default(a, "rotary_embedding_dim", int64_t{0});
    set_default(a, "num_heads", int64_t{0});
    return a;
  };
  d.lower = Lowering::Rotary;
  return d;
}

}  // namespace isomer
