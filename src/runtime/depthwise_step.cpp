#include "runtime/depthwise_step.h"

#include <memory>
#include <sstream>

#include "kernels/depthwise.h"
#include "kernels/parallel.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// A dense [N, C, H, W] tensor laid out channels last, with no padding (the strides
// of extent-1 axes address nothing and are not compared).
bool dense_channels_last(const md_t& md, const std::vector<int64_t>& dims) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.data_type != dnnl_f32)
    return false;
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const int64_t want[4] = {c * h * w, 1, w * c, c};
  for (int i = 0; i < 4; ++i)
    if (d.dims[i] != dims[static_cast<size_t>(i)] || d.padded_dims[i] != d.dims[i] ||
        (d.dims[i] > 1 && d.format_desc.blocking.strides[i] != want[i]))
      return false;
  return md.get_size() == static_cast<size_t>(dims[0] * c * h * w) * sizeof(float);
}

}  // namespace

bool native_depthwise_wins(const DepthwiseConv& d, const md_t& src, const md_t& dst) {
  if (!kernels::depthwise_activation_supported(d.act) || d.in.size() != 4 || d.kernel.size() != 2) return false;
  if (!dense_channels_last(src, d.in) || !dense_channels_last(dst, d.out)) return false;
  // Processor time at one thread against oneDNN 2.6's jit depthwise kernel and the
  // SiLU step after it (Zen 5, nhwc; three interleaved whole-run profiles each of
  // EfficientNet-B0 at 224 and B3 at 384, machine load 15): 3x3 windows at stride 1
  // over 64 channels and more on rows of 48 columns and more win (144 of 56x56:
  // 0.197 -> 0.164, 0.193 -> 0.174, 0.209 -> 0.155 ms; 192 of 48x48: 0.17-0.23 ->
  // 0.16-0.18). Elsewhere oneDNN's kernel, which keeps more of the input in L1,
  // ties or wins: fewer channels on wide rows (32 of 112x112: 0.175 -> 0.191),
  // stride 2 (144 of 96x96 to 48x48: 0.17-0.27 -> 0.26-0.35), 5x5 windows on rows of
  // 24 or fewer (816 of 12x12: 0.087 -> 0.110; 1392 of 6x6: 0.045 -> 0.076), where
  // the border columns, taken one at a time, are most of the row.
  constexpr int64_t kMinChannels = 64, kMinColumns = 48;
  return d.kernel == std::vector<int64_t>{3, 3} && d.strides == std::vector<int64_t>{1, 1} &&
         d.dilations == std::vector<int64_t>{1, 1} && d.in[1] >= kMinChannels && d.out[3] >= kMinColumns;
}

int add_native_depthwise(Compiler& c, const DepthwiseConv& d, int x, const md_t& dst_md, StepInfo info,
                         const std::string& name) {
  kernels::DepthwiseGeometry g;
  g.batch = d.in[0];
  g.channels = d.in[1];
  g.in_h = d.in[2], g.in_w = d.in[3], g.out_h = d.out[2], g.out_w = d.out[3];
  g.k_h = d.kernel[0], g.k_w = d.kernel[1];
  g.stride_h = d.strides[0], g.stride_w = d.strides[1];
  g.dil_h = d.dilations[0], g.dil_w = d.dilations[1];
  g.pad_top = d.pad_begin[0], g.pad_left = d.pad_begin[1];
  // Weights as [kh, kw, C]: one vector of channels per tap.
  const int64_t C = g.channels, taps = g.k_h * g.k_w;
  auto w = std::make_shared<std::vector<float>>(static_cast<size_t>(taps * C));
  auto b = std::make_shared<std::vector<float>>(static_cast<size_t>(C));
  for (int64_t ch = 0; ch < C; ++ch) {
    (*b)[static_cast<size_t>(ch)] = static_cast<float>(d.bias[static_cast<size_t>(ch)]);
    for (int64_t t = 0; t < taps; ++t)
      (*w)[static_cast<size_t>(t * C + ch)] = static_cast<float>(d.weights[static_cast<size_t>(ch * taps + t)]);
  }
  const int y = c.new_value(DType::Float32, d.out, dst_md, name);
  const int threads = c.threads();
  std::ostringstream sig;
  sig << "depthwise nhwc " << to_string(d.in) << " -> " << to_string(d.out) << " k" << to_string(d.kernel) << " s"
      << to_string(d.strides) << " d" << to_string(d.dilations) << " pl" << to_string(d.pad_begin) << " "
      << kernels::pw_name(d.act);
  info.kind = "depthwise";
  info.signature = sig.str();
  add_native_step(c, std::move(info), {x}, {y}, [g, w, b, act = d.act, threads](const std::vector<char*>& p) {
    kernels::depthwise_nhwc(g, reinterpret_cast<const float*>(p[0]), w->data(), b->data(), act,
                            reinterpret_cast<float*>(p[1]), threads);
  });
  return y;
}

}  // namespace isomer::runtime
