// Operators that run on isomer's own kernels along one axis (Softmax,
// LayerNormalization, reductions) or that move data by index (Gather), plus
// Shape, which is known when the graph is compiled.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "kernels/copy.h"
#include "kernels/rows.h"
#include "runtime/compiler.h"
#include "runtime/lowering.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Where(IsNaN(y), k, y) right after a softmax's result y (torch's exports of
// scaled_dot_product_attention: a row masked whole gives NaN, made k = 0), with
// y read by nothing else: the softmax step replaces its NaNs itself.
struct NanGuard {
  const Node* isnan = nullptr;
  const Node* where = nullptr;
  float to = 0;
};

std::optional<NanGuard> nan_guard(Compiler& c, const Value& y) {
  if (!c.opts().fuse || c.is_output(y)) return std::nullopt;
  const auto& users = c.consumers(y);
  if (users.size() != 2) return std::nullopt;
  NanGuard g;
  for (const auto& [m, k] : users) {
    if (m->op_type() == "IsNaN" && m->num_outputs() == 1) g.isnan = m;
    else if (m->op_type() == "Where" && m->inputs().size() == 3 && k == 2) g.where = m;
  }
  if (!g.isnan || !g.where || !c.takeable(*g.isnan) || !c.takeable(*g.where)) return std::nullopt;
  const Value flag = g.isnan->output(0);
  if (c.sole_consumer(flag) != g.where || g.where->inputs()[0] != flag || g.where->inputs()[2] != y) return std::nullopt;
  const Value& other = g.where->inputs()[1];
  if (other == y) return std::nullopt;
  const Tensor* t = c.peek_known(other);
  if (!t || t->numel() != 1 || !is_float(t->dtype())) return std::nullopt;
  // The result keeps y's type and shape (a constant of higher rank would broadcast it).
  if (g.where->output_types()[0] != y.type()) return std::nullopt;
  g.to = static_cast<float>(t->f64_at(0));
  return g;
}

}  // namespace

bool lower_softmax(Compiler& c, const Node& n) {
  if (n.op_type() != "Softmax" && n.op_type() != "LogSoftmax") return false;
  int x = dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty()) return false;
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", -1), static_cast<int64_t>(xd.size())));
  const int64_t outer = num_elements(xd, 0, axis), len = xd[axis], inner = num_elements(xd, axis + 1, xd.size());
  const bool log = n.op_type() == "LogSoftmax";
  int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name());
  const std::optional<NanGuard> guard = nan_guard(c, n.output(0));
  StepInfo info = step_info(n, "softmax",
                            std::string(log ? "logsoftmax " : "softmax ") + to_string(std::vector<int64_t>{outer, len, inner}) +
                                (guard ? " nan->" + std::to_string(guard->to) : ""),
                            5.0 * static_cast<double>(num_elements(xd)));
  if (guard)
    for (const Node* m : {guard->isnan, guard->where}) {
      info.ops.push_back(m->op_type());
      info.nodes.push_back(node_key(*m));
    }
  const bool has_guard = guard.has_value();
  const float to = guard ? guard->to : 0.0f;
  add_native_step(c, info, {x}, {y}, [outer, len, inner, log, has_guard, to](const std::vector<char*>& p) {
    kernels::softmax_axis(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]), outer, len, inner, log,
                          0, has_guard ? &to : nullptr);
  });
  c.bind(n.output(0), y);
  if (guard) {
    c.bind(guard->where->output(0), y);
    c.mark_done(*guard->isnan);
    c.mark_done(*guard->where);
  }
  return true;
}

