#include "kernels/select.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

// Threads for `units` independent rows of `work` elements in all: one per 32K
// elements (team_for_work), at most one per row.
int team_for(int64_t work, int64_t units, int threads) {
  const int team = team_for_work(threads > 0 ? threads : omp_get_max_threads(), static_cast<double>(work) / 32768);
  return static_cast<int>(std::clamp<int64_t>(units, 1, team));
}

// Rows [o0, o1) of `outer` for thread t of nt.
inline int64_t share(int64_t outer, int t, int nt) { return outer * t / nt; }

// NaN above every number; ties broken by the lower index.
template <class T, bool Smallest>
struct Before {
  const T* v;
  bool operator()(int32_t a, int32_t b) const {
    const T x = v[a], y = v[b];
    if constexpr (std::is_floating_point_v<T>) {
      const bool xn = std::isnan(x), yn = std::isnan(y);
      if (xn || yn) {
        if (xn && yn) return a < b;
        return Smallest ? yn : xn;
      }
    }
    if (x != y) return Smallest ? x < y : x > y;
    return a < b;
  }
};

template <bool Smallest, class T>
void top_k_rows(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
                int threads) {
  const int team = team_for(outer * n * inner, outer * inner, threads);
  const int64_t rows = outer * inner;
  parallel_teams(team, [&](int t, int nt) {
    std::vector<T> row(static_cast<size_t>(n));
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t r = share(rows, t, nt); r < share(rows, t + 1, nt); ++r) {
      const int64_t o = r / inner, i = r % inner;
      const T* src = x + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) row[j] = src[j * inner];
      for (int64_t j = 0; j < n; ++j) order[j] = static_cast<int32_t>(j);
      const Before<T, Smallest> before{row.data()};
      if (k == 1) {
        order[0] = *std::min_element(order.begin(), order.end(), before);
      } else if (k < n) {
        std::nth_element(order.begin(), order.begin() + k - 1, order.end(), before);
        std::sort(order.begin(), order.begin() + k, before);
      } else {
        std::sort(order.begin(), order.end(), before);
      }
      T* vo = values + o * k * inner + i;
      int64_t* io = indices ? indices + o * k * inner + i : nullptr;
      for (int64_t j = 0; j < k; ++j) {
        vo[j * inner] = row[order[j]];
        if (indices) io[j * inner] = order[j];
      }
    }
  });
}

void combine(float* d, float u, ScatterReduce reduce) {
  switch (reduce) {
    case ScatterReduce::Add: *d += u; break;
    case ScatterReduce::Mul: *d *= u; break;
    case ScatterReduce::Max: *d = std::max(*d, u); break;
    case ScatterReduce::Min: *d = std::min(*d, u); break;
    case ScatterReduce::None: *d = u; break;
  }
}

// combine over a run of n elements, the reduction chosen once (the loops vectorize).
void combine_run(float* __restrict d, const float* __restrict u, int64_t n, ScatterReduce reduce) {
  switch (reduce) {
    case ScatterReduce::Add: for (int64_t j = 0; j < n; ++j) d[j] += u[j]; break;
    case ScatterReduce::Mul: for (int64_t j = 0; j < n; ++j) d[j] *= u[j]; break;
    case ScatterReduce::Max: for (int64_t j = 0; j < n; ++j) d[j] = std::max(d[j], u[j]); break;
    case ScatterReduce::Min: for (int64_t j = 0; j < n; ++j) d[j] = std::min(d[j], u[j]); break;
    case ScatterReduce::None: for (int64_t j = 0; j < n; ++j) d[j] = u[j]; break;
  }
}

int64_t index_at(const void* index, size_t index_elem, int64_t p) {
  return index_elem == 4 ? static_cast<const int32_t*>(index)[p] : static_cast<const int64_t*>(index)[p];
}

template <class T>
void top_k_any(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
               bool smallest, int threads) {
  require(k >= 0 && k <= n && n < (int64_t{1} << 31), "top_k: k out of range or axis too long");
  if (k == 0 || outer * inner == 0) return;
  (smallest ? top_k_rows<true, T> : top_k_rows<false, T>)(x, values, indices, outer, n, inner, k, threads);
}

}  // namespace

void top_k(const float* x, float* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads) {
  top_k_any(x, values, indices, outer, n, inner, k, smallest, threads);
}
void top_k(const int64_t* x, int64_t* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads) {
  top_k_any(x, values, indices, outer, n, inner, k, smallest, threads);
}
void top_k(const int32_t* x, int32_t* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner, int64_t k,
           bool smallest, int threads) {
  top_k_any(x, values, indices, outer, n, inner, k, smallest, threads);
}

