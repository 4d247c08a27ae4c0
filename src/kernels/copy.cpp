#include "kernels/copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

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

void trilu(size_t elem, const void* x, void* y, int64_t mats, int64_t rows, int64_t cols, int64_t k, bool upper,
           int threads) {
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);  // the same triangle, and i + k cannot overflow
  const int64_t units = mats * rows;
  int team = threads > 0 ? threads : omp_get_max_threads();
  team = static_cast<int>(std::clamp<int64_t>(units * cols * static_cast<int64_t>(elem) / 65536, 1, team));
  const char* xs = static_cast<const char*>(x);
  char* ys = static_cast<char*>(y);
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t u = units * t / nt; u < units * (t + 1) / nt; ++u) {
      const int64_t i = u % rows;
      // Columns [keep_begin, keep_end) are kept, the rest zeroed.
      const int64_t keep_begin = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      const int64_t keep_end = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      const size_t row = static_cast<size_t>(u * cols) * elem;
      if (keep_begin > 0) std::memset(ys + row, 0, static_cast<size_t>(keep_begin) * elem);
      if (keep_end > keep_begin && xs != ys)
        std::memcpy(ys + row + static_cast<size_t>(keep_begin) * elem, xs + row + static_cast<size_t>(keep_begin) * elem,
                    static_cast<size_t>(keep_end - keep_begin) * elem);
      if (keep_end < cols)
        std::memset(ys + row + static_cast<size_t>(keep_end) * elem, 0, static_cast<size_t>(cols - keep_end) * elem);
    }
  });
}

namespace {

int64_t read_index(const void* index, size_t index_elem, int64_t j) {
  if (index_elem == 8) {
    int64_t v;
    std::memcpy(&v, static_cast<const char*>(index) + j * 8, 8);
    return v;
  }
  int32_t w;
  std::memcpy(&w, static_cast<const char*>(index) + j * 4, 4);
  return w;
}

template <class T>
bool gather_elements_typed(const T* x, std::span<const int64_t> xd, const void* index, size_t index_elem,
                           std::span<const int64_t> id, int64_t axis, T* out, int64_t* bad, int threads) {
  const size_t rank = xd.size();
  std::vector<int64_t> xs(rank, 1);
  for (size_t d = rank; d-- > 1;) xs[d - 1] = xs[d] * xd[d];
  // Rows of the index tensor's last dim; each row's base offset in x follows the
  // row's coordinates.
  const int64_t inner = rank ? id[rank - 1] : 1;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= id[d];
  const int64_t n = xd[static_cast<size_t>(axis)], sa = xs[static_cast<size_t>(axis)];
  const bool last_axis = static_cast<size_t>(axis) + 1 == rank;
  int team = threads > 0 ? threads : omp_get_max_threads();
  team = static_cast<int>(std::clamp<int64_t>(rows * inner / 32768, 1, team));
  std::vector<int64_t> bad_at(static_cast<size_t>(team), 0);
  std::vector<char> failed(static_cast<size_t>(team), 0);
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt && !failed[static_cast<size_t>(t)]; ++r) {
      int64_t rem = r, base = 0;
      for (size_t d = rank - 1; d-- > 0;) {
        const int64_t c = rem % id[d];
        rem /= id[d];
        if (static_cast<int64_t>(d) != axis) base += c * xs[d];
      }
      for (int64_t j = 0; j < inner; ++j) {
        int64_t v = read_index(index, index_elem, r * inner + j);
        if (v < -n || v >= n) {
          failed[static_cast<size_t>(t)] = 1;
          bad_at[static_cast<size_t>(t)] = v;
          break;
        }
        if (v < 0) v += n;
        out[r * inner + j] = x[base + v * sa + (last_axis ? 0 : j)];
      }
    }
  });
  for (int t = 0; t < team; ++t)
    if (failed[static_cast<size_t>(t)]) {
      if (bad) *bad = bad_at[static_cast<size_t>(t)];
      return false;
    }
  return true;
}

}  // namespace

bool gather_elements(size_t elem, const void* x, std::span<const int64_t> x_dims, const void* index,
                     size_t index_elem, std::span<const int64_t> index_dims, int64_t axis, void* out, int64_t* bad,
                     int threads) {
  switch (elem) {
#define CASE(N, T)                                                                                              \
  case N:                                                                                                       \
    return gather_elements_typed(static_cast<const T*>(x), x_dims, index, index_elem, index_dims, axis,         \
                                 static_cast<T*>(out), bad, threads);
    CASE(1, uint8_t)
    CASE(2, uint16_t)
    CASE(4, uint32_t)
    CASE(8, uint64_t)
#undef CASE
    default: throw Error("gather_elements: unsupported element size " + std::to_string(elem));
  }
}

