#include "kernels/rows.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "kernels/parallel.h"
#include "kernels/rows_vec.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

int team_for(int64_t work, int64_t units, int threads) {
  const int team = team_for_work(threads > 0 ? threads : omp_get_max_threads(), static_cast<double>(work) / 32768);
  return static_cast<int>(std::clamp<int64_t>(units, 1, team));
}

// The row kernels of reductions (8 lanes in every clone; softmax and normalization
// rows go through the explicit dispatch below, 16 lanes under AVX-512).
ISOMER_CLONES float row_sum(const float* x, int64_t n) { return rowv::sum<vm8::v8>(x, n); }
ISOMER_CLONES float row_sum_sq(const float* x, int64_t n, float shift) {
  return rowv::sum_sq<vm8::v8>(x, n, shift);
}
ISOMER_CLONES float row_max(const float* x, int64_t n) { return rowv::max<vm8::v8>(x, n); }
ISOMER_CLONES float row_exp_sum(const float* x, float* y, int64_t n, float m) {
  return rowv::exp_sum<vm8::v8>(x, y, n, m);
}

// One entry point per instruction set (vector_isa.h), chosen once. (flatten: see
// rows_vec.h's Part.)
using SoftmaxRow = void (*)(const float*, float*, int64_t, bool, const float*);
using LayerNormRow = void (*)(const float*, float*, int64_t, const float*, const float*, float, bool);

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void softmax_row_avx512(const float* x, float* y, int64_t n, bool log,
                                                             const float* nan_to) {
  rowv::softmax<vm16::v16>(x, y, n, log, nan_to);
}
ISOMER_TARGET_AVX2 void softmax_row_avx2(const float* x, float* y, int64_t n, bool log, const float* nan_to) {
  rowv::softmax<vm8::v8>(x, y, n, log, nan_to);
}
void softmax_row_baseline(const float* x, float* y, int64_t n, bool log, const float* nan_to) {
  rowv::softmax<vm8::v8>(x, y, n, log, nan_to);
}

template <rowv::FloatVector V>
ISOMER_VINLINE float exp_row(const float* x, float* y, int64_t n) {
  float m = rowv::max<V>(x, n);
  if (std::isinf(m) && m < 0) m = 0;
  return rowv::exp_sum<V>(x, y, n, m);
}
ISOMER_TARGET_AVX512 ISOMER_FLATTEN float exp_row_avx512(const float* x, float* y, int64_t n) {
  return exp_row<vm16::v16>(x, y, n);
}
ISOMER_TARGET_AVX2 float exp_row_avx2(const float* x, float* y, int64_t n) { return exp_row<vm8::v8>(x, y, n); }
float exp_row_baseline(const float* x, float* y, int64_t n) { return exp_row<vm8::v8>(x, y, n); }

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void layer_norm_row_avx512(const float* x, float* y, int64_t n, const float* scale,
                                                const float* bias, float eps, bool rms) {
  rowv::layer_norm<vm16::v16>(x, y, n, scale, bias, eps, rms);
}
ISOMER_TARGET_AVX2 void layer_norm_row_avx2(const float* x, float* y, int64_t n, const float* scale,
                                            const float* bias, float eps, bool rms) {
  rowv::layer_norm<vm8::v8>(x, y, n, scale, bias, eps, rms);
}
void layer_norm_row_baseline(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                             bool rms) {
  rowv::layer_norm<vm8::v8>(x, y, n, scale, bias, eps, rms);
}

SoftmaxRow softmax_row_for(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return softmax_row_avx512;
    case VectorIsa::Avx2: return softmax_row_avx2;
    default: return softmax_row_baseline;
  }
}
LayerNormRow layer_norm_row_for(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return layer_norm_row_avx512;
    case VectorIsa::Avx2: return layer_norm_row_avx2;
    default: return layer_norm_row_baseline;
  }
}

