// Rotary position embedding as exporters decompose it (torch dynamo and
// TorchScript exports of LLaMA, Mistral, Qwen2, Phi, GPT-NeoX attention):
//
//   y = Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, h, 2h)), Slice(x, 0, h), axis=-1), sin))
//
// operands of Mul and Add in either order, recognized by structure, run as one
// row kernel (kernels/rope.h) that reads x, cos and sin through their strides
// (x is usually a transposed view of the projection). Decomposed, the same took
// two views, a Neg over a strided slice, a Concat copy and a pointwise pass.
#include <optional>

#include "kernels/rope.h"
#include "kernels/rotary.h"
#include "ops/layout_common.h"
#include "ops/rotary.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

struct RopeMatch {
  Value x, cos, sin;
  const Node* lo = nullptr;  // Slice(x, 0, h)
  const Node* hi = nullptr;  // Slice(x, h, 2h)
  std::vector<const Node*> nodes;  // Neg, Concat, Mul(rot, sin), Mul(x, cos), Add: the last one's output the result
};

const Node* producer(const Value& v, const char* op) {
  if (!v.present() || v.node->kind() != NodeKind::Op || v.node->op_type() != op || v.node->num_outputs() != 1)
    return nullptr;
  return v.node.get();
}

// The constant ints of input i of a Slice, or nullopt.
std::optional<std::vector<int64_t>> slice_ints(Compiler& c, const Node& s, size_t i) {
  if (i >= s.inputs().size() || !s.inputs()[i].present()) return std::nullopt;
  const Tensor* t = c.peek_known(s.inputs()[i]);
  if (!t || !is_integer(t->dtype())) return std::nullopt;
  return t->to_i64();
}

// [start, end) as the Slice `s` writes them for its one axis, the last of a rank
// `rank` input, with step 1; nullopt otherwise. Not yet clamped to the extent.
std::optional<std::pair<int64_t, int64_t>> last_axis_range(Compiler& c, const Node& s, int64_t rank) {
  if (s.op_type() != "Slice" || s.inputs().size() < 3) return std::nullopt;
  const auto starts = slice_ints(c, s, 1), ends = slice_ints(c, s, 2);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (s.inputs().size() > 3 && s.inputs()[3].present()) {
    const auto axes = slice_ints(c, s, 3);
    if (!axes || axes->size() != 1 || (*axes)[0] < -rank || (*axes)[0] >= rank) return std::nullopt;
    if (normalize_axis((*axes)[0], rank) != rank - 1) return std::nullopt;
  } else if (rank != 1) {
    return std::nullopt;  // the default axis is 0
  }
  if (s.inputs().size() > 4 && s.inputs()[4].present()) {
    const auto steps = slice_ints(c, s, 4);
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
  }
  return std::pair{(*starts)[0], (*ends)[0]};
}

// The pattern ending at `add`, by structure only (the dims are checked when it
// is lowered): every value inside is read only inside, no node of it lowered.
std::optional<RopeMatch> match_rope(Compiler& c, const Node& add) {
  if (!c.opts().fuse || add.kind() != NodeKind::Op || add.op_type() != "Add" || add.inputs().size() != 2 ||
      add.num_outputs() != 1 || add.output_types()[0].dtype != DType::Float32)
    return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    const Node* mx = producer(add.inputs()[order], "Mul");
    const Node* mr = producer(add.inputs()[1 - order], "Mul");
    if (!mx || !mr || mx == mr || mx->inputs().size() != 2 || mr->inputs().size() != 2) continue;
    for (int ri = 0; ri < 2; ++ri) {
      const Node* cat = producer(mr->inputs()[ri], "Concat");
      if (!cat || cat->inputs().size() != 2) continue;
      const Node* neg = producer(cat->inputs()[0], "Neg");
      const Node* hi = neg ? producer(neg->inputs()[0], "Slice") : nullptr;
      const Node* lo = producer(cat->inputs()[1], "Slice");
      if (!hi || !lo || hi->inputs()[0] != lo->inputs()[0]) continue;
      const Value x = lo->inputs()[0];
      const TensorType& xt = x.type();
      const int64_t rank = static_cast<int64_t>(xt.shape.size());
      if (xt.dtype != DType::Float32 || rank < 1) continue;
      const int64_t axis = cat->attrs().get_int("axis", 0);
      if (axis < -rank || axis >= rank || normalize_axis(axis, rank) != rank - 1) continue;
      const auto hr = last_axis_range(c, *hi, rank), lr = last_axis_range(c, *lo, rank);
      // The low half starts at 0 and the high half where it ends.
      if (!hr || !lr || lr->first != 0 || lr->second <= 0 || hr->first != lr->second) continue;
      // Mul(x, cos): x is one operand (either one if both are x).
      int xi = mx->inputs()[0] == x ? 0 : mx->inputs()[1] == x ? 1 : -1;
      if (xi < 0) continue;
      RopeMatch m;
      m.x = x;
      m.cos = mx->inputs()[1 - xi];
      m.sin = mr->inputs()[1 - ri];
      m.lo = lo;
      m.hi = hi;
      m.nodes = {neg, cat, mr, mx, &add};
      // Values inside are read only inside (x, cos and sin may be read anywhere).
      auto only = [&](const Node* n, const Node* by) { return c.sole_consumer(n->output(0)) == by; };
      if (!only(hi, neg) || !only(neg, cat) || !only(lo, cat) || !only(cat, mr) || !only(mr, &add) || !only(mx, &add))
        continue;
      bool free = true;
      for (const Node* n : m.nodes) free = free && !c.lowered(*n) && !c.is_pending(*n);
      if (!free) continue;
      return m;
    }
  }
  return std::nullopt;
}

