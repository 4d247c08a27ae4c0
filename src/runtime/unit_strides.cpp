// The strides of a layout's axes of extent 1 (compiler.h: unit_axis_strides,
// canonical_unit_strides): those oneDNN's format tags give them.
#include <algorithm>
#include <vector>

#include "runtime/compiler.h"

namespace isomer::runtime {

void unit_axis_strides(const std::vector<int64_t>& extents, std::vector<int64_t>& strides, int64_t innermost) {
  const size_t n = extents.size();
  // The order of the other axes, outermost first (ties in index order), and the
  // longest run of them still in index order (the first such run found from the
  // outside): the axes a layout tag left in place, where the rest were moved
  // (channels-last's channel axis).
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (extents[i] != 1) order.push_back(i);
  if (order.size() == n) return;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  std::vector<size_t> run_from(order.size(), 1);  // longest increasing run starting at k
  for (size_t k = order.size(); k-- > 0;)
    for (size_t j = k + 1; j < order.size(); ++j)
      if (order[j] > order[k]) run_from[k] = std::max(run_from[k], run_from[j] + 1);
  std::vector<bool> in_place(n, false);
  size_t best = 0;
  for (size_t v : run_from) best = std::max(best, v);
  for (size_t k = 0, last = 0, want = best; k < order.size() && want > 0; ++k)
    if (run_from[k] == want && (want == best || order[k] > last)) in_place[order[k]] = true, last = order[k], --want;
  // Each extent-1 axis goes right after the nearest axis before it in index order
  // that is in place (or extent 1), or outermost: where the tag's order puts it.
  std::vector<size_t> full = order;
  for (size_t i = 0; i < n; ++i) {
    if (extents[i] != 1) continue;
    size_t at = 0;
    for (size_t k = 0; k < full.size(); ++k)
      if (full[k] < i && (in_place[full[k]] || extents[full[k]] == 1)) at = k + 1;
    full.insert(full.begin() + static_cast<std::ptrdiff_t>(at), i);
  }
  for (size_t k = full.size(); k-- > 0;)
    if (extents[full[k]] == 1)
      strides[full[k]] = k + 1 < full.size() ? std::max<int64_t>(strides[full[k + 1]] * extents[full[k + 1]], 1) : innermost;
}

namespace {

// Whether `d` is exactly what one of the tags oneDNN's kernels take makes of its
// dims: plain, channels last, or 16 or 8 channel blocks.
bool is_tag_layout(const dnnl_memory_desc_t& d) {
  using tag = dnnl::memory::format_tag;
  static const std::vector<std::vector<tag>> tags = {
      {}, {}, {tag::ab, tag::ba}, {tag::abc, tag::acb, tag::aBc16b, tag::aBc8b},
      {tag::abcd, tag::acdb, tag::aBcd16b, tag::aBcd8b}, {tag::abcde, tag::acdeb, tag::aBcde16b, tag::aBcde8b}};
  if (d.ndims >= static_cast<int>(tags.size())) return false;
  const auto& b = d.format_desc.blocking;
  for (tag t : tags[static_cast<size_t>(d.ndims)]) {
    const dnnl_memory_desc_t g = md_t(dims_t(d.dims, d.dims + d.ndims), static_cast<dt>(d.data_type), t).data;
    const auto& gb = g.format_desc.blocking;
    if (gb.inner_nblks == b.inner_nblks && std::equal(b.inner_blks, b.inner_blks + b.inner_nblks, gb.inner_blks) &&
        std::equal(b.inner_idxs, b.inner_idxs + b.inner_nblks, gb.inner_idxs) &&
        std::equal(d.padded_dims, d.padded_dims + d.ndims, g.padded_dims) &&
        std::equal(b.strides, b.strides + d.ndims, gb.strides))
      return true;
  }
  return false;
}

}  // namespace

md_t canonical_unit_strides(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.ndims < 2 || d.format_kind != dnnl_blocked || std::find(d.dims, d.dims + d.ndims, 1) == d.dims + d.ndims)
    return md;
  // One that a tag makes keeps its strides: with one axis of extent above 1 ([1, C,
  // 1, 1]) plain and channels last are both exact, and the layout oneDNN picks for
  // a consumer's output follows the one it has (a resize of a channels-last [1,
  // 256, 1, 1] wrote plain and was reordered back).
  if (is_tag_layout(d)) return md;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int64_t> blocks(static_cast<size_t>(d.ndims), 1), extents, strides(b.strides, b.strides + d.ndims);
  int64_t inner = 1;
  for (int k = 0; k < b.inner_nblks; ++k) blocks[static_cast<size_t>(b.inner_idxs[k])] *= b.inner_blks[k], inner *= b.inner_blks[k];
  for (int i = 0; i < d.ndims; ++i) extents.push_back(d.padded_dims[i] / blocks[static_cast<size_t>(i)]);
  unit_axis_strides(extents, strides, inner);
  dnnl_memory_desc_t out = d;
  for (int i = 0; i < d.ndims; ++i) out.format_desc.blocking.strides[i] = strides[static_cast<size_t>(i)];
  return md_t(out);
}

}  // namespace isomer::runtime