namespace {

struct RmsMatch {
  std::vector<const Node*> nodes;  // in order, the last one's output the result
  Value x;
  float eps = 0;
  std::vector<float> scale;
};

// A ReduceMean over the last of `rank` axes, kept (axes as attribute or, from opset 18,
// as a known input).
bool is_last_axis_mean(Compiler& c, const Node& m, int64_t rank) {
  if (m.op_type() != "ReduceMean" || m.num_outputs() != 1 || m.attrs().get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = m.attrs().get_ints("axes", {});
  if (m.inputs().size() > 1 && m.inputs()[1].present()) {
    const Tensor* t = c.peek_known(m.inputs()[1]);
    if (!t || !is_integer(t->dtype())) return false;
    axes.clear();
    for (double a : t->to_f64()) axes.push_back(static_cast<int64_t>(a));
  }
  return axes.size() == 1 && normalize_axis(axes[0], rank) == rank - 1;
}

// A per-column constant (`cols` values, of rank at most `rank`) read by `w` beside `v`.
const Tensor* column_constant(Compiler& c, const Node& w, const Value& v, int64_t cols, int64_t rank) {
  if (w.inputs().size() != 2) return nullptr;
  const Value& other = w.inputs()[0] == v ? w.inputs()[1] : w.inputs()[0];
  const Tensor* t = other != v ? c.peek_known(other) : nullptr;
  return t && t->dtype() == DType::Float32 && t->numel() == cols && t->rank() <= rank ? t : nullptr;
}

std::optional<RmsMatch> match_rms_norm(Compiler& c, const Node& n) {
  if (!c.opts().fuse || n.num_outputs() != 1 || n.inputs().size() != 2) return std::nullopt;
  auto scalar = [&](const Value& v) -> std::optional<double> {
    const Tensor* t = v.present() ? c.peek_known(v) : nullptr;
    if (!t || t->numel() != 1 || !is_float(t->dtype())) return std::nullopt;
    return t->f64_at(0);
  };
  const Value x = n.inputs()[0];
  if (n.op_type() == "Pow") {
    if (scalar(n.inputs()[1]) != 2.0) return std::nullopt;
  } else if (n.op_type() != "Mul" || n.inputs()[1] != x) {
    return std::nullopt;
  }
  if (x.type().dtype != DType::Float32 || !is_static(x.type().shape)) return std::nullopt;
  const std::vector<int64_t> xd = static_dims(x.type().shape);
  if (xd.empty() || xd.back() < 1) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(xd.size());
  // The mean of squares over the last axis, kept.
  const Node* mean = c.sole_consumer(n.output(0));
  if (!mean || !is_last_axis_mean(c, *mean, rank)) return std::nullopt;
  // + eps, Sqrt.
  const Node* add = c.sole_consumer(mean->output(0));
  if (!add || add->op_type() != "Add" || add->inputs().size() != 2) return std::nullopt;
  const Value& ea = add->inputs()[0] == mean->output(0) ? add->inputs()[1] : add->inputs()[0];
  const std::optional<double> eps = scalar(ea);
  if (!eps || *eps < 0 || ea == mean->output(0)) return std::nullopt;
  const Node* sq = c.sole_consumer(add->output(0));
  if (!sq || sq->op_type() != "Sqrt") return std::nullopt;
  // x / sqrt, or x * (1 / sqrt): the inverse as Reciprocal, or as Div(1, sqrt), which
  // is how torch's TorchScript exporter writes rsqrt.
  std::vector<const Node*> nodes = {&n, mean, add, sq};
  const Node* norm = c.sole_consumer(sq->output(0));
  if (!norm) return std::nullopt;
  const bool one_over = norm->op_type() == "Div" && norm->inputs().size() == 2 && norm->inputs()[1] == sq->output(0) &&
                        norm->inputs()[0] != sq->output(0) && scalar(norm->inputs()[0]) == 1.0;
  if (norm->op_type() == "Reciprocal" || one_over) {
    nodes.push_back(norm);
    const Value inv = norm->output(0);
    norm = c.sole_consumer(inv);
    if (!norm || norm->op_type() != "Mul" || norm->inputs().size() != 2 ||
        !((norm->inputs()[0] == x && norm->inputs()[1] == inv) || (norm->inputs()[1] == x && norm->inputs()[0] == inv)))
      return std::nullopt;
  } else if (norm->op_type() != "Div" || norm->inputs().size() != 2 || norm->inputs()[0] != x ||
             norm->inputs()[1] != sq->output(0)) {
    return std::nullopt;
  }
  nodes.push_back(norm);
  if (norm->output_types()[0] != x.type()) return std::nullopt;
  // A weight per column.
  std::vector<float> scale(static_cast<size_t>(xd.back()), 1.0f);
  Value result = norm->output(0);
  if (const Node* w = c.sole_consumer(result); w && w->op_type() == "Mul") {
    const Tensor* t = column_constant(c, *w, result, xd.back(), rank);
    if (t && w->output_types()[0] == x.type()) {
      const std::vector<double> v = t->to_f64();
      for (size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<float>(v[i]);
      nodes.push_back(w);
      result = w->output(0);
    }
  }
  for (const Node* m : nodes)
    if (c.lowered(*m) || (m != nodes.back() && c.is_output(m->output(0)))) return std::nullopt;
  RmsMatch r;
  r.nodes = std::move(nodes);
  r.x = x;
  r.eps = static_cast<float>(*eps);
  r.scale = std::move(scale);
  return r;
}

}  // namespace

bool is_rms_norm_root(Compiler& c, const Node& n) { return match_rms_norm(c, n).has_value(); }

namespace {

// LayerNormalization as exporters before opset 17 write it (TorchScript's BERT and
// GPT-2): d = x - ReduceMean(x) over the last axis, the RMS chain above on d (d
// squared, its mean, + eps, Sqrt, Div), times gamma, plus beta. Rooted at the mean of
// x, the chain's first node; d may be read by the chain alone.
struct LayerNormMatch {
  RmsMatch chain;  // nodes from the mean of x on; x the normalized input
  std::vector<float> bias;
};

std::optional<LayerNormMatch> match_decomposed_layer_norm(Compiler& c, const Node& n) {
  if (!c.opts().fuse || n.inputs().empty()) return std::nullopt;
  const Value x = n.inputs()[0];
  if (x.type().dtype != DType::Float32 || !is_static(x.type().shape)) return std::nullopt;
  const std::vector<int64_t> xd = static_dims(x.type().shape);
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (rank == 0 || !is_last_axis_mean(c, n, rank)) return std::nullopt;
  const Node* sub = c.sole_consumer(n.output(0));
  if (!sub || sub->op_type() != "Sub" || sub->inputs().size() != 2 || sub->inputs()[0] != x ||
      sub->inputs()[1] != n.output(0) || sub->output_types()[0] != x.type() || c.is_output(sub->output(0)))
    return std::nullopt;
  const Value d = sub->output(0);
  std::optional<RmsMatch> rms;
  for (const auto& [m, i] : c.consumers(d))
    if (!rms && (m->op_type() == "Pow" || m->op_type() == "Mul")) rms = match_rms_norm(c, *m);
  if (!rms || rms->x != d) return std::nullopt;
  for (const auto& [m, i] : c.consumers(d))
    if (std::find(rms->nodes.begin(), rms->nodes.end(), m) == rms->nodes.end()) return std::nullopt;
  LayerNormMatch r;
  r.chain = std::move(*rms);
  r.chain.nodes.insert(r.chain.nodes.begin(), {&n, sub});
  r.chain.x = x;
  const Value result = r.chain.nodes.back()->output(0);
  if (const Node* a = c.sole_consumer(result); a && a->op_type() == "Add" && a->output_types()[0] == x.type())
    if (const Tensor* t = column_constant(c, *a, result, xd.back(), rank); t && c.takeable(*a)) {
      for (double v : t->to_f64()) r.bias.push_back(static_cast<float>(v));
      r.chain.nodes.push_back(a);
    }
  for (const Node* m : {&n, sub})
    if (c.lowered(*m)) return std::nullopt;
  return r;
}

// Whether every matched node past the root is free to take: neither lowered nor
// claimed by a pointwise kernel being planned.
bool all_takeable(Compiler& c, const std::vector<const Node*>& nodes) {
  return std::all_of(nodes.begin() + 1, nodes.end(), [&](const Node* m) { return c.takeable(*m); });
}

// One normalization step over the rows of x for the matched nodes (the last one's
// output its result): kernels::normalize_rows with the mean (layer norm) or without.
bool add_norm_step(Compiler& c, const Node& root, const std::vector<const Node*>& nodes, const Value& x,
                   const std::string& what, std::vector<float> scale, std::vector<float> bias, float eps, bool rms) {
  const std::vector<int64_t> xd = static_dims(x.type().shape);
  const int xi = dense_f32(c, x);
  if (xi < 0) return false;
  const int64_t cols = xd.back(), rows = num_elements(xd) / cols;
  const int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), nodes.back()->name());
  StepInfo info = step_info(root, "layernorm", what + " " + std::to_string(rows) + "x" + std::to_string(cols) + " decomposed",
                            8.0 * static_cast<double>(rows * cols));
  info.ops.clear();
  info.nodes.clear();
  for (const Node* m : nodes) {
    info.ops.push_back(m->op_type());
    info.nodes.push_back(node_key(*m));
  }
  auto sc = std::make_shared<std::vector<float>>(std::move(scale));
  auto b = std::make_shared<std::vector<float>>(std::move(bias));
  add_native_step(c, info, {xi}, {y}, [rows, cols, sc, b, eps, rms](const std::vector<char*>& p) {
    kernels::normalize_rows(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]), rows, cols, sc->data(),
                            b->empty() ? nullptr : b->data(), eps, rms);
  });
  c.bind(nodes.back()->output(0), y);
  for (const Node* m : nodes) c.mark_done(*m);
  return true;
}

}  // namespace