// The Add a node of the pattern (Neg, either Mul, the Add) feeds, or nullptr.
const Node* rope_root(Compiler& c, const Node& n) {
  const std::string& op = n.op_type();
  const Node* at = &n;
  if (op == "Neg") {
    at = c.sole_consumer(n.output(0));
    if (!at || at->op_type() != "Concat") return nullptr;
    at = c.sole_consumer(at->output(0));
  }
  if (at && at->op_type() == "Mul") at = c.sole_consumer(at->output(0));
  return at && at->op_type() == "Add" ? at : nullptr;
}

std::optional<RopeMatch> match_from(Compiler& c, const Node& n) {
  if (n.kind() != NodeKind::Op || n.num_outputs() != 1) return std::nullopt;
  const std::string& op = n.op_type();
  if (op != "Neg" && op != "Mul" && op != "Add") return std::nullopt;
  const Node* root = rope_root(c, n);
  if (!root) return std::nullopt;
  std::optional<RopeMatch> m = match_rope(c, *root);
  if (!m) return std::nullopt;
  // n must be one of the pattern's nodes (a Mul feeding the Add from elsewhere is not).
  for (const Node* p : m->nodes)
    if (p == &n) return m;
  return std::nullopt;
}

// Element offset of every row (all dims but the last) of a strided operand.
std::vector<int64_t> row_offsets(const std::vector<int64_t>& dims, const kernels::StridedRef& r) {
  const size_t lead = dims.size() - 1;
  const int64_t rows = num_elements(std::vector<int64_t>(dims.begin(), dims.begin() + static_cast<int64_t>(lead)));
  std::vector<int64_t> off(static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, o = r.offset;
    for (size_t i = lead; i-- > 0;) {
      o += (rem % dims[i]) * r.strides[i];
      rem /= dims[i];
    }
    off[static_cast<size_t>(row)] = o;
  }
  return off;
}

}  // namespace

bool is_rope_node(Compiler& c, const Node& n) { return match_from(c, n).has_value(); }

