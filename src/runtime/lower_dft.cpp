// DFT along one axis (torch.fft's export) as a native step on kernels/dft.h: the
// twiddles computed when the graph is compiled, the rows before the axis split
// among a team. FNet's token mixing (two DFTs over 32 x 128 per layer) had been
// delegated to ONNX Runtime node by node. STFT: the frames as rows of a product.
#include <algorithm>
#include <memory>

#include "kernels/dft.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "ops/dft.h"
#include "ops/stft.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

// STFT (ops/stft.cpp): its windowed frames transformed as one product with a
// constant matrix (kernels/gemm.h).
bool lower_stft(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  if (in[0].type().dtype != DType::Float32) return false;
  const bool has_window = in.size() > 2 && in[2].present(), has_length = in.size() > 3 && in[3].present();
  const Tensor* step = c.known(in[1]);
  const Tensor* window = has_window ? c.known(in[2]) : nullptr;
  const Tensor* length = has_length ? c.known(in[3]) : nullptr;
  if (!step || step->numel() != 1 || (has_window && (!window || window->dtype() != DType::Float32)) ||
      (has_length && (!length || length->numel() != 1)))
    return false;  // the reference kernel runs it
  const int x = dense_f32(c, in[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const ops::StftShape s = ops::stft_geometry(n.attrs(), xd, step->to_i64()[0], window ? window->numel() : -1,
                                              length ? length->to_i64()[0] : -1);
  // Every frame times the window, transformed, is one row of a product: the frames
  // are rows of the signal `step` samples apart (read in place, overlapping), and
  // the window and the transform are one constant matrix [length * parts, bins * 2],
  // whose columns give each frequency's real and imaginary parts side by side, as
  // the output stores them. (Frame by frame, torch.stft's 31 frames of 256: 0.53 ms.)
  const kernels::DftShape f = s.frame();
  std::vector<float> cos_kt, sin_kt;
  kernels::dft_matrix(f, cos_kt, sin_kt);
  std::vector<double> w(static_cast<size_t>(s.length), 1.0);
  if (window) w = window->to_f64();
  const int64_t K = s.length * s.parts, N = 2 * s.bins;
  std::vector<float> transform(static_cast<size_t>(K * N));
  for (int64_t t = 0; t < s.length; ++t)
    for (int64_t k = 0; k < s.bins; ++k) {
      const auto at = static_cast<size_t>(t * s.bins + k);
      const auto wt = static_cast<float>(w[static_cast<size_t>(t)]);
      // (a + i b)(c + i sn): re a c - b sn, im a sn + b c
      float* real = transform.data() + t * s.parts * N + 2 * k;
      real[0] = wt * cos_kt[at];
      real[1] = wt * sin_kt[at];
      if (s.parts == 2) {
        real[N] = -wt * sin_kt[at];
        real[N + 1] = wt * cos_kt[at];
      }
    }
  auto packed = std::make_shared<const kernels::PackedB>(kernels::pack_b(transform.data(), K, N, N));
  const double macs = static_cast<double>(s.batch * s.frames * K * N);
  const int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "stft",
                            "stft " + to_string(xd) + " frames " + std::to_string(s.frames) + " n" +
                                std::to_string(s.length) + " step " + std::to_string(s.step) + " out" +
                                std::to_string(s.bins),
                            2 * macs),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    const auto* signal = reinterpret_cast<const float*>(p[0]);
                    auto* out = reinterpret_cast<float*>(p[1]);
                    for (int64_t b = 0; b < s.batch; ++b)
                      kernels::gemm_packed(signal + b * s.n * s.parts, s.step * s.parts, s.frames, *packed,
                                           out + b * s.frames * N, N);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_dft(Compiler& c, const Node& n) {
  if (n.inputs()[0].type().dtype != DType::Float32) return false;
  const bool has_length = n.inputs().size() > 1 && n.inputs()[1].present();
  const bool has_axis = n.inputs().size() > 2 && n.inputs()[2].present();
  const Tensor* length = has_length ? c.known(n.inputs()[1]) : nullptr;
  const Tensor* axis = has_axis ? c.known(n.inputs()[2]) : nullptr;
  if ((has_length && !length) || (has_axis && !axis)) return false;  // the reference kernel runs it
  const int x = dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const int64_t ax = ops::dft_axis(axis, static_cast<int64_t>(xd.size()));
  const kernels::DftShape s = ops::dft_geometry(n.attrs(), xd, ax, length ? length->to_i64().at(0) : -1);
  // Contiguous samples of a length whose [n, n_out] matrices fit in L2 (512 KB)
  // run as products with them, the frequencies in the vector lanes (FNet's 128:
  // 10x faster than one twiddle at a time); others a twiddle per (k, t).
  const bool by_matrix = s.inner == 1 && std::min(s.n_in, s.length) * s.n_out <= 64 * 1024;
  std::vector<float> cosines, sines;
  if (by_matrix) {
    kernels::dft_matrix(s, cosines, sines);
  } else {
    const auto [cd, sd] = kernels::dft_twiddles(s.length);
    cosines.assign(cd.begin(), cd.end());
    sines.assign(sd.begin(), sd.end());
  }
  const double macs = static_cast<double>(s.outer * s.n_out * std::min(s.n_in, s.length) * s.inner * s.parts * 2);
  const int team = static_cast<int>(std::min<int64_t>(kernels::team_for_work(c.threads(), macs / (64.0 * 1024)), s.outer));
  const int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "dft",
                            std::string(s.inverse ? "idft " : "dft ") + (by_matrix ? "matrix " : "") + to_string(xd) + " axis " + std::to_string(ax) +
                                " n" + std::to_string(s.length) + " out" + std::to_string(s.n_out) + " t" +
                                std::to_string(team),
                            2 * macs),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    const auto* in = reinterpret_cast<const float*>(p[0]);
                    auto* out = reinterpret_cast<float*>(p[1]);
                    kernels::parallel_teams(team, [&](int t, int nt) {
                      const int64_t begin = s.outer * t / nt, end = s.outer * (t + 1) / nt;
                      if (!by_matrix) {
                        kernels::dft_rows(in, out, s, cosines.data(), sines.data(), begin, end);
                        return;
                      }
                      thread_local std::vector<float> scratch;
                      scratch.resize(static_cast<size_t>(2 * s.n_out));
                      kernels::dft_rows_by_matrix(in, out, s, cosines.data(), sines.data(), scratch.data(),
                                                  scratch.data() + s.n_out, begin, end);
                    });
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
