// Einsum on float32, as exporters write it for attention ("bhqd,bhkd->bhqk") and
// projections ("bsd,df->bsf"):
//  - two operands: one oneDNN matmul over strided views. The labels fall into
//    batch (both operands and the output), M (A and the output), N (B and the
//    output) and K (both operands, summed); A is viewed as [batch..., M, K] and B as
//    [batch..., K, N] with the M, N and K labels each merged into one dim (an
//    operand whose strides do not allow that is copied first), and the output is a
//    view of the [batch..., M, N] result in the equation's order;
//  - one operand: a transpose (a view, no step) or a sum over labels (a copy into
//    [kept..., summed...] order where needed, then the native row reduction).
// Anything else (three or more operands, a label summed in one operand only, a
// repeated label: a diagonal) runs on the reference kernel, which
// `isomer run --print-steps` shows.
#include <algorithm>
#include <map>
#include <numeric>

#include "kernels/rows.h"
#include "ops/einsum.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

using ops::EinsumSpec;
using Labels = std::vector<int>;

bool contains(const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

// Element strides of value `id` per label (0 where its dim is 1: a broadcast).
std::map<int, int64_t> label_strides(Compiler& c, int id, const Labels& labels) {
  const std::vector<int64_t> st = *c.strides_of(id);
  const std::vector<int64_t>& d = c.val(id).dims;
  std::map<int, int64_t> out;
  for (size_t i = 0; i < labels.size(); ++i) out[labels[i]] = d[i] == 1 ? 0 : st[i];
  return out;
}

// A group of labels merged into one dim, outermost first.
using Group = Labels;

int64_t extent(const Group& g, const std::vector<int64_t>& ext) {
  int64_t e = 1;
  for (int l : g) e *= ext[static_cast<size_t>(l)];
  return e;
}

// The stride of the merged dim if the group's labels are laid out as one
// (row-major among themselves) in `st`, else nullopt. A group of extent 1 has any.
std::optional<int64_t> merged_stride(const Group& g, const std::map<int, int64_t>& st, const std::vector<int64_t>& ext) {
  Group live;
  for (int l : g)
    if (ext[static_cast<size_t>(l)] != 1) live.push_back(l);
  if (live.empty()) return 0;
  for (size_t i = 0; i + 1 < live.size(); ++i)
    if (st.at(live[i]) != st.at(live[i + 1]) * ext[static_cast<size_t>(live[i + 1])]) return std::nullopt;
  return st.at(live.back());
}

// Value `x` (labels `labels`) seen as one dim per group: a view, or a view of a
// dense copy (in group order) when its strides do not merge. Labels a group has
// but `x` lacks are broadcast (extent 1 in x).
int grouped_operand(Compiler& c, int x, const Labels& labels, const std::vector<Group>& groups,
                    const std::vector<int64_t>& ext, const std::string& name) {
  std::map<int, int64_t> st = label_strides(c, x, labels);
  const std::vector<int64_t>& xd = c.val(x).dims;
  std::map<int, int64_t> own;  // this operand's extent per label
  for (size_t i = 0; i < labels.size(); ++i) own[labels[i]] = xd[i];
  auto own_ext = [&](const Group& g) {
    std::vector<int64_t> e = ext;
    for (int l : g) e[static_cast<size_t>(l)] = own.count(l) ? own[l] : 1;
    return e;
  };
  std::vector<int64_t> dims, strides;
  bool mergeable = true;
  for (const Group& g : groups) {
    const std::vector<int64_t> e = own_ext(g);
    for (int l : g) st.emplace(l, 0);
    auto s = merged_stride(g, st, e);
    mergeable = mergeable && s.has_value();
    dims.push_back(extent(g, e));
    strides.push_back(s.value_or(0));
  }
  if (!mergeable) {
    // Copy into group order, label by label (a strided copy), then merge.
    std::vector<int64_t> fd, fs;
    Labels order;
    for (const Group& g : groups)
      for (int l : g) {
        order.push_back(l);
        fd.push_back(own.count(l) ? own[l] : 1);
        fs.push_back(st.at(l));
      }
    if (c.val(x).known && c.is_dense(x)) {
      // A constant (an MoE's stacked expert weights, 'edf' read as [d, (e, f)]) is
      // laid out in group order once, here: as a step it was copied on every run.
      const Tensor& t = *c.val(x).known;
      const size_t elem = dtype_size(t.dtype());
      Bytes bytes = Bytes::uninitialized(static_cast<size_t>(num_elements(fd)) * elem);
      kernels::strided_copy(elem, t.bytes().data(), fs, bytes.data(), row_major(fd), fd, 1);
      x = c.constant_value(Tensor(t.dtype(), fd, std::move(bytes)), name + ".dense");
    } else {
      int v = c.view(x, fd, fs, 0, name + ".labels");
      c.val(v).step_local = true;
      x = c.copy_strided(v, name + ".dense");
    }
    st = label_strides(c, x, order);
    strides.clear();
    for (const Group& g : groups) strides.push_back(*merged_stride(g, st, own_ext(g)));
  }
  int v = c.view(x, dims, strides, 0, name);
  c.val(v).step_local = true;
  return v;
}

// Labels of `from` sorted by descending stride in `st` (the order they are laid
// out in), ties in `from`'s order.
Group by_stride(Group from, const std::map<int, int64_t>& st) {
  std::stable_sort(from.begin(), from.end(), [&](int a, int b) { return st.at(a) > st.at(b); });
  return from;
}

bool einsum_two(Compiler& c, const Node& n, const EinsumSpec& s, const std::vector<int64_t>& ext) {
  const Labels &la = s.inputs[0], &lb = s.inputs[1], &lo = s.output;
  Group batch, m, nn, k;
  for (int l = 0; l < s.num_labels; ++l) {
    const bool a = contains(la, l), b = contains(lb, l), o = contains(lo, l);
    if (a && b && o) batch.push_back(l);
    else if (a && o) m.push_back(l);
    else if (b && o) nn.push_back(l);
    else if (a && b) k.push_back(l);
    else if (a || b) return false;  // summed in one operand only
  }
  if (batch.size() + 2 > DNNL_MAX_NDIMS) return false;
  int xa = c.id(n.inputs()[0]), xb = c.id(n.inputs()[1]);
  if (!c.strides_of(xa)) xa = c.as_plain(xa);
  if (!c.strides_of(xb)) xb = c.as_plain(xb);
  const auto sa = label_strides(c, xa, la), sb = label_strides(c, xb, lb);
  // Batch in the output's order; M and K in the order A lays them out, N in B's.
  std::stable_sort(batch.begin(), batch.end(), [&](int a, int b) {
    return std::find(lo.begin(), lo.end(), a) < std::find(lo.begin(), lo.end(), b);
  });
  m = by_stride(m, sa);
  k = by_stride(k, sa);
  nn = by_stride(nn, sb);
  std::vector<Group> ga, gb;
  for (int l : batch) ga.push_back({l}), gb.push_back({l});
  ga.push_back(m), ga.push_back(k);
  gb.push_back(k), gb.push_back(nn);
  int a = grouped_operand(c, xa, la, ga, ext, n.name() + ".A");
  int b = grouped_operand(c, xb, lb, gb, ext, n.name() + ".B");
  std::vector<int64_t> od;
  for (int l : batch) od.push_back(ext[static_cast<size_t>(l)]);
  od.push_back(extent(m, ext));
  od.push_back(extent(nn, ext));
  auto make = [&] { return dnnl::matmul::primitive_desc(dnnl::matmul::desc(c.val(a).md, c.val(b).md, md_t(), plain_md(od, dt::f32)), c.engine()); };
  dnnl::matmul::primitive_desc pd = make();
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
    // Views oneDNN has only its reference matmul for: dense operands instead.
    a = c.as_plain(a);
    b = c.as_plain(b);
    pd = make();
  }
  int y = c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name());
  StepInfo info = step_info(n, "matmul",
                            "einsum matmul src " + describe_md(c.val(a).md) + " wei " + describe_md(c.val(b).md) +
                                " dst " + describe_md(plain_md(od, dt::f32)) + " impl " + pd.impl_info_str(),
                            2.0 * static_cast<double>(num_elements(od)) * static_cast<double>(extent(k, ext)));
  c.add_primitive(pd, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}}, info);
  // The output: the [batch..., M, N] result seen in the equation's label order.
  std::map<int, int64_t> ys;
  const std::vector<int64_t> yst = row_major(od);
  for (size_t i = 0; i < batch.size(); ++i) ys[batch[i]] = yst[i];
  auto unmerge = [&](const Group& g, int64_t stride) {
    for (size_t i = g.size(); i-- > 0;) {
      ys[g[i]] = stride;
      stride *= ext[static_cast<size_t>(g[i])];
    }
  };
  unmerge(m, yst[batch.size()]);
  unmerge(nn, yst[batch.size() + 1]);
  std::vector<int64_t> out_dims, out_strides;
  for (int l : lo) {
    out_dims.push_back(ext[static_cast<size_t>(l)]);
    out_strides.push_back(ys.at(l));
  }
  c.bind(n.output(0), c.view(y, out_dims, out_strides, 0, n.name() + ".out"));
  return true;
}

