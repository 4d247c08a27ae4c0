// Lowering of pooling, batch normalization, padding (into a pool) and
// concatenation to oneDNN primitives.
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>

#include "ops/kernels.h"
#include "ops/nn_common.h"
#include "runtime/compiler.h"
#include "kernels/copy.h"
#include "kernels/parallel.h"
#include "kernels/window.h"
#include "runtime/fusion.h"
#include "runtime/lower_quant.h"
#include "runtime/lowering.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

std::string dims_text(const dims_t& d) { return to_string(std::vector<int64_t>(d.begin(), d.end())); }


}  // namespace

namespace {

// A pooling primitive for `n` reading `src`, with `extra` zero padding (begin,
// end per spatial axis) folded in from a Pad node that `src` skips.
// `op` names the pooling when `n` is another operator that computes one (a reduction).
bool pool_with_padding(Compiler& c, const Node& n, const Value& src, const std::vector<int64_t>& extra,
                       const std::string& op) {
  std::vector<int64_t> xd = c.dims(src);
  if (xd.size() < 3 || xd.size() > 5) return false;
  std::vector<int64_t> spatial(xd.begin() + 2, xd.end());
  bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  dims_t kernel, strides, dil, pl, pr;
  std::vector<int64_t> od = {xd[0], xd[1]};
  if (global) {
    for (int64_t s : spatial) {
      kernel.push_back(s);
      strides.push_back(1);
      dil.push_back(0);
      pl.push_back(0);
      pr.push_back(0);
      od.push_back(1);
    }
  } else {
    ops::Window w = ops::read_window(n.attrs(), n.attrs().get_ints("kernel_shape"));
    const std::vector<ops::WindowAxis> axes = plan_padded_window(w, spatial, extra);
    const ConvGeometry g = conv_geometry(xd[0], xd[1], axes);
    od = g.out;
    strides = g.strides;
    dil = g.dilations;
    pl = g.pad_begin;
    pr = g.pad_end;
    for (const ops::WindowAxis& a : axes) kernel.push_back(a.kernel);
  }
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if (op == "AveragePool" || op == "GlobalAveragePool")
    alg = n.attrs().get_int("count_include_pad", 0) || !extra.empty() ? dnnl::algorithm::pooling_avg_include_padding
                                                                      : dnnl::algorithm::pooling_avg_exclude_padding;
  int x = c.id(src);
  const DType type = c.val(x).dtype;
  const dt ty = type == DType::Float32 ? dt::f32 : dnnl_int(type);
  if (!c.val(x).md.data.ndims) x = with_md(c, x, xd, plain_md(xd, ty));
  const md_t md = c.val(x).md;  // a copy: new values may move the table
  // A thread joins from 64K elements read (each output element reads its window):
  // the global pools of squeeze-excitation blocks on 7x7 or 14x14 images read a few
  // thousand; GoogLeNet's 3x3 max pools at stride 1 on 14x14x512 read 900K (counted
  // as the 100K of their input, they ran on one thread: 3% slower at two).
  double reads = static_cast<double>(num_elements(od));
  for (auto k : kernel) reads *= static_cast<double>(k);
  const Compiler::TeamScope team(c, kernels::team_for_work(c.threads(), reads / (64.0 * 1024)));
  md_t dst_any(to_dims(od), ty, tag::any);
  auto make_pd = [&](const md_t& src_md) {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_md, dst_any, strides, kernel, dil,
                                     pl, pr);
    return dnnl::pooling_v2_forward::primitive_desc(d, c.engine());
  };
  auto pd = make_pd(md);
  // A 2-D pool of a float input whose pixels hold their channels together (what a
  // convolution writes: channel-blocked or channels last) runs on the native kernel,
  // in that layout. oneDNN 2.6's AVX2 pooling was several times slower than it
  // (SqueezeNet's first pool 2.8 ms, 7x ONNX Runtime's time); its AVX-512 one is
  // slower on channel blocks and narrow channels last, measured below. Where oneDNN
  // has only its reference kernel (a dilated pool:
  // 1x16x32x32 channels last, 3x3 dilated by 2, ran on it), an input in another
  // layout is reordered to channels last first.
  const bool onednn_avx512 = std::string(pd.impl_info_str()).find("jit:avx512") != std::string::npos;
  if (!global && xd.size() == 4 && type == DType::Float32) {
    const md_t last(to_dims(xd), dt::f32, tag::nhwc);
    // Channels last with more than 64 channels stays on oneDNN's AVX-512 kernel:
    // GoogLeNet's and Inception's 192-channel pools took 25-35% longer native
    // (3x3 at stride 2 on 56x56: 0.081 ms, 0.061 oneDNN), where 64 channels ran
    // 0-15% faster (ResNet-50's first pool: 0.067 ms, 0.079) and the channel
    // blocks 10-20% faster (DenseNet's first pool: 0.056 ms, 0.070).
    int64_t lanes = 0;
    tag layout = tag::nhwc;
    if ((md == last && (xd[1] <= 64 || !onednn_avx512)) || is_reference(pd)) lanes = xd[1];
    for (auto [l, blocked] : {std::pair{int64_t{8}, tag::nChw8c}, std::pair{int64_t{16}, tag::nChw16c}})
      if (xd[1] % l == 0 && md == md_t(to_dims(xd), dt::f32, blocked)) lanes = l, layout = blocked;
    if (lanes > 0) {
      x = c.as_layout(x, md_t(to_dims(xd), dt::f32, layout));
      kernels::Pool2d p;
      p.batch = xd[0];
      p.blocks = xd[1] / lanes;
      p.lanes = lanes;
      p.in_h = xd[2], p.in_w = xd[3], p.out_h = od[2], p.out_w = od[3];
      p.kernel_h = kernel[0], p.kernel_w = kernel[1], p.stride_h = strides[0], p.stride_w = strides[1];
      p.pad_top = pl[0], p.pad_left = pl[1], p.dilation_h = dil[0] + 1, p.dilation_w = dil[1] + 1;
      p.average = alg != dnnl::algorithm::pooling_max;
      p.count_pad = alg == dnnl::algorithm::pooling_avg_include_padding;
      const md_t out_md(to_dims(od), dt::f32, layout);
      const int dst = c.new_value(DType::Float32, od, out_md, n.name());
      const double flops = static_cast<double>(num_elements(od)) * static_cast<double>(kernel[0] * kernel[1]);
      add_native_step(c,
                      step_info(n, "pool",
                                std::string(p.average ? "avgpool" : "maxpool") + "-native " + describe_md(c.val(x).md) +
                                    " -> " + describe_md(out_md) + " k" + dims_text(kernel) + " s" +
                                    dims_text(strides) + " pl" + dims_text(pl) + " d" + dims_text(dil),
                                flops),
                      {x}, {dst}, [p, threads = c.threads()](const std::vector<char*>& ptr) {
                        kernels::pool_2d(reinterpret_cast<const float*>(ptr[0]), reinterpret_cast<float*>(ptr[1]), p,
                                         threads);
                      });
      c.bind(n.output(0), dst);
      return true;
    }
  }
  // oneDNN's fast kernels take only dense layouts of a known tag; a view (a channel
  // part of a channel-last tensor, whose batch stride is then no dense one) gets its
  // reference kernel, 100x slower (NasNet-A's 3x3 average pools of a merged
  // convolution's parts: 19 ms each instead of 0.1). Its jit kernels take no plain
  // 1-D or 3-D layout either: "simple_nchw" pooled 192 channels of 3000 in 6.3 ms
  // and MViT's [192, 8, 56, 56] in 53. Such an input is reordered first into the
  // channel-last or channel-blocked layout a fast kernel takes.
  const auto slow = [](const dnnl::pooling_v2_forward::primitive_desc& p) {
    return is_reference(p) || std::string(p.impl_info_str()).rfind("simple", 0) == 0;
  };
  const std::vector<tag> layouts = xd.size() == 3   ? std::vector<tag>{tag::nwc, tag::nCw16c, tag::nCw8c, tag::ncw}
                                   : xd.size() == 4 ? std::vector<tag>{tag::nhwc, tag::nChw16c, tag::nChw8c, tag::nchw}
                                                    : std::vector<tag>{tag::ndhwc, tag::nCdhw16c, tag::nCdhw8c, tag::ncdhw};
  if (slow(pd))
    for (const tag layout : layouts) {
      const md_t want(to_dims(xd), ty, layout);
      if (want == md) continue;
      try {
        auto dense = make_pd(want);
        if (slow(dense)) continue;
        x = c.as_layout(x, want);
        pd = dense;
        break;
      } catch (const dnnl::error&) {
      }
    }
  const md_t src_md = c.val(x).md;  // a copy: new values may move the table
  int dst = c.new_value(type, od, pd.dst_desc(), n.name());
  double flops = static_cast<double>(num_elements(od)) * static_cast<double>(num_elements(std::vector<int64_t>(kernel.begin(), kernel.end())));
  c.add_primitive(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, dst}},
                  step_info(n, "pool",
                          "pool " + std::to_string(static_cast<int>(alg)) + " " + describe_md(src_md) + " -> " +
                              describe_md(pd.dst_desc()) + " k" + dims_text(kernel) + " s" + dims_text(strides) +
                              " pl" + dims_text(pl) + " pr" + dims_text(pr) + " d" + dims_text(dil) + " impl " +
                              pd.impl_info_str(),
                          flops));
  if (global && n.output_types()[0].rank() == 2) {
    // ReduceMean without keepdims: [N, C], the pooled [N, C, 1...] made plain.
    const std::vector<int64_t> rd{od[0], od[1]};
    dst = c.alias(c.as_plain(dst), rd, plain_md(rd, ty), n.name());
  }
  c.bind(n.output(0), dst);
  return true;
}

}  // namespace

