// Operators that only relabel, select or repeat elements become views: the same
// buffer read with other dims, strides and a start offset, no step at all.
// Identity and Dropout alias their input; Reshape, Flatten, Squeeze and Unsqueeze
// re-stride it (copying only when the input is a view whose strides cannot be
// regrouped); Transpose permutes strides; Slice offsets and scales them; Split
// makes one view per part; Expand gives broadcast dims stride 0. Native kernels
// and oneDNN's matmul and reorders read such views directly.
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

// The input of a view as something strided: blocked oneDNN layouts become plain.
int viewable(Compiler& c, const Value& v) {
  int x = c.id(v);
  return c.strides_of(x) ? x : c.as_plain(x);
}

}  // namespace

bool lower_identity(Compiler& c, const Node& n) {
  if (n.num_outputs() != 1 && !(n.op_type() == "Dropout" && n.num_outputs() <= 2)) return false;
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
  const std::vector<int64_t> out_dims = static_dims(c.concrete_types(n)[0].shape);
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
  if (!ts) {
    x = c.as_plain(x);
    ts = row_major(out_dims);
  }
  c.bind(n.output(0), c.view(x, out_dims, *ts, 0, n.name()));
  return true;
}

bool lower_transpose(Compiler& c, const Node& n) {
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
  int x = viewable(c, in[0]);
  const std::vector<int64_t> xd = c.val(x).dims;
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
  int x = viewable(c, n.inputs()[0]);
  const std::vector<int64_t> xd = c.val(x).dims;
  const int64_t rank = static_cast<int64_t>(xd.size());
  int64_t axis = n.attrs().get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  const std::vector<int64_t> xs = *c.strides_of(x);
  const auto elem = static_cast<int64_t>(dtype_size(c.val(x).dtype));
  int64_t at = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    std::vector<int64_t> od = static_dims(types[k].shape);
    c.bind(n.output(static_cast<uint32_t>(k)),
           c.view(x, od, xs, num_elements(od) ? at * xs[static_cast<size_t>(axis)] * elem : 0,
                  n.name() + ":" + std::to_string(k)));
    at += od[static_cast<size_t>(axis)];
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

}  // namespace isomer::runtime
