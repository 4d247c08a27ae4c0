#include "parallel/op_spec.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "ops/op.h"

namespace isomer::parallel {

namespace {

using Dims = std::vector<int64_t>;

std::optional<Dims> dims_of(const TensorType& t) {
  if (!is_static(t.shape)) return std::nullopt;
  return static_dims(t.shape);
}

// Values of a constant integer input, if it is one.
std::optional<std::vector<int64_t>> const_ints(const Node& n, size_t i) {
  if (i >= n.inputs().size() || !n.inputs()[i].present()) return std::nullopt;
  const Tensor* t = n.inputs()[i].constant();
  if (!t || (t->dtype() != DType::Int64 && t->dtype() != DType::Int32)) return std::nullopt;
  return t->to_i64();
}

// Builds specs: one dimension at a time, tensor dims named per input and output.
class SpecBuilder {
 public:
  SpecBuilder(const Node& n, std::vector<Dims> in, std::vector<Dims> out)
      : n_(n), in_(std::move(in)), out_(std::move(out)) {}

  // A dimension cutting output dims `out` (-1 none) and input dims `in` (-1 none).
  // Extents must agree; a dimension of extent < 2 cannot be split and is left out.
  void add(char kind, std::vector<int> out, std::vector<int> in) {
    in.resize(in_.size(), -1);
    out.resize(out_.size(), -1);
    int64_t extent = -1;
    auto see = [&](const Dims& d, int axis) {
      if (axis < 0) return;
      extent = extent < 0 ? d[static_cast<size_t>(axis)] : std::gcd(extent, d[static_cast<size_t>(axis)]);
    };
    for (size_t k = 0; k < out.size(); ++k) see(out_[k], out[k]);
    for (size_t k = 0; k < in.size(); ++k) see(in_[k], in[k]);
    if (extent < 2) return;
    // Parameter: the dimension cuts a weight.
    if (kind == 'A')
      for (size_t k = 0; k < in.size(); ++k)
        if (in[k] >= 0 && n_.inputs()[k].node->kind() == NodeKind::Constant) kind = 'P';
    spec.dims.push_back({kind, extent, std::move(out), std::move(in)});
  }

  // Elementwise with numpy broadcasting: each output dim cuts the inputs' dims of the
  // same extent (aligned from the right); broadcast inputs are read whole.
  void broadcast(char first_kind = 'S') {
    const Dims& o = out_[0];
    for (size_t d = 0; d < o.size(); ++d) {
      std::vector<int> in(in_.size(), -1);
      for (size_t k = 0; k < in_.size(); ++k) {
        const int64_t off = static_cast<int64_t>(o.size()) - static_cast<int64_t>(in_[k].size());
        const int64_t a = static_cast<int64_t>(d) - off;
        if (a >= 0 && in_[k][static_cast<size_t>(a)] == o[d]) in[k] = static_cast<int>(a);
      }
      add(d == 0 ? first_kind : 'A', std::vector<int>(out_.size(), static_cast<int>(d)), in);
    }
  }

  const Dims& in(size_t i) const { return in_[i]; }
  const Dims& out(size_t i) const { return out_[i]; }
  size_t num_in() const { return in_.size(); }
  size_t num_out() const { return out_.size(); }
  int rank_in(size_t i) const { return static_cast<int>(in_[i].size()); }
  OpSpec spec;