bool lower_pool(Compiler& c, const Node& n) {
  // MaxPool of u8 or s8 (QOperator models pool their quantized activations) is exact
  // on integers; every other pooling is of float32.
  const DType t = n.inputs()[0].type().dtype;
  const bool integer_max = n.op_type() == "MaxPool" && (t == DType::UInt8 || t == DType::Int8) &&
                           n.output_types()[0].dtype == t;
  if (!all_float32(n) && !integer_max) return false;
  if (n.num_outputs() != 1) return false;  // MaxPool's Indices: the reference kernel
  return pool_with_padding(c, n, n.inputs()[0], {}, n.op_type());
}

// ReduceMean or ReduceMax over every spatial axis of an [N, C, spatial...] value
// is global pooling: torch 2 exports AdaptiveAvgPool2d(1) and the
// squeeze of squeeze-and-excitation so. A pooling primitive reads a convolution's
// blocked output where it lies; the reduction kernel would reorder it to plain
// first (EfficientNet-B0: 17 such reorders, 10% of its time).
bool lower_spatial_reduce_as_pool(Compiler& c, const Node& n) {
  const std::string& op = n.op_type();
  if ((op != "ReduceMean" && op != "ReduceMax") || n.num_outputs() != 1) return false;
  if (n.inputs()[0].type().dtype != DType::Float32 || n.output_types()[0].dtype != DType::Float32) return false;
  const std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  const auto rank = static_cast<int64_t>(xd.size());
  if (rank < 3 || rank > 5 || num_elements(xd) == 0) return false;
  // Without keepdims the result is [N, C] (an image classifier's pooling before
  // its Linear: MnasNet's mean over [2, 3] read a reorder of its last convolution's
  // channels-last output to plain, 0.019 of 1.3 ms).
  if (n.attrs().get_int("keepdims", 1) != 1 && n.output_types()[0].rank() != 2) return false;
  std::vector<int64_t> axes = n.attrs().get_ints("axes", {});
  if (n.inputs().size() > 1 && n.inputs()[1].present()) {
    const Tensor* t = c.known(n.inputs()[1]);
    if (!t) return false;
    axes = t->to_i64();
  }
  if (axes.empty()) return false;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return false;  // the reference kernel says why
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  std::vector<int64_t> spatial(static_cast<size_t>(rank - 2));
  std::iota(spatial.begin(), spatial.end(), 2);
  if (axes != spatial) return false;
  if (is_plain(c.val(c.id(n.inputs()[0])).md, xd)) return false;  // the reduction kernel reads it as it is
  return pool_with_padding(c, n, n.inputs()[0], {}, op == "ReduceMean" ? "GlobalAveragePool" : "GlobalMaxPool");
}