bool lower_decomposed_layer_norm(Compiler& c, const Node& n) {
  std::optional<LayerNormMatch> mt = match_decomposed_layer_norm(c, n);
  if (!mt || !all_takeable(c, mt->chain.nodes)) return false;
  return add_norm_step(c, n, mt->chain.nodes, mt->chain.x, mt->bias.empty() ? "layernorm" : "layernorm bias",
                       std::move(mt->chain.scale), std::move(mt->bias), mt->chain.eps, /*rms=*/false);
}

bool lower_rms_norm(Compiler& c, const Node& n) {
  std::optional<RmsMatch> mt = match_rms_norm(c, n);
  // A root whose chain a pointwise kernel being planned has claimed (it asked for
  // the mean of squares) runs unfused: the chain is that kernel's.
  if (!mt || !all_takeable(c, mt->nodes)) return false;
  return add_norm_step(c, n, mt->nodes, mt->x, "rmsnorm", std::move(mt->scale), {}, mt->eps, /*rms=*/true);
}

std::optional<std::vector<float>> row_param(Compiler& c, const Node& n, size_t i, int64_t cols) {
  if (i >= n.inputs().size() || !n.inputs()[i].present()) return std::vector<float>();
  const Tensor* t = c.known(n.inputs()[i]);
  if (!t || t->dtype() != DType::Float32 || (t->numel() != cols && t->numel() != 1)) return std::nullopt;
  std::vector<double> v = t->to_f64();
  std::vector<float> f(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) f[static_cast<size_t>(k)] = static_cast<float>(v[t->numel() == 1 ? 0 : static_cast<size_t>(k)]);
  return f;
}