bool scatter_nd(size_t elem, void* y, std::span<const int64_t> y_dims, const int64_t* index, int64_t tuples,
                int64_t k, const void* updates, int64_t* bad, ScatterReduce reduce) {
  require(reduce == ScatterReduce::None || elem == 4, "scatter_nd: a reduction needs float32 elements");
  const size_t rank = y_dims.size();
  std::vector<int64_t> st(rank, 1);
  for (size_t d = rank; d-- > 1;) st[d - 1] = st[d] * y_dims[d];
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < rank; ++d) slice *= y_dims[d];
  const size_t bytes = static_cast<size_t>(slice) * elem;
  char* ys = static_cast<char*>(y);
  const char* us = static_cast<const char*>(updates);
  // In order, one tuple after the other: a later tuple naming the same slice wins.
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = index[t * k + d];
      const int64_t n = y_dims[static_cast<size_t>(d)];
      if (v < -n || v >= n) {
        if (bad) *bad = v;
        return false;
      }
      off += (v < 0 ? v + n : v) * st[static_cast<size_t>(d)];
    }
    if (reduce == ScatterReduce::None) {
      std::memcpy(ys + static_cast<size_t>(off) * elem, us + static_cast<size_t>(t) * bytes, bytes);
      continue;
    }
    float* d = reinterpret_cast<float*>(ys) + off;
    const float* u = reinterpret_cast<const float*>(us) + t * slice;
    switch (reduce) {
      case ScatterReduce::Add: for (int64_t i = 0; i < slice; ++i) d[i] += u[i]; break;
      case ScatterReduce::Mul: for (int64_t i = 0; i < slice; ++i) d[i] *= u[i]; break;
      case ScatterReduce::Max: for (int64_t i = 0; i < slice; ++i) d[i] = u[i] > d[i] ? u[i] : d[i]; break;
      case ScatterReduce::Min: for (int64_t i = 0; i < slice; ++i) d[i] = u[i] < d[i] ? u[i] : d[i]; break;
      case ScatterReduce::None: break;
    }
  }
  return true;
}

namespace {

// Pixels [p0, p1) of one image. With C a constant (0: `channels`), the compiler
// turns the interleaving stores into vector permutes.
template <int C>
ISOMER_VINLINE void interleave(const float* __restrict x, int64_t channels, int64_t pixels, float* __restrict y,
                               int64_t p0, int64_t p1) {
  const int64_t ch = C ? C : channels;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t c = 0; c < ch; ++c) y[p * ch + c] = x[c * pixels + p];
}

ISOMER_VINLINE void interleave_any(const float* x, int64_t channels, int64_t pixels, float* y, int64_t p0,
                                   int64_t p1) {
  switch (channels) {
    case 1: return interleave<1>(x, channels, pixels, y, p0, p1);
    case 2: return interleave<2>(x, channels, pixels, y, p0, p1);
    case 3: return interleave<3>(x, channels, pixels, y, p0, p1);
    case 4: return interleave<4>(x, channels, pixels, y, p0, p1);
    default: return interleave<0>(x, channels, pixels, y, p0, p1);
  }
}

using Interleave = void (*)(const float*, int64_t, int64_t, float*, int64_t, int64_t);
ISOMER_TARGET_AVX512 ISOMER_FLATTEN void interleave_avx512(const float* x, int64_t channels, int64_t pixels, float* y,
                                                           int64_t p0, int64_t p1) {
  interleave_any(x, channels, pixels, y, p0, p1);
}
ISOMER_TARGET_AVX2 ISOMER_FLATTEN void interleave_avx2(const float* x, int64_t channels, int64_t pixels, float* y,
                                                       int64_t p0, int64_t p1) {
  interleave_any(x, channels, pixels, y, p0, p1);
}
ISOMER_FLATTEN void interleave_baseline(const float* x, int64_t channels, int64_t pixels, float* y, int64_t p0,
                                        int64_t p1) {
  interleave_any(x, channels, pixels, y, p0, p1);
}

}  // namespace

void planes_to_channels_last(const float* x, int64_t batch, int64_t channels, int64_t pixels, float* y,
                             int threads) {
  static const Interleave run = [] {
    switch (best_vector_isa()) {
      case VectorIsa::Avx512: return interleave_avx512;
      case VectorIsa::Avx2: return interleave_avx2;
      default: return interleave_baseline;
    }
  }();
  // Each thread a range of pixel runs of 1024 (of every image).
  constexpr int64_t kRun = 1024;
  const int64_t runs_per_image = (pixels + kRun - 1) / kRun, runs = batch * runs_per_image;
  parallel_teams(static_cast<int>(std::min<int64_t>(std::max(threads, 1), runs)), [&](int t, int team) {
    for (int64_t r = runs * t / team; r < runs * (t + 1) / team; ++r) {
      const int64_t b = r / runs_per_image, p0 = r % runs_per_image * kRun;
      const int64_t off = b * channels * pixels;
      run(x + off, channels, pixels, y + off, p0, std::min(p0 + kRun, pixels));
    }
  });
}

}  // namespace isomer::kernels