bool lower_rope(Compiler& c, const Node& n) {
  std::optional<RopeMatch> m = match_from(c, n);
  if (!m) return false;
  for (const Value& v : {m->x, m->cos, m->sin})
    if (c.bound_id(v) < 0 && !c.peek_known(v) && c.depends_on_pending(v)) return false;
  const Node& add = *m->nodes.back();
  const std::vector<int64_t> dims = c.dims(m->x);
  if (dims.empty() || dims.back() % 2 != 0 || dims.back() < 2) return false;
  const int64_t D = dims.back(), h = D / 2;
  // Both halves exactly: [0, h) and [h, D) once clamped to the extent.
  const auto lr = last_axis_range(c, *m->lo, static_cast<int64_t>(dims.size()));
  const auto hr = last_axis_range(c, *m->hi, static_cast<int64_t>(dims.size()));
  const ops::AxisSlice ls = ops::slice_axis(lr->first, lr->second, 1, D), hs = ops::slice_axis(hr->first, hr->second, 1, D);
  if (ls.start != 0 || ls.count != h || hs.start != h || hs.count != h) return false;
  // cos and sin broadcast to x's dims without widening them; the result has x's dims.
  for (const Value& v : {m->cos, m->sin}) {
    if (c.dtype(v) != DType::Float32) return false;
    const std::vector<int64_t>& vd = c.dims(v);
    if (vd.size() > dims.size()) return false;
    for (size_t i = 0; i < vd.size(); ++i)
      if (vd[i] != 1 && vd[i] != dims[dims.size() - vd.size() + i]) return false;
  }
  if (c.dtype(m->x) != DType::Float32) return false;
  auto readable = [&](const Value& v) {
    int id = c.id(v);
    return c.strides_of(id) ? id : c.as_plain(id);
  };
  const int xi = readable(m->x), ci = readable(m->cos), si = readable(m->sin);
  const kernels::StridedRef xr = strided_ref(c, xi, dims), cr = strided_ref(c, ci, dims), sr = strided_ref(c, si, dims);
  auto shape = std::make_shared<kernels::RopeRows>();
  shape->rows = num_elements(dims) / D;
  shape->half = h;
  shape->x_off = row_offsets(dims, xr);
  shape->cos_off = row_offsets(dims, cr);
  shape->sin_off = row_offsets(dims, sr);
  shape->x_step = xr.strides.back();
  shape->cos_step = cr.strides.back();
  shape->sin_step = sr.strides.back();
  const int y = c.new_value(DType::Float32, dims, plain_md(dims, dt::f32), add.name());
  StepInfo info = step_info(add, "pointwise",
                            "rope " + std::to_string(shape->rows) + "x" + std::to_string(D) + " x" +
                                to_string(xr.strides) + " cos" + to_string(cr.strides) + " sin" + to_string(sr.strides),
                            3.0 * static_cast<double>(num_elements(dims)));
  info.ops.clear();
  info.nodes.clear();
  for (const Node* p : {m->lo, m->hi, m->nodes[0], m->nodes[1], m->nodes[2], m->nodes[3], m->nodes[4]}) {
    info.ops.push_back(p->op_type());
    info.nodes.push_back(node_key(*p));
  }
  add_native_step(c, info, {xi, ci, si}, {y}, [shape](const std::vector<char*>& p) {
    kernels::rope_rows(*shape, reinterpret_cast<const float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                       reinterpret_cast<const float*>(p[2]), reinterpret_cast<float*>(p[3]));
  });
  c.bind(add.output(0), y);
  for (const Node* p : {m->lo, m->hi}) c.mark_done(*p);
  for (const Node* p : m->nodes) c.mark_done(*p);
  return true;
}

// ONNX's own RotaryEmbedding: X, the caches and position_ids dense; where an
// operand does not fit (other types, shapes the shape rule could not check), the
// reference kernel runs the node and says why.
bool lower_rotary_embedding(Compiler& c, const Node& n) {
  const bool positions = n.inputs().size() > 3 && n.inputs()[3].present();
  if (positions && c.dtype(n.inputs()[3]) != DType::Int64) return false;
  const int x = dense_f32(c, n.inputs()[0]), cos = dense_f32(c, n.inputs()[1]), sin = dense_f32(c, n.inputs()[2]);
  if (x < 0 || cos < 0 || sin < 0 || c.val(cos).dims != c.val(sin).dims) return false;
  kernels::RotaryShape g;
  try {
    g = rotary_shape(n.attrs(), c.val(x).dims, c.val(cos).dims, positions ? &c.val(c.id(n.inputs()[3])).dims : nullptr);
  } catch (const Error&) {
    return false;
  }
  std::vector<int> reads{x, cos, sin};
  if (positions) reads.push_back(c.as_plain(c.id(n.inputs()[3])));
  const int y = dense_output(c, n);
  const std::string who = n.name();
  add_native_step(c,
                  step_info(n, "pointwise",
                            std::string("rotary ") + (g.interleaved ? "interleaved " : "") + to_string(c.val(x).dims) +
                                " rot" + std::to_string(g.rot) + (positions ? " at positions" : ""),
                            3.0 * static_cast<double>(g.rows() * g.rot)),
                  reads, {y}, [g, positions, who](const std::vector<char*>& p) {
                    const int64_t bad = kernels::rotary_embedding(
                        g, reinterpret_cast<const float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                        reinterpret_cast<const float*>(p[2]), positions ? reinterpret_cast<const int64_t*>(p[3]) : nullptr,
                        reinterpret_cast<float*>(p[positions ? 4 : 3]));
                    if (bad >= 0)
                      throw Error("RotaryEmbedding '" + who + "': position " + std::to_string(bad) +
                                  " is outside the caches' " + std::to_string(g.cache_rows) + " rows");
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
