// Lowering of ConvTranspose, the upsampling of CNN decoders: as a convolution where
// it is one (stride 1: the kernel flipped) or as a 1x1 convolution to the kernel taps
// and a scatter (strided), else on oneDNN's deconvolution with its bias and no
// activation fused (layouts chosen by oneDNN as for convolutions). Resize is in
// lower_resize.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <sstream>

#include "kernels/copy.h"
#include "kernels/parallel.h"
#include "ops/nn_common.h"
#include "runtime/compiler.h"
#include "runtime/fusion.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// A ConvTranspose whose kernel equals its stride (no padding, dilation or groups:
// UNet's 2x2 stride-2 up-convolutions) writes each output pixel from one input
// pixel: a 1x1 convolution to s*s*M channels ordered (i, j, m), written
// channel-last, then one copy that moves the (j, m) runs of each row i into
// place (also channel-last). oneDNN's deconvolution ran these four times slower
// than ONNX Runtime.
bool deconv_as_shuffle(Compiler& c, const Node& n, const Tensor& wt, const std::vector<int64_t>& xd,
                       const std::vector<ops::DeconvAxis>& axes) {
  if (xd.size() != 4 || !c.opts().blocked_layouts || n.attrs().get_int("group", 1) != 1) return false;
  const int64_t s = axes[0].stride;
  for (const ops::DeconvAxis& a : axes)
    if (a.kernel != s || a.stride != s || a.dilation != 1 || a.pad_begin || a.pad_end || a.out_pad) return false;
  if (axes[1].stride != s || s < 2) return false;
  const bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();
  const Tensor* bt = has_bias ? c.known(n.inputs()[2]) : nullptr;
  if (has_bias && !bt) return false;
  const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], M = wt.dims()[1], K = s * s * M;
  const std::vector<double> w = wt.to_f64();
  std::vector<double> w1(static_cast<size_t>(K * C)), b1(static_cast<size_t>(K), 0.0);
  const std::vector<double> b = bt ? bt->to_f64() : std::vector<double>(static_cast<size_t>(M), 0.0);
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t m = 0; m < M; ++m) {
        const int64_t k = (i * s + j) * M + m;
        b1[k] = b[m];
        for (int64_t ci = 0; ci < C; ++ci) w1[k * C + ci] = w[((ci * M + m) * s + i) * s + j];
      }
  const std::vector<int64_t> td{N, K, H, W}, od{N, M, H * s, W * s};
  // Activations commute with the copy: post-ops of the convolution.
  const Fusion fusion = plan_fusion(c, n.output(0), od, /*allow_add=*/false, /*full_binary=*/false);
  for (const PostOp& p : fusion.ops)
    if (!p.eltwise) return false;
  dnnl::post_ops po;
  std::string post;
  for (const PostOp& p : fusion.ops) {
    po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
    post += " +" + p.eltwise->text();
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  const md_t src_any(to_dims(xd), dt::f32, tag::any), wei_any(dims_t{K, C, 1, 1}, dt::f32, tag::any),
      bias_md(dims_t{K}, dt::f32, tag::a), t_md(to_dims(td), dt::f32, tag::nhwc);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any,
                                    wei_any, bias_md, t_md, dims_t{1, 1}, dims_t{0, 0}, dims_t{0, 0}, dims_t{0, 0});
  dnnl::convolution_forward::primitive_desc pd(d, attr, c.engine());
  if (is_reference(pd)) return false;
  const int wid = c.as_layout(
      c.constant_value(Tensor::from_f64(DType::Float32, {K, C, 1, 1}, w1), n.name() + ".weight"), pd.weights_desc());
  const int src = c.as_layout(c.id(n.inputs()[0]), pd.src_desc());
  const int t = c.new_value(DType::Float32, td, pd.dst_desc(), n.name() + ".cells");
  StepInfo info;
  info.kind = "conv";
  info.label = n.name();
  info.ops = fusion_ops("ConvTranspose", {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  info.signature = "deconv as 1x1 conv src " + describe_md(pd.src_desc()) + " wei " + describe_md(pd.weights_desc()) +
                   " dst " + describe_md(pd.dst_desc()) + " bias" + post + " impl " + pd.impl_info_str();
  info.flops = 2.0 * static_cast<double>(N * H * W) * static_cast<double>(K * C);
  c.add_primitive(pd,
                  {{DNNL_ARG_SRC, src},
                   {DNNL_ARG_WEIGHTS, wid},
                   {DNNL_ARG_DST, t},
                   {DNNL_ARG_BIAS, c.constant_value(Tensor::from_f64(DType::Float32, {K}, b1), n.name() + ".bias")}},
                  info);
  // t[n, h, w, i, (j, m)] -> y[n, h, i, w, (j, m)], both channel-last.
  const int y = c.new_value(DType::Float32, od, md_t(to_dims(od), dt::f32, tag::nhwc), n.name());
  const std::vector<int64_t> dims{N, H, s, W, s * M}, from{H * W * K, W * K, s * M, K, 1},
      to{H * s * W * s * M, s * W * s * M, W * s * M, s * M, 1};
  add_native_step(c, step_info(n, "copy", "ConvTranspose cells to pixels " + to_string(dims)), {t}, {y},
                  [dims, from, to](const std::vector<char*>& p) {
                    kernels::strided_copy(sizeof(float), p[0], from, p[1], to, dims);
                  });
  finish_fusion(c, fusion, y);
  return true;
}

// Output rows [o_begin, o_end) of the first of 3 spatial axes (missing ones at the
// end, of extent 1): y[o, g, m] = bias[g, m] + t[i, g, k, m] summed over the input
// positions i and kernel taps k with o = i s - pad + k d, for G groups of Mg
// channels, t and y channel-last (row-major multi-indices), then the (leaky) ReLUs
// of `slopes` in turn. Each row gathers along the first axis from the taps that
// reach it, so threads that own rows never write the same pixel. kMg 0 (G 1) adds
// one run a tap (the loop of groups made that scatter 10% slower), kMg < 0 runs of
// Mg, kMg > 0 runs of that many, unrolled (groups of 4 channels: 2.2x faster).
template <int kMg>
[[gnu::always_inline]] inline void add_taps_to_rows(const float* t, float* y, const float* bias, int64_t o_begin,
                                                    int64_t o_end, const int64_t* in, const int64_t* kernel,
                                                    const int64_t* out, const int64_t* stride,
                                                    const int64_t* dilation, const int64_t* pad, int64_t G, int64_t Mg,
                                                    const std::vector<float>& slopes) {
  const int64_t taps = kernel[0] * kernel[1] * kernel[2], M = G * Mg, row = out[1] * out[2] * M;
  for (int64_t o0 = o_begin; o0 < o_end; ++o0) {
    float* yr = y + o0 * row;
    for (int64_t p = 0; p < out[1] * out[2]; ++p)
      for (int64_t m = 0; m < M; ++m) yr[p * M + m] = bias[m];
    for (int64_t k0 = 0; k0 < kernel[0]; ++k0) {
      const int64_t num = o0 + pad[0] - k0 * dilation[0];
      if (num < 0 || num % stride[0] != 0 || num / stride[0] >= in[0]) continue;
      const float* ti = t + num / stride[0] * in[1] * in[2] * taps * M;
      for (int64_t i1 = 0; i1 < in[1]; ++i1)
        for (int64_t i2 = 0; i2 < in[2]; ++i2) {
          const float* tp = ti + (i1 * in[2] + i2) * taps * M;
          for (int64_t k1 = 0; k1 < kernel[1]; ++k1) {
            const int64_t o1 = i1 * stride[1] - pad[1] + k1 * dilation[1];
            if (o1 < 0 || o1 >= out[1]) continue;
            for (int64_t k2 = 0; k2 < kernel[2]; ++k2) {
              const int64_t o2 = i2 * stride[2] - pad[2] + k2 * dilation[2];
              if (o2 < 0 || o2 >= out[2]) continue;
              const float* src = tp + ((k0 * kernel[1] + k1) * kernel[2] + k2) * Mg;
              float* dst = yr + (o1 * out[2] + o2) * M;
              if constexpr (kMg > 0) {
                for (int64_t g = 0; g < G; ++g)
                  for (int m = 0; m < kMg; ++m) dst[g * kMg + m] += src[g * taps * kMg + m];
              } else if constexpr (kMg < 0) {
                for (int64_t g = 0; g < G; ++g)
                  for (int64_t m = 0; m < Mg; ++m) dst[g * Mg + m] += src[g * taps * Mg + m];
              } else {
                for (int64_t m = 0; m < M; ++m) dst[m] += src[m];
              }
            }
          }
        }
    }
    for (const float a : slopes)
      for (int64_t q = 0; q < row; ++q) yr[q] = yr[q] < 0.0f ? a * yr[q] : yr[q];
  }
}

ISOMER_CLONES void add_taps_to_rows_of_groups(const float* t, float* y, const float* bias, int64_t o_begin,
                                              int64_t o_end, const int64_t* in, const int64_t* kernel,
                                              const int64_t* out, const int64_t* stride, const int64_t* dilation,
                                              const int64_t* pad, int64_t G, int64_t Mg,
                                              const std::vector<float>& slopes) {
  // (inlined here, not in a lambda: each clone's instruction set)
  const int run = G == 1 ? 0 : Mg == 2 || Mg == 4 || Mg == 8 || Mg == 16 ? static_cast<int>(Mg) : -1;
  switch (run) {
    case 0:
      return add_taps_to_rows<0>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
    case 2:
      return add_taps_to_rows<2>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
    case 4:
      return add_taps_to_rows<4>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
    case 8:
      return add_taps_to_rows<8>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
    case 16:
      return add_taps_to_rows<16>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
    default:
      return add_taps_to_rows<-1>(t, y, bias, o_begin, o_end, in, kernel, out, stride, dilation, pad, G, Mg, slopes);
  }
}

// A strided ConvTranspose as a product and a scatter: a 1x1 convolution to one
// channel per (kernel tap, output channel), written channel-last, whose rows are
// then added into the output pixels they reach (col2im); grouped, a grouped 1x1
// convolution from a channel-last source (given the choice, oneDNN 2.6 offered
// only its reference kernel) whose cells are ordered (group, tap, channel). oneDNN 2.6's
// deconvolution took 1.7-1.9 times ONNX Runtime's time for a stride of 2, and
// 16-25 times with a ReLU post-op (kernel 4, stride 2, padding 1: every decoder's
// upsampling, 1-D or 2-D); this form about 0.9 times. The cells take N * positions * taps * M floats: a
// larger layer stays on oneDNN.
bool deconv_as_gemm(Compiler& c, const Node& n, const Tensor& wt, const std::vector<int64_t>& xd,
                    const std::vector<ops::DeconvAxis>& axes) {
  const size_t sp = axes.size();
  if (!c.opts().blocked_layouts || sp > 3) return false;
  if (std::none_of(axes.begin(), axes.end(), [](const ops::DeconvAxis& a) { return a.stride > 1; })) return false;
  const bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();
  const Tensor* bt = has_bias ? c.known(n.inputs()[2]) : nullptr;
  if (has_bias && !bt) return false;
  const int64_t G = n.attrs().get_int("group", 1), N = xd[0], C = xd[1], Cg = C / G, Mg = wt.dims()[1], M = G * Mg,
                taps = num_elements(wt.dims(), 2, wt.dims().size()), K = taps * M,
                positions = num_elements(xd, 2, xd.size());
  if (N * positions * K > (int64_t{16} << 20)) return false;  // 64 MB of cells
  // Depthwise ones stay on oneDNN: the scatter's runs of one float took as long
  // as its deconvolution (32 channels, kernel 4, stride 2, 1-D and 2-D; groups of
  // 2 channels 1.85x faster, of 4 4.4x).
  if (G > 1 && Mg < 2) return false;
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1}, pad{0, 0, 0};
  std::vector<int64_t> od{N, M};
  for (size_t i = 0; i < sp; ++i) {  // (trailing axes of extent 1: the same row-major order)
    in[i] = axes[i].in, kernel[i] = axes[i].kernel, out[i] = axes[i].out;
    stride[i] = axes[i].stride, dilation[i] = axes[i].dilation, pad[i] = axes[i].pad_begin;
    od.push_back(axes[i].out);
  }
  // Weights [G, C/G, M/G, taps] -> [G, (tap, m), C/G] (a grouped 1x1 convolution):
  // the channel-last cells of one input position are the runs the scatter adds,
  // group by group and tap by tap.
  const std::vector<double> w = wt.to_f64();
  std::vector<double> w1(static_cast<size_t>(K * Cg));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t m = 0; m < Mg; ++m)
        for (int64_t ci = 0; ci < Cg; ++ci)
          w1[((g * taps + t) * Mg + m) * Cg + ci] = w[((g * Cg + ci) * Mg + m) * taps + t];
  std::vector<int64_t> td = xd, wd1 = G > 1 ? std::vector<int64_t>{G, K / G, Cg} : std::vector<int64_t>{K, C};
  td[1] = K;
  wd1.insert(wd1.end(), sp, 1);
  const tag last = sp == 1 ? tag::nwc : sp == 2 ? tag::nhwc : tag::ndhwc;
  const md_t src_any(to_dims(xd), dt::f32, G > 1 ? last : tag::any), wei_any(to_dims(wd1), dt::f32, tag::any),
      t_md(to_dims(td), dt::f32, last);
  const dims_t ones(sp, 1), zeros(sp, 0);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any,
                                    wei_any, md_t(), t_md, ones, zeros, zeros, zeros);
  dnnl::convolution_forward::primitive_desc pd(d, c.engine());
  if (is_reference(pd)) return false;
  const int wid = c.as_layout(c.constant_value(Tensor::from_f64(DType::Float32, wd1, w1), n.name() + ".weight"),
                              pd.weights_desc());
  const int src = c.as_layout(c.id(n.inputs()[0]), pd.src_desc());
  const int t = c.new_value(DType::Float32, td, pd.dst_desc(), n.name() + ".cells");
  StepInfo info;
  info.kind = "conv";
  info.label = n.name();
  info.ops = {"ConvTranspose"};
  info.nodes = {node_key(n)};
  info.signature = "deconv as 1x1 conv to taps src " + describe_md(pd.src_desc()) + " wei " +
                   describe_md(pd.weights_desc()) + " dst " + describe_md(pd.dst_desc()) + " impl " + pd.impl_info_str();
  info.flops = 2.0 * static_cast<double>(N * positions) * static_cast<double>(K * Cg);
  c.add_primitive(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, t}}, info);
  // ReLU and LeakyReLU after it are applied to each row as it is finished.
  Fusion fusion = plan_fusion(c, n.output(0), od, /*allow_add=*/false, /*full_binary=*/false);
  std::vector<float> slopes;
  for (const PostOp& op : fusion.ops)
    if (op.eltwise && op.eltwise->alg == dnnl::algorithm::eltwise_relu) slopes.push_back(op.eltwise->alpha);
  if (slopes.size() != fusion.ops.size()) {
    slopes.clear();
    fusion = Fusion{{}, {}, n.output(0), n.output(0)};
  }
  const int y = c.new_value(DType::Float32, od, md_t(to_dims(od), dt::f32, last), n.name());
  std::vector<float> bias(static_cast<size_t>(M), 0.0f);
  if (bt) {
    const std::vector<double> b = bt->to_f64();
    std::copy(b.begin(), b.end(), bias.begin());
  }
  const int64_t in_size = positions * K, out_size = num_elements(od, 2, od.size()) * M, rows = N * out[0];
  const int team = kernels::team_for_work(
      c.threads(), std::min(static_cast<double>(rows), static_cast<double>(N * positions * K) / (64.0 * 1024)));
  StepInfo scatter = step_info(n, "copy", "ConvTranspose taps added into pixels " + to_string(od) +
                                              (slopes.empty() ? "" : " +relu"));
  scatter.ops = fusion_ops("ConvTranspose", {}, fusion);
  scatter.nodes = fusion_nodes(n, fusion);
  add_native_step(c, std::move(scatter), {t}, {y}, [=](const std::vector<char*>& p) {
    kernels::parallel_teams(team, [&](int th, int nt) {
      for (int64_t r = rows * th / nt; r < rows * (th + 1) / nt;) {  // rows of one batch element at a time
        const int64_t b = r / out[0], end = std::min(rows * (th + 1) / nt, (b + 1) * out[0]);
        add_taps_to_rows_of_groups(reinterpret_cast<const float*>(p[0]) + b * in_size,
                                   reinterpret_cast<float*>(p[1]) + b * out_size, bias.data(), r % out[0],
                                   r % out[0] + end - r, in.data(), kernel.data(), out.data(), stride.data(),
                                   dilation.data(), pad.data(), G, Mg, slopes);
        r = end;
      }
    });
  });
  finish_fusion(c, fusion, y);
  return true;
}

