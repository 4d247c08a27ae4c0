// Attention as exporters decompose it, on the runtime's attention step
// (attention_step.h), found by structure from its first product:
//
//   S = MatMul(Q [* a], K^T [* b]) [* c | / c ...] [+ mask | Where(keep, ., -inf)]
//   Y = MatMul(Softmax(S, axis = -1), V)
//
// Q [B, Hq, Sq, D] (or [Hq, Sq, D]), K^T [B, Hq, D, T] and V [B, Hq, T, Dv] are
// read in place through their strides; K and V heads repeated for grouped-query
// attention (repeat_kv's Expand and Reshape: a split view, or one KV head read
// with stride 0) are read once per KV head. The scalar factors multiply into one
// scale; a float mask is added and a bool one keeps keys where true, either
// broadcast over batch, heads and queries by its strides. Every value inside is
// read only inside.
//
// Taken where the step costs less than the products and softmax as separate steps
// (measured: kMinCausalWork, kMinWork): a mask that hides every key after the
// query's own position (a causal mask: LLaMA, GPT-2), known when the graph is
// compiled or computed at run time by a construction that proves it
// (computed_causal: Hugging Face's causal And padding mask), lets the step multiply
// each tile of queries only up to its frontier; without one (no mask: ViT; a
// padding mask: BERT; any other mask) the step does the same products, its scores
// stay in cache between them and the softmax, a mask shared by a head's queries
// starts Q K^T's accumulators, and Q's and K^T's scalar Muls fold into the packing
// of K^T. A constant mask that hides exactly the causal keys and adds nothing
// elsewhere is not read at all. A row whose every key is masked is NaN, as the
// decomposed Softmax makes it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/layout_common.h"
#include "runtime/attention_step.h"
#include "runtime/compiler.h"
#include "runtime/lowering.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// The least work of one head (queries x keys x (D + Dv)) for which the step is
// taken: processor time at 1 thread on a Zen 5 (AVX-512), the step against oneDNN's
// products and isomer's softmax, 12 heads, medians of 7 interleaved runs, load 9-10.
// Causal (half the products saved): 64 queries of 32 (2^18) 0.050 -> 0.039 ms, 48
// of 64 0.046 -> 0.046, 32 of 64 (2^17) 0.023 -> 0.025 (slower: the packing and the
// rows cost more than the half saved); 128 of 64: 0.43 -> 0.29 ms (LLaMA's block).
// Otherwise (the same products): 128 of 32 (2^20, no mask) 0.154 -> 0.152, 96 of
// 64 (padding mask) 0.170 -> 0.164, BERT's 128 of 64 0.301 -> 0.273, ViT's 197 of 64
// (its Q and K^T scaled) 0.362 -> 0.336; 64 of 32 (2^18) 0.042 -> 0.044 and 32 of 64
// 0.023 -> 0.024 are slower. Heads of fewer than kMinHead features are slower on
// the step at any length without a causal half to save (4 heads of 16, 256 queries:
// 0.133 -> 0.150 ms; HuBERT's 199: 0.096 -> 0.108, and 0.098 -> 0.130 under
// w2v2-conformer's position bias): Q K^T's tiles are 16 deep, and P V's 16 columns
// run on 8-lane panels; causal, they still win (96 queries of 16: 0.029 -> 0.020).
// (On 16-lane panels for those 16 columns, whole models were still mixed: HuBERT
// 0.448 -> 0.458 ms, w2v2-conformer 0.826 -> 0.849, WavLM 0.639 -> 0.622.)
constexpr double kMinCausalWork = 256.0 * 1024;
constexpr double kMinWork = 1024.0 * 1024;
constexpr int64_t kMinHead = 32;

struct Chain {
  const Node* qk = nullptr;
  const Node* softmax = nullptr;
  const Node* pv = nullptr;
  std::vector<const Node*> between;  // scale and mask nodes from qk to softmax
  std::vector<const Node*> scaled;   // scalar Muls on Q and K^T, taken in
  Value q, kt, v;                    // the products' operands, without those Muls
  float scale = 1;
  std::optional<Value> mask;
  bool bool_mask = false;
};

