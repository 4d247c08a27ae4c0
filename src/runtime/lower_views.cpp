// Operators that only relabel, select or repeat elements become views: the same
// buffer read with other dims, strides and a start offset, no step at all.
// Identity and Dropout alias their input; Reshape, Flatten, Squeeze and Unsqueeze
// re-stride it (copying only when the input is a view whose strides cannot be
// regrouped, and then, for a broadcast's repeat axis merged with another, only when
// something other than a product reads it: a SplitView); Transpose permutes strides;
// Slice offsets and scales them; Split makes one view per part; Expand (and a Tile
// of dims of extent 1) gives broadcast dims stride 0. Native kernels
// and oneDNN's matmul and reorders read such views directly. DepthToSpace and
// SpaceToDepth are one strided copy.
#include <algorithm>

#include "ops/layout_common.h"
#include "runtime/compiler.h"
#include "kernels/copy.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Strides that show a tensor of dims `from` (strides `fs`) as dims `to` without
// copying, or nullopt if its layout does not allow it (a regrouped run of dims
// must be contiguous among itself).
std::optional<std::vector<int64_t>> reshape_strides(const std::vector<int64_t>& from, const std::vector<int64_t>& fs,
                                                    const std::vector<int64_t>& to) {
  if (num_elements(from) == 0) return row_major(to);
  std::vector<int64_t> fd, fst;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1) fd.push_back(from[i]), fst.push_back(fs[i]);
  std::vector<int64_t> ts(to.size(), 0);
  size_t i = 0, j = 0;
  while (j < to.size()) {
    if (to[j] == 1) {
      ++j;
      continue;
    }
    if (i >= fd.size()) return std::nullopt;
    const size_t i0 = i, j0 = j;
    int64_t pf = fd[i++], pt = to[j++];
    while (pf != pt) {
      if (pf < pt) {
        if (i >= fd.size()) return std::nullopt;
        pf *= fd[i++];
      } else {
        if (j >= to.size()) return std::nullopt;
        pt *= to[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (fst[k] != fst[k + 1] * fd[k + 1]) return std::nullopt;
    int64_t s = fst[i - 1];
    for (size_t k = j; k-- > j0;) {
      ts[k] = s;
      s *= to[k];
    }
  }
  if (i != fd.size()) return std::nullopt;
  return ts;
}

// `parts` (strided dims, outermost first, in the element order of a dense tensor)
// regrouped as dims `to`: each dim of `to` takes consecutive parts, a part split in
// two where a dim ends inside it and divides it. Contiguous neighbours are merged
// first, so a dim that needs one stride gets one. nullopt where a dim ends inside
// a part it does not divide.
std::optional<SplitView> regroup(int src, std::vector<std::pair<int64_t, int64_t>> parts,
                                 const std::vector<int64_t>& to) {
  std::vector<std::pair<int64_t, int64_t>> ps;
  for (const auto& p : parts) {
    if (p.first == 1) continue;
    if (!ps.empty() && ps.back().second == p.second * p.first) ps.back() = {ps.back().first * p.first, p.second};
    else ps.push_back(p);
  }
  SplitView v;
  v.src = src;
  v.dims = to;
  size_t i = 0;
  for (int64_t t : to) {
    std::vector<std::pair<int64_t, int64_t>> own;
    int64_t have = 1;
    while (have < t) {
      if (i >= ps.size()) return std::nullopt;
      const int64_t need = t / have;
      if (t % have != 0) return std::nullopt;
      auto [e, st] = ps[i];
      if (e <= need) {
        own.push_back(ps[i++]);
        have *= e;
      } else {
        if (e % need != 0) return std::nullopt;
        own.push_back({need, st * (e / need)});
        ps[i] = {e / need, st};
        have *= need;
      }
    }
    if (have != t) return std::nullopt;
    v.parts.push_back(std::move(own));
  }
  if (i != ps.size()) return std::nullopt;
  return v;
}

// Binds `out` to `v`: a plain view where each dim has at most one part, else a
// SplitView left for its consumers.
void bind_regrouped(Compiler& c, const Value& out, SplitView v, const std::string& name) {
  if (!v.split()) {
    std::vector<int64_t> st;
    for (const auto& p : v.parts) st.push_back(p.empty() ? 1 : p[0].second);
    c.bind(out, c.view(v.src, v.dims, st, 0, name));
    return;
  }
  c.defer_view(out, std::move(v));
}

// The parts of a SplitView in element order.
std::vector<std::pair<int64_t, int64_t>> flat_parts(const SplitView& v) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& p : v.parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The input of a view as something strided: blocked oneDNN layouts become plain.
int viewable(Compiler& c, const Value& v) {
  int x = c.id(v);
  return c.strides_of(x) ? x : c.as_plain(x);
}

// Elements [start, start + count) along `axis` of value `x` in a blocked layout
// (what a convolution writes: nChw16c) as a view in that layout, with no copy,
// or -1 where that is not exact. It is exact when the part starts on a block
// boundary along the axis (its blocks are then the parent's blocks from start /
// block on) and ends on one or at the parent's end (a partial last block holds
// only the parent's own zero padding, never another part's channels), and when
// the part is dense in the parent's order of dims (the dims outside the part's
// blocks have extent 1: batch 1 for a channel part), so that every primitive and
// native kernel takes it as it would a tensor of its own. Its description is the
// dense one of that order, equal to what oneDNN makes from the format tag.
int blocked_part(Compiler& c, int x, size_t axis, int64_t start, int64_t count, const std::string& name) {
  const RtValue& v = c.val(x);
  const dnnl_memory_desc_t& d = v.md.data;
  if (!d.ndims || d.format_kind != dnnl_blocked || d.offset0 != 0 || count <= 0 ||
      static_cast<size_t>(d.ndims) != v.dims.size() || axis >= v.dims.size())
    return -1;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (b.inner_nblks == 0) return -1;  // plain strides: an ordinary view
  std::vector<int64_t> blocks(v.dims.size(), 1);
  for (int k = 0; k < b.inner_nblks; ++k) blocks[static_cast<size_t>(b.inner_idxs[k])] *= b.inner_blks[k];
  for (int i = 0; i < d.ndims; ++i)
    if (d.padded_offsets[i] != 0 || d.padded_dims[i] % blocks[static_cast<size_t>(i)] != 0) return -1;
  const int64_t block = blocks[axis], end = start + count, full = v.dims[axis];
  if (start < 0 || end > full || start % block != 0 || (end % block != 0 && end != full)) return -1;
  dnnl_memory_desc_t p = d;
  const int a = static_cast<int>(axis);
  p.dims[a] = count;
  p.padded_dims[a] = end == full ? d.padded_dims[a] - start : count;
  // Dense strides in the parent's order of outer dims (outermost first, ties in
  // index order), innermost from the inner blocks' size.
  std::vector<int> order(static_cast<size_t>(d.ndims));
  for (int i = 0; i < d.ndims; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return b.strides[i] > b.strides[j]; });
  int64_t inner = 1;
  for (int k = 0; k < b.inner_nblks; ++k) inner *= b.inner_blks[k];
  int64_t stride = inner;
  dnnl_dims_t dense{};
  for (size_t k = order.size(); k-- > 0;) {
    const int i = order[k];
    dense[i] = stride;
    stride *= p.padded_dims[i] / blocks[static_cast<size_t>(i)];
  }
  for (int i = 0; i < d.ndims; ++i) {
    const int64_t outer = p.padded_dims[i] / blocks[static_cast<size_t>(i)];
    if (outer != 1 && b.strides[i] != dense[i]) return -1;  // not one dense run
    p.format_desc.blocking.strides[i] = dense[i];
  }
  std::vector<int64_t> dims = v.dims;
  dims[axis] = count;
  const auto elem = static_cast<int64_t>(dtype_size(v.dtype));
  const int64_t offset = start / block * b.strides[a] * elem;
  int id = c.alias(x, dims, md_t(p), name);
  c.val(id).byte_offset += offset;
  c.val(id).bytes = c.val(id).md.get_size();
  return id;
}

}  // namespace