// acc[i] += exp(x[i] - m[i]) (an infinite m contributes nothing: its result is m).
ISOMER_CLONES void cols_exp_accumulate(const float* x, const float* m, float* acc, int64_t inner) {
  for (int64_t i = 0; i < inner; ++i) acc[i] += std::isinf(m[i]) ? 0.0f : vm::exp(x[i] - m[i]);
}

// Column-wise (inner > 1) reductions: acc[i] op= x[k, i].
ISOMER_CLONES void cols_accumulate(ReduceKind kind, const float* x, float* acc, int64_t inner) {
  switch (kind) {
    case ReduceKind::Max:
      for (int64_t i = 0; i < inner; ++i) acc[i] = (acc[i] != acc[i] || acc[i] > x[i]) ? acc[i] : x[i];
      break;
    case ReduceKind::Min:
      for (int64_t i = 0; i < inner; ++i) acc[i] = (acc[i] != acc[i] || acc[i] < x[i]) ? acc[i] : x[i];
      break;
    case ReduceKind::Prod:
      for (int64_t i = 0; i < inner; ++i) acc[i] *= x[i];
      break;
    case ReduceKind::SumSquare:
    case ReduceKind::L2:
      for (int64_t i = 0; i < inner; ++i) acc[i] += x[i] * x[i];
      break;
    case ReduceKind::L1:
      for (int64_t i = 0; i < inner; ++i) acc[i] += std::fabs(x[i]);
      break;
    default:
      for (int64_t i = 0; i < inner; ++i) acc[i] += x[i];
      break;
  }
}

float initial(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max: return -std::numeric_limits<float>::infinity();
    case ReduceKind::Min: return std::numeric_limits<float>::infinity();
    case ReduceKind::Prod: return 1.0f;
    default: return 0.0f;
  }
}

float finish(ReduceKind kind, float v, int64_t n) {
  switch (kind) {
    case ReduceKind::Mean: return v / static_cast<float>(n);
    case ReduceKind::L2: return std::sqrt(v);
    case ReduceKind::LogSum: return std::log(v);
    default: return v;
  }
}

float reduce_row(ReduceKind kind, const float* x, int64_t n) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
    case ReduceKind::LogSum: return row_sum(x, n);
    case ReduceKind::SumSquare:
    case ReduceKind::L2: return row_sum_sq(x, n, 0.0f);
    case ReduceKind::Max: return row_max(x, n);
    default: {
      float acc = initial(kind);
      for (int64_t j = 0; j < n; ++j) {
        const float v = x[j];
        switch (kind) {
          case ReduceKind::Min: acc = (acc != acc || acc < v) ? acc : v; break;
          case ReduceKind::Prod: acc *= v; break;
          case ReduceKind::L1: acc += std::fabs(v); break;
          default: acc += v; break;
        }
      }
      return acc;
    }
  }
}

}  // namespace