namespace {

}  // namespace

std::optional<FoldedPad> zero_spatial_pad(Compiler& c, const Node& pad) {
  const auto& in = pad.inputs();
  if (pad.attrs().get_string("mode", "constant") != "constant") return std::nullopt;
  if (in.size() > 3 && in[3].present()) return std::nullopt;  // axes
  if (in.size() > 2 && in[2].present()) {
    const Tensor* v = c.known(in[2]);
    if (!v || v->numel() != 1 || v->f64_at(0) != 0.0) return std::nullopt;
  }
  const Tensor* pt = c.known(in[1]);
  if (!pt) return std::nullopt;
  const std::vector<int64_t> pads = pt->to_i64();
  const size_t r = in[0].type().rank();  // not c.dims: a DequantizeLinear under way may ask (lower_quant.cpp)
  if (pads.size() != 2 * r || r < 3 || r > 5) return std::nullopt;
  FoldedPad f{&pad, in[0], {}};
  std::vector<int64_t> end;
  for (size_t i = 0; i < r; ++i) {
    if (pads[i] < 0 || pads[r + i] < 0 || (i < 2 && (pads[i] || pads[r + i]))) return std::nullopt;
    if (i >= 2) f.extra.push_back(pads[i]), end.push_back(pads[r + i]);
  }
  f.extra.insert(f.extra.end(), end.begin(), end.end());
  return f;
}