bool lower_identity(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1 && !(n.op_type() == "Dropout" && n.num_outputs() <= 2)) return false;
  if (const SplitView* s = c.split_view(n.inputs()[0]); s && n.num_outputs() == 1) {
    c.defer_view(n.output(0), *s);
    return true;
  }
  int x = c.id(n.inputs()[0]);
  c.bind(n.output(0), c.alias(x, c.val(x).dims, c.val(x).md, n.name()));
  if (n.num_outputs() == 2) {
    // Dropout's mask in inference: all true.
    std::vector<int64_t> dims = c.val(x).dims;
    Tensor mask(DType::Bool, dims, std::string(static_cast<size_t>(num_elements(dims)), '\1'));
    c.bind(n.output(1), c.constant_value(mask, n.name() + ".mask"));
  }
  return true;
}

bool lower_reshape(Compiler& c, const Node& n) {
  if (lower_reshaped_group_norm(c, n)) return true;
  const std::vector<int64_t> out_dims = static_dims(c.concrete_types(n)[0].shape);
  if (const SplitView* s = c.split_view(n.inputs()[0]))
    if (auto v = regroup(s->src, flat_parts(*s), out_dims)) {
      bind_regrouped(c, n.output(0), std::move(*v), n.name());
      return true;
    }
  int x = c.id(n.inputs()[0]);
  if (!c.strides_of(x)) {
    // A blocked layout: oneDNN regroups its dims where the blocking allows
    // (adding or dropping dims of extent 1, the same dims).
    try {
      md_t md = c.val(x).dims == out_dims ? c.val(x).md : c.val(x).md.reshape(to_dims(out_dims));
      c.bind(n.output(0), c.alias(x, out_dims, md, n.name()));
      return true;
    } catch (const dnnl::error&) {
      x = c.as_plain(x);
    }
  }
  auto fs = c.strides_of(x);
  auto ts = reshape_strides(c.val(x).dims, *fs, out_dims);
  if (!ts && c.broadcast_view(x)) {
    // A broadcast's repeat axis merged with a real one (repeat_kv): read in place
    // by a product, copied dense only for other consumers.
    std::vector<std::pair<int64_t, int64_t>> parts;
    for (size_t i = 0; i < fs->size(); ++i) parts.push_back({c.val(x).dims[i], (*fs)[i]});
    if (auto v = regroup(x, std::move(parts), out_dims)) {
      bind_regrouped(c, n.output(0), std::move(*v), n.name());
      return true;
    }
  }
  if (!ts) {
    x = c.as_plain(x);
    ts = row_major(out_dims);
  }
  c.bind(n.output(0), c.view(x, out_dims, *ts, 0, n.name()));
  return true;
}