void reduce_axis(ReduceKind kind, const float* x, float* out, int64_t outer, int64_t n, int64_t inner, int threads) {
  if (kind == ReduceKind::LogSumExp) {
    // log(sum(exp(x))) = m + log(sum(exp(x - m))): the maxima first, then the sums
    // of exponentials with the vector exp (rows: into a scratch row; columns: all
    // lanes of a row of the axis at once).
    reduce_axis(ReduceKind::Max, x, out, outer, n, inner, threads);
    const int team = team_for(outer * n * inner * 8, outer, threads);
    parallel_teams(team, [&](int t, int nt) {
      std::vector<float> scratch(static_cast<size_t>(inner == 1 ? n : inner));
      for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o) {
        float* m = out + o * inner;
        if (inner == 1) {
          if (!std::isinf(m[0]) && m[0] == m[0]) m[0] += std::log(row_exp_sum(x + o * n, scratch.data(), n, m[0]));
          continue;
        }
        std::fill(scratch.begin(), scratch.end(), 0.0f);
        for (int64_t k = 0; k < n; ++k) cols_exp_accumulate(x + (o * n + k) * inner, m, scratch.data(), inner);
        for (int64_t i = 0; i < inner; ++i)
          if (!std::isinf(m[i]) && m[i] == m[i]) m[i] += std::log(scratch[static_cast<size_t>(i)]);
      }
    });
    return;
  }
  const int team = team_for(outer * n * inner, inner == 1 ? outer : outer * ((inner + 255) / 256), threads);
  if (inner == 1) {
    parallel_teams(team, [&](int t, int nt) {
      for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o)
        out[o] = finish(kind, reduce_row(kind, x + o * n, n), n);
    });
    return;
  }
  // Column blocks of up to 256 lanes, so the accumulators stay in L1.
  const int64_t blocks = (inner + 255) / 256;
  parallel_teams(team, [&](int t, int nt) {
    const int64_t units = outer * blocks;
    for (int64_t u = units * t / nt; u < units * (t + 1) / nt; ++u) {
      const int64_t o = u / blocks, i0 = (u % blocks) * 256, w = std::min<int64_t>(256, inner - i0);
      float* acc = out + o * inner + i0;
      std::fill(acc, acc + w, initial(kind));
      for (int64_t k = 0; k < n; ++k) cols_accumulate(kind, x + (o * n + k) * inner + i0, acc, w);
      for (int64_t i = 0; i < w; ++i) acc[i] = finish(kind, acc[i], n);
    }
  });
}

namespace {

// NaNs of y[0, n) replaced by `to`.
void replace_nan(float* y, int64_t n, float to) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::isnan(y[i]) ? to : y[i];
}

}  // namespace

void softmax_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, int threads,
                  const float* nan_to) {
  if (inner == 1) {
    const SoftmaxRow row = softmax_row_for(best_vector_isa());
    const int team = team_for(outer * n * 8, outer, threads);
    parallel_teams(team, [&](int t, int nt) {
      for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o) {
        row(x + o * n, y + o * n, n, log, nan_to);
      }
    });
    return;
  }
  const int team = team_for(outer * n * inner * 8, outer, threads);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<float> m(static_cast<size_t>(inner)), s(static_cast<size_t>(inner));
    for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o) {
      const float* xo = x + o * n * inner;
      float* yo = y + o * n * inner;
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      for (int64_t k = 0; k < n; ++k) cols_accumulate(ReduceKind::Max, xo + k * inner, m.data(), inner);
      for (float& v : m)
        if (std::isinf(v) && v < 0) v = 0;
      std::fill(s.begin(), s.end(), 0.0f);
      for (int64_t k = 0; k < n; ++k) {
        const float* xk = xo + k * inner;
        float* yk = yo + k * inner;
        for (int64_t i = 0; i < inner; ++i) yk[i] = xk[i] - m[static_cast<size_t>(i)];
        if (!log)
          for (int64_t i = 0; i < inner; ++i) yk[i] = vm::exp(yk[i]);
        for (int64_t i = 0; i < inner; ++i) s[static_cast<size_t>(i)] += log ? vm::exp(yk[i]) : yk[i];
      }
      for (int64_t i = 0; i < inner; ++i) s[static_cast<size_t>(i)] = log ? std::log(s[static_cast<size_t>(i)]) : 1.0f / s[static_cast<size_t>(i)];
      for (int64_t k = 0; k < n; ++k) {
        float* yk = yo + k * inner;
        if (log)
          for (int64_t i = 0; i < inner; ++i) yk[i] -= s[static_cast<size_t>(i)];
        else
          for (int64_t i = 0; i < inner; ++i) yk[i] *= s[static_cast<size_t>(i)];
      }
      if (nan_to) replace_nan(yo, n * inner, *nan_to);
    }
  });
}

void normalize_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms, int threads) {
  const LayerNormRow row = layer_norm_row_for(best_vector_isa());
  const int team = team_for(rows * n * 4, rows, threads);
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) row(x + r * n, y + r * n, n, scale, bias, eps, rms);
  });
}