namespace {

// Zero Pad feeding only an AveragePool (torch's export of count_include_pad):
// the padding becomes the pool's, counted in the average as the zeros were.
bool pad_into_pool(Compiler& c, const Node& pad) {
  if (pad.inputs()[0].type().dtype != DType::Float32) return false;
  const Node* pool = c.sole_consumer(pad.output(0));
  if (!c.opts().fuse || !pool || pool->op_type() != "AveragePool" || pool->num_outputs() != 1) return false;
  const std::optional<FoldedPad> f = zero_spatial_pad(c, pad);
  if (!f) return false;
  // The pool's own padding must count its zeros too, or be absent.
  std::vector<int64_t> own = pool->attrs().get_ints("pads", {});
  bool own_pads = std::any_of(own.begin(), own.end(), [](int64_t p) { return p != 0; }) ||
                  pool->attrs().get_string("auto_pad", "NOTSET") != "NOTSET";
  if (own_pads && !pool->attrs().get_int("count_include_pad", 0)) return false;
  if (!pool_with_padding(c, *pool, f->src, f->extra, pool->op_type())) return false;
  c.mark_done(*pool);
  return true;
}

// Zero Pad read only by a float convolution (causal and dilated Conv1d written as
// F.pad then conv, TensorFlow's "same" padding ported as an explicit Pad): the
// padding becomes the convolution's, and the padded copy is never made.
bool pad_into_conv(Compiler& c, const Node& pad) {
  if (pad.inputs()[0].type().dtype != DType::Float32 || !c.opts().fuse) return false;
  const Node* conv = c.sole_consumer(pad.output(0));
  if (!conv || conv->op_type() != "Conv" || conv->inputs()[0] != pad.output(0) || !c.takeable(*conv)) return false;
  const std::optional<FoldedPad> f = zero_spatial_pad(c, pad);
  if (!f) return false;
  bool ok = false;
  c.set_pending(*conv, true);  // under way: its fused epilogue must not read it back
  try {
    ok = lower_conv_padded(c, *conv, *f);
  } catch (const dnnl::error&) {
    ok = false;  // no oneDNN primitive for this instance: the Pad and the convolution run apart
  }
  c.set_pending(*conv, false);
  if (ok) c.mark_done(*conv);
  return ok;
}

// Constant padding: the output filled with the value, the input copied into its
// interior. A negative amount crops that side (RWKV's time shift pads the time axis by
// one at the front and -1 at the back).
bool pad_constant(Compiler& c, const Node& pad) {
  const auto& in = pad.inputs();
  if (pad.attrs().get_string("mode", "constant") != "constant" || (in.size() > 3 && in[3].present())) return false;
  const Tensor* pt = c.known(in[1]);
  if (!pt) return false;
  std::vector<int64_t> pads = pt->to_i64();
  int x = c.id(in[0]);
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
      pads.size() == 2 * c.val(x).dims.size()) {
    // Nothing to pad (Swin's windows pad to a multiple of the window, which 56 is
    // already): the input as it is, in any layout, not a copy (1.2 MB per block).
    c.bind(pad.output(0), c.alias(x, c.val(x).dims, c.val(x).md, pad.name()));
    return true;
  }
  if (!c.strides_of(x)) x = c.as_plain(x);
  const std::vector<int64_t> xd = c.val(x).dims;
  const size_t r = xd.size();
  if (pads.size() != 2 * r) return false;
  std::vector<int64_t> od = xd, kept = xd;
  for (size_t i = 0; i < r; ++i) {
    od[i] += pads[i] + pads[r + i];
    kept[i] += std::min<int64_t>(pads[i], 0) + std::min<int64_t>(pads[r + i], 0);
    if (od[i] < 0) return false;
    kept[i] = std::max<int64_t>(kept[i], 0);
  }
  const DType t = c.val(x).dtype;
  const size_t elem = dtype_size(t);
  std::string fill(elem, '\0');
  if (in.size() > 2 && in[2].present()) {
    const Tensor* v = c.known(in[2]);
    if (!v || v->dtype() != t || v->numel() != 1) return false;
    fill = v->bytes();
  }
  auto type = dnnl_type(t);
  int y = c.new_value(t, od, type ? plain_md(od, *type) : md_t(), pad.name());
  const std::vector<int64_t> ost = row_major(od), from = *c.strides_of(x);
  int64_t to_offset = 0, from_offset = 0;
  for (size_t i = 0; i < r; ++i) {
    to_offset += std::max<int64_t>(pads[i], 0) * ost[i];
    from_offset += std::max<int64_t>(-pads[i], 0) * from[i];
  }
  to_offset *= static_cast<int64_t>(elem);
  from_offset *= static_cast<int64_t>(elem);
  const int64_t total = num_elements(od);
  // Only cropped: every output element is copied, none filled.
  const bool fills = num_elements(kept) != total;
  add_native_step(c, step_info(pad, "pad", "pad " + std::string(dtype_name(t)) + to_string(xd) + " -> " + to_string(od)),
                  {x}, {y}, [elem, fill, fills, total, kept, from, ost, to_offset, from_offset](const std::vector<char*>& p) {
                    if (fills) kernels::fill(elem, p[1], total, fill.data());
                    if (num_elements(kept) > 0)
                      kernels::strided_copy(elem, p[0] + from_offset, from, p[1] + to_offset, ost, kept);
                  });
  c.bind(pad.output(0), y);
  return true;
}

