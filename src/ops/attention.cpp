// ONNX's Attention (scaled dot-product attention, what PyTorch exports
// F.scaled_dot_product_attention as at opset 23): shape rule and float reference
// semantics, in double precision. Like the recurrent operators it has no field or
// symbolic semantics (softmax is not polynomial), so rules and the e-graph treat
// it as opaque but known.
//
// Canonical form: opset 25's. Opset 24 added the input nonpad_kv_seqlen and 25
// the sliding window (left_window_size, right_window_size) and refused
// q_num_heads/kv_num_heads on 4-D inputs, which 23 and 24 ignore: the import hook
// drops them there, and the export hook refuses what an older opset cannot say.
//
// Semantics, per batch b, query head h (its key/value head h / (q_heads /
// kv_heads): grouped-query attention reads each KV head for a group of query heads):
//   K, V = concat(past, new) along the sequence (present_key, present_value)
//   s[i, j] = scale * q_i . k_j          (scale defaults to 1/sqrt(head size))
//   s = softcap * tanh(s / softcap)      (softcap > 0)
//   bias[i, j] = mask (bool: 0 or -inf; float: added; columns past a short mask's
//                end: -inf) + causal (-inf where j > i + offset) + window +
//                padding (-inf where j >= nonpad_kv_seqlen[b])
//   p = softmax_j(s + bias), a row whose bias is all -inf is zero
//   Y_i = sum_j p[i, j] v_j
// where offset = past length, or nonpad_kv_seqlen[b] - q_len with an external
// cache, else 0. qk_matmul_output is s before softcap (mode 0), after it (1),
// with the bias (2) or p (3).
#include "ops/attention.h"

#include <cmath>
#include <limits>

#include "ops/kernels.h"