void softmax_row(VectorIsa isa, const float* x, float* y, int64_t n, bool log) {
  if (!vector_isa_available(isa)) throw Error(std::string("softmax_row: this CPU has no ") + vector_isa_name(isa));
  softmax_row_for(isa)(x, y, n, log, nullptr);
}

float softmax_exp_row(VectorIsa isa, const float* x, float* y, int64_t n) {
  switch (isa) {
    case VectorIsa::Avx512: return exp_row_avx512(x, y, n);
    case VectorIsa::Avx2: return exp_row_avx2(x, y, n);
    default: return exp_row_baseline(x, y, n);
  }
}

void layer_norm_row(VectorIsa isa, const float* x, float* y, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms) {
  if (!vector_isa_available(isa)) throw Error(std::string("layer_norm_row: this CPU has no ") + vector_isa_name(isa));
  layer_norm_row_for(isa)(x, y, n, scale, bias, eps, rms);
}

namespace {

// a beats b as the extreme value: larger (Max) or smaller, and a NaN beats every
// number (NumPy's and ONNX Runtime's arg-max and arg-min both find the first NaN).
// Integers have no NaN and compare plainly.
template <bool Max, class T>
inline bool beats(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool a_nan = a != a, b_nan = b != b;
    return a_nan ? !b_nan : (!b_nan && (Max ? a > b : a < b));
  } else {
    return Max ? a > b : a < b;
  }
}

// Whether v replaces the best so far b, met at a later index: strictly better, or
// (Last) at least as good.
template <bool Max, bool Last, class T>
inline bool takes(T v, T b) {
  return Last ? !beats<Max>(b, v) : beats<Max>(v, b);
}

// Index of the extreme value of a contiguous row. The vector part keeps a best
// value and index per lane; merging the lanes resolves ties toward the lower
// (Last: the higher) index.
// Lanes of arg-max/min partial results (a best value and its index each).
constexpr int64_t kArgLanes = 16;

template <bool Max, bool Last, class T>
ISOMER_CLONES int64_t row_arg(const T* x, int64_t n) {
  T b = x[0];
  int64_t best = 0, j = 1;
  if (n >= 2 * kArgLanes) {
    T bv[kArgLanes];
    int64_t bi[kArgLanes];
    for (int64_t l = 0; l < kArgLanes; ++l) bv[l] = x[l], bi[l] = l;
    for (j = kArgLanes; j + kArgLanes <= n; j += kArgLanes)
      for (int64_t l = 0; l < kArgLanes; ++l) {
        const T v = x[j + l];
        const bool take = takes<Max, Last>(v, bv[l]);
        bv[l] = take ? v : bv[l];
        bi[l] = take ? j + l : bi[l];
      }
    b = bv[0];
    best = bi[0];
    for (int64_t l = 1; l < kArgLanes; ++l)
      if (beats<Max>(bv[l], b) || (!beats<Max>(b, bv[l]) && (Last ? bi[l] > best : bi[l] < best))) {
        b = bv[l];
        best = bi[l];
      }
  }
  for (; j < n; ++j)
    if (takes<Max, Last>(x[j], b)) {
      b = x[j];
      best = j;
    }
  return best;
}

// The same along a strided axis, all inner lanes side by side.
template <bool Max, bool Last, class T>
ISOMER_CLONES void cols_arg(const T* x, int64_t* out, int64_t n, int64_t inner, T* best) {
  std::copy(x, x + inner, best);
  std::fill(out, out + inner, 0);
  for (int64_t k = 1; k < n; ++k) {
    const T* xk = x + k * inner;
    for (int64_t i = 0; i < inner; ++i) {
      const T v = xk[i];
      const bool take = takes<Max, Last>(v, best[i]);
      best[i] = take ? v : best[i];
      out[i] = take ? k : out[i];
    }
  }
}