// Reflect and edge padding by non-negative amounts (EnCodec's and HiFi-GAN's
// Conv1d pad_mode="reflect"): the input copied into the interior, then axis by axis
// each padded slab copied from the slab it mirrors or repeats, over the
// axes before it whole (their padding is done, so corners come right) and the
// axes after it interior only.
bool pad_mirrored(Compiler& c, const Node& pad) {
  const auto& in = pad.inputs();
  const std::string mode = pad.attrs().get_string("mode", "constant");
  if ((mode != "reflect" && mode != "edge") || (in.size() > 3 && in[3].present())) return false;
  const Tensor* pt = c.known(in[1]);
  if (!pt) return false;
  const std::vector<int64_t> pads = pt->to_i64();
  int x = c.id(in[0]);
  if (!c.strides_of(x)) x = c.as_plain(x);
  const std::vector<int64_t> xd = c.val(x).dims;
  const size_t r = xd.size();
  if (pads.size() != 2 * r) return false;
  std::vector<int64_t> od = xd;
  for (size_t i = 0; i < r; ++i) {
    if (pads[i] < 0 || pads[r + i] < 0) return false;
    const bool padded = pads[i] + pads[r + i] > 0;
    // Reflection needs two samples and at most n - 1 of padding; the reference says why not.
    if (padded && (xd[i] == 0 || (mode == "reflect" && (xd[i] < 2 || std::max(pads[i], pads[r + i]) >= xd[i]))))
      return false;
    od[i] += pads[i] + pads[r + i];
  }
  const DType t = c.val(x).dtype;
  const size_t elem = dtype_size(t);
  auto type = dnnl_type(t);
  int y = c.new_value(t, od, type ? plain_md(od, *type) : md_t(), pad.name());
  const std::vector<int64_t> ost = row_major(od), from = *c.strides_of(x);
  const auto bytes = static_cast<int64_t>(elem);
  int64_t interior = 0;
  for (size_t i = 0; i < r; ++i) interior += pads[i] * ost[i];
  // One slab copy: (dims, byte offset read, byte offset written), all within y.
  struct Slab {
    std::vector<int64_t> dims;
    int64_t from, to;
  };
  std::vector<Slab> slabs;
  for (size_t a = 0; a < r; ++a) {
    std::vector<int64_t> dims(r);
    int64_t base = 0;
    for (size_t k = 0; k < r; ++k) {
      dims[k] = k < a ? od[k] : k == a ? 1 : xd[k];
      if (k > a) base += pads[k] * ost[k];
    }
    const int64_t n = xd[a];
    for (int64_t o = 0; o < od[a]; ++o) {
      int64_t j = o - pads[a];
      if (j >= 0 && j < n) continue;
      j = mode == "reflect" ? (j < 0 ? -j : 2 * (n - 1) - j) : std::clamp<int64_t>(j, 0, n - 1);
      slabs.push_back({dims, (base + (pads[a] + j) * ost[a]) * bytes, (base + o * ost[a]) * bytes});
    }
  }
  add_native_step(c, step_info(pad, "pad", "pad " + mode + " " + std::string(dtype_name(t)) + to_string(xd) + " -> " +
                                               to_string(od)),
                  {x}, {y}, [elem, xd, from, ost, interior, bytes, slabs](const std::vector<char*>& p) {
                    kernels::strided_copy(elem, p[0], from, p[1] + interior * bytes, ost, xd);
                    for (const Slab& s : slabs) kernels::strided_copy(elem, p[1] + s.from, ost, p[1] + s.to, ost, s.dims);
                  });
  c.bind(pad.output(0), y);
  return true;
}

}  // namespace

bool lower_pad(Compiler& c, const Node& pad) {
  return pad_into_pool(c, pad) || pad_into_conv(c, pad) || lower_qdq_pad_into_convs(c, pad) || pad_constant(c, pad) ||
         pad_mirrored(c, pad);
}