bool einsum_one(Compiler& c, const Node& n, const EinsumSpec& s, const std::vector<int64_t>& ext) {
  const Labels &li = s.inputs[0], &lo = s.output;
  int x = c.id(n.inputs()[0]);
  if (!c.strides_of(x)) x = c.as_plain(x);
  const auto sx = label_strides(c, x, li);
  Group kept = lo, summed;
  for (int l : li)
    if (!contains(lo, l)) summed.push_back(l);
  if (summed.empty()) {
    // A transpose: a view.
    std::vector<int64_t> dims, strides;
    for (int l : lo) dims.push_back(ext[static_cast<size_t>(l)]), strides.push_back(sx.at(l));
    c.bind(n.output(0), c.view(x, dims, strides, 0, n.name()));
    return true;
  }
  // [kept (output order), summed] rows, then each row summed.
  std::vector<Group> groups{kept, summed};
  int v = grouped_operand(c, x, li, groups, ext, n.name() + ".rows");
  if (!c.is_dense(v)) v = c.as_plain(v);
  const int64_t rows = extent(kept, ext), len = extent(summed, ext);
  std::vector<int64_t> od;
  for (int l : lo) od.push_back(ext[static_cast<size_t>(l)]);
  int y = c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name());
  add_native_step(c, step_info(n, "reduce", "einsum sum " + to_string(std::vector<int64_t>{rows, len, 1}),
                               static_cast<double>(rows * len)),
                  {v}, {y}, [rows, len](const std::vector<char*>& p) {
                    kernels::reduce_axis(kernels::ReduceKind::Sum, reinterpret_cast<const float*>(p[0]),
                                         reinterpret_cast<float*>(p[1]), rows, len, 1);
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace

bool lower_einsum(Compiler& c, const Node& n) {
  if (n.inputs().empty() || n.inputs().size() > 2) return false;
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> ranks;
  for (const Value& v : n.inputs()) {
    dims.push_back(c.dims(v));
    ranks.push_back(static_cast<int64_t>(dims.back().size()));
  }
  const EinsumSpec s = ops::parse_einsum(n.attrs().get_string("equation"), ranks);
  for (const Labels& l : s.inputs)
    for (size_t i = 0; i < l.size(); ++i)
      if (std::count(l.begin(), l.end(), l[i]) > 1) return false;  // a diagonal
  const std::vector<int64_t> ext = ops::einsum_extents(s, dims);
  if (num_elements(ext) == 0) return false;
  // A transpose is a view of any element type; the rest computes in float32.
  const bool transpose = s.inputs.size() == 1 && s.inputs[0].size() == s.output.size();
  if (!transpose && !all_float32(n)) return false;
  return n.inputs().size() == 1 ? einsum_one(c, n, s, ext) : einsum_two(c, n, s, ext);
}

}  // namespace isomer::runtime