template <bool Max, bool Last, class T>
void arg_axis(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, int threads) {
  const int team = team_for(outer * n * inner, outer, threads);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<T> best(static_cast<size_t>(inner));
    for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o) {
      if (inner == 1) out[o] = row_arg<Max, Last>(x + o * n, n);
      else cols_arg<Max, Last>(x + o * n * inner, out + o * inner, n, inner, best.data());
    }
  });
}

}  // namespace

namespace {

template <class T>
void arg_axis_any(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                  int threads) {
  if (max) (last ? arg_axis<true, true, T> : arg_axis<true, false, T>)(x, out, outer, n, inner, threads);
  else (last ? arg_axis<false, true, T> : arg_axis<false, false, T>)(x, out, outer, n, inner, threads);
}

}  // namespace

void argmax_axis(const float* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads) {
  arg_axis_any(x, out, outer, n, inner, max, last, threads);
}
void argmax_axis(const int32_t* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads) {
  arg_axis_any(x, out, outer, n, inner, max, last, threads);
}
void argmax_axis(const int64_t* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max, bool last,
                 int threads) {
  arg_axis_any(x, out, outer, n, inner, max, last, threads);
}

namespace {

// Sums in T, except that integers add as their unsigned counterparts (wrapping,
// never undefined behaviour).
template <class T>
struct Accumulate {
  using type = T;
};
template <>
struct Accumulate<int64_t> {
  using type = uint64_t;
};
template <>
struct Accumulate<int32_t> {
  using type = uint32_t;
};

template <class T>
void cumsum_columns(const T* x, T* y, int64_t n, int64_t inner, bool exclusive, bool reverse,
                    typename Accumulate<T>::type* acc) {
  using A = typename Accumulate<T>::type;
  std::fill(acc, acc + inner, A(0));
  for (int64_t s = 0; s < n; ++s) {
    const int64_t k = reverse ? n - 1 - s : s;
    const T* xk = x + k * inner;
    T* yk = y + k * inner;
    if (exclusive) {
      for (int64_t i = 0; i < inner; ++i) {
        const A v = static_cast<A>(xk[i]);
        yk[i] = static_cast<T>(acc[i]);
        acc[i] += v;
      }
    } else {
      for (int64_t i = 0; i < inner; ++i) yk[i] = static_cast<T>(acc[i] += static_cast<A>(xk[i]));
    }
  }
}

template <class T>
void cumsum_any(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse, int threads) {
  const int team = team_for(outer * n * inner, outer, threads);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<typename Accumulate<T>::type> acc(static_cast<size_t>(inner));
    for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o)
      cumsum_columns(x + o * n * inner, y + o * n * inner, n, inner, exclusive, reverse, acc.data());
  });
}

}  // namespace

void cumsum_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads) {
  cumsum_any(x, y, outer, n, inner, exclusive, reverse, threads);
}
void cumsum_axis(const double* x, double* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads) {
  cumsum_any(x, y, outer, n, inner, exclusive, reverse, threads);
}
void cumsum_axis(const int64_t* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads) {
  cumsum_any(x, y, outer, n, inner, exclusive, reverse, threads);
}
void cumsum_axis(const int32_t* x, int32_t* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 int threads) {
  cumsum_any(x, y, outer, n, inner, exclusive, reverse, threads);
}

ISOMER_CLONES void row_affine(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * a + b;
}

// y[s, l] = x[s, l] * a[l] + b[l] for lanes l < n of `spatial` positions `stride` apart.
ISOMER_CLONES void block_affine(const float* x, float* y, int64_t spatial, int64_t n, int64_t stride,
                                const float* a, const float* b) {
  for (int64_t s = 0; s < spatial; ++s)
    for (int64_t l = 0; l < n; ++l) y[s * stride + l] = x[s * stride + l] * a[l] + b[l];
}

// s[l] += x[p * stride + l] over `spatial` positions p, for lanes l < n.
ISOMER_CLONES void lane_sums(const float* x, int64_t spatial, int64_t n, int64_t stride, float* s) {
  for (int64_t p = 0; p < spatial; ++p)
    for (int64_t l = 0; l < n; ++l) s[l] += x[p * stride + l];
}