// A ConvTranspose of stride 1 is the convolution with the kernel flipped, input and
// output channels swapped within each group, and padding d (k - 1) - p at each end
// (plus output_padding at the far one): y[o] = sum_t x[o + p - t d] w[t]. oneDNN's
// convolutions run it at their speed; its deconvolution took 1.5x ONNX Runtime's
// time (3x3, 32 to 16 channels of 64x64). Activations after it are post-ops.
bool deconv_as_conv(Compiler& c, const Node& n, const Tensor& wt, const std::vector<int64_t>& xd,
                    const std::vector<ops::DeconvAxis>& axes) {
  const size_t sp = axes.size();
  if (!c.opts().blocked_layouts || sp < 1 || sp > 3) return false;
  dims_t dil, pl, pr;
  std::vector<int64_t> od{xd[0], 0};
  for (const ops::DeconvAxis& a : axes) {
    const int64_t reach = a.dilation * (a.kernel - 1);
    if (a.stride != 1 || a.pad_begin > reach || a.pad_end - a.out_pad > reach) return false;
    dil.push_back(a.dilation - 1);
    pl.push_back(reach - a.pad_begin);
    pr.push_back(reach - a.pad_end + a.out_pad);
    od.push_back(a.out);
  }
  const bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();
  const Tensor* bt = has_bias ? c.known(n.inputs()[2]) : nullptr;
  if (has_bias && !bt) return false;
  const int64_t groups = n.attrs().get_int("group", 1), C = xd[1], Cg = C / groups, Mg = wt.dims()[1],
                M = Mg * groups, cells = num_elements(wt.dims(), 2, wt.dims().size());
  od[1] = M;
  // Weights [C, M/G, k...] -> [G, M/G, C/G, k...] with every kernel axis reversed
  // (the cells reversed in row-major order).
  const std::vector<double> w = wt.to_f64();
  std::vector<double> wc(w.size());
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t m = 0; m < Mg; ++m)
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t k = 0; k < cells; ++k)
          wc[((g * Mg + m) * Cg + ci) * cells + k] = w[((g * Cg + ci) * Mg + m) * cells + cells - 1 - k];
  std::vector<int64_t> wshape = groups > 1 ? std::vector<int64_t>{groups, Mg, Cg} : std::vector<int64_t>{M, C};
  wshape.insert(wshape.end(), wt.dims().begin() + 2, wt.dims().end());
  Fusion fusion = plan_fusion(c, n.output(0), od, /*allow_add=*/false, /*full_binary=*/false);
  if (!std::all_of(fusion.ops.begin(), fusion.ops.end(), [](const PostOp& op) { return op.eltwise.has_value(); }))
    fusion = Fusion{{}, {}, n.output(0), n.output(0)};
  const md_t src_any(to_dims(xd), dt::f32, tag::any), dst_any(to_dims(od), dt::f32, tag::any),
      wei_any(to_dims(wshape), dt::f32, tag::any), bias_md(dims_t{M}, dt::f32, tag::a);
  const dims_t ones(sp, 1);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any,
                                    wei_any, has_bias ? bias_md : md_t(), dst_any, ones, dil, pl, pr);
  std::vector<std::pair<int, int>> args;
  std::string post;
  int acc = -1;
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = dnnl::convolution_forward::primitive_desc(d, probe_attr(c, fusion, od.size(), 0, false), c.engine());
    pd = dnnl::convolution_forward::primitive_desc(d, fusion_attr(c, fusion, pd.dst_desc(), acc, post, args),
                                                   c.engine());
  } catch (const dnnl::error&) {
    return false;
  }
  if (is_reference(pd)) return false;
  const int wid = c.as_layout(c.constant_value(Tensor::from_f64(DType::Float32, wshape, wc), n.name() + ".weight"),
                              pd.weights_desc());
  const int src = c.as_layout(c.id(n.inputs()[0]), pd.src_desc());
  const int dst = c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  args.insert(args.begin(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, dst}});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.as_layout(c.id(n.inputs()[2]), bias_md)});
  StepInfo info;
  info.kind = "conv";
  info.label = n.name();
  info.ops = fusion_ops("ConvTranspose", {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  info.signature = "deconv as flipped conv src " + describe_md(pd.src_desc()) + " wei " +
                   describe_md(pd.weights_desc()) + " dst " + describe_md(pd.dst_desc()) + " pl" +
                   to_string(std::vector<int64_t>(pl.begin(), pl.end())) + " pr" +
                   to_string(std::vector<int64_t>(pr.begin(), pr.end())) + " g" + std::to_string(groups) +
                   (has_bias ? " bias" : "") + post + " impl " + pd.impl_info_str();
  info.flops = 2.0 * static_cast<double>(num_elements(xd)) * static_cast<double>(Mg * cells);
  c.add_primitive(pd, args, info);
  finish_fusion(c, fusion, dst);
  return true;
}

}  // namespace

