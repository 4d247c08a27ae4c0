// Lowering of Resize: of a channels-last or channel-blocked source in that layout,
// on kernels of pixel runs and of tap rows below, else on oneDNN's
// resampling where its source pixels and weights are ONNX's (checked index by
// index), else on isomer's own separable kernel below, with the reference
// evaluator's own tables (ops/resize.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/parallel.h"
#include "ops/resize.h"
#include "runtime/compiler.h"
#include "runtime/fusion.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {


// oneDNN's resampling maps output index o to (o + 0.5) in / out - 0.5 in float
// (src/cpu/resampling_utils.hpp), rounded half away from zero for nearest.
float onednn_coordinate(int64_t o, int64_t in, int64_t out) {
  return (static_cast<float>(o) + 0.5f) * static_cast<float>(in) / static_cast<float>(out) - 0.5f;
}

// True if oneDNN's resampling takes the same source pixels as `plan` along every
// axis, and for linear mode, the same coordinate (ONNX half_pixel at scale out/in).
bool onednn_matches(const ops::ResizePlan& plan, const ops::ResizeAttrs& a) {
  const size_t r = plan.axes.size();
  if (r < 3 || r > 5 || plan.any_outside || !plan.axes[0].identity() || !plan.axes[1].identity()) return false;
  if (a.mode == "nearest") {
    for (size_t d = 2; d < r; ++d) {
      const ops::ResizeAxis& ax = plan.axes[d];
      for (int64_t o = 0; o < ax.out; ++o) {
        int64_t i = static_cast<int64_t>(std::round(onednn_coordinate(o, ax.in, ax.out)));
        i = std::clamp<int64_t>(i, 0, ax.in - 1);
        if (i != ax.index[o]) return false;
      }
    }
    return true;
  }
  if (a.mode != "linear") return false;
  for (size_t d = 2; d < r; ++d) {
    const ops::ResizeAxis& ax = plan.axes[d];
    const bool half_pixel = a.coord == "half_pixel" || (a.coord == "pytorch_half_pixel" && ax.out > 1) ||
                            (a.coord == "half_pixel_symmetric" && ax.scale * ax.in == ax.out);
    if (!half_pixel || ax.scale != static_cast<double>(ax.out) / static_cast<double>(ax.in)) return false;
  }
  return true;
}