bool op_is(const Node* n, const char* op) { return n && n->kind() == NodeKind::Op && n->op_type() == op; }

// The finite float32 scalar a constant input holds, or nullopt.
std::optional<float> scalar_of(Compiler& c, const Value& v) {
  const Tensor* t = c.peek_known(v);
  if (!t || t->numel() != 1 || t->dtype() != DType::Float32) return std::nullopt;
  return static_cast<float>(t->f64_at(0));
}

bool same_shape(const Value& a, const Node& n) { return a.type().shape == n.output_types()[0].shape; }

std::optional<Chain> match_chain(Compiler& c, const Node& qk) {
  if (!c.opts().fuse || !op_is(&qk, "MatMul") || qk.inputs().size() != 2 || !all_float32(qk)) return std::nullopt;
  Chain m;
  m.qk = &qk;
  m.q = qk.inputs()[0];
  m.kt = qk.inputs()[1];
  for (Value* v : {&m.q, &m.kt}) {
    const Node& p = *v->node;
    if (p.kind() != NodeKind::Op || c.lowered(p) || c.bound_id(*v) >= 0 || c.sole_consumer(*v) != &qk) continue;
    if (std::optional<float> f = matmul_operand_scale(c, p)) {
      m.scale *= *f;
      m.scaled.push_back(&p);
      *v = c.peek_known(p.inputs()[1]) ? p.inputs()[0] : p.inputs()[1];
    }
  }
  Value x = qk.output(0);
  while (true) {
    const Node* n = c.sole_consumer(x);
    if (!n || n->kind() != NodeKind::Op || n->num_outputs() != 1 || c.lowered(*n) || c.is_pending(*n))
      return std::nullopt;
    const std::string& op = n->op_type();
    const auto& in = n->inputs();
    if (op == "Softmax") {
      const int64_t rank = static_cast<int64_t>(x.type().shape.size());
      const int64_t axis = n->attrs().get_int("axis", -1);
      if (axis < -rank || axis >= rank || normalize_axis(axis, rank) != rank - 1) return std::nullopt;
      m.softmax = n;
      break;
    }
    if (in.size() < 2 || !same_shape(x, *n)) return std::nullopt;
    // Scalar factors come before the mask (after it they would scale the mask too).
    if ((op == "Mul" || op == "Div") && !m.mask) {
      const bool first = in[0] == x;
      const std::optional<float> f = scalar_of(c, in[first ? 1 : 0]);
      if (!f || (op == "Div" && (!first || *f == 0.0f))) return std::nullopt;
      m.scale *= op == "Div" ? 1.0f / *f : *f;
      if (!std::isfinite(m.scale)) return std::nullopt;
    } else if (op == "Add" && !m.mask && in.size() == 2 && in[0] != in[1]) {
      m.mask = in[0] == x ? in[1] : in[0];
      if (m.mask->type().dtype != DType::Float32) return std::nullopt;
    } else if (op == "Where" && !m.mask && in.size() == 3 && in[1] == x && in[2] != x) {
      // Where(keep, S, -inf): masked_fill as exporters write it.
      const std::optional<float> fill = scalar_of(c, in[2]);
      if (!fill || !(std::isinf(*fill) && *fill < 0) || in[0].type().dtype != DType::Bool) return std::nullopt;
      m.mask = in[0];
      m.bool_mask = true;
    } else {
      return std::nullopt;
    }
    m.between.push_back(n);
    x = n->output(0);
  }
  const Node* pv = c.sole_consumer(m.softmax->output(0));
  if (!op_is(pv, "MatMul") || pv->inputs().size() != 2 || pv->inputs()[0] != m.softmax->output(0) ||
      pv->inputs()[1] == m.softmax->output(0) || !all_float32(*pv) || c.lowered(*pv) || c.is_pending(*pv))
    return std::nullopt;
  m.pv = pv;
  m.v = pv->inputs()[1];
  return m;
}

