#include "kernels/rows.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

// Reductions keep partial results in 8-wide vectors (GCC's vector extension:
// AVX registers in the AVX2 and AVX-512 clones, pairs of SSE registers in the
// baseline one): the compiler does not vectorize a float reduction by itself, since
// that reorders the additions.
using v8 = float __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float hsum(v8 v) {
  float s = 0;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

inline float hmax(v8 v) {
  float m = v[0];
  for (int l = 1; l < 8; ++l) m = m > v[l] ? m : v[l];
  return m;
}

int team_for(int64_t work, int64_t units, int threads) {
  int team = threads > 0 ? threads : omp_get_max_threads();
  const int64_t by_work = std::max<int64_t>(1, work / 32768);
  return static_cast<int>(std::clamp<int64_t>(std::min(by_work, units), 1, team));
}

ISOMER_CLONES float row_sum(const float* x, int64_t n) {
  v8 a = {}, b = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    a += load8(x + j);
    b += load8(x + j + 8);
  }
  float s = hsum(a + b);
  for (; j < n; ++j) s += x[j];
  return s;
}

ISOMER_CLONES float row_sum_sq(const float* x, int64_t n, float shift) {
  v8 a = {}, b = {};
  const v8 sh = v8{} + shift;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v8 d = load8(x + j) - sh, e = load8(x + j + 8) - sh;
    a += d * d;
    b += e * e;
  }
  float s = hsum(a + b);
  for (; j < n; ++j) s += (x[j] - shift) * (x[j] - shift);
  return s;
}

// The largest element (NaN if there is one, as ONNX Runtime's Max and Softmax).
ISOMER_CLONES float row_max(const float* x, int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  v8 a = v8{} - inf, b = v8{} - inf;
  v8i seen = {};  // lanes that met a NaN
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v8 u = load8(x + j), w = load8(x + j + 8);
    a = a > u ? a : u;
    b = b > w ? b : w;
    seen |= (u != u) | (w != w);
  }
  float m = hmax(a > b ? a : b);
  bool nan = false;
  for (int l = 0; l < 8; ++l) nan = nan || seen[l] != 0;
  for (; j < n; ++j) {
    m = m > x[j] ? m : x[j];
    nan = nan || x[j] != x[j];
  }
  if (nan)
    for (int64_t k = 0; k < n; ++k)
      if (x[k] != x[k]) return x[k];
  return m;
}

// y = exp(x - m), returns the sum of y (one pass).
ISOMER_CLONES float row_exp_sum(const float* x, float* y, int64_t n, float m) {
  const vm8::v8 mm = vm8::splat(m);
  vm8::v8 acc = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const vm8::v8 e = vm8::exp(vm8::load(x + j) - mm);
    vm8::store(y + j, e);
    acc += e;
  }
  float s = 0;
  for (int l = 0; l < 8; ++l) s += acc[l];
  for (; j < n; ++j) s += (y[j] = vm::exp(x[j] - m));
  return s;
}

ISOMER_CLONES void row_scale(float* y, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j) y[j] *= s;
}

ISOMER_CLONES void row_shift(const float* x, float* y, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - s;
}

ISOMER_CLONES void row_normalize(const float* x, float* y, int64_t n, float mean, float inv, const float* scale,
                                 const float* bias) {
  if (bias) {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  }
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
    default: return v;
  }
}

float reduce_row(ReduceKind kind, const float* x, int64_t n) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return row_sum(x, n);
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
    // log(sum(exp(x))) = m + log(sum(exp(x - m))).
    std::vector<float> m(static_cast<size_t>(outer * inner));
    reduce_axis(ReduceKind::Max, x, m.data(), outer, n, inner, threads);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        float mm = m[o * inner + i], s = 0;
        if (std::isinf(mm)) {
          out[o * inner + i] = mm;
          continue;
        }
        for (int64_t k = 0; k < n; ++k) s += std::exp(x[(o * n + k) * inner + i] - mm);
        out[o * inner + i] = mm + std::log(s);
      }
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

void softmax_axis(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, int threads) {
  if (inner == 1) {
    const int team = team_for(outer * n * 8, outer, threads);
    parallel_teams(team, [&](int t, int nt) {
      for (int64_t o = outer * t / nt; o < outer * (t + 1) / nt; ++o) {
        const float* xr = x + o * n;
        float* yr = y + o * n;
        float m = row_max(xr, n);
        if (std::isinf(m) && m < 0) m = 0;  // a row of -inf: exp gives 0s, sum 0 -> NaN as ONNX Runtime
        if (log) {
          row_shift(xr, yr, n, m);
          float s = 0;
          for (int64_t j = 0; j < n; ++j) s += vm::exp(yr[j]);
          float ls = std::log(s);
          row_shift(yr, yr, n, ls);
        } else {
          float s = row_exp_sum(xr, yr, n, m);
          row_scale(yr, n, 1.0f / s);
        }
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
    }
  });
}

void normalize_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps, bool rms, int threads) {
  const int team = team_for(rows * n * 4, rows, threads);
  parallel_teams(team, [&](int t, int nt) {
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      const float* xr = x + r * n;
      float mean = rms ? 0.0f : row_sum(xr, n) / static_cast<float>(n);
      float var = row_sum_sq(xr, n, mean) / static_cast<float>(n);
      float inv = 1.0f / std::sqrt(var + eps);
      row_normalize(xr, y + r * n, n, mean, inv, scale, bias);
    }
  });
}

}  // namespace isomer::kernels