// s[l] += (x[p * stride + l] - m[l])^2 over `spatial` positions p, for lanes l < n.
ISOMER_CLONES void lane_sums_sq(const float* x, int64_t spatial, int64_t n, int64_t stride, const float* m, float* s) {
  for (int64_t p = 0; p < spatial; ++p)
    for (int64_t l = 0; l < n; ++l) {
      const float d = x[p * stride + l] - m[l];
      s[l] += d * d;
    }
}

namespace {

// Groups inside a block of channels: the lanes [c0, c0 + n) of one block (whole
// groups of `per` lanes), each pass reading every position's lanes together. One
// group at a time read one float per position, `block` floats apart, three times
// (RAFT's InstanceNormalization in channels last: 2 ms for [2, 32, 64, 64]).
void normalize_lanes(const float* x, float* y, int64_t spatial, int64_t block, int64_t c0, int64_t n, int64_t per,
                     const float* scale, const float* bias, float eps, float* work) {
  float *sum = work, *mean = work + n, *a = work + 2 * n, *b = work + 3 * n;
  const float len = static_cast<float>(per * spatial);
  std::fill(sum, sum + n, 0.0f);
  lane_sums(x, spatial, n, block, sum);
  for (int64_t g = 0; g < n; g += per) {
    float m = 0.0f;
    for (int64_t l = g; l < g + per; ++l) m += sum[l];
    std::fill(mean + g, mean + g + per, m / len);
  }
  std::fill(sum, sum + n, 0.0f);
  lane_sums_sq(x, spatial, n, block, mean, sum);
  for (int64_t g = 0; g < n; g += per) {
    float v = 0.0f;
    for (int64_t l = g; l < g + per; ++l) v += sum[l];
    const float inv = 1.0f / std::sqrt(v / len + eps);
    for (int64_t l = g; l < g + per; ++l) {
      a[l] = inv * scale[c0 + l];
      b[l] = bias[c0 + l] - mean[l] * a[l];
    }
  }
  block_affine(x, y, spatial, n, block, a, b);
}

}  // namespace

// Groups that lie inside a block (instance normalization of a blocked or channels-last
// tensor, a group a channel): the sums of all the block's lanes side by side in one
// pass over its positions, then one affine pass. A group at a time summed `per` lanes
// at each position with a call, 7 ns an element for a group of one channel (wav2vec 2's
// first GroupNorm over [1, 32, 799] in blocks of 8, the slowest step of the model).
// Lane sums of `spatial` positions of `block` lanes (sum[l] += x[s, l], and sq[l] +=
// (x[s, l] - center[l])^2 where sq is given), for a block that divides 16: the
// positions are read as rows of 16 floats into vector registers (as arrays the sums
// went through memory every row, 5x slower), summed in float over 256 rows at a time
// and then in double.
constexpr int64_t kVectorLanes = 16;
using Lanes16 = float __attribute__((vector_size(4 * kVectorLanes)));

static ISOMER_CLONES void lane_sums16(const float* x, int64_t spatial, int64_t block, const float* center, double* sum,
                                    double* sq) {
  constexpr int64_t W = kVectorLanes, kChunk = 256;
  Lanes16 c16;
  for (int64_t j = 0; j < W; ++j) c16[j] = sq ? center[j % block] : 0.0f;
  const int64_t n = spatial * block, rows = n / W;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    Lanes16 s1 = {}, s2 = {};
    const int64_t r1 = std::min(rows, r0 + kChunk);
    for (int64_t r = r0; r < r1; ++r) {
      Lanes16 v;
      std::memcpy(&v, x + r * W, sizeof v);
      v -= c16;
      s1 += v;
      s2 += v * v;
    }
    for (int64_t j = 0; j < W; ++j) {
      sum[j % block] += s1[j];
      if (sq) sq[j % block] += s2[j];
    }
  }
  for (int64_t i = rows * W; i < n; ++i) {
    const double d = static_cast<double>(x[i] - c16[i % block]);
    sum[i % block] += d;
    if (sq) sq[i % block] += d * d;
  }
}

