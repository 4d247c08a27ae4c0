#pragma once
// ONNX DFT along one axis, stated once for the reference evaluator (double) and
// the runtime's kernel (float): the input viewed as [outer, n_in, inner, parts]
// (parts 1: real, 2: complex), the output as [outer, n_out, inner, 2]. Frequency
// k sums the first min(n_in, length) samples times e^(-/+ 2 pi i k n / length)
// (the signal zero-padded or cut to `length`); the inverse divides by length.
#include <cmath>
#include <cstdint>
#include <vector>

namespace isomer::kernels {

struct DftShape {
  int64_t outer = 1, n_in = 1, inner = 1, parts = 1;
  int64_t length = 1;  // the transform's length (dft_length, else n_in)
  int64_t n_out = 1;   // length, or length / 2 + 1 one-sided
  bool inverse = false;
};

// cos and sin of 2 pi j / length for j < length: the twiddles of every (k n) mod length.
inline std::pair<std::vector<double>, std::vector<double>> dft_twiddles(int64_t length) {
  std::vector<double> c(static_cast<size_t>(length)), s(static_cast<size_t>(length));
  const double step = 2.0 * M_PI / static_cast<double>(length);
  for (int64_t j = 0; j < length; ++j) {
    c[static_cast<size_t>(j)] = std::cos(step * static_cast<double>(j));
    s[static_cast<size_t>(j)] = std::sin(step * static_cast<double>(j));
  }
  return {std::move(c), std::move(s)};
}

// Rows [begin, end) of `outer`; W is the twiddles' type (the evaluator's double,
// the kernel's float).
template <class T, class W>
void dft_rows(const T* x, T* y, const DftShape& s, const W* cosines, const W* sines, int64_t begin, int64_t end) {
  const int64_t n = s.n_in < s.length ? s.n_in : s.length, in = s.inner, p = s.parts;
  const T sign = s.inverse ? T(1) : T(-1);
  const T scale = s.inverse ? T(1) / static_cast<T>(s.length) : T(1);
  for (int64_t o = begin; o < end; ++o) {
    const T* xo = x + o * s.n_in * in * p;
    T* yo = y + o * s.n_out * in * 2;
    for (int64_t k = 0; k < s.n_out; ++k) {
      T* yk = yo + k * in * 2;
      for (int64_t i = 0; i < 2 * in; ++i) yk[i] = T(0);
      for (int64_t t = 0, j = 0; t < n; ++t, j = j + k >= s.length ? j + k - s.length : j + k) {  // j = k t mod length
        const T c = static_cast<T>(cosines[j]), sn = sign * static_cast<T>(sines[j]);
        const T* xt = xo + t * in * p;
        // (a + i b)(c + i sn) = (a c - b sn) + i (b c + a sn)
        if (p == 1) {
          for (int64_t i = 0; i < in; ++i) {
            yk[2 * i] += xt[i] * c;
            yk[2 * i + 1] += xt[i] * sn;
          }
        } else {
          for (int64_t i = 0; i < in; ++i) {
            const T a = xt[2 * i], b = xt[2 * i + 1];
            yk[2 * i] += a * c - b * sn;
            yk[2 * i + 1] += b * c + a * sn;
          }
        }
      }
      if (s.inverse)
        for (int64_t i = 0; i < 2 * in; ++i) yk[i] *= scale;
    }
  }
}

// STFT's frame: `length` samples of `parts` values from x, each times window[t]
// (no window: as they are), into `frame`.
template <class T, class W>
void window_frame(const T* x, const W* window, int64_t length, int64_t parts, T* frame) {
  for (int64_t t = 0; t < length; ++t)
    for (int64_t q = 0; q < parts; ++q)
      frame[t * parts + q] = window ? x[t * parts + q] * static_cast<T>(window[t]) : x[t * parts + q];
}

// The transform as products with [n, n_out] matrices of cos(2 pi k t / length)
// and -/+ sin(...) (row t: every frequency k), for a signal whose samples are
// contiguous (inner 1): the frequencies are the vector lanes. `re` and `im` hold
// n_out values each (scratch).
inline void dft_matrix(const DftShape& s, std::vector<float>& cos_kt, std::vector<float>& sin_kt) {
  const int64_t n = s.n_in < s.length ? s.n_in : s.length;
  const auto [cosines, sines] = dft_twiddles(s.length);
  cos_kt.resize(static_cast<size_t>(n * s.n_out));
  sin_kt.resize(cos_kt.size());
  const double sign = s.inverse ? 1.0 : -1.0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0, j = 0; k < s.n_out; ++k, j = j + t >= s.length ? j + t - s.length : j + t) {
      cos_kt[static_cast<size_t>(t * s.n_out + k)] = static_cast<float>(cosines[static_cast<size_t>(j)]);
      sin_kt[static_cast<size_t>(t * s.n_out + k)] = static_cast<float>(sign * sines[static_cast<size_t>(j)]);
    }
}

inline void dft_rows_by_matrix(const float* x, float* y, const DftShape& s, const float* cos_kt, const float* sin_kt,
                               float* re, float* im, int64_t begin, int64_t end) {
  const int64_t n = s.n_in < s.length ? s.n_in : s.length, p = s.parts, m = s.n_out;
  const float scale = s.inverse ? 1.0f / static_cast<float>(s.length) : 1.0f;
  for (int64_t o = begin; o < end; ++o) {
    const float* xo = x + o * s.n_in * p;
    for (int64_t k = 0; k < m; ++k) re[k] = im[k] = 0.0f;
    for (int64_t t = 0; t < n; ++t) {
      const float a = xo[t * p], b = p == 2 ? xo[t * p + 1] : 0.0f;
      const float* c = cos_kt + t * m;
      const float* sn = sin_kt + t * m;
      for (int64_t k = 0; k < m; ++k) {
        re[k] += a * c[k] - b * sn[k];
        im[k] += b * c[k] + a * sn[k];
      }
    }
    float* yo = y + o * m * 2;
    for (int64_t k = 0; k < m; ++k) {
      yo[2 * k] = re[k] * scale;
      yo[2 * k + 1] = im[k] * scale;
    }
  }
}

}  // namespace isomer::kernels