bool lower_batchnorm(Compiler& c, const Node& n) {
  if (!all_float32(n)) return false;
  if (n.num_outputs() != 1 || n.attrs().get_int("training_mode", 0) != 0) return false;
  std::vector<int64_t> xd = c.dims(n.inputs()[0]);
  if (xd.size() < 2 || xd.size() > 5) return false;
  int64_t ch = xd[1];
  int params[4];
  for (int i = 0; i < 4; ++i) {
    const Tensor* t = c.known(n.inputs()[i + 1]);
    if (!t || t->numel() != ch) return false;
    params[i] = c.constant_value(t->reshaped({ch}), n.name());
  }
  int x = c.id(n.inputs()[0]);
  // A view with gaps (a channel part) is made dense; a 4-D or 5-D dense layout in
  // another order (channels-last, as a dequantized integer convolution's output is)
  // is read as it is: oneDNN's channels-last batch norm is fast, and plain NCHW 10x
  // slower (QOperator DenseNet-121: 31.8 ms of batch norms -> 4.0).
  const bool gaps = c.val(x).bytes != static_cast<size_t>(num_elements(xd)) * 4;
  if (xd.size() == 2 || (c.strides_of(x) && !c.is_dense(x) && (gaps || xd.size() == 3))) x = c.as_plain(x);
  // A plain 3-D input runs as [N, C, W, 1]: oneDNN has only its reference kernel for
  // the 3-D plain layout (PatchTST's BatchNorm1d on [7, 64, 11]: 44 us, as 4-D 8 us).
  const bool as_4d = xd.size() == 3 && c.strides_of(x) && c.is_dense(x);
  // A plain 2-D input [N, C] is [N, C, 1, 1] channels-last in the same memory: the
  // plain 2-D kernel walks each channel down the rows, the channels-last one streams
  // them (LeViT's BatchNorm1d over a Linear's [64, 320]: 39 us).
  const bool as_nhwc = xd.size() == 2 && c.strides_of(x) && c.is_dense(x);
  const std::vector<int64_t> pd_dims = as_4d     ? std::vector<int64_t>{xd[0], xd[1], xd[2], 1}
                                       : as_nhwc ? std::vector<int64_t>{xd[0], xd[1], 1, 1}
                                                 : xd;
  if (as_4d) x = c.alias(x, pd_dims, plain_md(pd_dims, dt::f32), n.name() + ".4d");
  if (as_nhwc) x = c.alias(x, pd_dims, md_t(pd_dims, dt::f32, tag::nhwc), n.name() + ".nhwc");
  const md_t md = c.val(x).md;  // a copy: new values may move the table
  float eps = static_cast<float>(n.attrs().get_float("epsilon", 1e-5));
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  // A Relu right after it is applied in the same pass (DenseNet's BN-ReLU-Conv).
  const Node* relu = c.opts().fuse ? c.sole_consumer(n.output(0)) : nullptr;
  if (relu && !c.takeable(*relu)) relu = nullptr;
  if (relu) {
    auto e = eltwise_of(c, *relu, n.output(0), xd.size());
    if (e && e->alg == dnnl::algorithm::eltwise_relu && e->alpha == 0) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    else relu = nullptr;
  }
  const Compiler::TeamScope team(
      c, kernels::team_for_work(c.threads(), 8.0 * static_cast<double>(num_elements(xd)) / kernels::kTeamBytes));
  dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps, flags);
  dnnl::batch_normalization_forward::primitive_desc pd(d, c.engine());
  int dst = c.new_value(DType::Float32, pd_dims, md, n.name());
  StepInfo info = step_info(n, "batchnorm", "batchnorm " + describe_md(md) + (relu ? " relu" : ""),
                            2.0 * static_cast<double>(num_elements(xd)));
  if (relu) {
    info.ops.push_back("Relu");
    info.nodes.push_back(node_key(*relu));
  }
  c.add_primitive(pd,
                  {{DNNL_ARG_SRC, x},
                   {DNNL_ARG_SCALE, params[0]},
                   {DNNL_ARG_SHIFT, params[1]},
                   {DNNL_ARG_MEAN, params[2]},
                   {DNNL_ARG_VARIANCE, params[3]},
                   {DNNL_ARG_DST, dst}},
                  info);
  c.bind((relu ? relu : &n)->output(0), as_4d || as_nhwc ? c.alias(dst, xd, plain_md(xd, dt::f32), n.name()) : dst);
  if (relu) c.mark_done(*relu);
  return true;
}