// (extent, stride) parts of each of v's dims: a split view's, else its strides'
// (one part a dim), with the value id they are relative to; nullopt for a
// blocked layout.
std::optional<std::pair<int, std::vector<std::vector<std::pair<int64_t, int64_t>>>>> parts_of(Compiler& c,
                                                                                              const Value& v) {
  if (const SplitView* s = c.split_view(v)) return std::pair{s->src, s->parts};
  int id = c.id(v);
  auto st = c.strides_of(id);
  if (!st) {
    id = c.as_plain(id);
    st = c.strides_of(id);
  }
  std::vector<std::vector<std::pair<int64_t, int64_t>>> parts;
  for (size_t i = 0; i < st->size(); ++i) parts.push_back({{c.val(id).dims[i], (*st)[i]}});
  return std::pair{id, parts};
}

// K^T ([B, Hq, D, T], `transposed`) or V ([B, Hq, T, Dv]) as [B, Hk, T, d] heads,
// each query head h reading KV head h / (Hq / Hk). Rank 3 has no batch dim.
std::optional<HeadsView> kv_heads(Compiler& c, const Value& v, int64_t B, int64_t Hq, bool transposed, int64_t* hk) {
  auto p = parts_of(c, v);
  if (!p) return std::nullopt;
  auto& parts = p->second;
  if (parts.size() == 3) parts.insert(parts.begin(), {{1, 0}});
  if (parts.size() != 4) return std::nullopt;
  for (auto& q : parts)
    if (q.empty()) q = {{1, 0}};  // a split view's dim of extent 1 has no parts
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}})
    if (parts[i].size() != 1) return std::nullopt;
  HeadsView h;
  h.id = p->first;
  const auto [eb, sb] = parts[0][0];
  if (eb != B && eb != 1) return std::nullopt;
  h.s[0] = eb == 1 ? 0 : sb;
  // The heads: Hq of their own, one shared (stride 0), or Hk repeated Hq / Hk times
  // each (repeat_kv: the repeat inner, stride 0).
  const auto& heads = parts[1];
  int64_t kv = 0, stride = 0;
  if (heads.size() == 1 && heads[0].first == Hq) {
    kv = heads[0].second == 0 ? 1 : Hq;
    stride = heads[0].second;
  } else if (heads.size() == 2 && heads[1].second == 0 && heads[0].first * heads[1].first == Hq) {
    kv = heads[0].first;
    stride = heads[0].second;
  } else {
    return std::nullopt;
  }
  h.s[1] = stride;
  h.s[2] = transposed ? parts[3][0].second : parts[2][0].second;
  h.s[3] = transposed ? parts[2][0].second : parts[3][0].second;
  *hk = kv;
  return h;
}

// What a mask known when the graph is compiled (broadcast to [.., Sq, T], T == Sq)
// hides: every key after the query's own position (-inf or false above the
// diagonal), and whether that is all it does (0 or true on and below it).
struct Causality {
  bool causal = false, only = false;
};
Causality causal_values(const Tensor* t, int64_t Sq, int64_t T, bool is_bool) {
  if (Sq != T || !t || t->rank() < 2) return {};
  const std::vector<int64_t>& md = t->dims();
  for (size_t i = 0; i + 2 < md.size(); ++i)
    if (md[i] != 1) return {};
  if (md[md.size() - 2] != Sq || md.back() != T) return {};
  Causality r{true, true};
  for (int64_t i = 0; i < Sq; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const double x = t->f64_at(i * T + j);
      if (j > i && (is_bool ? x != 0.0 : !(std::isinf(x) && x < 0))) return {};
      if (j <= i && (is_bool ? x == 0.0 : x != 0.0)) r.only = false;
    }
  return r;
}
Causality causal_mask(Compiler& c, const Value& mask, int64_t Sq, int64_t T, bool is_bool) {
  return causal_values(c.known(mask), Sq, T, is_bool);
}