namespace isomer {
using namespace ops;

AttentionAttrs attention_attrs(const Attributes& attrs) {
  AttentionAttrs a;
  const int64_t causal = attrs.get_int("is_causal", 0);
  require(causal == 0 || causal == 1, "is_causal must be 0 or 1, not " + std::to_string(causal));
  a.causal = causal == 1;
  a.q_heads = attrs.get_int("q_num_heads", 0);
  a.kv_heads = attrs.get_int("kv_num_heads", 0);
  require(a.q_heads >= 0 && a.kv_heads >= 0, "q_num_heads and kv_num_heads must be positive");
  a.qk_mode = attrs.get_int("qk_matmul_output_mode", 0);
  require(a.qk_mode >= 0 && a.qk_mode <= 3,
          "qk_matmul_output_mode must be 0, 1, 2 or 3, not " + std::to_string(a.qk_mode));
  a.has_scale = attrs.has("scale");
  if (a.has_scale) a.scale = attrs.get_float("scale");
  a.softcap = attrs.get_float("softcap", 0.0);
  require(a.softcap >= 0, "softcap must not be negative");
  a.left_window = attrs.get_int("left_window_size", -1);
  a.right_window = attrs.get_int("right_window_size", -1);
  require(a.left_window >= -1 && a.right_window >= -1, "left_window_size and right_window_size must be -1 or >= 0");
  if (attrs.has("softmax_precision")) {
    const int64_t p = attrs.get_int("softmax_precision");
    // FLOAT, FLOAT16, DOUBLE, BFLOAT16: the reference computes in double anyway.
    require(p == 1 || p == 10 || p == 11 || p == 16,
            "softmax_precision " + std::to_string(p) + " is not a floating-point type");
  }
  return a;
}

namespace {

std::string dim_text(const Dim& d) { return d.is_static() ? std::to_string(d.value) : "?"; }

// a and b must agree where both are known; the known one wins.
Dim unify(const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static())
    require(a.value == b.value, what + " (" + std::to_string(a.value) + " vs " + std::to_string(b.value) + ")");
  return a.is_static() ? a : b;
}

Dim div_exact(const Dim& d, int64_t k, const std::string& what) {
  if (!d.is_static()) return Dim::unknown();
  require(d.value % k == 0, what + ": " + std::to_string(d.value) + " is not a multiple of " + std::to_string(k));
  return Dim(d.value / k);
}

Dim plus(const Dim& a, const Dim& b) {
  return a.is_static() && b.is_static() ? Dim(a.value + b.value) : Dim::unknown();
}

// The 4-D geometry of the inputs, as dims that may be symbolic.
struct Geometry {
  bool rank3 = false;
  Dim batch, q_heads, kv_heads, q_len, kv_len, past = Dim(0), total, head, v_head;
};

Geometry geometry(const InferContext& ctx, const AttentionAttrs& a) {
  const TensorType &q = ctx.in(kAttnQ), &k = ctx.in(kAttnK), &v = ctx.in(kAttnV);
  for (const auto& [t, what] : {std::pair{&q, "Q"}, std::pair{&k, "K"}, std::pair{&v, "V"}})
    require(is_float(t->dtype), std::string(what) + " must be a float tensor");
  require(k.dtype == q.dtype, "K must have Q's type");
  require(q.rank() == 3 || q.rank() == 4,
          "Q must have rank 3 ([batch, seq, heads * head_size]) or 4 ([batch, heads, seq, head_size]), not " +
              std::to_string(q.rank()));
  require(k.rank() == q.rank() && v.rank() == q.rank(), "Q, K and V must have the same rank (" +
                                                            std::to_string(q.rank()) + ", " +
                                                            std::to_string(k.rank()) + ", " + std::to_string(v.rank()) + ")");
  Geometry g;
  g.rank3 = q.rank() == 3;
  g.batch = unify(unify(q.shape[0], k.shape[0], "Q and K have different batch sizes"), v.shape[0],
                  "Q and V have different batch sizes");
  if (g.rank3) {
    require(a.q_heads > 0 && a.kv_heads > 0, "3-D Q, K and V need the attributes q_num_heads and kv_num_heads");
    g.q_heads = a.q_heads;
    g.kv_heads = a.kv_heads;
    g.q_len = q.shape[1];
    g.kv_len = unify(k.shape[1], v.shape[1], "K and V have different sequence lengths");
    g.head = div_exact(q.shape[2], a.q_heads, "Q's hidden size does not split into q_num_heads heads");
    g.head = unify(g.head, div_exact(k.shape[2], a.kv_heads, "K's hidden size does not split into kv_num_heads heads"),
                   "Q and K have different head sizes");
    g.v_head = div_exact(v.shape[2], a.kv_heads, "V's hidden size does not split into kv_num_heads heads");
  } else {
    g.q_heads = q.shape[1];
    g.kv_heads = unify(k.shape[1], v.shape[1], "K and V have different numbers of heads");
    g.q_len = q.shape[2];
    g.kv_len = unify(k.shape[2], v.shape[2], "K and V have different sequence lengths");
    g.head = unify(q.shape[3], k.shape[3], "Q and K have different head sizes");
    g.v_head = v.shape[3];
  }
  if (g.q_heads.is_static() && g.kv_heads.is_static())
    require(g.kv_heads.value > 0 && g.q_heads.value % g.kv_heads.value == 0,
            "the " + std::to_string(g.q_heads.value) + " query heads are not a multiple of the " +
                std::to_string(g.kv_heads.value) + " key/value heads");

  const bool pk = ctx.has_input(kAttnPastKey), pv = ctx.has_input(kAttnPastValue);
  require(pk == pv, "past_key and past_value must be given together");
  if (pk) {
    const TensorType &tk = ctx.in(kAttnPastKey), &tv = ctx.in(kAttnPastValue);
    require(tk.dtype == q.dtype && tv.dtype == v.dtype, "past_key and past_value must have K's and V's types");
    require(tk.rank() == 4 && tv.rank() == 4, "past_key and past_value must have rank 4 ([batch, kv_heads, past, head_size])");
    unify(tk.shape[0], g.batch, "past_key's batch differs from Q's");
    unify(tv.shape[0], g.batch, "past_value's batch differs from Q's");
    unify(tk.shape[1], g.kv_heads, "past_key's heads differ from K's");
    unify(tv.shape[1], g.kv_heads, "past_value's heads differ from V's");
    g.past = unify(tk.shape[2], tv.shape[2], "past_key and past_value have different lengths");
    unify(tk.shape[3], g.head, "past_key's head size differs from K's");
    unify(tv.shape[3], g.v_head, "past_value's head size differs from V's");
  }
  g.total = plus(g.past, g.kv_len);
  if (ctx.has_input(kAttnNonpad)) {
    require(!pk, "nonpad_kv_seqlen cannot be combined with past_key and past_value");
    const TensorType& t = ctx.in(kAttnNonpad);
    require(t.dtype == DType::Int64 && t.rank() == 1, "nonpad_kv_seqlen must be an int64 [batch] tensor");
    unify(t.shape[0], g.batch, "nonpad_kv_seqlen's length differs from the batch");
  }
  if (ctx.has_input(kAttnMask)) {
    const TensorType& m = ctx.in(kAttnMask);
    require(m.dtype == DType::Bool || is_float(m.dtype), "attn_mask must be bool or float");
    require(m.rank() >= 1 && m.rank() <= 4,
            "attn_mask must have rank 1 to 4 (broadcast to [batch, q_heads, q_len, total_len]), not " +
                std::to_string(m.rank()));
    const Dim want[4] = {g.batch, g.q_heads, g.q_len, g.total};
    for (int64_t i = 0; i < m.rank(); ++i) {
      const Dim& d = m.shape[static_cast<size_t>(m.rank() - 1 - i)];
      const Dim& w = want[3 - i];
      if (!d.is_static() || !w.is_static()) continue;
      if (i == 0)
        require(d.value <= w.value, "attn_mask's last dim " + std::to_string(d.value) + " exceeds the " +
                                        std::to_string(w.value) + " keys");
      else
        require(d.value == 1 || d.value == w.value, "attn_mask " + to_string(m.shape) +
                                                        " does not broadcast to [batch, q_heads, q_len, total] = [" +
                                                        dim_text(g.batch) + ", " + dim_text(g.q_heads) + ", " +
                                                        dim_text(g.q_len) + ", " + dim_text(g.total) + "]");
    }
  }
  return g;
}

std::vector<TensorType> infer(const InferContext& ctx) {
  const AttentionAttrs a = attention_attrs(ctx.attrs);
  const Geometry g = geometry(ctx, a);
  const size_t outputs = ctx.num_outputs == 0 ? 1 : ctx.num_outputs;
  require(outputs <= 4, "Attention has 4 outputs, not " + std::to_string(outputs));
  const DType t = ctx.in(kAttnQ).dtype, tv = ctx.in(kAttnV).dtype;
  const Dim hv = g.q_heads.is_static() && g.v_head.is_static() ? Dim(g.q_heads.value * g.v_head.value) : Dim::unknown();
  std::vector<TensorType> out;
  out.push_back(g.rank3 ? TensorType{tv, Shape{g.batch, g.q_len, hv}} : TensorType{tv, Shape{g.batch, g.q_heads, g.q_len, g.v_head}});
  if (outputs > 1) out.push_back({t, Shape{g.batch, g.kv_heads, g.total, g.head}});
  if (outputs > 2) out.push_back({tv, Shape{g.batch, g.kv_heads, g.total, g.v_head}});
  if (outputs > 3) out.push_back({t, Shape{g.batch, g.q_heads, g.q_len, g.total}});
  return out;
}

// ---- reference semantics --------------------------------------------------------------

// A [B, heads, S, D] tensor read from its 4-D or 3-D form.
struct Heads {
  std::vector<double> data;
  int64_t heads = 0, len = 0, d = 0;
  bool rank3 = false;
  double at(int64_t b, int64_t h, int64_t s, int64_t i) const {
    return rank3 ? data[static_cast<size_t>(((b * len + s) * heads + h) * d + i)]
                 : data[static_cast<size_t>(((b * heads + h) * len + s) * d + i)];
  }
};

// concat(past, new) along the sequence, [B, heads, past + len, d].
std::vector<double> present(const std::vector<double>& past, const Heads& x, int64_t batch, int64_t p) {
  const int64_t t = p + x.len;
  std::vector<double> out(static_cast<size_t>(batch * x.heads * t * x.d));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < x.heads; ++h)
      for (int64_t s = 0; s < t; ++s)
        for (int64_t i = 0; i < x.d; ++i)
          out[static_cast<size_t>(((b * x.heads + h) * t + s) * x.d + i)] =
              s < p ? past[static_cast<size_t>(((b * x.heads + h) * p + s) * x.d + i)] : x.at(b, h, s - p, i);
  return out;
}