// y[s, l] = x[s, l] * a[l] + b[l] over `spatial` positions of `block` dense lanes (a
// block that divides 16), as rows of 16.
static ISOMER_CLONES void lane_affine16(const float* x, float* y, int64_t spatial, int64_t block, const float* a,
                                      const float* b) {
  constexpr int64_t W = kVectorLanes;
  Lanes16 a16, b16;
  for (int64_t j = 0; j < W; ++j) a16[j] = a[j % block], b16[j] = b[j % block];
  const int64_t n = spatial * block, rows = n / W;
  for (int64_t r = 0; r < rows; ++r) {
    Lanes16 v;
    std::memcpy(&v, x + r * W, sizeof v);
    v = v * a16 + b16;
    std::memcpy(y + r * W, &v, sizeof v);
  }
  for (int64_t i = rows * W; i < n; ++i) y[i] = x[i] * a[i % block] + b[i % block];
}

static void normalize_groups_in_vector_blocks(const float* x, float* y, int64_t batch, int64_t channels, int64_t spatial,
                                       int64_t per, const float* scale, const float* bias, float eps, int threads,
                                       int64_t block) {
  const int64_t blocks = batch * (channels / block), len = per * spatial;
  const int team = team_for(blocks * block * spatial * 4, blocks, threads);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<double> sum(static_cast<size_t>(block)), sq(sum.size());
    std::vector<float> center(sum.size()), a(sum.size()), b(sum.size());
    for (int64_t r = blocks * t / nt; r < blocks * (t + 1) / nt; ++r) {
      const int64_t c0 = r % (channels / block) * block;
      const float* xr = x + r * block * spatial;
      // Each group's mean first, then its variance about that mean (two passes, as
      // the kernel below computes it for a group of whole blocks).
      std::fill(sum.begin(), sum.end(), 0.0);
      lane_sums16(xr, spatial, block, nullptr, sum.data(), nullptr);
      for (int64_t g = 0; g < block; g += per) {
        double m = 0;
        for (int64_t l = g; l < g + per; ++l) m += sum[static_cast<size_t>(l)];
        for (int64_t l = g; l < g + per; ++l) center[static_cast<size_t>(l)] = static_cast<float>(m / static_cast<double>(len));
      }
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(sq.begin(), sq.end(), 0.0);
      lane_sums16(xr, spatial, block, center.data(), sum.data(), sq.data());
      for (int64_t g = 0; g < block; g += per) {
        double v = 0;
        for (int64_t l = g; l < g + per; ++l) v += sq[static_cast<size_t>(l)];
        const float inv = 1.0f / std::sqrt(static_cast<float>(v / static_cast<double>(len)) + eps);
        for (int64_t l = g; l < g + per; ++l) {
          const size_t i = static_cast<size_t>(l);
          a[i] = inv * scale[c0 + l];
          b[i] = bias[c0 + l] - center[i] * a[i];
        }
      }
      lane_affine16(xr, y + r * block * spatial, spatial, block, a.data(), b.data());
    }
  });
}