namespace {

// True if `n` is a 1x1 convolution (stride 1, no padding, one group) of input
// `x` with constant weights: it can read a channel concatenation part by part.
bool is_pointwise_conv_of(Compiler& c, const Node& n, size_t input, const std::vector<int64_t>& xd) {
  if (n.op_type() != "Conv" || input != 0 || n.attrs().get_int("group", 1) != 1) return false;
  const Tensor* w = c.peek_known(n.inputs()[1]);
  if (!w || w->rank() != 4 || w->dims()[2] != 1 || w->dims()[3] != 1 || w->dims()[1] != xd[1]) return false;
  if (n.inputs().size() > 2 && n.inputs()[2].present() && !c.peek_known(n.inputs()[2])) return false;
  try {
    ops::Window win = ops::read_window(n.attrs(), {1, 1});
    for (const ops::WindowAxis& a : ops::plan_window(win, {xd[2], xd[3]}))
      if (a.stride != 1 || a.pad_begin != 0 || a.dilation != 1 || a.out != a.in) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

}  // namespace

namespace {

// Places the parts of a concatenation in its output buffer `dst` (part k starting
// offsets[k] bytes in): each part's producer then writes it there. Leading parts
// that already live, in order, in the buffer of an earlier concatenation that is
// exactly them (DenseNet's blocks concatenate the same growing list of features
// again and again) take that whole buffer along instead. `same_layout(r, k0, k1)`
// says whether buffer r holds parts [k0, k1) in dst's layout for them. All or
// nothing.
bool place_parts(Compiler& c, const std::vector<int>& ids, const std::vector<int64_t>& offsets, int dst,
                 const std::function<bool(int, size_t, size_t)>& same_layout) {
  std::vector<int> targets;
  std::vector<int64_t> at;
  for (size_t i = 0; i < ids.size();) {
    const RtValue& v = c.val(ids[i]);
    if (v.alias_of < 0) {
      targets.push_back(ids[i]);
      at.push_back(offsets[i++]);
      continue;
    }
    const int r = v.alias_of;
    size_t j = i;
    size_t bytes = 0;
    while (j < ids.size() && c.val(ids[j]).alias_of == r &&
           c.val(ids[j]).byte_offset - v.byte_offset == offsets[j] - offsets[i])
      bytes += c.val(ids[j++]).bytes;
    if (v.byte_offset != 0 || bytes != c.val(r).bytes || !same_layout(r, i, j)) return false;
    targets.push_back(r);
    at.push_back(offsets[i]);
    i = j;
  }
  return c.retarget_all(targets, dst, at);
}

}  // namespace

namespace {

// The strides of a concatenation's output: row-major, except that parts all dense
// in one other order of their axes (channels-last convolution outputs), read only by
// convolutions, are concatenated in that order: GhostNet's cat([conv(x),
// dwconv(conv(x))]) of 12-channel parts, which the next convolution reads
// channels-last, was copied into NCHW and reordered back (a third of its copies).
std::vector<int64_t> concat_strides(Compiler& c, const Node& n, const std::vector<int>& ids,
                                    const std::vector<int64_t>& od) {
  const std::vector<int64_t> plain = row_major(od);
  if (c.is_output(n.output(0)) || c.consumers(n.output(0)).empty()) return plain;
  for (const auto& [consumer, index] : c.consumers(n.output(0)))
    if (consumer->op_type() != "Conv" || index != 0) return plain;
  // Axes from the outermost (largest stride) in, as part 0 lays them out.
  const std::vector<int64_t> first = *c.strides_of(ids[0]);
  std::vector<size_t> order(od.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a] > first[b]; });
  std::vector<int64_t> out(od.size());
  for (int id : ids) {
    const std::vector<int64_t> di = c.val(id).dims, si = *c.strides_of(id);
    int64_t stride = 1;
    for (size_t k = order.size(); k-- > 0;) {
      if (di[order[k]] > 1 && si[order[k]] != stride) return plain;
      stride *= di[order[k]];
    }
  }
  int64_t stride = 1;
  for (size_t k = order.size(); k-- > 0;) {
    out[order[k]] = stride;
    stride *= std::max<int64_t>(od[order[k]], 1);
  }
  return out;
}

}  // namespace