 private:
  const Node& n_;
  std::vector<Dims> in_, out_;
};

void matmul(SpecBuilder& b) {
  const int ra = b.rank_in(0), rb = b.rank_in(1), r = static_cast<int>(b.out(0).size());
  if (ra < 2 || rb < 2) return;
  for (int d = 0; d < r - 2; ++d) {  // batch dims, broadcast from the right
    const int a = d - (r - ra), c = d - (r - rb);
    int ia = a >= 0 && b.in(0)[a] == b.out(0)[d] ? a : -1;
    int ib = c >= 0 && b.in(1)[c] == b.out(0)[d] ? c : -1;
    b.add(d == 0 ? 'S' : 'A', {d}, {ia, ib});
  }
  b.add(r == 2 ? 'S' : 'A', {r - 2}, {ra - 2, -1});
  b.add('P', {r - 1}, {-1, rb - 1});
  b.add('R', {-1}, {ra - 1, rb - 2});
}

void gemm(SpecBuilder& b, const Node& n) {
  if (b.rank_in(0) != 2 || b.rank_in(1) != 2) return;
  const bool ta = n.attrs().get_int("transA", 0) != 0, tb = n.attrs().get_int("transB", 0) != 0;
  const int64_t M = b.out(0)[0], N = b.out(0)[1];
  int cm = -1, cn = -1;  // C's dims that follow M and N (C broadcasts to [M, N])
  if (b.num_in() > 2) {
    const Dims& c = b.in(2);
    if (c.size() == 2) {
      cm = c[0] == M ? 0 : -1;
      cn = c[1] == N ? 1 : -1;
    } else if (c.size() == 1) {
      cn = c[0] == N ? 0 : -1;
    }
  }
  b.add('S', {0}, {ta ? 1 : 0, -1, cm});
  b.add('P', {1}, {-1, tb ? 0 : 1, cn});
  b.add('R', {-1}, {ta ? 0 : 1, tb ? 1 : 0, -1});
  if (b.num_in() > 2) b.spec.add_once = 2;
}

void conv(SpecBuilder& b, const Node& n) {
  const Dims& x = b.in(0);
  const Dims& w = b.in(1);
  if (x.size() < 3 || w.size() != x.size()) return;
  const int64_t group = n.attrs().get_int("group", 1);
  const bool bias = b.num_in() > 2;
  b.add('S', {0}, {0, -1, -1});
  if (group == 1) {
    b.add('P', {1}, {-1, 0, bias ? 0 : -1});
    b.add('R', {-1}, {1, 1, -1});
    if (bias) b.spec.add_once = 2;
  } else if (group == x[1] && w[0] == x[1] && w[1] == 1) {  // depthwise: channels split with their group
    b.add('P', {1}, {1, 0, bias ? 0 : -1});
    b.spec.group_dim = static_cast<int>(b.spec.dims.size()) - 1;
  }
  // Spatial dims only for pointwise convolutions (no window crosses a block boundary).
  const auto pads = n.attrs().get_ints("pads", {});
  const auto strides = n.attrs().get_ints("strides", {});
  bool pointwise = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
                   std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; });
  for (size_t d = 2; d < w.size(); ++d) pointwise = pointwise && w[d] == 1;
  if (pointwise && n.attrs().get_string("auto_pad", "NOTSET") == "NOTSET")
    for (int d = 2; d < static_cast<int>(x.size()); ++d) b.add('A', {d}, {d, -1, -1});
}

// Operators that keep dims [0, keep) of input 0 and act along the rest (or along
// one axis): each kept dim maps to the same output dim; other inputs read whole.
void keep_dims(SpecBuilder& b, const std::set<int>& acting) {
  for (int d = 0; d < b.rank_in(0); ++d)
    if (!acting.count(d) && d < static_cast<int>(b.out(0).size()) && b.in(0)[d] == b.out(0)[d])
      b.add(d == 0 ? 'S' : 'A', std::vector<int>(b.num_out(), d), {d});
}

void reshape_like(SpecBuilder& b) {
  for (const DimPair& p : reshape_dim_pairs(b.in(0), b.out(0)))
    b.add(p.in == 0 ? 'S' : 'A', {p.out}, {p.in});
}

void reduce(SpecBuilder& b, const Node& n, bool sum) {
  const int r = b.rank_in(0);
  std::optional<std::vector<int64_t>> axes = const_ints(n, 1);
  if (!axes && n.attrs().has("axes")) axes = n.attrs().get_ints("axes");
  std::set<int> reduced;
  if (!axes || axes->empty()) {
    if (axes && n.attrs().get_int("noop_with_empty_axes", 0)) return;
    for (int d = 0; d < r; ++d) reduced.insert(d);
  } else {
    for (int64_t a : *axes) reduced.insert(static_cast<int>(a < 0 ? a + r : a));
  }
  const bool keep = n.attrs().get_int("keepdims", 1) != 0;
  int o = 0;
  for (int d = 0; d < r; ++d) {
    if (reduced.count(d)) {
      if (sum) b.add('R', {-1}, {d});
      if (keep) ++o;
      continue;
    }
    b.add(d == 0 ? 'S' : 'A', {o++}, {d});
  }
}

void gather(SpecBuilder& b, const Node& n) {
  const int r = b.rank_in(0), ri = b.rank_in(1);
  const int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis", 0), r));
  for (int d = 0; d < ri; ++d) b.add(d == 0 ? 'S' : 'A', {axis + d}, {-1, d});
  for (int d = 0; d < r; ++d)
    if (d != axis) b.add('P', {d < axis ? d : d + ri - 1}, {d, -1});
}

}  // namespace

std::vector<DimPair> reshape_dim_pairs(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<DimPair> pairs;
  if (std::find(in.begin(), in.end(), 0) != in.end()) return pairs;
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[j] == 1) {
      ++j;
      continue;
    }
    const size_t gi = i, gj = j;
    int64_t pin = in[i], pout = out[j];
    while (pin != pout) {
      if (pin < pout) {
        if (++i >= in.size()) return pairs;
        pin *= in[i];
      } else {
        if (++j >= out.size()) return pairs;
        pout *= out[j];
      }
    }
    const int64_t g = std::gcd(in[gi], out[gj]);
    if (g > 1) pairs.push_back({static_cast<int>(gi), static_cast<int>(gj), g});
    ++i;
    ++j;
  }
  return pairs;
}