bool lower_layernorm(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1) return false;  // mean / inverse std outputs: the reference kernel
  int x = dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty()) return false;
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", -1), static_cast<int64_t>(xd.size())));
  const int64_t rows = num_elements(xd, 0, axis), cols = num_elements(xd, axis, xd.size());
  // Scale and bias broadcast over the normalized dims; anything else is the reference kernel's.
  const bool rms = n.op_type() == "RMSNormalization";  // no mean, no bias
  auto scale = row_param(c, n, 1, cols), bias = rms ? std::optional<std::vector<float>>(std::vector<float>()) : row_param(c, n, 2, cols);
  if (!scale || !bias || scale->empty()) return false;
  const float eps = static_cast<float>(n.attrs().get_float("epsilon", 1e-5));
  int y = c.new_value(DType::Float32, xd, plain_md(xd, dt::f32), n.name());
  auto s = std::make_shared<std::vector<float>>(std::move(*scale));
  auto b = std::make_shared<std::vector<float>>(std::move(*bias));
  add_native_step(c,
                  step_info(n, "layernorm",
                          std::string(rms ? "rmsnorm " : "layernorm ") + std::to_string(rows) + "x" + std::to_string(cols) +
                              (b->empty() ? "" : " bias"),
                          8.0 * static_cast<double>(rows * cols)),
                  {x}, {y}, [rows, cols, s, b, eps, rms](const std::vector<char*>& p) {
                    kernels::normalize_rows(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]), rows,
                                            cols, s->data(), b->empty() ? nullptr : b->data(), eps, rms);
                  });
  c.bind(n.output(0), y);
  return true;
}

namespace {

// out[o, i] = the sum (wrapping: W is T's unsigned twin), max or min of x[o, j, i] over j.
template <class T, class W>
void reduce_integers(kernels::ReduceKind k, const char* xp, char* yp, int64_t outer, int64_t len, int64_t inner) {
  const auto* x = reinterpret_cast<const T*>(xp);
  auto* y = reinterpret_cast<T*>(yp);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* col = x + o * len * inner + i;
      if (k == kernels::ReduceKind::Sum) {
        W s = 0;
        for (int64_t j = 0; j < len; ++j) s += static_cast<W>(col[j * inner]);
        y[o * inner + i] = static_cast<T>(s);
        continue;
      }
      T m = col[0];
      for (int64_t j = 1; j < len; ++j)
        m = k == kernels::ReduceKind::Max ? std::max(m, col[j * inner]) : std::min(m, col[j * inner]);
      y[o * inner + i] = m;
    }
}

}  // namespace