// The last two dims of v's type where they are static.
std::optional<std::pair<int64_t, int64_t>> last_two(const Value& v) {
  const Shape& sh = v.type().shape;
  if (sh.size() < 2 || !sh[sh.size() - 2].is_static() || !sh.back().is_static()) return std::nullopt;
  return std::pair{sh[sh.size() - 2].value, sh.back().value};
}

// The fill a mask computed at run time gives every key after the query's own
// position, by construction: And(hidden, x) of bools hides them (false) whatever x
// is (Hugging Face's causal mask And its padding mask), Where(hidden, x, F) gives
// them the scalar F (-inf, or a fill at most -1e38: finfo.min), an Expand keeps
// them where the last two dims are already [Sq, T]. For bools the fill is -inf (the
// chain's Where). nullopt where nothing proves it.
std::optional<float> computed_causal(Compiler& c, const Value& v, int64_t Sq, int64_t T, bool is_bool, int depth = 0) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (depth > 8 || v.type().dtype != (is_bool ? DType::Bool : DType::Float32)) return std::nullopt;
  // (Nothing is lowered here but constants: a value computed at run time is lowered
  // where the graph's order reaches it, whether or not this proof holds.)
  if (const Tensor* t = c.peek_known(v)) {
    if (!causal_values(t, Sq, T, is_bool).causal) return std::nullopt;
    return kNegInf;
  }
  const Node* n = v.node.get();
  if (!n || n->kind() != NodeKind::Op || n->num_outputs() != 1) return std::nullopt;
  const std::string& op = n->op_type();
  const auto& in = n->inputs();
  if (op == "And" && is_bool && in.size() == 2) {
    for (const Value& x : in)
      if (computed_causal(c, x, Sq, T, true, depth + 1)) return kNegInf;
    return std::nullopt;
  }
  if (op == "Where" && !is_bool && in.size() == 3 && computed_causal(c, in[0], Sq, T, true, depth + 1)) {
    const std::optional<float> f = scalar_of(c, in[2]);
    if (!f || !(*f <= -1e38f)) return std::nullopt;
    return *f;
  }
  if (op == "Expand" && in.size() == 2) {
    if (last_two(in[0]) != std::pair{Sq, T}) return std::nullopt;
    return computed_causal(c, in[0], Sq, T, is_bool, depth + 1);
  }
  return std::nullopt;
}

}  // namespace