bool scatter_elements(size_t elem, void* y, std::span<const int64_t> y_dims, const void* index, size_t index_elem,
                      std::span<const int64_t> index_dims, int64_t axis, const void* updates, ScatterReduce reduce,
                      int64_t* bad) {
  require(reduce == ScatterReduce::None || elem == 4, "scatter_elements: a reduction needs float32 elements");
  const size_t rank = y_dims.size(), ax = static_cast<size_t>(axis);
  require(index_dims.size() == rank && ax < rank, "scatter_elements: the index tensor does not fit the data");
  for (size_t d = 0; d < rank; ++d)
    require(index_dims[d] <= y_dims[d] || d == ax, "scatter_elements: the index tensor exceeds the data");
  int64_t count = 1;
  for (int64_t d : index_dims) count *= d;
  const int64_t extent = y_dims[ax];
  // Every index is checked before anything is written.
  for (int64_t p = 0; p < count; ++p) {
    const int64_t v = index_at(index, index_elem, p);
    if (v < -extent || v >= extent) {
      if (bad) *bad = v;
      return false;
    }
  }
  std::vector<int64_t> ys(rank, 1), coord(rank, 0);
  for (size_t d = rank; d-- > 1;) ys[d - 1] = ys[d] * y_dims[d];
  char* yb = static_cast<char*>(y);
  const char* ub = static_cast<const char*>(updates);
  auto put = [&](int64_t off, int64_t p) {
    if (reduce == ScatterReduce::None) std::memcpy(yb + static_cast<size_t>(off) * elem, ub + static_cast<size_t>(p) * elem, elem);
    else combine(reinterpret_cast<float*>(yb) + off, reinterpret_cast<const float*>(ub)[p], reduce);
  };
  // Row by row along the last axis, in order: a later position naming the same
  // element wins (or combines last). A row whose indices are all one value (the
  // scatter along a leading axis of an index expanded over the columns: index_add,
  // scatter_add in GNN message passing) names a contiguous run of y.
  const size_t last = rank - 1;
  const int64_t len = index_dims[last];
  if (len == 0) return true;
  for (int64_t p0 = 0; p0 < count; p0 += len) {
    int64_t base = 0;
    for (size_t d = 0; d < last; ++d)
      if (d != ax) base += coord[d] * ys[d];
    auto at = [&](int64_t j) {
      const int64_t c = index_at(index, index_elem, p0 + j);
      return c < 0 ? c + extent : c;
    };
    if (ax == last) {
      for (int64_t j = 0; j < len; ++j) put(base + at(j), p0 + j);
    } else {
      const int64_t first = index_at(index, index_elem, p0);
      bool uniform = true;
      for (int64_t j = 1; j < len && uniform; ++j) uniform = index_at(index, index_elem, p0 + j) == first;
      if (uniform) {
        const int64_t off = base + at(0) * ys[ax];
        if (reduce == ScatterReduce::None) std::memcpy(yb + static_cast<size_t>(off) * elem, ub + static_cast<size_t>(p0) * elem, static_cast<size_t>(len) * elem);
        else combine_run(reinterpret_cast<float*>(yb) + off, reinterpret_cast<const float*>(ub) + p0, len, reduce);
      } else {
        for (int64_t j = 0; j < len; ++j) put(base + at(j) * ys[ax] + j, p0 + j);
      }
    }
    for (size_t d = last; d-- > 0;) {
      if (++coord[d] < index_dims[d]) break;
      coord[d] = 0;
    }
  }
  return true;
}

void one_hot(size_t elem, const void* index, IndexKind kind, int64_t outer, int64_t inner, int64_t depth,
             const void* on, const void* off, void* out, int threads) {
  auto index_at = [&](int64_t p) -> int64_t {
    if (kind == IndexKind::Int64) return static_cast<const int64_t*>(index)[p];
    if (kind == IndexKind::Int32) return static_cast<const int32_t*>(index)[p];
    const float f = static_cast<const float*>(index)[p];
    return std::isfinite(f) && std::fabs(f) < 9e18f ? static_cast<int64_t>(f) : -1 - depth;  // out of range: all off
  };
  const int team = team_for(outer * depth * inner, outer, threads);
  char* ob = static_cast<char*>(out);
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t o = share(outer, t, nt); o < share(outer, t + 1, nt); ++o) {
      char* row = ob + static_cast<size_t>(o * depth * inner) * elem;
      for (int64_t j = 0; j < depth * inner; ++j) std::memcpy(row + static_cast<size_t>(j) * elem, off, elem);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = index_at(o * inner + i);
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) std::memcpy(row + static_cast<size_t>(v * inner + i) * elem, on, elem);
      }
    }
  });
}

}  // namespace isomer::kernels