bool lower_reduce(Compiler& c, const Node& n) {
  static const std::map<std::string, kernels::ReduceKind> kinds = {
      {"ReduceSum", kernels::ReduceKind::Sum}, {"ReduceMean", kernels::ReduceKind::Mean},
      {"ReduceMax", kernels::ReduceKind::Max}, {"ReduceMin", kernels::ReduceKind::Min},
      {"ReduceProd", kernels::ReduceKind::Prod}, {"ReduceSumSquare", kernels::ReduceKind::SumSquare},
      {"ReduceL1", kernels::ReduceKind::L1}, {"ReduceL2", kernels::ReduceKind::L2},
      {"ReduceLogSum", kernels::ReduceKind::LogSum},
      {"ReduceLogSumExp", kernels::ReduceKind::LogSumExp}};
  auto kind = kinds.find(n.op_type());
  if (kind == kinds.end() || n.num_outputs() != 1) return false;
  if (n.op_type() == "ReduceMean" && lower_decomposed_layer_norm(c, n)) return true;
  if (lower_spatial_reduce_as_pool(c, n)) return true;
  // Integer sums and extremes (an MoE's count of tokens per expert: ReduceSum of a
  // OneHot) wrap as ONNX Runtime's do; other integer reductions stay on the
  // reference kernel.
  const DType t = c.dtype(n.inputs()[0]);
  const kernels::ReduceKind k = kind->second;
  const bool integer = (t == DType::Int64 || t == DType::Int32) &&
                       (k == kernels::ReduceKind::Sum || k == kernels::ReduceKind::Max || k == kernels::ReduceKind::Min);
  int x = integer ? c.as_plain(c.id(n.inputs()[0])) : dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const auto rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> axes = n.attrs().get_ints("axes", {});
  if (n.inputs().size() > 1 && n.inputs()[1].present()) {
    const Tensor* t = c.known(n.inputs()[1]);
    if (!t) return false;
    axes = t->to_i64();
  }
  if (axes.empty()) {
    if (n.attrs().get_int("noop_with_empty_axes", 0)) return false;  // an identity: the reference kernel copies
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = normalize_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  // The reduced axes as one run of adjacent axes (dims of extent 1 may sit between).
  std::vector<int64_t> live;
  for (int64_t a : axes)
    if (xd[static_cast<size_t>(a)] != 1) live.push_back(a);
  size_t first = live.empty() ? 0 : static_cast<size_t>(live.front()), last = live.empty() ? 0 : static_cast<size_t>(live.back()) + 1;
  bool adjacent = true;
  for (size_t i = first; i < last; ++i)
    adjacent = adjacent && (xd[i] == 1 || std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i)));
  if (!adjacent) {
    // Axes apart (an adaptive average pool decomposed by the exporter: a mean over
    // axes -3 and -1): the kept axes are moved before the reduced ones, one run.
    std::vector<int64_t> perm, td, strides(xd.size(), 1);
    for (size_t i = xd.size(); i-- > 1;) strides[i - 1] = strides[i] * xd[i];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < rank; ++i)
        if (std::binary_search(axes.begin(), axes.end(), i) == (pass == 1)) perm.push_back(i);
    std::vector<int64_t> src_strides;
    for (int64_t a : perm) td.push_back(xd[static_cast<size_t>(a)]), src_strides.push_back(strides[static_cast<size_t>(a)]);
    std::vector<int64_t> dst_strides(td.size(), 1);
    for (size_t i = td.size(); i-- > 1;) dst_strides[i - 1] = dst_strides[i] * td[i];
    const int t = c.new_value(DType::Float32, td, plain_md(td, dt::f32), n.name() + ".kept_first");
    add_native_step(c, step_info(n, "reorder", "reduce axes last " + to_string(td), 0), {x}, {t},
                    [=](const std::vector<char*>& p) {
                      kernels::strided_copy(sizeof(float), p[0], src_strides, p[1], dst_strides, td);
                    });
    x = t;
    first = xd.size() - axes.size(), last = xd.size();
  }
  const std::vector<int64_t> rd = c.val(x).dims;
  const int64_t outer = num_elements(rd, 0, first), len = num_elements(rd, first, last), inner = num_elements(rd, last, rd.size());
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  int y = integer ? dense_output(c, n) : c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name());
  add_native_step(c,
                  step_info(n, "reduce",
                          "reduce " + n.op_type() + " " + std::string(dtype_name(t)) +
                              to_string(std::vector<int64_t>{outer, len, inner}),
                          static_cast<double>(num_elements(xd))),
                  {x}, {y}, [k, t, integer, outer, len, inner](const std::vector<char*>& p) {
                    if (!integer)
                      kernels::reduce_axis(k, reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]),
                                           outer, len, inner);
                    else if (t == DType::Int64)
                      reduce_integers<int64_t, uint64_t>(k, p[0], p[1], outer, len, inner);
                    else
                      reduce_integers<int32_t, uint32_t>(k, p[0], p[1], outer, len, inner);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_gather(Compiler& c, const Node& n) {
  if (n.op_type() != "Gather" || n.num_outputs() != 1) return false;
  if (lower_expert_matmul(c, n)) return true;
  const DType index_type = c.dtype(n.inputs()[1]);
  if (index_type != DType::Int64 && index_type != DType::Int32) return false;
  int x = c.as_plain(c.id(n.inputs()[0]));
  int idx = c.as_plain(c.id(n.inputs()[1]));
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.empty()) return false;
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", 0), static_cast<int64_t>(xd.size())));
  const int64_t outer = num_elements(xd, 0, axis), len = xd[axis], inner = num_elements(xd, axis + 1, xd.size());
  const int64_t m = num_elements(c.val(idx).dims);
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  const DType t = c.val(x).dtype;
  auto type = dnnl_type(t);
  int y = c.new_value(t, od, type ? plain_md(od, *type) : md_t(), n.name());
  const size_t elem = dtype_size(t), ielem = dtype_size(index_type);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "gather",
                          "gather " + std::string(dtype_name(t)) + to_string(std::vector<int64_t>{outer, len, inner}) +
                              " m" + std::to_string(m),
                          0),
                  {x, idx}, {y}, [elem, outer, len, inner, ielem, m, who](const std::vector<char*>& p) {
                    int64_t bad = 0;
                    if (!kernels::gather_axis(elem, p[0], outer, len, inner, p[1], ielem, m, p[2], &bad))
                      throw Error(who + ": index " + std::to_string(bad) + " is out of range for an axis of extent " +
                                  std::to_string(len));
                  });
  c.bind(n.output(0), y);
  return true;
}