bool resize_on_onednn(Compiler& c, const Node& n, const ops::ResizePlan& plan, const ops::ResizeAttrs& a) {
  const std::vector<int64_t>& xd = c.dims(n.inputs()[0]);
  const std::vector<int64_t> od = plan.out_dims();
  const auto alg =
      a.mode == "nearest" ? dnnl::algorithm::resampling_nearest : dnnl::algorithm::resampling_linear;
  const Fusion fusion = plan_fusion(c, n.output(0), od, /*allow_add=*/true, /*full_binary=*/false);
  const bool blocked = c.opts().blocked_layouts;
  // The source in the layout it has (a convolution's blocked output), the
  // destination in the same: oneDNN's resampling kernels take any.
  // Only a channel-blocked or channel-last source (a convolution's output):
  // oneDNN 2.6's jit resampling of a plain nchw source crashed on 96x32x32
  // (isomer's kernel below takes plain sources).
  const int x = c.id(n.inputs()[0]);
  const md_t src_md = c.val(x).md;
  const auto& bd = src_md.data.format_desc.blocking;
  if (!blocked || src_md.data.ndims != static_cast<int>(xd.size()) || src_md.data.format_kind != dnnl_blocked)
    return false;
  const bool channel_blocks = bd.inner_nblks == 1 && bd.inner_idxs[0] == 1;
  const bool channel_last = bd.inner_nblks == 0 && bd.strides[1] == 1 && xd[1] > 1;
  if (!channel_blocks && !channel_last) return false;
  md_t dst_any(to_dims(od), dt::f32, tag::any);
  auto make_pd = [&](const md_t& dst, const dnnl::primitive_attr& attr) {
    dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_md, dst);
    return dnnl::resampling_forward::primitive_desc(d, attr, c.engine());
  };
  dnnl::resampling_forward::primitive_desc pd;
  try {
    pd = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
  } catch (const dnnl::error&) {
    return false;
  }
  if (is_reference(pd)) return false;
  const md_t dst_md = pd.dst_desc();
  std::vector<std::pair<int, int>> args;
  std::string post;
  int acc = -1;
  dnnl::primitive_attr attr = fusion_attr(c, fusion, dst_md, acc, post, args);
  pd = make_pd(dst_md, attr);
  const int src = c.as_layout(x, pd.src_desc());
  const int dst = acc >= 0 ? c.alias(acc, od, pd.dst_desc(), n.name()) : c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  c.val(dst).accumulated = acc >= 0;
  args.insert(args.begin(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  StepInfo info;
  info.kind = "resample";
  info.label = n.name();
  info.ops = fusion_ops("Resize", {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  info.signature = std::string("resampling ") + (a.mode == "nearest" ? "nearest" : "linear") + " src " +
                   describe_md(pd.src_desc()) + " dst " + describe_md(pd.dst_desc()) + post + " impl " +
                   pd.impl_info_str();
  c.add_primitive(pd, args, info);
  finish_fusion(c, fusion, dst);
  return true;
}

// Nearest resize of the last two axes kept in the source's channels-last or channel-
// blocked layout: every output pixel's run of channels (of a block's lanes) is one
// source pixel's, and an output row that reads the same source row as the row before
// is a copy of it. oneDNN's jit resampling found each pixel's source anew (YOLO's
// 2x upsample of [1, 64, 32, 32] channels-last: 2.7x ONNX Runtime's time).
struct PixelRuns {
  int64_t planes = 1, run = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  std::vector<int64_t> hi, wi;
};

// Output rows [row, row + rows * len) read source row `src`: each source pixel's run
// is loaded once and stored to every one of them.
template <int64_t kRun>
void copy_pixels(const float* src, float* row, int64_t rows, int64_t len, const PixelRuns& t) {
  const int64_t run = kRun ? kRun : t.run;
  for (int64_t ow = 0; ow < t.ow; ++ow) {
    const float* s = src + t.wi[ow] * run;
    for (int64_t r = 0; r < rows; ++r) {
      float* d = row + r * len + ow * run;
      for (int64_t i = 0; i < run; ++i) d[i] = s[i];
    }
  }
}

ISOMER_CLONES void pixel_rows(const float* x, float* y, const PixelRuns& t, int64_t r0, int64_t r1) {
  const int64_t len = t.ow * t.run;
  for (int64_t r = r0; r < r1;) {
    const int64_t p = r / t.oh, oh = r % t.oh;
    int64_t same = 1;  // the rows after r of its plane and this thread that read its source row
    while (r + same < r1 && oh + same < t.oh && t.hi[oh + same] == t.hi[oh]) ++same;
    const float* src = x + (p * t.ih + t.hi[oh]) * t.iw * t.run;
    float* row = y + r * len;
    if (t.run == 16) copy_pixels<16>(src, row, same, len, t);
    else if (t.run == 8) copy_pixels<8>(src, row, same, len, t);
    else copy_pixels<0>(src, row, same, len, t);
    r += same;
  }
}

// body(r0, r1) over output rows [0, rows) of row_bytes each: a thread for each 64 KB
// written, as a copy's.
template <class F>
void split_rows(int64_t rows, int64_t row_bytes, F&& body) {
  const int64_t most = std::min<int64_t>(rows, omp_get_max_threads());
  const int team = static_cast<int>(std::clamp<int64_t>(rows * row_bytes / 65536, 1, most));
  kernels::parallel_teams(team, [&](int th, int nt) { body(rows * th / nt, rows * (th + 1) / nt); });
}

// Linear (or cubic) resize of the last two axes in the same layouts: an output row
// is a blend of th source rows, each first blended along W (tw taps a pixel) into a
// row kept while the output rows after it read it, every blend a pass over runs of
// channels or block lanes. Exporters' align_corners upsampling (DPT's fusion
// stages), which oneDNN's resampling does not compute, ran on the plane kernel with
// the convolution's channels-last output reordered to plain before it and back
// after it: both reorders took longer than the resize.
struct TapRows {
  static constexpr int kMaxTaps = 4;
  int64_t planes = 1, run = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  int th = 1, tw = 1;
  std::vector<int64_t> hi, wi;
  std::vector<float> hw, ww;
};

// dst[ow][i] = sum_k ww[ow, k] src[wi[ow, k]][i], i < run.
template <int kTaps, int64_t kRun>
void blend_pixels(const float* src, float* __restrict dst, const TapRows& t) {
  const int taps = kTaps ? kTaps : t.tw;
  const int64_t run = kRun ? kRun : t.run;
  for (int64_t ow = 0; ow < t.ow; ++ow) {
    const int64_t* at = t.wi.data() + ow * taps;
    const float* w = t.ww.data() + ow * taps;
    float* __restrict d = dst + ow * run;
    if (taps == 2) {
      const float w0 = w[0], w1 = w[1];
      const float *s0 = src + at[0] * run, *s1 = src + at[1] * run;
      for (int64_t i = 0; i < run; ++i) d[i] = w0 * s0[i] + w1 * s1[i];
      continue;
    }
    const float w0 = w[0];
    const float* s0 = src + at[0] * run;
    for (int64_t i = 0; i < run; ++i) d[i] = w0 * s0[i];
    for (int k = 1; k < taps; ++k) {
      const float wk = w[k];
      const float* sk = src + at[k] * run;
      for (int64_t i = 0; i < run; ++i) d[i] += wk * sk[i];
    }
  }
}

ISOMER_CLONES void blend_row(const float* src, float* dst, const TapRows& t) {
  if (t.tw == 2 && t.run == 16) blend_pixels<2, 16>(src, dst, t);
  else if (t.tw == 2 && t.run == 8) blend_pixels<2, 8>(src, dst, t);
  else if (t.tw == 2) blend_pixels<2, 0>(src, dst, t);
  else blend_pixels<0, 0>(src, dst, t);
}

// out[i] = sum_j w[j] rows[j][i], i < len.
ISOMER_CLONES void blend_rows(const float* const* rows, const float* w, int taps, int64_t len, float* __restrict out) {
  if (taps == 2) {
    const float w0 = w[0], w1 = w[1];
    const float *r0 = rows[0], *r1 = rows[1];
    for (int64_t i = 0; i < len; ++i) out[i] = w0 * r0[i] + w1 * r1[i];
    return;
  }
  const float w0 = w[0];
  const float* r0 = rows[0];
  for (int64_t i = 0; i < len; ++i) out[i] = w0 * r0[i];
  for (int j = 1; j < taps; ++j) {
    const float wj = w[j];
    const float* rj = rows[j];
    for (int64_t i = 0; i < len; ++i) out[i] += wj * rj[i];
  }
}

void tap_rows(const float* x, float* y, const TapRows& t, int64_t r0, int64_t r1) {
  const int64_t len = t.ow * t.run;
  // Slots a cache line more than a row apart: rows a multiple of 4 KB apart made
  // every load wait on the store before it to the same offset (4K aliasing).
  const int64_t slot_len = len + 16;
  thread_local std::vector<float> cache;
  cache.resize(static_cast<size_t>(TapRows::kMaxTaps * slot_len));
  int64_t held[TapRows::kMaxTaps] = {-1, -1, -1, -1};  // the source row (plane-wide) in each slot
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t p = r / t.oh, o = r % t.oh;
    int64_t want[TapRows::kMaxTaps];
    const float* rows[TapRows::kMaxTaps];
    for (int j = 0; j < t.th; ++j) want[j] = p * t.ih + t.hi[o * t.th + j];
    for (int j = 0; j < t.th; ++j) {
      int slot = -1;
      for (int q = 0; q < t.th && slot < 0; ++q)
        if (held[q] == want[j]) slot = q;
      if (slot < 0) {  // a slot no tap of this row reads: there is one, th slots for th taps
        for (int q = 0; q < t.th && slot < 0; ++q) {
          bool needed = false;
          for (int k = 0; k < t.th; ++k) needed = needed || held[q] == want[k];
          if (!needed) slot = q;
        }
        blend_row(x + want[j] * t.iw * t.run, cache.data() + slot * slot_len, t);
        held[slot] = want[j];
      }
      rows[j] = cache.data() + slot * slot_len;
    }
    blend_rows(rows, t.hw.data() + o * t.th, t.th, len, y + r * len);
  }
}

// A resize of the last two axes of a channels-last or channel-blocked source, in
// that layout: nearest on the pixel runs, linear or cubic on the tap rows (except
// where oneDNN's resampling computes ONNX's values: it runs those in any layout).
bool resize_in_layout(Compiler& c, const Node& n, const ops::ResizePlan& plan, const ops::ResizeAttrs& a) {
  const std::vector<int64_t>& xd = c.dims(n.inputs()[0]);
  if (xd.size() != 4 || !c.opts().blocked_layouts) return false;
  if (c.val(c.id(n.inputs()[0])).dtype != DType::Float32) return false;
  if (!plan.axes[0].identity() || !plan.axes[1].identity()) return false;
  const ops::ResizeAxis &h = plan.axes[2], &w = plan.axes[3];
  const bool nearest = h.taps == 1 && w.taps == 1;
  if (!nearest && (a.mode == "nearest" || onednn_matches(plan, a))) return false;
  if (h.taps > TapRows::kMaxTaps || w.taps > TapRows::kMaxTaps) return false;  // antialiased downscaling
  // A post-op oneDNN would fuse (an FPN's lateral Add) keeps the resize there.
  if (!plan_fusion(c, n.output(0), plan.out_dims(), true, false).ops.empty()) return false;
  const int x = c.id(n.inputs()[0]);
  const md_t& src_md = c.val(x).md;
  std::optional<tag> layout;
  for (tag t : {tag::nhwc, tag::nChw16c, tag::nChw8c})
    if (src_md == md_t(to_dims(xd), dt::f32, t)) layout = t;
  if (!layout || (*layout == tag::nhwc && xd[1] == 1)) return false;  // [N, 1, H, W] is plain: the plane kernel
  const int64_t block = *layout == tag::nChw16c ? 16 : *layout == tag::nChw8c ? 8 : 0;
  const int64_t planes = block ? xd[0] * ((xd[1] + block - 1) / block) : xd[0], run = block ? block : xd[1];
  const std::vector<int64_t> od = plan.out_dims();
  const int y = c.new_value(DType::Float32, od, md_t(to_dims(od), dt::f32, *layout), n.name());
  if (nearest) {
    PixelRuns t;
    t.planes = planes, t.run = run;
    t.ih = xd[2], t.iw = xd[3], t.oh = h.out, t.ow = w.out;
    t.hi = h.index, t.wi = w.index;
    add_native_step(c,
                    step_info(n, "resize", "nearest in layout " + describe_md(src_md) + " -> " + to_string(od),
                              static_cast<double>(num_elements(od))),
                    {x}, {y}, [t](const std::vector<char*>& p) {
                      const auto* src = reinterpret_cast<const float*>(p[0]);
                      auto* dst = reinterpret_cast<float*>(p[1]);
                      split_rows(t.planes * t.oh, t.ow * t.run * 4,
                                 [&](int64_t a, int64_t b) { pixel_rows(src, dst, t, a, b); });
                    });
  } else {
    TapRows t;
    t.planes = planes, t.run = run;
    t.ih = xd[2], t.iw = xd[3], t.oh = h.out, t.ow = w.out, t.th = h.taps, t.tw = w.taps;
    t.hi = h.index, t.wi = w.index;
    t.hw.assign(h.weight.begin(), h.weight.end());
    t.ww.assign(w.weight.begin(), w.weight.end());
    add_native_step(c,
                    step_info(n, "resize",
                              a.mode + " " + a.coord + " in layout " + describe_md(src_md) + " -> " + to_string(od),
                              2.0 * static_cast<double>(num_elements(od)) * (h.taps + w.taps)),
                    {x}, {y}, [t](const std::vector<char*>& p) {
                      const auto* src = reinterpret_cast<const float*>(p[0]);
                      auto* dst = reinterpret_cast<float*>(p[1]);
                      split_rows(t.planes * t.oh, t.ow * t.run * 4,
                                 [&](int64_t a, int64_t b) { tap_rows(src, dst, t, a, b); });
                    });
  }
  c.bind(n.output(0), y);
  return true;
}

// The last two axes' tables as float weights, for the kernel below.
struct PlaneTaps {
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int th = 1, tw = 1;
  int64_t repeat = 0;  // nearest: wi[ow] = ow / repeat for every ow (0: another map)
  std::vector<int64_t> hi, wi;
  std::vector<float> hw, ww;
};

PlaneTaps plane_taps(const ops::ResizeAxis* h, const ops::ResizeAxis& w) {
  PlaneTaps t;
  if (h) {
    t.ih = h->in, t.oh = h->out, t.th = h->taps, t.hi = h->index;
    t.hw.assign(h->weight.begin(), h->weight.end());
  } else {
    t.hi = {0}, t.hw = {1.f};
  }
  t.iw = w.in, t.ow = w.out, t.tw = w.taps, t.wi = w.index;
  t.ww.assign(w.weight.begin(), w.weight.end());
  if (t.tw == 1 && t.ow == 2 * t.iw) {
    t.repeat = 2;
    for (int64_t o = 0; o < t.ow; ++o) t.repeat = t.wi[o] == o / 2 ? t.repeat : 0;
  }
  return t;
}

// y[p][oh][ow] = sum_j hw[oh, j] sum_k ww[ow, k] x[p][hi[oh, j]][wi[ow, k]] for every plane p.
ISOMER_CLONES void resize_planes(const float* x, float* y, int64_t planes, const PlaneTaps& t) {
#pragma omp parallel for
  for (int64_t p = 0; p < planes; ++p) {
    thread_local std::vector<float> cache;
    if (cache.size() < static_cast<size_t>(2 * t.ow)) cache.resize(static_cast<size_t>(2 * t.ow));
    int64_t cached[2] = {-1, -1};
    const float* rows[2] = {nullptr, nullptr};
    const float* xp = x + p * t.ih * t.iw;
    float* yp = y + p * t.oh * t.ow;
    for (int64_t oh = 0; oh < t.oh; ++oh) {
      float* row = yp + oh * t.ow;
      if (t.th == 1 && t.tw == 1) {
        if (oh > 0 && t.hi[oh] == t.hi[oh - 1]) {  // nearest upsampling repeats rows
          std::memcpy(row, row - t.ow, sizeof(float) * static_cast<size_t>(t.ow));
          continue;
        }
        const float* src = xp + t.hi[oh] * t.iw;
        if (t.repeat == 2) {  // each pixel twice (nn.Upsample(scale_factor=2)): no index loads
          for (int64_t iw = 0; iw < t.iw; ++iw) row[2 * iw] = row[2 * iw + 1] = src[iw];
        } else {
          for (int64_t ow = 0; ow < t.ow; ++ow) row[ow] = src[t.wi[ow]];
        }
        continue;
      }
      if (t.th == 2 && t.tw == 2) {  // linear: each source row interpolated once, kept while rows use it
        float* h[2] = {cache.data(), cache.data() + t.ow};
        for (int j = 0; j < 2; ++j) {
          const int64_t r = t.hi[oh * 2 + j];
          int slot = cached[0] == r ? 0 : cached[1] == r ? 1 : -1;
          if (slot < 0) {
            slot = cached[0] == t.hi[oh * 2 + 1 - j] ? 1 : 0;  // keep the row the other tap reads
            const float* src = xp + r * t.iw;
            float* dst = h[slot];
            for (int64_t ow = 0; ow < t.ow; ++ow)
              dst[ow] = t.ww[ow * 2] * src[t.wi[ow * 2]] + t.ww[ow * 2 + 1] * src[t.wi[ow * 2 + 1]];
            cached[slot] = r;
          }
          rows[j] = h[slot];
        }
        const float w0 = t.hw[oh * 2], w1 = t.hw[oh * 2 + 1];
        for (int64_t ow = 0; ow < t.ow; ++ow) row[ow] = w0 * rows[0][ow] + w1 * rows[1][ow];
        continue;
      }
      for (int64_t ow = 0; ow < t.ow; ++ow) row[ow] = 0.f;
      for (int j = 0; j < t.th; ++j) {
        const float wh = t.hw[oh * t.th + j];
        if (wh == 0.f) continue;
        const float* src = xp + t.hi[oh * t.th + j] * t.iw;
        for (int64_t ow = 0; ow < t.ow; ++ow) {
          float s = 0.f;
          for (int k = 0; k < t.tw; ++k) s += t.ww[ow * t.tw + k] * src[t.wi[ow * t.tw + k]];
          row[ow] += wh * s;
        }
      }
    }
  }
}

// One axis of a separable resize on float data: y[b][o][i] = sum_k w[o,k] x[b][index[o,k]][i].
struct AxisPass {
  int64_t outer = 1, in = 1, out = 1, inner = 1;
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

ISOMER_CLONES void resize_pass(const float* x, float* y, const AxisPass& a) {
  for (int64_t b = 0; b < a.outer; ++b)
    for (int64_t o = 0; o < a.out; ++o) {
      float* dst = y + (b * a.out + o) * a.inner;
      for (int64_t i = 0; i < a.inner; ++i) dst[i] = 0.f;
      for (int k = 0; k < a.taps; ++k) {
        const float w = a.weight[o * a.taps + k];
        const float* src = x + (b * a.in + a.index[o * a.taps + k]) * a.inner;
        for (int64_t i = 0; i < a.inner; ++i) dst[i] += w * src[i];
      }
    }
}

}  // namespace

bool lower_resize(Compiler& c, const Node& n) {
  const auto& in = n.inputs();
  if (in[0].type().dtype != DType::Float32) return false;  // (sizes are int64)
  auto operand = [&](size_t i, bool& ok) -> const Tensor* {
    if (i >= in.size() || !in[i].present()) return nullptr;
    const Tensor* t = c.known(in[i]);
    ok = ok && t;
    return t;
  };
  bool ok = true;
  const Tensor *roi = operand(1, ok), *scales = operand(2, ok), *sizes = operand(3, ok);
  if (!ok) return false;  // extents computed at run time: the reference kernel
  const std::vector<int64_t> xd = c.dims(in[0]);
  const ops::ResizeAttrs a = ops::read_resize_attrs(n.attrs(), static_cast<int64_t>(xd.size()));
  const ops::ResizePlan plan =
      ops::plan_resize(a, xd,
                       ops::resize_extents(a, xd, roi ? roi->to_f64() : std::vector<double>{},
                                           scales ? scales->to_f64() : std::vector<double>{},
                                           sizes ? sizes->to_i64() : std::vector<int64_t>{}));
  if (plan.any_outside) return false;  // tf_crop_and_resize's extrapolation: the reference kernel
  const size_t r = xd.size();
  // Every output element its own input's (SegFormer's decode head resizes the
  // stage already at the target size): a view, no step.
  if (std::all_of(plan.axes.begin(), plan.axes.end(), [](const ops::ResizeAxis& ax) { return ax.identity(); })) {
    const int x = c.id(in[0]);
    c.bind(n.output(0), c.alias(x, c.val(x).dims, c.val(x).md, n.name()));
    return true;
  }
  if (resize_in_layout(c, n, plan, a)) return true;
  if (onednn_matches(plan, a) && resize_on_onednn(c, n, plan, a)) return true;
  // Own kernel: a plane kernel when only the last two axes change, else one pass per changed axis.
  if (r < 1) return false;
  bool planar = true;
  for (size_t d = 0; d + 2 < r; ++d) planar = planar && plan.axes[d].identity();
  if (!planar) {
    std::vector<AxisPass> passes;
    std::vector<int64_t> dims = xd;
    for (size_t d = 0; d < r; ++d) {
      const ops::ResizeAxis& ax = plan.axes[d];
      if (ax.identity()) continue;
      AxisPass p;
      p.outer = num_elements(dims, 0, d), p.in = ax.in, p.out = ax.out, p.inner = num_elements(dims, d + 1, r);
      p.taps = ax.taps, p.index = ax.index, p.weight.assign(ax.weight.begin(), ax.weight.end());
      dims[d] = ax.out;
      passes.push_back(std::move(p));
    }
    const int x = c.as_plain(c.id(in[0]));
    const std::vector<int64_t> od = plan.out_dims();
    const int y = c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name());
    add_native_step(c, step_info(n, "resize", a.mode + " " + a.coord + " " + to_string(xd) + " -> " + to_string(od)),
                    {x}, {y}, [passes](const std::vector<char*>& p) {
                      std::vector<float> a, b;
                      const float* src = reinterpret_cast<const float*>(p[0]);
                      for (size_t k = 0; k < passes.size(); ++k) {
                        const AxisPass& q = passes[k];
                        float* dst = k + 1 == passes.size() ? reinterpret_cast<float*>(p[1])
                                                            : ((k % 2 ? b : a).resize(static_cast<size_t>(q.outer * q.out * q.inner)),
                                                               (k % 2 ? b : a).data());
                        resize_pass(src, dst, q);
                        src = dst;
                      }
                    });
    c.bind(n.output(0), y);
    return true;
  }
  const PlaneTaps taps = plane_taps(r >= 2 ? &plan.axes[r - 2] : nullptr, plan.axes[r - 1]);
  const int64_t planes = num_elements(xd, 0, r >= 2 ? r - 2 : r - 1);
  const int x = c.as_plain(c.id(in[0]));
  const std::vector<int64_t> od = plan.out_dims();
  const int y = c.new_value(DType::Float32, od, plain_md(od, dt::f32), n.name());
  add_native_step(c,
                  step_info(n, "resize",
                            a.mode + " " + a.coord + " " + to_string(xd) + " -> " + to_string(od),
                            2.0 * static_cast<double>(num_elements(od)) * taps.th * taps.tw),
                  {x}, {y}, [taps, planes](const std::vector<char*>& p) {
                    resize_planes(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]), planes, taps);
                  });
  c.bind(n.output(0), y);
  return true;
}


}  // namespace isomer::runtime