OpSpec op_spec(const Node& n) {
  if (n.kind() != NodeKind::Op) return {};
  std::vector<Dims> in, out;
  for (const Value& v : n.inputs()) {
    if (!v.present()) return {};
    std::optional<Dims> d = dims_of(v.type());
    if (!d) return {};
    in.push_back(*d);
  }
  for (const TensorType& t : n.output_types()) {
    std::optional<Dims> d = dims_of(t);
    if (!d) return {};
    out.push_back(*d);
  }
  SpecBuilder b(n, in, out);
  const std::string& op = n.op_type();
  const OpDef& def = *n.op();
  if (def.onnx_domain == "isomer.parallel") return {};
  if (def.props.elementwise || op == "Where" || op == "Cast" || op == "Clip" || op == "Identity" ||
      (op == "Dropout" && n.num_outputs() == 1)) {
    if (n.num_outputs() == 1) b.broadcast();
  } else if (op == "MatMul") {
    matmul(b);
  } else if (op == "Gemm") {
    gemm(b, n);
  } else if (op == "Conv") {
    conv(b, n);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") {
    if (n.num_outputs() == 1) keep_dims(b, [&] {
        std::set<int> s;
        for (int d = 2; d < b.rank_in(0); ++d) s.insert(d);
        return s;
      }());
  } else if (op == "BatchNormalization") {
    if (n.num_outputs() == 1) {
      b.add('S', {0}, {0, -1, -1, -1, -1});
      b.add('A', {1}, {1, 0, 0, 0, 0});
      for (int d = 2; d < b.rank_in(0); ++d) b.add('A', {d}, {d});
    }
  } else if (op == "LayerNormalization") {
    if (n.num_outputs() == 1) {
      const int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis", -1), b.rank_in(0)));
      std::set<int> acting;
      for (int d = axis; d < b.rank_in(0); ++d) acting.insert(d);
      keep_dims(b, acting);
    }
  } else if (op == "Softmax") {
    keep_dims(b, {static_cast<int>(normalize_axis(n.attrs().get_int("axis", -1), b.rank_in(0)))});
  } else if (op == "ReduceSum" || op == "ReduceMean") {
    reduce(b, n, op == "ReduceSum");
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = n.attrs().get_ints("perm", {});
    if (perm.empty())
      for (int d = b.rank_in(0) - 1; d >= 0; --d) perm.push_back(d);
    for (size_t d = 0; d < perm.size(); ++d)
      b.add(perm[d] == 0 ? 'S' : 'A', {static_cast<int>(d)}, {static_cast<int>(perm[d])});
  } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    reshape_like(b);
  } else if (op == "Concat") {
    const int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis"), b.rank_in(0)));
    for (int d = 0; d < b.rank_in(0); ++d)
      if (d != axis) b.add(d == 0 ? 'S' : 'A', {d}, std::vector<int>(b.num_in(), d));
  } else if (op == "Split") {
    const int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis", 0), b.rank_in(0)));
    for (int d = 0; d < b.rank_in(0); ++d)
      if (d != axis) b.add(d == 0 ? 'S' : 'A', std::vector<int>(b.num_out(), d), {d});
  } else if (op == "Slice" || op == "Pad" || op == "Expand") {
    // Dims the operator leaves alone: same extent, and (Slice, Pad) not named by
    // its constant operands.
    std::set<int> touched;
    if (op == "Slice") {
      std::optional<std::vector<int64_t>> axes = const_ints(n, 3);
      if (!axes && n.inputs().size() > 3) return {};
      if (!axes) {
        std::optional<std::vector<int64_t>> starts = const_ints(n, 1);
        if (!starts) return {};
        axes = std::vector<int64_t>(starts->size());
        std::iota(axes->begin(), axes->end(), 0);
      }
      for (int64_t a : *axes) touched.insert(static_cast<int>(a < 0 ? a + b.rank_in(0) : a));
    } else if (op == "Pad") {
      std::optional<std::vector<int64_t>> pads = const_ints(n, 1);
      if (!pads || n.inputs().size() > 3) return {};
      const int r = b.rank_in(0);
      for (int d = 0; d < r && 2 * r == static_cast<int>(pads->size()); ++d)
        if ((*pads)[d] != 0 || (*pads)[d + r] != 0) touched.insert(d);
      if (2 * r != static_cast<int>(pads->size())) return {};
    }
    const int off = static_cast<int>(b.out(0).size()) - b.rank_in(0);
    for (int d = 0; d < b.rank_in(0); ++d)
      if (!touched.count(d) && b.in(0)[d] == b.out(0)[d + off]) b.add(d == 0 ? 'S' : 'A', {d + off}, {d});
  } else if (op == "Gather") {
    gather(b, n);
  }
  return b.spec;
}

}  // namespace isomer::parallel
