#include "parallel/layout.h"

#include <algorithm>

#include "ir/error.h"

namespace isomer::parallel {

std::vector<int> Layout::used_axes() const {
  std::vector<int> out = partial;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool Layout::uses(int axis) const {
  if (std::find(partial.begin(), partial.end(), axis) != partial.end()) return true;
  for (const auto& d : dims)
    if (std::find(d.begin(), d.end(), axis) != d.end()) return true;
  return false;
}

size_t Layout::hash() const {
  size_t h = 0x51ed;
  auto mix = [&](size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const auto& d : dims) {
    mix(d.size());
    for (int a : d) mix(static_cast<size_t>(a));
  }
  mix(0xfeed);
  for (int a : partial) mix(static_cast<size_t>(a));
  return h;
}

std::string layout_text(const Layout& l, const Mesh& mesh) {
  std::string s = "[";
  for (size_t i = 0; i < l.dims.size(); ++i) {
    if (i) s += ",";
    s += l.dims[i].empty() ? "_" : "S" + mesh.axes_text(l.dims[i]);
  }
  s += "]";
  if (!l.partial.empty()) s += " partial" + mesh.axes_text(l.partial);
  return s;
}

const char* step_name(CommStep::Kind k) {
  switch (k) {
    case CommStep::Kind::Slice: return "slice";
    case CommStep::Kind::AllReduce: return "all_reduce";
    case CommStep::Kind::AllGather: return "all_gather";
    case CommStep::Kind::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

std::vector<int64_t> local_dims(const std::vector<int64_t>& dims, const Layout& l, const Mesh& mesh) {
  require(dims.size() == l.dims.size(), "layout of rank " + std::to_string(l.dims.size()) + " for a tensor of rank " +
                                            std::to_string(dims.size()));
  std::vector<int64_t> out = dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t g = mesh.group_size(l.dims[i]);
    require(g > 0 && dims[i] % g == 0, "dimension " + std::to_string(i) + " of extent " + std::to_string(dims[i]) +
                                           " cannot be split into " + std::to_string(g) + " equal blocks");
    out[i] = dims[i] / g;
  }
  return out;
}

std::vector<int64_t> block_offsets(const std::vector<int64_t>& dims, const Layout& l, const Mesh& mesh, int device) {
  std::vector<int64_t> local = local_dims(dims, l, mesh), off(dims.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) off[i] = mesh.position(device, l.dims[i]) * local[i];
  return off;
}

namespace {

bool is_prefix(const std::vector<int>& a, const std::vector<int>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// An axis the current layout neither splits nor sums over: every device of its
// group holds the same block, so cutting along it needs no communication.
bool replicated_on(const Layout& l, int axis) { return !l.uses(axis); }

}  // namespace

std::vector<CommStep> redistribute(const Layout& from, const Layout& to, const std::vector<int64_t>& dims,
                                   const Mesh& mesh) {
  require(to.partial.empty(), "a layout with partial sums is never a target");
  std::vector<CommStep> steps;
  Layout cur = from;
  auto push = [&](CommStep::Kind kind, std::vector<int> axes, int dim, Layout next) {
    CommStep s;
    s.kind = kind;
    s.axes = std::move(axes);
    s.dim = dim;
    s.local_before = local_dims(dims, cur, mesh);
    s.local_after = local_dims(dims, next, mesh);
    s.after = next;
    cur = std::move(next);
    steps.push_back(std::move(s));
  };
  const int rank = static_cast<int>(dims.size());
  // 1. Cut early what the target splits and the source holds in copies (less to move later).
  for (int d = 0; d < rank; ++d) {
    if (!is_prefix(cur.dims[d], to.dims[d])) continue;
    std::vector<int> cut;
    for (size_t i = cur.dims[d].size(); i < to.dims[d].size() && replicated_on(cur, to.dims[d][i]); ++i)
      cut.push_back(to.dims[d][i]);
    if (cut.empty()) continue;
    Layout next = cur;
    next.dims[d].insert(next.dims[d].end(), cut.begin(), cut.end());
    push(CommStep::Kind::Slice, cut, d, next);
  }
  // 2. Sum partial sums: scattered along the dim the target splits over exactly these axes.
  if (!cur.partial.empty()) {
    const std::vector<int> sum = cur.partial;
    int scatter_dim = -1;
    std::vector<int> order;
    for (int d = 0; d < rank && scatter_dim < 0; ++d) {
      if (!is_prefix(cur.dims[d], to.dims[d]) || to.dims[d].size() < cur.dims[d].size() + sum.size()) continue;
      std::vector<int> next(to.dims[d].begin() + static_cast<long>(cur.dims[d].size()),
                            to.dims[d].begin() + static_cast<long>(cur.dims[d].size() + sum.size()));
      std::vector<int> sorted = next;
      std::sort(sorted.begin(), sorted.end());
      if (sorted == sum) {
        scatter_dim = d;
        order = next;
      }
    }
    Layout next = cur;
    next.partial.clear();
    if (scatter_dim >= 0) {
      next.dims[scatter_dim].insert(next.dims[scatter_dim].end(), order.begin(), order.end());
      push(CommStep::Kind::ReduceScatter, order, scatter_dim, next);
    } else {
      push(CommStep::Kind::AllReduce, sum, -1, next);
    }
  }
  // 3. Gather what the target does not split the same way (the minor axes first go).
  for (int d = 0; d < rank; ++d) {
    size_t k = 0;
    while (k < cur.dims[d].size() && k < to.dims[d].size() && cur.dims[d][k] == to.dims[d][k]) ++k;
    if (k == cur.dims[d].size()) continue;
    Layout next = cur;
    std::vector<int> gathered(cur.dims[d].begin() + static_cast<long>(k), cur.dims[d].end());
    next.dims[d].resize(k);
    push(CommStep::Kind::AllGather, gathered, d, next);
  }
  // 4. Cut the rest (now held in copies).
  for (int d = 0; d < rank; ++d) {
    if (cur.dims[d].size() == to.dims[d].size()) continue;
    std::vector<int> cut(to.dims[d].begin() + static_cast<long>(cur.dims[d].size()), to.dims[d].end());
    for (int a : cut) require(replicated_on(cur, a), "internal: redistribution cuts along a used axis");
    Layout next = cur;
    next.dims[d] = to.dims[d];
    push(CommStep::Kind::Slice, cut, d, next);
  }
  require(cur == to, "internal: redistribution did not reach the target layout");
  return steps;
}

}  // namespace isomer::parallel