bool lower_concat(Compiler& c, const Node& n) {
  for (const Value& v : n.inputs())
    if (v.type().dtype == DType::Float64 || dtype_size(v.type().dtype) == 0) return false;
  std::vector<int64_t> d0 = c.dims(n.inputs()[0]);
  if (d0.empty()) return false;
  int axis = static_cast<int>(normalize_axis(n.attrs().get_int("axis"), static_cast<int64_t>(d0.size())));
  // Channels of a 4-D tensor read only by 1x1 convolutions (SqueezeNet's fire
  // modules): each convolution sums its products with the parts (a sum
  // post-op), and the concatenation's copy is never made.
  if (c.opts().fuse && c.opts().blocked_layouts && axis == 1 && d0.size() == 4 && n.inputs().size() >= 2 &&
      !c.is_output(n.output(0)) && !c.consumers(n.output(0)).empty()) {
    std::vector<int64_t> od = d0;
    od[1] = 0;
    bool parts_ok = true;
    for (const Value& v : n.inputs()) {
      const std::vector<int64_t>& d = c.dims(v);
      parts_ok = parts_ok && d.size() == 4 && d[1] > 0 && c.dtype(v) == DType::Float32 && !c.peek_known(v);
      if (parts_ok) od[1] += d[1];
    }
    bool all_pointwise = parts_ok;
    for (const auto& [consumer, index] : c.consumers(n.output(0)))
      all_pointwise = all_pointwise && is_pointwise_conv_of(c, *consumer, index, od);
    if (all_pointwise) {
      c.defer_concat(n.output(0), n.inputs());
      // Its type for the consumers' shape inference; no step writes or reads it,
      // so it gets no buffer.
      c.bind(n.output(0), c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name()));
      return true;
    }
  }
  std::vector<int> ids;
  std::vector<md_t> mds;
  std::vector<int64_t> od = d0;
  od[axis] = 0;
  std::string sig = "concat axis" + std::to_string(axis);
  bool blocked = false;
  for (const Value& v : n.inputs()) {
    if (num_elements(c.dims(v)) == 0) continue;  // empty inputs add nothing
    int id = c.id(v);
    ids.push_back(id);
    mds.push_back(c.val(id).md);
    od[axis] += c.val(id).dims[axis];
    sig += " " + describe_md(c.val(id).md);
    blocked = blocked || !c.strides_of(id);
  }
  if (ids.empty()) return false;
  // Each part's region of the output is one contiguous run when the dims before
  // the axis are all 1 (batch 1): its producer then writes it in place.
  int64_t lead = 1;
  for (int i = 0; i < axis; ++i) lead *= od[static_cast<size_t>(i)];
  const DType t = c.val(ids[0]).dtype;
  const auto elem = static_cast<int64_t>(dtype_size(t));
  if (!blocked) {
    auto type = dnnl_type(t);
    const std::vector<int64_t> ost = concat_strides(c, n, ids, od);
    int dst = c.new_value(t, od, type ? md_t(to_dims(od), *type, to_dims(ost)) : md_t(), n.name());
    const bool in_runs = ost == row_major(od);  // each part's region one run (batch 1)
    int64_t at = 0;
    for (int id : ids) {
      const std::vector<int64_t> di = c.val(id).dims;
      const int64_t offset = at * ost[static_cast<size_t>(axis)] * elem;
      at += di[static_cast<size_t>(axis)];
      if (lead == 1 && in_runs && c.is_dense(id) && c.val(id).alias_of < 0 && c.retarget(id, dst, offset)) continue;
      StepInfo info = step_info(n, "copy", "concat-part " + std::string(dtype_name(t)) + to_string(di) + " s" +
                                             to_string(*c.strides_of(id)) + " -> " + to_string(ost));
      // Walked in the output's memory order: channels-last parts copy runs of
      // channels, not one element per channel-strided step.
      std::vector<size_t> order(di.size());
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ost[a] > ost[b]; });
      std::vector<int64_t> dims, from, to;
      for (size_t k : order) {
        dims.push_back(di[k]);
        from.push_back((*c.strides_of(id))[k]);
        to.push_back(ost[k]);
      }
      add_native_step(c, info, {id}, {dst}, [elem, dims, from, to, offset](const std::vector<char*>& p) {
        kernels::strided_copy(static_cast<size_t>(elem), p[0], from, p[1] + offset, to, dims);
      });
    }
    c.bind(n.output(0), dst);
    return true;
  }
  dnnl::concat::primitive_desc pd(axis, mds, c.engine());
  int dst = c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  // In place when every part's region of the output has the part's own layout.
  bool in_place = lead == 1;
  std::vector<int64_t> offsets;
  dims_t at(od.size(), 0);
  for (int id : ids) {
    md_t sub = pd.dst_desc().submemory_desc(to_dims(c.val(id).dims), at);
    offsets.push_back(sub.data.offset0 * elem);
    sub.data.offset0 = 0;
    in_place = in_place && sub == c.val(id).md;
    at[static_cast<size_t>(axis)] += c.val(id).dims[static_cast<size_t>(axis)];
  }
  auto same_layout = [&](int r, size_t k0, size_t k1) {
    std::vector<int64_t> rd = c.val(ids[k0]).dims;
    rd[static_cast<size_t>(axis)] = 0;
    dims_t from(od.size(), 0);
    for (size_t k = 0; k < k1; ++k) {
      if (k < k0) from[static_cast<size_t>(axis)] += c.val(ids[k]).dims[static_cast<size_t>(axis)];
      else rd[static_cast<size_t>(axis)] += c.val(ids[k]).dims[static_cast<size_t>(axis)];
    }
    md_t sub = pd.dst_desc().submemory_desc(to_dims(rd), from);
    sub.data.offset0 = 0;
    return rd == c.val(r).dims && sub == c.val(r).md;
  };
  if (in_place && place_parts(c, ids, offsets, dst, same_layout)) {
    c.bind(n.output(0), dst);
    return true;
  }
  if (in_place) {
    // Some parts cannot be written in place (a part of a merged convolution's
    // output is a view of that one's buffer): the others still are, and only those
    // are copied into their region, each by a reorder of its own.
    std::vector<size_t> copied;
    for (size_t i = 0; i < ids.size(); ++i)
      if (!c.retarget(ids[i], dst, offsets[i])) copied.push_back(i);
    for (size_t i : copied) {
      const RtValue& part = c.val(ids[i]);
      const int to = c.alias(dst, part.dims, part.md, n.name() + ".part" + std::to_string(i));
      c.val(to).byte_offset += offsets[i];
      c.val(to).bytes = part.bytes;
      StepInfo info = step_info(n, "copy", "concat-part " + describe_md(part.md) + " -> " + describe_md(pd.dst_desc()));
      info.bytes = 2.0 * static_cast<double>(part.bytes);
      dnnl::reorder::primitive_desc rpd(c.engine(), part.md, c.engine(), part.md);
      c.add_primitive(dnnl::reorder(rpd), {{DNNL_ARG_FROM, ids[i]}, {DNNL_ARG_TO, to}}, info);
    }
    c.bind(n.output(0), dst);
    return true;
  }
  std::vector<std::pair<int, int>> args;
  for (size_t i = 0; i < ids.size(); ++i) args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), ids[i]});
  args.push_back({DNNL_ARG_DST, dst});
  c.add_primitive(dnnl::concat(pd), args, step_info(n, "concat", sig + " -> " + describe_md(pd.dst_desc())));
  c.bind(n.output(0), dst);
  return true;
}

}  // namespace isomer::runtime