void normalize_groups(const float* x, float* y, int64_t batch, int64_t channels, int64_t spatial, int64_t groups,
                      const float* scale, const float* bias, float eps, int threads, int64_t block) {
  const int64_t per = channels / groups, len = per * spatial;
  if (per < block && kVectorLanes % block == 0) {
    // Blocks a vector holds whole (8 or 16 channels): rows of the vector summed in registers.
    normalize_groups_in_vector_blocks(x, y, batch, channels, spatial, per, scale, bias, eps, threads, block);
    return;
  }
  if (per < block) {
    // Units of whole groups of at least 16 lanes (a vector), so that a batch of one in
    // channels last still has work for several threads.
    const int64_t lanes = per >= 16 ? per : per * (16 / per), chunks = (block + lanes - 1) / lanes,
                  units = batch * (channels / block) * chunks;
    const int team = team_for(batch * channels * spatial * 4, units, threads);
    parallel_teams(team, [&](int t, int nt) {
      std::vector<float> work(static_cast<size_t>(4 * lanes));
      for (int64_t u = units * t / nt; u < units * (t + 1) / nt; ++u) {
        const int64_t blk = u / chunks, l0 = u % chunks * lanes, n = std::min(lanes, block - l0);
        const int64_t c0 = blk % (channels / block) * block + l0;
        const int64_t at = blk / (channels / block) * channels * spatial + (c0 - l0) * spatial + l0;
        normalize_lanes(x + at, y + at, spatial, block, c0, n, per, scale, bias, eps, work.data());
      }
    });
    return;
  }
  const int64_t rows = batch * groups;
  const int team = team_for(rows * len * 4, rows, threads);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<float> a(static_cast<size_t>(block)), b(a.size());
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      const int64_t first = (r % groups) * per;
      const int64_t at = r / groups * channels * spatial + first / block * block * spatial;
      const float* xr = x + at;
      float* yr = y + at;
      // A group of whole blocks is one contiguous run of per * spatial floats in
      // any of the layouts.
      const float mean = row_sum(xr, len) / static_cast<float>(len);
      const float var = row_sum_sq(xr, len, mean) / static_cast<float>(len);
      const float inv = 1.0f / std::sqrt(var + eps);
      if (block == 1) {
        for (int64_t c = 0; c < per; ++c) {
          const float k = inv * scale[first + c];
          row_affine(xr + c * spatial, yr + c * spatial, spatial, k, bias[first + c] - mean * k);
        }
        continue;
      }
      for (int64_t c0 = 0; c0 < per; c0 += block) {
        for (int64_t l = 0; l < block; ++l) {
          const float k = inv * scale[first + c0 + l];
          a[static_cast<size_t>(l)] = k;
          b[static_cast<size_t>(l)] = bias[first + c0 + l] - mean * k;
        }
        block_affine(xr + c0 * spatial, yr + c0 * spatial, spatial, block, block, a.data(), b.data());
      }
    }
  });
}

ISOMER_CLONES
void local_response_norm(const float* x, float* y, int64_t batch, int64_t channels, int64_t spatial, int64_t below,
                         int64_t above, float alpha_over_size, float beta, float bias, int threads) {
  const int64_t rows = batch * channels;
  const int team = team_for(rows * spatial * (below + above + 8), rows, threads);
  // beta = 0.75 (every CNN that uses LRN) as d^-3/4 = 1 / (sqrt(d) * sqrt(sqrt(d))).
  const bool three_quarters = beta == 0.75f;
  parallel_teams(team, [&](int t, int nt) {
    std::vector<float> sq(static_cast<size_t>(spatial));
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      const int64_t b = r / channels, c = r % channels;
      const int64_t lo = std::max<int64_t>(0, c - below), hi = std::min(channels - 1, c + above);
      std::fill(sq.begin(), sq.end(), 0.0f);
      for (int64_t k = lo; k <= hi; ++k) {  // neighbour rows, each read along
        const float* xk = x + (b * channels + k) * spatial;
        for (int64_t s = 0; s < spatial; ++s) sq[static_cast<size_t>(s)] += xk[s] * xk[s];
      }
      const float* xr = x + r * spatial;
      float* yr = y + r * spatial;
      for (int64_t s = 0; s < spatial; ++s) {
        const float d = bias + alpha_over_size * sq[static_cast<size_t>(s)];
        const float root = std::sqrt(d);
        yr[s] = three_quarters ? xr[s] / (root * std::sqrt(root)) : xr[s] * std::pow(d, -beta);
      }
    }
  });
}

}  // namespace isomer::kernels