bool lower_transpose(Compiler& c, const Node& n) {
  if (const SplitView* s = c.split_view(n.inputs()[0])) {
    std::vector<int64_t> perm = n.attrs().get_ints("perm", {});
    const size_t r = s->dims.size();
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    if (perm.size() != r) return false;
    SplitView t;
    t.src = s->src;
    for (int64_t p : perm) {
      t.dims.push_back(s->dims[static_cast<size_t>(p)]);
      t.parts.push_back(s->parts[static_cast<size_t>(p)]);
    }
    c.defer_view(n.output(0), std::move(t));
    return true;
  }
  int x = c.id(n.inputs()[0]);
  const std::vector<int64_t> xd = c.val(x).dims;
  const size_t r = xd.size();
  std::vector<int64_t> perm = n.attrs().get_ints("perm", {});
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return false;
  if (!c.strides_of(x)) {
    // A blocked layout permuted as it is (oneDNN moves the blocking with its
    // dim): a pair of transposes that cancel leaves the original layout.
    std::vector<int> inverse(r);
    std::vector<int64_t> od;
    for (size_t i = 0; i < r; ++i) {
      inverse[static_cast<size_t>(perm[i])] = static_cast<int>(i);
      od.push_back(xd[static_cast<size_t>(perm[i])]);
    }
    try {
      c.bind(n.output(0), c.alias(x, od, c.val(x).md.permute_axes(inverse), n.name()));
      return true;
    } catch (const dnnl::error&) {
      x = c.as_plain(x);
    }
  }
  std::vector<int64_t> xs = *c.strides_of(x), od, os;
  for (int64_t p : perm) {
    od.push_back(xd[static_cast<size_t>(p)]);
    os.push_back(xs[static_cast<size_t>(p)]);
  }
  c.bind(n.output(0), c.view(x, od, os, 0, n.name()));
  return true;
}

