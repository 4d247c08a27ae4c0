// STFT (opset 17, torch.stft's export: spectrogram front ends of audio models): the
// signal [batch, n, parts] (parts 1: real, 2: complex) cut into frames of
// frame_length samples, frame_step apart, each times the window and transformed by a
// DFT of its length: [batch, frames, bins, 2], frames = (n - length) / step + 1 and
// bins = length / 2 + 1 one-sided (the default), else length. The window (input 2)
// sets the length, or frame_length (input 3) does with no window; given both, they
// agree. This evaluator transforms frame by frame on kernels/dft.h; the runtime
// multiplies the frames by the window's and the transform's matrix at once.
#include "ops/stft.h"

#include "ir/graph.h"
#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

kernels::DftShape StftShape::frame() const {
  kernels::DftShape s;
  s.parts = parts;
  s.n_in = s.length = length;
  s.n_out = bins;
  return s;
}

StftShape ops::stft_geometry(const Attributes& attrs, const std::vector<int64_t>& dims, int64_t step,
                             int64_t window_length, int64_t frame_length) {
  require_valid(dims.size() == 3 && (dims[2] == 1 || dims[2] == 2),
                "STFT signal " + to_string(dims) + " must be [batch, length, 1 or 2]");
  require_valid(step > 0, "STFT frame_step must be positive, got " + std::to_string(step));
  require_valid(window_length >= 0 || frame_length >= 0, "STFT needs a window or a frame_length");
  require_valid(window_length < 0 || frame_length < 0 || window_length == frame_length,
                "STFT window of " + std::to_string(window_length) + " samples with frame_length " +
                    std::to_string(frame_length));
  StftShape s;
  s.batch = dims[0];
  s.n = dims[1];
  s.parts = dims[2];
  s.step = step;
  s.length = window_length >= 0 ? window_length : frame_length;
  require_valid(s.length > 0 && s.length <= s.n, "STFT frame of " + std::to_string(s.length) +
                                                     " samples for a signal of " + std::to_string(s.n));
  const bool onesided = attrs.get_int("onesided", 1) != 0;
  require_valid(!onesided || s.parts == 1, "a one-sided STFT takes a real signal");
  s.frames = (s.n - s.length) / s.step + 1;
  s.bins = onesided ? s.length / 2 + 1 : s.length;
  return s;
}

namespace {

int64_t scalar_of(const Tensor& t, const char* what) {
  require_valid(t.numel() == 1, std::string("STFT ") + what + " must be one value, got " + to_string(t.dims()));
  return t.to_i64()[0];
}

std::vector<TensorType> infer_stft(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_float(x, "STFT signal");
  require_valid(x.rank() == 3, "STFT signal " + to_string(x.shape) + " must be [batch, length, 1 or 2]");
  const Dim& parts = x.shape[2];
  require_valid(!parts.is_static() || parts.value == 1 || parts.value == 2,
                "STFT signal " + to_string(x.shape) + " must end in 1 (real) or 2 (complex) parts");
  const bool onesided = ctx.attrs.get_int("onesided", 1) != 0;
  require_valid(!onesided || !parts.is_static() || parts.value == 1, "a one-sided STFT takes a real signal");
  const bool window = ctx.has_input(2), frame_length = ctx.has_input(3);
  require_valid(window || frame_length, "STFT needs a window or a frame_length");
  if (window) {
    require_float(ctx.in(2), "STFT window");
    require_valid(ctx.in(2).rank() == 1, "STFT window " + to_string(ctx.in(2).shape) + " must be 1-D");
  }
  Dim length = window ? ctx.in(2).shape[0] : Dim::unknown();
  if (frame_length && ctx.constant(3)) {
    const int64_t l = scalar_of(*ctx.constant(3), "frame_length");
    require_valid(!length.is_static() || length.value == l, "STFT window of " + std::to_string(length.value) +
                                                                " samples with frame_length " + std::to_string(l));
    length = Dim(l);
  }
  const Tensor* step = ctx.constant(1);
  Dim frames = Dim::unknown(), bins = Dim::unknown();
  if (length.is_static()) {
    require_valid(length.value > 0, "STFT frame length must be positive");
    bins = Dim(onesided ? length.value / 2 + 1 : length.value);
    if (step && x.shape[1].is_static()) {
      const StftShape s = stft_geometry(ctx.attrs, {1, x.shape[1].value, 1}, scalar_of(*step, "frame_step"),
                                        length.value, -1);
      frames = Dim(s.frames);
    }
  }
  return {{x.dtype, {x.shape[0], frames, bins, Dim(2)}}};
}

std::vector<Tensor> eval_stft(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const bool window = ctx.has_input(2);
  const StftShape s = stft_geometry(ctx.attrs, x.dims(), scalar_of(ctx.in(1), "frame_step"),
                                    window ? ctx.in(2).numel() : -1,
                                    ctx.has_input(3) ? scalar_of(ctx.in(3), "frame_length") : -1);
  const kernels::DftShape f = s.frame();
  const auto [cosines, sines] = kernels::dft_twiddles(f.length);
  const std::vector<double> xv = x.to_f64();
  const std::vector<double> wv = window ? ctx.in(2).to_f64() : std::vector<double>{};
  std::vector<double> frame(static_cast<size_t>(s.length * s.parts));
  std::vector<double> y(static_cast<size_t>(s.batch * s.frames * s.bins * 2));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.frames; ++t) {
      kernels::window_frame(xv.data() + (b * s.n + t * s.step) * s.parts, window ? wv.data() : nullptr, s.length,
                            s.parts, frame.data());
      kernels::dft_rows(frame.data(), y.data() + (b * s.frames + t) * s.bins * 2, f, cosines.data(), sines.data(),
                        0, 1);
    }
  return {Tensor::from_f64(x.dtype(), {s.batch, s.frames, s.bins, 2}, y)};
}

}  // namespace

OpDef def_STFT() {
  OpDef d;
  d.name = "STFT";
  d.min_inputs = 2;
  d.max_inputs = 4;
  d.min_opset = 17;
  d.attributes = {{"onesided", "int"}};
  d.props.linear_in = {0};
  d.infer = infer_stft;
  d.eval = eval_stft;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "onesided", int64_t{1});
    return a;
  };
  d.lower = Lowering::Stft;  // runtime/lower_dft.cpp
  return d;
}

}  // namespace isomer
