// Fusion: a constant affine step (BatchNormalization, a per-channel Add/Sub/Mul, a
// bias Add) after a Conv, MatMul or Gemm is absorbed into that operator's weights.
// The producer must have no other reader, or its work would be done twice.
// Constants are combined in double and stored in the producer's element type.
#include <cmath>

#include "ops/op.h"
#include "passes/rewrite.h"

namespace isomer::passes {

namespace {

// A Conv whose operands the fusions may rewrite.
struct ConvMatch {
  const Node* conv = nullptr;
  const Tensor* weight = nullptr;  // nullptr if W is not constant
  std::vector<double> bias;        // B as given, or zeros if the Conv has none
  int64_t channels = 0;            // output channels (axis 1 of the output)
  DType dtype = DType::Undefined;
};

// Output 0 of a float Conv whose bias, if any, is constant, with static output channels.
std::optional<ConvMatch> match_conv(const Value& v, bool need_constant_weight) {
  if (!is_op(v, "Conv")) return std::nullopt;
  const Node& conv = *v.node;
  const TensorType& out = conv.output_types()[0];
  if (!is_float(out.dtype) || out.rank() < 3 || !out.shape[1].is_static()) return std::nullopt;
  ConvMatch m{&conv, conv.inputs()[1].constant(), {}, out.shape[1].value, out.dtype};
  if (need_constant_weight && (!m.weight || m.weight->dtype() != out.dtype)) return std::nullopt;
  m.bias.assign(static_cast<size_t>(m.channels), 0.0);
  if (conv.inputs().size() > 2 && conv.inputs()[2].present()) {
    const Tensor* b = conv.inputs()[2].constant();
    if (!b || b->numel() != m.channels) return std::nullopt;
    m.bias = b->to_f64();
  }
  return m;
}

// W[m, ...] * scale[m] for a weight whose axis 0 is the output channel.
Tensor scale_rows(const Tensor& w, const std::vector<double>& scale) {
  std::vector<double> values = w.to_f64();
  const size_t per_row = values.size() / scale.size();
  for (size_t i = 0; i < values.size(); ++i) values[i] *= scale[i / per_row];
  return Tensor::from_f64(w.dtype(), w.dims(), values);
}

// W[..., n] * scale[n] for a weight whose last axis is the output channel.
Tensor scale_columns(const Tensor& w, const std::vector<double>& scale) {
  std::vector<double> values = w.to_f64();
  for (size_t i = 0; i < values.size(); ++i) values[i] *= scale[i % scale.size()];
  return Tensor::from_f64(w.dtype(), w.dims(), values);
}

Value conv_with(const MatchContext& ctx, const ConvMatch& m, const Value& weight, const std::vector<double>& bias) {
  GraphBuilder& b = ctx.builder;
  Value bias_value = b.constant(Tensor::from_f64(m.dtype, {m.channels}, bias));
  return b.op1("Conv", {m.conv->inputs()[0], weight, bias_value}, m.conv->attrs(), m.conv->name());
}

// BatchNormalization in inference form with constant per-channel parameters:
// y = x * k + shift, k = scale / sqrt(var + eps), shift = beta - mean * k.
struct AffineBN {
  std::vector<double> k, shift;
};

std::optional<AffineBN> match_inference_bn(const MatchContext& ctx, int64_t channels) {
  const Node& bn = ctx.node;
  if (bn.op_type() != "BatchNormalization" || bn.num_outputs() != 1) return std::nullopt;
  if (bn.attrs().get_int("training_mode", 0) != 0 || ctx.in.size() != 5) return std::nullopt;
  std::vector<double> params[4];  // scale, beta, mean, var
  for (size_t i = 0; i < 4; ++i) {
    const Tensor* t = ctx.in[i + 1].constant();
    if (!t || !is_float(t->dtype()) || t->rank() != 1 || t->numel() != channels) return std::nullopt;
    params[i] = t->to_f64();
  }
  const double eps = bn.attrs().get_float("epsilon", 1e-5);
  AffineBN a;
  for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
    a.k.push_back(params[0][c] / std::sqrt(params[3][c] + eps));
    a.shift.push_back(params[1][c] - params[2][c] * a.k.back());
  }
  return a;
}

// Conv(x, W, B) -> BN(s, beta, m, v) => Conv(x, W*k, (B-m)*k + beta), k = s/sqrt(v+eps)
Replacement fuse_conv_batchnorm(const MatchContext& ctx) {
  if (ctx.node.op_type() != "BatchNormalization" || ctx.input_uses(0) != 1) return {};
  std::optional<ConvMatch> conv = match_conv(ctx.in[0], /*need_constant_weight=*/true);
  if (!conv) return {};
  std::optional<AffineBN> bn = match_inference_bn(ctx, conv->channels);
  if (!bn) return {};
  std::vector<double> bias(conv->bias.size());
  for (size_t c = 0; c < bias.size(); ++c) bias[c] = conv->bias[c] * bn->k[c] + bn->shift[c];
  Value weight = ctx.builder.constant(scale_rows(*conv->weight, bn->k));
  return {conv_with(ctx, *conv, weight, bias)};
}

// A float 2-D MatMul(A, W) with constant W, or a Gemm with constant B and (if any)
// constant C, seen as alpha * op(A) op(B) + beta * C with N output columns.
struct GemmMatch {
  const Node* node = nullptr;
  const Tensor* b = nullptr;  // constant second operand
  const Tensor* c = nullptr;  // constant C, or nullptr
  bool trans_b = false;
  int64_t columns = 0;
  DType dtype = DType::Undefined;
};

std::optional<GemmMatch> match_gemm_constant_b(const Value& v) {
  const bool matmul = is_op(v, "MatMul");
  if (!matmul && !is_op(v, "Gemm")) return std::nullopt;
  const Node& n = *v.node;
  const TensorType& out = n.output_types()[0];
  if (!is_float(out.dtype) || out.rank() != 2 || !out.shape[1].is_static()) return std::nullopt;
  if (matmul && n.inputs()[0].type().rank() != 2) return std::nullopt;
  GemmMatch m{&n, n.inputs()[1].constant(), nullptr, false, out.shape[1].value, out.dtype};
  if (!m.b || m.b->rank() != 2 || m.b->dtype() != out.dtype) return std::nullopt;
  if (!matmul) {
    m.trans_b = n.attrs().get_int("transB", 0) != 0;
    if (n.inputs().size() > 2 && n.inputs()[2].present()) {
      m.c = n.inputs()[2].constant();
      if (!m.c || m.c->rank() > 2) return std::nullopt;
    }
  }
  return m;
}

// Gemm(A, B, C) -> BN(s, beta, m, v) => Gemm(A, B*k, (beta_g*C)*k + beta - m*k)   [k per column]
// (also MatMul(A, W) -> BN, as Gemm with no C)
Replacement fuse_gemm_batchnorm(const MatchContext& ctx) {
  if (ctx.node.op_type() != "BatchNormalization" || ctx.input_uses(0) != 1) return {};
  std::optional<GemmMatch> gemm = match_gemm_constant_b(ctx.in[0]);
  if (!gemm) return {};
  std::optional<AffineBN> bn = match_inference_bn(ctx, gemm->columns);
  if (!bn) return {};
  const Node& g = *gemm->node;
  const int64_t n_cols = gemm->columns;
  // New C: the old one (times beta_g) broadcast against [N], scaled and shifted per column.
  std::vector<int64_t> c_dims{n_cols};
  std::vector<double> c_old;
  double beta_g = 1;
  if (gemm->c) {
    c_dims = broadcast_dims(gemm->c->dims(), {n_cols});
    c_old = gemm->c->to_f64();
    beta_g = g.attrs().get_float("beta", 1.0);
  }
  std::vector<double> c_new(static_cast<size_t>(num_elements(c_dims)));
  for (size_t i = 0; i < c_new.size(); ++i) {
    const size_t col = i % static_cast<size_t>(n_cols);
    double c = 0;
    if (gemm->c) {
      const auto& d = gemm->c->dims();  // rank <= 2, broadcast to c_dims
      const size_t row = i / static_cast<size_t>(n_cols);
      const size_t cols_c = d.empty() ? 1 : static_cast<size_t>(d.back());
      const size_t rows_c = d.size() < 2 ? 1 : static_cast<size_t>(d[0]);
      c = c_old[(rows_c == 1 ? 0 : row) * cols_c + (cols_c == 1 ? 0 : col)];
    }
    c_new[i] = beta_g * c * bn->k[col] + bn->shift[col];
  }
  Tensor b_new = gemm->trans_b ? scale_rows(*gemm->b, bn->k) : scale_columns(*gemm->b, bn->k);
  Attributes attrs = g.op_type() == "Gemm" ? g.attrs() : Attributes{};
  attrs.erase("beta");
  GraphBuilder& b = ctx.builder;
  return {b.op1("Gemm",
                {g.inputs()[0], b.constant(std::move(b_new)), b.constant(Tensor::from_f64(gemm->dtype, c_dims, c_new))},
                attrs, g.name())};
}

// The Conv operand (by index) of a binary node whose other operand is a constant;
// `first_only` for Sub, where only conv - c keeps the conv's sign.
std::optional<size_t> conv_operand(const MatchContext& ctx, bool first_only) {
  if (ctx.in.size() != 2) return std::nullopt;
  for (size_t i = 0; i < (first_only ? 1u : 2u); ++i)
    if (is_op(ctx.in[i], "Conv") && ctx.in[1 - i].constant() && ctx.input_uses(i) == 1) return i;
  return std::nullopt;
}

// Conv(x, W, B) + c => Conv(x, W, B + c);  Conv(x, W, B) - c => Conv(x, W, B - c)   [c as [1,C,1,...]]
Replacement fold_conv_bias(const MatchContext& ctx) {
  const bool sub = ctx.node.op_type() == "Sub";
  if (!sub && ctx.node.op_type() != "Add") return {};
  std::optional<size_t> i = conv_operand(ctx, /*first_only=*/sub);
  if (!i) return {};
  std::optional<ConvMatch> conv = match_conv(ctx.in[*i], /*need_constant_weight=*/false);
  if (!conv || ctx.output_types()[0] != ctx.in[*i].type()) return {};
  std::optional<std::vector<double>> c =
      per_channel_values(*ctx.in[1 - *i].constant(), ctx.in[*i].type().rank(), conv->channels);
  if (!c) return {};
  std::vector<double> bias = conv->bias;
  for (size_t k = 0; k < bias.size(); ++k) bias[k] += sub ? -(*c)[k] : (*c)[k];
  return {conv_with(ctx, *conv, conv->conv->inputs()[1], bias)};
}

// Conv(x, W, B) * c => Conv(x, W*c, B*c)   [c per output channel, as [1,C,1,...]]
Replacement fold_conv_mul(const MatchContext& ctx) {
  if (ctx.node.op_type() != "Mul") return {};
  std::optional<size_t> i = conv_operand(ctx, /*first_only=*/false);
  if (!i) return {};
  std::optional<ConvMatch> conv = match_conv(ctx.in[*i], /*need_constant_weight=*/true);
  if (!conv || ctx.output_types()[0] != ctx.in[*i].type()) return {};
  std::optional<std::vector<double>> c =
      per_channel_values(*ctx.in[1 - *i].constant(), ctx.in[*i].type().rank(), conv->channels);
  if (!c) return {};
  std::vector<double> bias = conv->bias;
  for (size_t k = 0; k < bias.size(); ++k) bias[k] *= (*c)[k];
  Value weight = ctx.builder.constant(scale_rows(*conv->weight, *c));
  return {conv_with(ctx, *conv, weight, bias)};
}

// MatMul(A, W) + c => Gemm(A, W, c);  Gemm(A, B) + c => Gemm(A, B, c)   [A, W 2-D, W constant, c broadcasts to [M,N]]
// (and "- c" as "+ (-c)")
Replacement fold_gemm_bias(const MatchContext& ctx) {
  const bool sub = ctx.node.op_type() == "Sub";
  if ((!sub && ctx.node.op_type() != "Add") || ctx.in.size() != 2) return {};
  for (size_t i = 0; i < (sub ? 1u : 2u); ++i) {
    const Value& product = ctx.in[i];
    const Tensor* c = ctx.in[1 - i].constant();
    if (!c || c->rank() > 2 || ctx.input_uses(i) != 1 || ctx.output_types()[0] != product.type()) continue;
    const TensorType& t = product.type();
    if (!is_float(t.dtype) || t.rank() != 2 || c->dtype() != t.dtype) continue;
    const Node& n = *product.node;
    Attributes attrs;
    if (is_op(product, "MatMul")) {
      if (n.inputs()[0].type().rank() != 2 || !n.inputs()[1].constant() || n.inputs()[1].type().rank() != 2)
        continue;
    } else if (is_op(product, "Gemm")) {
      if (n.inputs().size() > 2) continue;  // already has a C
      attrs = n.attrs();
      attrs.erase("beta");
    } else {
      continue;
    }
    Tensor bias = *c;
    if (sub) {
      std::vector<double> negated = c->to_f64();
      for (double& x : negated) x = -x;
      bias = Tensor::from_f64(c->dtype(), c->dims(), negated);
    }
    GraphBuilder& b = ctx.builder;
    return {b.op1("Gemm", {n.inputs()[0], n.inputs()[1], b.constant(std::move(bias))}, attrs, n.name())};
  }
  return {};
}

}  // namespace

const std::vector<Rule>& fuse_rules() {
  static const std::vector<Rule> rules{
      {"fuse-conv-batchnorm", fuse_conv_batchnorm},
      {"fuse-gemm-batchnorm", fuse_gemm_batchnorm},
      {"fold-conv-bias", fold_conv_bias},
      {"fold-conv-mul", fold_conv_mul},
      {"fold-gemm-bias", fold_gemm_bias},
  };
  return rules;
}

}  // namespace isomer::passes
