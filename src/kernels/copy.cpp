#include "kernels/copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

struct Layout {
  std::vector<int64_t> dims, src, dst;
};

// Drops extent-1 dims and merges dims both sides walk contiguously.
Layout normalize(std::span<const int64_t> dims, std::span<const int64_t> src, std::span<const int64_t> dst) {
  Layout l;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    l.dims.push_back(dims[d]);
    l.src.push_back(src[d]);
    l.dst.push_back(dst[d]);
  }
  for (size_t d = l.dims.size(); d-- > 1;) {
    if (l.src[d - 1] != l.src[d] * l.dims[d] || l.dst[d - 1] != l.dst[d] * l.dims[d]) continue;
    l.dims[d - 1] *= l.dims[d];
    l.src[d - 1] = l.src[d];
    l.dst[d - 1] = l.dst[d];
    l.dims.erase(l.dims.begin() + static_cast<int64_t>(d));
    l.src.erase(l.src.begin() + static_cast<int64_t>(d));
    l.dst.erase(l.dst.begin() + static_cast<int64_t>(d));
  }
  if (l.dims.empty()) l.dims = {1}, l.src = {0}, l.dst = {0};
  return l;
}

template <class T>
void copy_run(const T* s, int64_t ss, T* d, int64_t ds, int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
  } else if (ss == 0) {
    T v = *s;
    for (int64_t j = 0; j < n; ++j) d[j * ds] = v;
  } else {
    for (int64_t j = 0; j < n; ++j) d[j * ds] = s[j * ss];
  }
}

// Rows [r0, r1) of the outer dims, each a run along the last dim; a 2-D tile
// order when the source's fastest dim is the second to last (a transpose).
template <class T>
void copy_rows(const T* src, T* dst, const Layout& l, int64_t r0, int64_t r1) {
  const size_t nd = l.dims.size();
  const int64_t inner = l.dims.back();
  std::vector<int64_t> idx(nd, 0);
  int64_t rem = r0, so = 0, doff = 0;
  for (size_t d = nd - 1; d-- > 0;) {
    idx[d] = rem % l.dims[d];
    rem /= l.dims[d];
  }
  for (size_t d = 0; d + 1 < nd; ++d) so += idx[d] * l.src[d], doff += idx[d] * l.dst[d];
  for (int64_t r = r0; r < r1; ++r) {
    copy_run(src + so, l.src.back(), dst + doff, l.dst.back(), inner);
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < l.dims[d]) {
        so += l.src[d], doff += l.dst[d];
        break;
      }
      so -= l.src[d] * (l.dims[d] - 1), doff -= l.dst[d] * (l.dims[d] - 1);
      idx[d] = 0;
    }
  }
}

// A transpose of the last two dims (source contiguous along dim -2, destination
// along dim -1), in 32x32 tiles so both sides stream through cache lines.
template <class T>
void copy_transposed(const T* src, T* dst, const Layout& l, int64_t b0, int64_t b1) {
  const size_t nd = l.dims.size();
  const int64_t R = l.dims[nd - 2], C = l.dims[nd - 1];
  const int64_t sr = l.src[nd - 2], sc = l.src[nd - 1], dr = l.dst[nd - 2], dc = l.dst[nd - 1];
  constexpr int64_t kTile = 32;
  for (int64_t b = b0; b < b1; ++b) {
    int64_t rem = b, so = 0, doff = 0;
    for (size_t d = nd - 2; d-- > 0;) {
      int64_t i = rem % l.dims[d];
      rem /= l.dims[d];
      so += i * l.src[d], doff += i * l.dst[d];
    }
    for (int64_t r0 = 0; r0 < R; r0 += kTile)
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t re = std::min(R, r0 + kTile), ce = std::min(C, c0 + kTile);
        for (int64_t r = r0; r < re; ++r)
          for (int64_t c = c0; c < ce; ++c) dst[doff + r * dr + c * dc] = src[so + r * sr + c * sc];
      }
  }
}