// Shape reads only the dims, which are known here.
bool lower_shape_of(Compiler& c, const Node& n) {
  std::vector<int64_t> d = c.dims(n.inputs()[0]);
  if (n.op_type() == "Size") {
    const std::vector<int64_t> count{num_elements(d)};
    c.bind(n.output(0), c.constant_value(Tensor::from_i64(DType::Int64, {}, count), n.name()));
    return true;
  }
  if (n.op_type() == "EyeLike") {  // its value depends only on the input's extents
    const DType t = c.dtype(n.inputs()[0]);
    const auto count = static_cast<size_t>(num_elements(d));
    const Tensor shaped = is_float(t) ? Tensor::from_f64(t, d, std::vector<double>(count, 0.0))
                                      : Tensor::from_i64(t, d, std::vector<int64_t>(count, 0));
    EvalContext ctx{n.attrs(), std::span<const Tensor>(&shaped, 1), 1};
    c.bind(n.output(0), c.constant_value(n.op()->eval(ctx)[0], n.name()));
    return true;
  }
  if (n.op_type() != "Shape") return false;
  const auto rank = static_cast<int64_t>(d.size());
  int64_t start = n.attrs().get_int("start", 0), end = n.attrs().get_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  c.bind(n.output(0), c.constant_value(Tensor::vector_i64(std::vector<int64_t>(d.begin() + start, d.begin() + end)),
                                       n.name()));
  return true;
}

// ConstantOfShape has concrete dims here, so its value is known: a constant.
bool lower_constant_of_shape(Compiler& c, const Node& n) {
  if (n.op_type() != "ConstantOfShape") return false;
  const std::vector<int64_t> od = static_dims(c.concrete_types(n)[0].shape);
  const Tensor shape = Tensor::vector_i64(od);
  EvalContext ctx{n.attrs(), std::span<const Tensor>(&shape, 1), 1};
  c.bind(n.output(0), c.constant_value(n.op()->eval(ctx)[0], n.name()));
  return true;
}

}  // namespace isomer::runtime