bool lower_slice(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (i >= in.size() || !in[i].present()) return std::nullopt;
    const Tensor* t = c.peek_known(in[i]);
    if (!t) return std::nullopt;
    return t->to_i64();
  };
  auto starts = ints(1), ends = ints(2);
  if (!starts || !ends) return false;  // data-dependent bounds: the reference kernel
  const int src = c.id(in[0]);
  const std::vector<int64_t> xd = c.val(src).dims;
  const int64_t rank = static_cast<int64_t>(xd.size());
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (in.size() > 3 && in[3].present()) {
    auto a = ints(3);
    if (!a) return false;
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (in.size() > 4 && in[4].present()) {
    auto s = ints(4);
    if (!s) return false;
    steps = *s;
  }
  if (axes.size() != starts->size() || ends->size() != starts->size() || steps.size() != starts->size()) return false;
  if (!c.strides_of(src)) {
    // A blocked input cut along one axis, forwards: a view in its own layout
    // where that is exact (see blocked_part).
    std::optional<std::pair<size_t, ops::AxisSlice>> cut;
    bool one_cut = true;
    for (size_t i = 0; i < axes.size() && one_cut; ++i) {
      const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank || steps[i] == 0) return false;
      ops::AxisSlice s = ops::slice_axis((*starts)[i], (*ends)[i], steps[i], xd[static_cast<size_t>(a)]);
      if (s.step == 1 && s.start == 0 && s.count == xd[static_cast<size_t>(a)]) continue;  // the whole axis
      one_cut = !cut && s.step == 1;
      cut = {static_cast<size_t>(a), s};
    }
    if (one_cut && cut)
      if (int v = blocked_part(c, src, cut->first, cut->second.start, cut->second.count, n.name()); v >= 0) {
        c.bind(n.output(0), v);
        return true;
      }
  }
  const int x = viewable(c, in[0]);
  std::vector<int64_t> od = xd, os = *c.strides_of(x);
  int64_t offset = 0;
  bool backwards = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] == 0) return false;
    ops::AxisSlice s = ops::slice_axis((*starts)[i], (*ends)[i], steps[i], xd[static_cast<size_t>(a)]);
    offset += s.start * os[static_cast<size_t>(a)];
    od[static_cast<size_t>(a)] = s.count;
    os[static_cast<size_t>(a)] *= s.step;
    backwards = backwards || s.step < 0;
  }
  const auto elem = static_cast<int64_t>(dtype_size(c.val(x).dtype));
  if (num_elements(od) == 0) offset = 0;
  int v = -1;
  if (backwards) {
    // oneDNN cannot describe negative strides: a reversed slice is copied.
    v = c.new_value(c.val(x).dtype, od, dnnl_type(c.val(x).dtype) ? plain_md(od, *dnnl_type(c.val(x).dtype)) : md_t(),
                    n.name());
    StepInfo info;
    info.kind = "copy";
    info.label = n.name();
    info.ops = {"Slice"};
    info.nodes = {node_key(n)};
    info.signature = "slice-copy " + std::string(dtype_name(c.val(x).dtype)) + to_string(od) + " s" + to_string(os);
    std::vector<int64_t> to = row_major(od);
    const int64_t start = offset;
    add_native_step(c, info, {x}, {v}, [elem, od, os, to, start](const std::vector<char*>& p) {
      kernels::strided_copy(static_cast<size_t>(elem), p[0] + start * elem, os, p[1], to, od);
    });
  } else {
    v = c.view(x, od, os, offset * elem, n.name());
  }
  c.bind(n.output(0), v);
  return true;
}