std::vector<Tensor> eval(const EvalContext& ctx) {
  const AttentionAttrs a = attention_attrs(ctx.attrs);
  const Tensor &q = ctx.in(kAttnQ), &k = ctx.in(kAttnK), &v = ctx.in(kAttnV);
  const bool rank3 = q.rank() == 3;
  const int64_t batch = q.dims()[0];
  Heads Q{q.to_f64(), 0, 0, 0, rank3}, K{k.to_f64(), 0, 0, 0, rank3}, V{v.to_f64(), 0, 0, 0, rank3};
  if (rank3) {
    Q.heads = a.q_heads, Q.len = q.dims()[1], Q.d = q.dims()[2] / a.q_heads;
    K.heads = a.kv_heads, K.len = k.dims()[1], K.d = k.dims()[2] / a.kv_heads;
    V.heads = a.kv_heads, V.len = v.dims()[1], V.d = v.dims()[2] / a.kv_heads;
  } else {
    Q.heads = q.dims()[1], Q.len = q.dims()[2], Q.d = q.dims()[3];
    K.heads = k.dims()[1], K.len = k.dims()[2], K.d = k.dims()[3];
    V.heads = v.dims()[1], V.len = v.dims()[2], V.d = v.dims()[3];
  }
  const int64_t p = ctx.has_input(kAttnPastKey) ? ctx.in(kAttnPastKey).dims()[2] : 0;
  const int64_t T = p + K.len, Sq = Q.len, group = Q.heads / K.heads;
  const std::vector<double> pk = p ? ctx.in(kAttnPastKey).to_f64() : std::vector<double>{};
  const std::vector<double> pv = p ? ctx.in(kAttnPastValue).to_f64() : std::vector<double>{};
  const std::vector<double> keys = present(pk, K, batch, p), values = present(pv, V, batch, p);
  const double scale = a.has_scale ? a.scale : 1.0 / std::sqrt(static_cast<double>(Q.d));
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  // The mask as strides over [batch, q_heads, q_len, its own length].
  std::vector<double> mask;
  bool bool_mask = false;
  int64_t mask_len = 0, ms[4] = {0, 0, 0, 0};
  if (ctx.has_input(kAttnMask)) {
    const Tensor& m = ctx.in(kAttnMask);
    mask = m.to_f64();
    bool_mask = m.dtype() == DType::Bool;
    const std::vector<int64_t>& md = m.dims();
    mask_len = md.back();
    int64_t stride = 1;
    for (size_t i = md.size(); i-- > 0;) {
      const size_t axis = 4 - (md.size() - i);
      ms[axis] = md[i] == 1 && axis != 3 ? 0 : stride;
      stride *= md[i];
    }
  }
  std::vector<int64_t> nonpad;
  if (ctx.has_input(kAttnNonpad)) nonpad = ctx.in(kAttnNonpad).to_i64();

  std::vector<double> y(static_cast<size_t>(batch * Q.heads * Sq * V.d), 0.0);
  std::vector<double> qk(static_cast<size_t>(batch * Q.heads * Sq * T), 0.0);
  std::vector<double> s(static_cast<size_t>(T)), bias(static_cast<size_t>(T));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t valid = nonpad.empty() ? T : nonpad[static_cast<size_t>(b)];
    const int64_t offset = p ? p : nonpad.empty() ? 0 : valid - Sq;
    for (int64_t h = 0; h < Q.heads; ++h) {
      const int64_t kh = h / group;
      const double* kb = keys.data() + (b * K.heads + kh) * T * K.d;
      const double* vb = values.data() + (b * K.heads + kh) * T * V.d;
      for (int64_t i = 0; i < Sq; ++i) {
        double* qrow = qk.data() + ((b * Q.heads + h) * Sq + i) * T;
        bool attends = false;
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < Q.d; ++e) dot += Q.at(b, h, i, e) * kb[j * K.d + e];
          s[j] = scale * dot;
          if (a.qk_mode == 0) qrow[j] = s[j];
          if (a.softcap > 0) s[j] = a.softcap * std::tanh(s[j] / a.softcap);
          if (a.qk_mode == 1) qrow[j] = s[j];
          double bj = 0;
          if (!mask.empty()) {
            if (j >= mask_len) {
              bj = kNegInf;
            } else {
              const double m = mask[static_cast<size_t>(b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3])];
              bj = bool_mask ? (m != 0 ? 0.0 : kNegInf) : m;
            }
          }
          const int64_t diff = i + offset - j;  // how far key j lies before query i
          if (a.causal && diff < 0) bj = kNegInf;
          if (a.left_window >= 0 && diff > a.left_window) bj = kNegInf;
          if (a.right_window >= 0 && -diff > a.right_window) bj = kNegInf;
          if (j >= valid) bj = kNegInf;
          bias[j] = bj;
          attends = attends || bj != kNegInf;
          s[j] += bj;
          if (a.qk_mode == 2) qrow[j] = s[j];
        }
        double* yrow = y.data() + ((b * Q.heads + h) * Sq + i) * V.d;
        if (!attends) {  // a fully masked row: zero probabilities, zero output
          if (a.qk_mode == 3) std::fill(qrow, qrow + T, 0.0);
          continue;
        }
        double mx = kNegInf;
        for (int64_t j = 0; j < T; ++j) mx = std::max(mx, s[j]);
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j < T; ++j) {
          s[j] /= sum;
          if (a.qk_mode == 3) qrow[j] = s[j];
          if (s[j] != 0)
            for (int64_t e = 0; e < V.d; ++e) yrow[e] += s[j] * vb[j * V.d + e];
        }
      }
    }
  }
  // Y in the inputs' form: [B, Hq, Sq, Dv] or [B, Sq, Hq * Dv].
  std::vector<double> yout = y;
  if (rank3)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < Q.heads; ++h)
        for (int64_t i = 0; i < Sq; ++i)
          for (int64_t e = 0; e < V.d; ++e)
            yout[static_cast<size_t>(((b * Sq + i) * Q.heads + h) * V.d + e)] =
                y[static_cast<size_t>(((b * Q.heads + h) * Sq + i) * V.d + e)];
  const std::vector<int64_t> ydims = rank3 ? std::vector<int64_t>{batch, Sq, Q.heads * V.d}
                                           : std::vector<int64_t>{batch, Q.heads, Sq, V.d};
  std::vector<Tensor> out{Tensor::from_f64(v.dtype(), ydims, yout)};
  if (ctx.num_outputs > 1) out.push_back(Tensor::from_f64(k.dtype(), {batch, K.heads, T, K.d}, keys));
  if (ctx.num_outputs > 2) out.push_back(Tensor::from_f64(v.dtype(), {batch, K.heads, T, V.d}, values));
  if (ctx.num_outputs > 3) out.push_back(Tensor::from_f64(q.dtype(), {batch, Q.heads, Sq, T}, qk));
  return out;
}