bool lower_attention_chain(Compiler& c, const Node& qk) {
  std::optional<Chain> m = match_chain(c, qk);
  if (!m) return false;
  for (const Value& v : {m->q, m->kt, m->v})
    if (c.bound_id(v) < 0 && !c.split_view(v) && !c.peek_known(v) && c.depends_on_pending(v)) return false;
  if (m->mask && c.bound_id(*m->mask) < 0 && !c.peek_known(*m->mask) && c.depends_on_pending(*m->mask))
    return false;
  for (const Value& v : {m->q, m->kt, m->v}) c.lower_producer(v);
  const std::vector<int64_t> qd = c.dims(m->q), kd = c.dims(m->kt), vd = c.dims(m->v);
  // (The products' outputs have no value yet: their dims follow from the operands'.)
  const size_t rank = qd.size();
  if ((rank != 3 && rank != 4) || kd.size() != rank || vd.size() != rank) return false;
  const int64_t B = rank == 4 ? qd[0] : 1, Hq = qd[rank - 3], Sq = qd[rank - 2], D = qd[rank - 1];
  const int64_t T = kd[rank - 1], Dv = vd[rank - 1];
  if (kd[rank - 3] != Hq || vd[rank - 3] != Hq || kd[rank - 2] != D || vd[rank - 2] != T ||
      (rank == 4 && ((kd[0] != B && kd[0] != 1) || (vd[0] != B && vd[0] != 1))))
    return false;
  std::vector<int64_t> sd{Hq, Sq, T}, od{Hq, Sq, Dv};
  if (rank == 4) sd.insert(sd.begin(), B), od.insert(od.begin(), B);
  if (B == 0 || Hq == 0 || Sq == 0 || T == 0 || D == 0 || Dv == 0) return false;
  const double head_work = static_cast<double>(Sq * T * (D + Dv));
  Causality causality;
  std::optional<float> fill;
  if (m->mask && head_work >= kMinCausalWork) {
    if (c.peek_known(*m->mask)) {
      causality = causal_mask(c, *m->mask, Sq, T, m->bool_mask);
    } else if (last_two(*m->mask) == std::pair{Sq, T}) {
      // A mask computed at run time: its last two dims must be the scores' own.
      fill = computed_causal(c, *m->mask, Sq, T, m->bool_mask);
      causality.causal = fill.has_value();
    }
  }
  // Below those, a few query rows per key head against enough keys (decode) may
  // still take the step's decode kernels (decode_attention_applies, once K's and
  // V's strides are known).
  const bool panels = causality.causal || (head_work >= kMinWork && std::min(D, Dv) >= kMinHead);
  if (!panels && Sq > kMaxDecodeRows) return false;
  if (m->mask) {
    // The mask broadcasts to the scores without widening them (checked by shape).
    const std::vector<int64_t> mdims = c.dims(*m->mask);
    if (mdims.size() > rank) return false;
    for (size_t i = 0; i < mdims.size(); ++i)
      if (mdims[i] != 1 && mdims[i] != sd[rank - mdims.size() + i]) return false;
  }

  AttentionStep s;
  int64_t hk = 0, hv = 0;
  auto keys = kv_heads(c, m->kt, B, Hq, true, &hk);
  auto values = kv_heads(c, m->v, B, Hq, false, &hv);
  if (!keys || !values || hk != hv || Hq % hk != 0) return false;
  s.keys = *keys;
  s.values = *values;
  AttentionDims& d = s.d;
  d.batch = B, d.q_heads = Hq, d.kv_heads = hk;
  d.q_len = Sq, d.kv_len = T, d.total = T, d.head = D, d.v_head = Dv;
  if (!panels && !decode_attention_applies(s)) return false;
  int q = c.id(m->q);
  auto qs = c.strides_of(q);
  if (!qs || qs->back() != 1) {
    q = c.as_plain(q);
    qs = c.strides_of(q);
  }
  s.q.id = q;
  for (size_t i = 0; i < rank; ++i) s.q.s[4 - rank + i] = (*qs)[i];
  s.a.causal = causality.causal;
  s.scale = m->scale;
  s.empty_row_nan = true;
  s.finite_fill = fill && std::isfinite(*fill);
  if (m->mask && !causality.only) set_attention_mask(c, s, c.id(*m->mask));
  // Y as the Transpose after the product reads it ([B, Sq, Hq, Dv]): the Transpose
  // and the Reshape merging the heads are then views.
  const Node* after = c.sole_consumer(m->pv->output(0));
  const std::vector<int64_t> perm = op_is(after, "Transpose") ? after->attrs().get_ints("perm", {}) : std::vector<int64_t>{};
  s.seq_major_y = rank == 4 && perm == std::vector<int64_t>{0, 2, 1, 3};

  StepInfo info;
  info.kind = "attention";
  info.label = m->pv->name();
  std::vector<const Node*> nodes = m->scaled;
  nodes.push_back(m->qk);
  nodes.insert(nodes.end(), m->between.begin(), m->between.end());
  nodes.push_back(m->softmax);
  nodes.push_back(m->pv);
  for (const Node* n : nodes) {
    info.ops.push_back(n->op_type());
    info.nodes.push_back(node_key(*n));
  }
  const int y = add_attention_step(c, s, std::move(info));
  std::vector<int64_t> strides = s.seq_major_y ? std::vector<int64_t>{Sq * Hq * Dv, Dv, Hq * Dv, 1} : row_major(od);
  c.bind(m->pv->output(0), c.view(y, od, strides, 0, m->pv->name()));
  for (const Node* n : nodes) c.mark_done(*n);
  return true;
}

}  // namespace isomer::runtime