bool lower_split(Compiler& c, const Node& n) {
  const std::vector<TensorType> types = c.concrete_types(n);
  const int src = c.id(n.inputs()[0]);
  const std::vector<int64_t> xd = c.val(src).dims;
  const int64_t rank = static_cast<int64_t>(xd.size());
  int64_t axis = n.attrs().get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  const auto a = static_cast<size_t>(axis);
  const auto elem = static_cast<int64_t>(dtype_size(c.val(src).dtype));
  // A blocked input (a convolution's nChw16c output split into channel groups)
  // keeps its layout in every part that can be a view of it as it is (see
  // blocked_part); the input is made plain only if some other part needs that.
  const bool blocked = !c.strides_of(src);
  int x = blocked ? -1 : src;
  int64_t at = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    std::vector<int64_t> od = static_dims(types[k].shape);
    const std::string name = n.name() + ":" + std::to_string(k);
    int part = -1;
    if (num_elements(od) == 0) {
      part = c.view(src, od, row_major(od), 0, name);  // nothing to read
    } else if (blocked) {
      part = blocked_part(c, src, a, at, od[a], name);
    }
    if (part < 0) {
      if (x < 0) x = viewable(c, n.inputs()[0]);
      const std::vector<int64_t> xs = *c.strides_of(x);
      part = c.view(x, od, xs, at * xs[a] * elem, name);
    }
    c.bind(n.output(static_cast<uint32_t>(k)), part);
    at += od[a];
  }
  return true;
}

bool lower_expand(Compiler& c, const Node& n) {
  const std::vector<int64_t> out_dims = static_dims(c.concrete_types(n)[0].shape);
  int x = viewable(c, n.inputs()[0]);
  const std::vector<int64_t>& xd = c.val(x).dims;
  const std::vector<int64_t> xs = *c.strides_of(x);
  std::vector<int64_t> os(out_dims.size(), 0);
  const size_t off = out_dims.size() - xd.size();
  for (size_t i = 0; i < xd.size(); ++i) os[off + i] = xd[i] == 1 ? 0 : xs[i];
  c.bind(n.output(0), c.view(x, out_dims, os, 0, n.name()));
  return true;
}

// DepthToSpace (DCR): y[n, c, h b + i, w b + j] = x[n, (i b + j) C' + c, h, w];
// CRD reads channel c b b + i b + j. SpaceToDepth: y seen
// as [N, b, b, C, H/b, W/b] reads x[n, c, h b + i, w b + j].
bool lower_space_depth(Compiler& c, const Node& n) {
  int x = c.id(n.inputs()[0]);
  if (!c.strides_of(x)) x = c.as_plain(x);
  const std::vector<int64_t> xd = c.val(x).dims, xs = *c.strides_of(x);
  if (xd.size() != 4) return false;
  const int64_t b = n.attrs().get_int("blocksize"), N = xd[0], C = xd[1], H = xd[2], W = xd[3];
  std::vector<int64_t> dims, from, to;
  if (n.op_type() == "DepthToSpace") {
    const int64_t Co = C / (b * b);
    // Seen as [N, C', H, b, b, W] (w last: each source row is read in order).
    dims = {N, Co, H, b, b, W};
    if (n.attrs().get_string("mode", "DCR") == "CRD")
      from = {xs[0], b * b * xs[1], xs[2], b * xs[1], xs[1], xs[3]};
    else
      from = {xs[0], xs[1], xs[2], b * Co * xs[1], Co * xs[1], xs[3]};
    to = {Co * H * b * W * b, H * b * W * b, b * W * b, W * b, 1, b};
  } else {
    dims = {N, b, b, C, H / b, W / b};
    from = {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]};
    to = row_major(dims);
  }
  const TensorType t = c.concrete_types(n)[0];
  std::vector<int64_t> od;
  for (const Dim& d : t.shape) od.push_back(d.value);
  const auto type = dnnl_type(t.dtype);
  const int y = c.new_value(t.dtype, od, type ? plain_md(od, *type) : md_t(), n.name());
  const size_t elem = dtype_size(c.val(x).dtype);
  add_native_step(c, step_info(n, "copy", std::string(n.op_type()) + " " + to_string(dims) + " s" + to_string(from)),
                  {x}, {y}, [elem, dims, from, to](const std::vector<char*>& p) {
                    kernels::strided_copy(elem, p[0], from, p[1], to, dims);
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