bool lower_conv_transpose(Compiler& c, const Node& n) {
  if (!all_float32(n)) return false;
  const Tensor* wt = c.known(n.inputs()[1]);
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  const std::vector<int64_t> wd = c.dims(n.inputs()[1]);
  const size_t sp = xd.size() - 2;
  if (sp < 1 || sp > 3) return false;
  const int64_t groups = n.attrs().get_int("group", 1), C = xd[1], Cg = C / groups, Mg = wd[1], M = Mg * groups;
  const std::vector<ops::DeconvAxis> axes = ops::plan_deconv(
      n.attrs(), std::vector<int64_t>(wd.begin() + 2, wd.end()), std::vector<int64_t>(xd.begin() + 2, xd.end()));
  if (wt && deconv_as_shuffle(c, n, *wt, xd, axes)) return true;
  if (wt && deconv_as_gemm(c, n, *wt, xd, axes)) return true;
  if (wt && deconv_as_conv(c, n, *wt, xd, axes)) return true;
  std::vector<int64_t> od{xd[0], M};
  dims_t strides, dil, pl, pr;
  // output_padding extends the far end: a negative far padding to oneDNN, which
  // refuses it. q zero pixels appended to the input along that axis add s q
  // outputs that read nothing but the bias, so the far padding s q - (op - pe)
  // can be >= 0 and the output is the same.
  std::vector<int64_t> extra(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    const ops::DeconvAxis& a = axes[i];
    if (a.pad_begin < 0) return false;
    // (pad_end < 0: an output_shape beyond the full output, the same case)
    if (a.out_pad > a.pad_end) extra[i] = (a.out_pad - a.pad_end + a.stride - 1) / a.stride;
    od.push_back(a.out);
    strides.push_back(a.stride);
    dil.push_back(a.dilation - 1);
    pl.push_back(a.pad_begin);
    pr.push_back(a.pad_end - a.out_pad + a.stride * extra[i]);
  }
  int x_id = c.id(n.inputs()[0]);
  if (std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e > 0; })) {
    const int xp = c.as_plain(x_id);
    std::vector<int64_t> padded = xd;
    for (size_t i = 0; i < sp; ++i) padded[i + 2] += extra[i];
    const int z = c.new_value(DType::Float32, padded, plain_md(padded, dt::f32), n.name() + ".padded");
    const std::vector<int64_t> from = row_major(xd), to = row_major(padded), dims = xd;
    const int64_t total = num_elements(padded);
    add_native_step(c, step_info(n, "copy", "ConvTranspose input zero-padded at the far end " + to_string(padded)),
                    {xp}, {z}, [from, to, dims, total](const std::vector<char*>& p) {
                      const float zero = 0.f;
                      kernels::fill(sizeof(float), p[1], total, &zero);
                      kernels::strided_copy(sizeof(float), p[0], from, p[1], to, dims);
                    });
    x_id = z;
    xd = padded;
  }
  // oneDNN's weights are [G,] M/G, C/G, k...: ONNX's C, M/G, k... seen with the
  // first two axes swapped (strides, no copy); oneDNN reorders them to its layout.
  const int64_t cells = num_elements(wd, 2, wd.size());
  std::vector<int64_t> wshape = groups > 1 ? std::vector<int64_t>{groups, Mg, Cg} : std::vector<int64_t>{M, C};
  std::vector<int64_t> wstrides =
      groups > 1 ? std::vector<int64_t>{Cg * Mg * cells, cells, Mg * cells} : std::vector<int64_t>{cells, Mg * cells};
  wshape.insert(wshape.end(), wd.begin() + 2, wd.end());
  const std::vector<int64_t> kernel_strides = row_major(std::vector<int64_t>(wd.begin() + 2, wd.end()));
  wstrides.insert(wstrides.end(), kernel_strides.begin(), kernel_strides.end());
  const bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();

  // No post-ops: oneDNN 2.6's jit deconvolution with a ReLU fused ran 6-9 times
  // slower than without it (3x3 stride 1, 4x4 stride 2, grouped or not: 1.9 ms
  // against 0.33 for 32 to 16 channels of 64x64), far more than the pass the
  // activation then takes on its own.
  const Fusion fusion{{}, {}, n.output(0), n.output(0)};
  const bool blocked = c.opts().blocked_layouts;
  const tag plain = sp == 1 ? tag::ncw : sp == 2 ? tag::nchw : tag::ncdhw;
  const md_t src_any(to_dims(xd), dt::f32, blocked ? tag::any : plain);
  md_t dst_any(to_dims(od), dt::f32, blocked ? tag::any : plain);
  const md_t wei_any(to_dims(wshape), dt::f32, tag::any), bias_md(dims_t{M}, dt::f32, tag::a);
  auto make_pd = [&](const md_t& dst, const dnnl::primitive_attr& attr) {
    dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                        src_any, wei_any, has_bias ? bias_md : md_t(), dst, strides, dil, pl, pr);
    return dnnl::deconvolution_forward::primitive_desc(d, attr, c.engine());
  };
  dnnl::deconvolution_forward::primitive_desc pd;
  try {
    pd = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
  } catch (const dnnl::error&) {
    return false;  // a geometry oneDNN does not take (negative far padding): the reference kernel
  }
  const md_t dst_md = pd.dst_desc();
  std::vector<std::pair<int, int>> args;
  std::string post;
  int acc = -1;
  fusion_attr(c, fusion, dst_md, acc, post, args);

  int wid;
  if (wt) {
    const std::vector<double> w = wt->to_f64();
    std::vector<double> wo(w.size());
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t m = 0; m < Mg; ++m)
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t k = 0; k < cells; ++k)
            wo[((g * Mg + m) * Cg + ci) * cells + k] = w[((g * Cg + ci) * Mg + m) * cells + k];
    wid = c.as_layout(c.constant_value(Tensor::from_f64(DType::Float32, wshape, wo), n.name() + ".weight"),
                      pd.weights_desc());
  } else {  // weights computed at run time (or a graph input): reordered on every run
    wid = c.as_layout(c.view(c.as_plain(c.id(n.inputs()[1])), wshape, wstrides, 0, n.name() + ".weight_view"),
                      pd.weights_desc());
  }
  const int src = c.as_layout(x_id, pd.src_desc());
  const int dst = acc >= 0 ? c.alias(acc, od, pd.dst_desc(), n.name()) : c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  c.val(dst).accumulated = acc >= 0;
  args.insert(args.begin(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, dst}});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.as_layout(c.id(n.inputs()[2]), bias_md)});
  StepInfo info;
  info.kind = "deconv";
  info.label = n.name();
  info.ops = fusion_ops("ConvTranspose", {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  std::ostringstream sig;
  sig << "deconv src " << describe_md(pd.src_desc()) << " wei " << describe_md(pd.weights_desc()) << " dst "
      << describe_md(pd.dst_desc()) << " s" << to_string(std::vector<int64_t>(strides.begin(), strides.end()))
      << " d" << to_string(std::vector<int64_t>(dil.begin(), dil.end())) << " pl"
      << to_string(std::vector<int64_t>(pl.begin(), pl.end())) << " pr"
      << to_string(std::vector<int64_t>(pr.begin(), pr.end())) << " g" << groups << (has_bias ? " bias" : "")
      << post << " impl " << pd.impl_info_str();
  info.signature = sig.str();
  info.flops = 2.0 * static_cast<double>(num_elements(xd)) * static_cast<double>(Mg * cells);
  c.add_primitive(pd, args, info);
  finish_fusion(c, fusion, dst);
  return true;
}

}  // namespace isomer::runtime