template <class T>
void copy_typed(const void* src, void* dst, const Layout& l, int threads) {
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst);
  const size_t nd = l.dims.size();
  int64_t total = 1;
  for (int64_t x : l.dims) total *= x;
  int team = threads > 0 ? threads : omp_get_max_threads();
  team = static_cast<int>(std::clamp<int64_t>(total * static_cast<int64_t>(sizeof(T)) / 65536, 1, team));
  const bool transposed = nd >= 2 && l.src.back() != 1 && l.src[nd - 2] == 1 && l.dst.back() == 1 && l.dims.back() >= 8 &&
                          l.dims[nd - 2] >= 8;
  if (transposed) {
    int64_t batches = 1;
    for (size_t x = 0; x + 2 < nd; ++x) batches *= l.dims[x];
    team = static_cast<int>(std::min<int64_t>(team, batches));
    if (team > 1 || batches > 1) {
      parallel_teams(team, [&](int t, int n) { copy_transposed(s, d, l, batches * t / n, batches * (t + 1) / n); });
      return;
    }
    copy_transposed(s, d, l, 0, 1);
    return;
  }
  int64_t rows = total / l.dims.back();
  team = static_cast<int>(std::min<int64_t>(team, rows));
  parallel_teams(team, [&](int t, int n) { copy_rows(s, d, l, rows * t / n, rows * (t + 1) / n); });
}

}  // namespace

void strided_copy(size_t elem, const void* src, std::span<const int64_t> src_strides, void* dst,
                  std::span<const int64_t> dst_strides, std::span<const int64_t> dims, int threads) {
  require(src_strides.size() == dims.size() && dst_strides.size() == dims.size(), "strided_copy: rank mismatch");
  for (int64_t d : dims)
    if (d == 0) return;
  Layout l = normalize(dims, src_strides, dst_strides);
  switch (elem) {
    case 1: copy_typed<uint8_t>(src, dst, l, threads); break;
    case 2: copy_typed<uint16_t>(src, dst, l, threads); break;
    case 4: copy_typed<uint32_t>(src, dst, l, threads); break;
    case 8: copy_typed<uint64_t>(src, dst, l, threads); break;
    default: {
      // Any other size: byte runs of `elem` (complex types).
      std::vector<int64_t> dims2(l.dims), ss(l.src), ds(l.dst);
      dims2.push_back(static_cast<int64_t>(elem));
      for (auto& x : ss) x *= static_cast<int64_t>(elem);
      for (auto& x : ds) x *= static_cast<int64_t>(elem);
      ss.push_back(1);
      ds.push_back(1);
      copy_typed<uint8_t>(src, dst, normalize(dims2, ss, ds), threads);
    }
  }
}

void fill(size_t elem, void* dst, int64_t count, const void* value) {
  char* d = static_cast<char*>(dst);
  bool zero = true;
  for (size_t b = 0; b < elem; ++b) zero = zero && static_cast<const char*>(value)[b] == 0;
  if (zero) {
    std::memset(d, 0, static_cast<size_t>(count) * elem);
    return;
  }
  for (int64_t i = 0; i < count; ++i) std::memcpy(d + i * static_cast<int64_t>(elem), value, elem);
}

bool gather_axis(size_t elem, const void* x, int64_t outer, int64_t n, int64_t inner, const void* index,
                 size_t index_elem, int64_t m, void* out, int64_t* bad, int threads) {
  std::vector<int64_t> idx(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    int64_t v;
    if (index_elem == 8) {
      std::memcpy(&v, static_cast<const char*>(index) + j * 8, 8);
    } else {
      int32_t w;
      std::memcpy(&w, static_cast<const char*>(index) + j * 4, 4);
      v = w;
    }
    if (v < -n || v >= n) {
      if (bad) *bad = v;
      return false;
    }
    idx[static_cast<size_t>(j)] = v < 0 ? v + n : v;
  }
  const size_t run = static_cast<size_t>(inner) * elem;
  const char* xs = static_cast<const char*>(x);
  char* o = static_cast<char*>(out);
  const int64_t units = outer * m;
  int team = threads > 0 ? threads : omp_get_max_threads();
  team = static_cast<int>(std::clamp<int64_t>(units * static_cast<int64_t>(run) / 65536, 1, team));
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t u = units * t / nt; u < units * (t + 1) / nt; ++u) {
      const int64_t oi = u / m, j = u % m;
      std::memcpy(o + u * static_cast<int64_t>(run), xs + (oi * n + idx[static_cast<size_t>(j)]) * static_cast<int64_t>(run), run);
    }
  });
  return true;
}

}  // namespace isomer::kernels