// ---- ONNX versions --------------------------------------------------------------------------

std::string import_attention(OnnxForm& form, int64_t opset, GraphBuilder&) {
  // Opsets 23 and 24 ignore the head counts on 4-D inputs; 25 refuses them.
  if (!form.inputs.empty() && form.inputs[0].present() && form.inputs[0].type().rank() == 4) {
    if (opset >= 25 && (form.attrs.has("q_num_heads") || form.attrs.has("kv_num_heads")))
      throw Error("q_num_heads and kv_num_heads must not be given with 4-D inputs (Attention-25)");
    form.attrs.erase("q_num_heads");
    form.attrs.erase("kv_num_heads");
  }
  return "";
}

void export_attention(OnnxForm& form, int64_t opset) {
  require(opset >= 23, "Attention needs opset 23, not " + std::to_string(opset));
  if (opset >= 25) return;
  require(form.attrs.get_int("left_window_size", -1) == -1 && form.attrs.get_int("right_window_size", -1) == -1,
          "a sliding window (left_window_size, right_window_size) cannot be written at opset " + std::to_string(opset));
  form.attrs.erase("left_window_size");
  form.attrs.erase("right_window_size");
  if (opset < 24)
    require(form.inputs.size() <= kAttnNonpad || !form.inputs[kAttnNonpad].present(),
            "nonpad_kv_seqlen cannot be written at opset 23");
}

}  // namespace

OpDef def_Attention() {
  OpDef d;
  d.name = "Attention";
  d.min_inputs = 3;
  d.max_inputs = 7;
  d.min_opset = 23;
  d.attributes = {{"is_causal", "int"},
                  {"kv_num_heads", "int"},
                  {"q_num_heads", "int"},
                  {"qk_matmul_output_mode", "int"},
                  {"scale", "float"},
                  {"softcap", "float"},
                  {"softmax_precision", "int"},
                  {"left_window_size", "int"},
                  {"right_window_size", "int"}};
  d.infer = infer;
  d.eval = eval;
  d.onnx_import = import_attention;
  d.onnx_export = export_attention;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "is_causal", int64_t{0});
    set_default(a, "qk_matmul_output_mode", int64_t{0});
    set_default(a, "softcap", 0.0);
    set_default(a, "left_window_size", int64_t{-1});
    set_default(a, "right_window_size", int64_t{-1});
    return a;
  };
  d.lower = Lowering::Attention;
  return d;
}

}  // namespace isomer
