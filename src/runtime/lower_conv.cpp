// Lowering of convolutions to oneDNN primitives, with what follows them fused in:
// BatchNormalization folded into the weights, a constant bias, activations and a
// residual Add as post-ops.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "ops/layout_common.h"
#include "ops/nn_common.h"
#include "runtime/compiler.h"
#include "runtime/depthwise_step.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "runtime/fusion.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Conv weights and bias with a following inference BatchNormalization folded in:
// w' = w * s / sqrt(var + eps) per output channel, b' = (b - mean) * s / sqrt(var + eps) + beta.
bool fold_batchnorm(Compiler& c, const Node& bn, std::vector<double>& w, std::vector<double>& b, int64_t oc) {
  if (bn.op_type() != "BatchNormalization" || bn.num_outputs() != 1 || bn.attrs().get_int("training_mode", 0) != 0)
    return false;
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = c.peek_known(bn.inputs()[i + 1]);
    if (!p[i] || p[i]->numel() != oc) return false;
  }
  double eps = bn.attrs().get_float("epsilon", 1e-5);
  std::vector<double> scale = p[0]->to_f64(), shift = p[1]->to_f64(), mean = p[2]->to_f64(), var = p[3]->to_f64();
  size_t per = w.size() / static_cast<size_t>(oc);
  for (int64_t o = 0; o < oc; ++o) {
    double f = scale[o] / std::sqrt(var[o] + eps);
    for (size_t k = 0; k < per; ++k) w[o * per + k] *= f;
    b[o] = (b[o] - mean[o]) * f + shift[o];
  }
  return true;
}

// Conv weights and bias with a following product or sum by a constant of one value
// per output channel (or one value) folded in: FrozenBatchNorm2d and other affine
// layers that exports write as Mul and Add rather than BatchNormalization (DETR's
// backbone), as ONNX Runtime folds them. `cur` is the convolution's value (of
// rank `rank`), `op` its sole reader. x*k: w' = w k, b' = b k; x/k: w' = w / k,
// b' = b / k; x+k: b' = b + k; x-k: b' = b - k; k*x and k+x alike.
bool fold_channel_affine(Compiler& c, const Node& op, const Value& cur, size_t rank, std::vector<double>& w,
                         std::vector<double>& b, int64_t oc) {
  const std::string& t = op.op_type();
  const bool mul = t == "Mul" || t == "Div", add = t == "Add" || t == "Sub";
  if ((!mul && !add) || op.num_outputs() != 1 || op.inputs().size() != 2) return false;
  const size_t at = op.inputs()[0] == cur ? 0 : 1;
  if (op.inputs()[at] != cur || op.inputs()[1 - at] == cur) return false;
  if ((t == "Div" || t == "Sub") && at != 0) return false;  // k/x, k-x are no affine map of x's weights
  // The result has the convolution's type: the constant broadcasts into it.
  if (op.output_types()[0] != cur.type()) return false;
  const Value& kv = op.inputs()[1 - at];
  if (c.depends_on_pending(kv)) return false;
  const Tensor* k = c.known(kv);
  if (!k || !is_float(k->dtype()) || k->dims().size() > rank) return false;
  // One value per channel (axis 1), or one value.
  const std::vector<int64_t>& kd = k->dims();
  for (size_t i = 0; i < kd.size(); ++i)
    if (kd[i] != 1 && !(rank - kd.size() + i == 1 && kd[i] == oc)) return false;
  std::vector<double> kk = k->to_f64();
  // An infinite or NaN factor (or a zero divisor) meets each weight, not the sum:
  // 0 * inf inside the sum is not what the graph computes.
  for (double f : kk)
    if (!std::isfinite(f) || (t == "Div" && f == 0)) return false;
  const size_t per = w.size() / static_cast<size_t>(oc);
  for (int64_t o = 0; o < oc; ++o) {
    const double f = kk[kk.size() == 1 ? 0 : static_cast<size_t>(o)];
    if (mul) {
      const double m = t == "Mul" ? f : 1.0 / f;
      for (size_t i = 0; i < per; ++i) w[o * per + i] *= m;
      b[o] *= m;
    } else {
      b[o] += t == "Add" ? f : -f;
    }
  }
  return true;
}

}  // namespace

Value fold_channel_affines(Compiler& c, Value cur, size_t rank, std::vector<double>& w, std::vector<double>& b,
                           int64_t oc, std::vector<const Node*>& folded) {
  if (!c.opts().fuse || cur.type().dtype != DType::Float32) return cur;
  while (const Node* m = c.sole_consumer(cur)) {
    if (c.lowered(*m) || c.is_pending(*m) || !fold_channel_affine(c, *m, cur, rank, w, b, oc)) break;
    folded.push_back(m);
    cur = m->output(0);
  }
  return cur;
}

namespace {

// The instruction set of a primitive's implementation ("brgconv:avx512_core" ->
// "avx512_core"): two kernels of one ISA run at about one speed.
std::string impl_isa(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  const auto colon = impl.rfind(':');
  return colon == std::string::npos ? impl : impl.substr(colon + 1);
}

// oneDNN's brgemm convolution (brgconv, channels last) against its direct kernel
// of the same instruction set in channel blocks, for a window wider than 1x1: on
// this AMD EPYC (AVX-512, one thread) brgconv ran 1.10-1.35x faster (Inception's
// 3x1 of 384 channels on 8 x 8: 0.22 ms, the blocked kernel 0.30; 448 -> 384 3x3 on
// 8 x 8: 0.75 against 0.95; 192 -> 320 3x3 stride 2 on 17 x 17: 0.29 against 0.35;
// 64 -> 128 3x3 stride 2 on 32 x 32: 0.15 against 0.16), where the two 1x1 kernels
// ran at one speed. Reading a blocked input as it is, or writing blocked channel
// parts, saves a reorder or copy of about 0.7 ns per element: worth more than the
// faster kernel only under about 512 multiply-adds per element moved.
constexpr double kBrgconvMacsPerMoved = 512;

// oneDNN's brgemm convolution with a window wider than 1x1 (not its 1x1 one).
bool brgconv(const dnnl::primitive_desc_base& pd) { return std::string(pd.impl_info_str()).rfind("brgconv:", 0) == 0; }

// True where brgconv would stream its weights once per image: a batch of images of
// under 32 output pixels each, with 2 MB of weights or more (past the L2 cache).
// ResNet-50's last stage at 128 x 128, batch 2 (512 -> 512 3x3 on 4 x 4, 9.4 MB of
// weights): brgconv 1.20 ms, the direct kernel on the same channels-last tensors
// 0.74 (ONNX Runtime 0.74); batch 4: 2.44 against 1.45; batch 1 or 7 x 7 images:
// brgconv as fast or faster; 256 channels on 4 x 4 (2.4 MB): the same speed.
bool brgconv_streams_weights(const std::vector<int64_t>& od, double weight_elements) {
  int64_t pixels = 1;
  for (size_t i = 2; i < od.size(); ++i) pixels *= od[i];
  return od[0] > 1 && pixels < 32 && weight_elements * sizeof(float) >= 2.0 * 1024 * 1024;
}

// True if `alt` (a blocked layout's kernel) runs about as fast as `chosen` (oneDNN's
// own pick for `any`) for a convolution of `macs` multiply-adds, where taking `alt`
// saves moving `moved` elements.
bool as_fast(const dnnl::primitive_desc_base& alt, const dnnl::primitive_desc_base& chosen, double macs,
             double moved) {
  if (impl_isa(alt) != impl_isa(chosen)) return false;
  return !(brgconv(chosen) && !brgconv(alt) && macs >= kBrgconvMacsPerMoved * moved);
}

// True for a layout with one inner block, on the channels (nChw16c, nChw8c).
bool channel_blocked(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  return d.ndims >= 3 && d.format_kind == dnnl_blocked && d.format_desc.blocking.inner_nblks == 1 &&
         d.format_desc.blocking.inner_idxs[0] == 1;
}

// The layout of `md`'s channel blocks (nChw16c, nCw8c...) for dims `dims`, if it has one.
std::optional<md_t> same_blocks(const md_t& md, const std::vector<int64_t>& dims) {
  if (!channel_blocked(md)) return std::nullopt;
  const int64_t block = md.data.format_desc.blocking.inner_blks[0];
  if (block != 16 && block != 8) return std::nullopt;
  const bool b16 = block == 16;
  switch (dims.size()) {
    case 3: return md_t(to_dims(dims), dt::f32, b16 ? tag::nCw16c : tag::nCw8c);
    case 4: return md_t(to_dims(dims), dt::f32, b16 ? tag::nChw16c : tag::nChw8c);
    case 5: return md_t(to_dims(dims), dt::f32, b16 ? tag::nCdhw16c : tag::nCdhw8c);
    default: return std::nullopt;
  }
}

// The same activation on every part of a Split of a convolution's output (merged
// convolutions whose branches each applied it: Inception's, NasNet-A's) is applied
// once, as a post-op: act(x) cut into parts is the parts of act(x). The Split's parts
// are then the activations' values; nothing else reads them.
struct SplitActivation {
  const Node* split = nullptr;
  std::vector<const Node*> acts;  // one per part of the Split
};

// Finds such a Split after `cur` (the convolution's value, of dims `od`) when nothing
// else is fused yet, and adds the activation to `fusion`.
SplitActivation split_activation(Compiler& c, const Value& cur, const std::vector<int64_t>& od, Fusion& fusion) {
  SplitActivation found;
  if (!c.opts().fuse || !fusion.ops.empty()) return found;
  const Node* s = c.sole_consumer(cur);
  if (!s || s->op_type() != "Split" || s->inputs()[0] != cur || c.lowered(*s) || c.is_pending(*s)) return found;
  std::optional<EltwiseSpec> common;
  std::vector<const Node*> acts;
  for (uint32_t k = 0; k < s->num_outputs(); ++k) {
    const Value part = s->output(k);
    const Node* a = c.sole_consumer(part);
    std::optional<EltwiseSpec> e;
    const bool same = a && !c.lowered(*a) && !c.is_pending(*a) && a->num_outputs() == 1 &&
                      a->output_types()[0].dtype == DType::Float32 && a->inputs()[0] == part &&
                      (e = eltwise_of(c, *a, part, od.size())).has_value() &&
                      (!common || (common->alg == e->alg && common->alpha == e->alpha && common->beta == e->beta));
    if (!same) return found;
    common = e;
    acts.push_back(a);
  }
  if (!common) return found;
  PostOp p;
  p.eltwise = common;
  p.nodes = acts;
  p.out = cur;
  fusion.ops.push_back(p);
  fusion.nodes.insert(fusion.nodes.end(), acts.begin(), acts.end());
  found.split = s;
  found.acts = std::move(acts);
  return found;
}

// After the convolution is lowered: each activation's value is its part of the Split.
void bind_split_activation(Compiler& c, const SplitActivation& sa) {
  if (sa.split)
    for (uint32_t k = 0; k < sa.split->num_outputs(); ++k) c.bind(sa.acts[k]->output(0), c.id(sa.split->output(k)));
}

// A 1x1 convolution of a channel concatenation that was never made (see
// lower_concat): one convolution per part with that part's input channels of
// the weights, the first with the bias, the others adding into its output (sum
// post-op), the last with the fused activations.
bool lower_conv_of_parts(Compiler& c, const Node& n, const std::vector<Value>& parts, const std::vector<double>& w,
                         bool has_bias, const std::vector<double>& bias, const std::vector<int64_t>& od,
                         const Fusion& fusion, const SplitActivation& split) {
  const int64_t oc = od[1];
  int64_t total = 0;
  for (const Value& p : parts) total += c.dims(p)[1];
  int dst = -1;
  md_t dst_md;
  int64_t from = 0;
  // Channel blocks for the output where most parts are in such blocks.
  std::optional<md_t> blocked_dst;
  size_t in_blocks = 0;
  for (const Value& p : parts)
    if (const md_t& m = c.val(c.id(p)).md; channel_blocked(m)) {
      if (!blocked_dst) blocked_dst = same_blocks(m, od);
      ++in_blocks;
    }
  if (2 * in_blocks <= parts.size()) blocked_dst.reset();
  for (size_t k = 0; k < parts.size(); ++k) {
    const bool first = k == 0, last = k + 1 == parts.size();
    const std::vector<int64_t>& pd_dims = c.dims(parts[k]);
    const int64_t ck = pd_dims[1];
    std::vector<double> wk(static_cast<size_t>(oc * ck));
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t i = 0; i < ck; ++i) wk[o * ck + i] = w[o * total + from + i];
    from += ck;
    dnnl::post_ops po;
    std::string post;
    if (!first) {
      po.append_sum(1.f);
      post += " +sum";
    }
    if (last)
      for (const PostOp& p : fusion.ops) {
        po.append_eltwise(1.f, p.eltwise->alg, p.eltwise->alpha, p.eltwise->beta);
        post += " +" + p.eltwise->text();
      }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    md_t wei_any(dims_t{oc, ck, 1, 1}, dt::f32, tag::any);
    md_t bias_md(dims_t{oc}, dt::f32, tag::a);
    auto make_pd = [&](const md_t& src, const md_t& dst) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        wei_any, first && has_bias ? bias_md : md_t(), dst, dims_t{1, 1},
                                        dims_t{0, 0}, dims_t{0, 0}, dims_t{0, 0});
      return dnnl::convolution_forward::primitive_desc(d, attr, c.engine());
    };
    auto pd = make_pd(md_t(to_dims(pd_dims), dt::f32, tag::any), first ? md_t(to_dims(od), dt::f32, tag::any) : dst_md);
    // A part in channel blocks is read as it is where the output can be in the same
    // blocks (chosen so where most parts are) under a kernel of the same instruction
    // set: NasNet-A's cells end in a concatenation of blocked and channel-last
    // values, and every blocked one was reordered to channels last for this.
    const md_t& part_md = c.val(c.id(parts[k])).md;
    const std::optional<md_t> dst_blocks = first ? blocked_dst : channel_blocked(dst_md) ? std::optional(dst_md) : std::nullopt;
    if (channel_blocked(part_md) && dst_blocks && !is_reference(pd))
      try {
        auto as_is = make_pd(part_md, *dst_blocks);
        if (!is_reference(as_is) && impl_isa(as_is) == impl_isa(pd)) pd = as_is;
      } catch (const dnnl::error&) {
      }
    if (first) {
      dst_md = pd.dst_desc();
      dst = c.new_value(DType::Float32, od, dst_md, n.name());
    }
    int out = first ? dst : c.alias(dst, od, dst_md, n.name() + ".part" + std::to_string(k));
    c.val(out).accumulated = !first;
    Tensor wkt = Tensor::from_f64(DType::Float32, {oc, ck, 1, 1}, wk);
    int wid = c.as_layout(c.constant_value(wkt, n.name() + ".weight" + std::to_string(k)), pd.weights_desc());
    std::vector<std::pair<int, int>> args = {
        {DNNL_ARG_SRC, c.as_layout(c.id(parts[k]), pd.src_desc())}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, out}};
    if (first && has_bias) {
      Tensor bt = Tensor::from_f64(DType::Float32, {oc}, bias);
      args.push_back({DNNL_ARG_BIAS, c.constant_value(bt, n.name() + ".bias")});
    }
    StepInfo info;
    info.kind = "conv";
    info.label = n.name() + " (part " + std::to_string(k + 1) + "/" + std::to_string(parts.size()) + ")";
    info.ops = last ? fusion_ops("Conv", {}, fusion) : std::vector<std::string>{"Conv"};
    if (first) info.ops.insert(info.ops.begin(), "Concat");
    if (last) info.nodes = fusion_nodes(n, fusion);
    info.signature = "conv src " + describe_md(pd.src_desc()) + " wei " + describe_md(pd.weights_desc()) + " dst " +
                     describe_md(pd.dst_desc()) + " s[1,1] d[0,0] pl[0,0] pr[0,0] g1" +
                     (first && has_bias ? " bias" : "") + post + " impl " + pd.impl_info_str();
    info.flops = 2.0 * static_cast<double>(num_elements(od)) * static_cast<double>(ck);
    c.add_primitive(pd, args, info);
    dst = out;
  }
  finish_fusion(c, fusion, dst);
  bind_split_activation(c, split);
  return true;
}

// The fewest groups f to merge so that a group's input and output channels are
// whole vector blocks (8 floats), or 1 when there is none up to 8 (depthwise
// convolutions have their own fast kernel and are left alone).
int64_t group_merge(int64_t in_per_group, int64_t out_per_group, int64_t groups) {
  if (in_per_group == 1 || (in_per_group % 8 == 0 && out_per_group % 8 == 0)) return 1;
  for (int64_t f = 2; f <= 8; ++f)
    if (groups % f == 0 && (in_per_group * f) % 8 == 0 && (out_per_group * f) % 8 == 0) return f;
  return 1;
}

// The merges to try, fewest groups merged first, where oneDNN has only its gemm
// kernel for `groups` groups: group_merge's, or for groups of whole vector blocks
// 2 and 4 of them (none for depthwise convolutions).
std::vector<int64_t> merge_factors(int64_t in_per_group, int64_t out_per_group, int64_t groups) {
  if (const int64_t f = group_merge(in_per_group, out_per_group, groups); f > 1) return {f};
  std::vector<int64_t> fs;
  if (in_per_group > 1)
    for (const int64_t f : {2, 4})
      if (groups % f == 0) fs.push_back(f);
  return fs;
}

// ONNX convolution weights [oc, in_per_group, k...] of `groups` groups as those of
// groups / f groups: output channel o keeps its weights at its old group's place
// among the f merged groups' inputs, zeros elsewhere. `shape` is updated.
std::vector<double> merge_groups(const std::vector<double>& w, std::vector<int64_t>& shape, int64_t out_per_group,
                                 int64_t f) {
  const int64_t oc = shape[0], in_g = shape[1];
  int64_t window = 1;
  for (size_t i = 2; i < shape.size(); ++i) window *= shape[i];
  std::vector<double> out(static_cast<size_t>(oc * in_g * f * window), 0.0);
  for (int64_t o = 0; o < oc; ++o) {
    const int64_t slot = (o / out_per_group) % f;  // its group's place within the merged group
    for (int64_t i = 0; i < in_g; ++i)
      for (int64_t k = 0; k < window; ++k)
        out[static_cast<size_t>((o * in_g * f + slot * in_g + i) * window + k)] =
            w[static_cast<size_t>((o * in_g + i) * window + k)];
  }
  shape[1] = in_g * f;
  return out;
}


// True if `v` (dims `dims`, batch 1) is read by a Split or a Slice along the channels and
// every such cut lies on a multiple of `block` channels (or at the end): in a
// layout of channel blocks of that size each part is then a view as it is
// (lower_views.cpp), where in a channel-last layout every convolution reading a
// part first copies it out (oneDNN's convolutions take only dense tensors).
// Likewise if `v` is a part of a channel Concat that starts on a block and ends
// on one (or at the Concat's end): in channel blocks the convolution writes its
// part in place (lower_concat), in a channel-last layout the part is copied
// (DenseNet's blocks: every layer's output is copied once per later layer).
// A pool keeps the channels and their layout: its output's cuts count as v's
// (DenseNet's stem pool is the first part of every Concat of its first block).
bool cut_on_blocks(Compiler& c, const Value& v, const std::vector<int64_t>& dims, int64_t block) {
  const auto rank = static_cast<int64_t>(dims.size());
  if (rank < 3 || dims[0] != 1) return false;  // a channel part of a batch is no dense run
  bool any = false;
  for (const auto& [user, k] : c.consumers(v)) {
    if (user->kind() != NodeKind::Op) continue;
    if ((user->op_type() == "MaxPool" || user->op_type() == "AveragePool") && k == 0 && user->num_outputs() == 1) {
      any = cut_on_blocks(c, user->output(0), dims, block) || any;
      continue;
    }
    std::vector<int64_t> cuts;
    int64_t extent = dims[1];  // the channels the cuts fall in
    if (user->op_type() == "Concat") {
      const int64_t axis = user->attrs().get_int("axis", 0);
      if ((axis < 0 ? axis + rank : axis) != 1) continue;
      int64_t at = 0, total = 0;
      for (size_t i = 0; i < user->inputs().size(); ++i) {
        const Shape& sh = user->inputs()[i].type().shape;
        if (static_cast<int64_t>(sh.size()) != rank || !sh[1].is_static()) return false;
        if (i < k) at += sh[1].value;
        total += sh[1].value;
      }
      cuts = {at, at + dims[1]};
      extent = total;
    } else if (k != 0) {
      continue;
    } else if (user->op_type() == "Split") {
      int64_t axis = user->attrs().get_int("axis", 0);
      if ((axis < 0 ? axis + rank : axis) != 1) continue;
      int64_t at = 0;
      for (const TensorType& t : user->output_types()) {
        if (static_cast<int64_t>(t.shape.size()) != rank || !t.shape[1].is_static()) return false;
        cuts.push_back(at += t.shape[1].value);
      }
    } else if (user->op_type() == "Slice") {
      const auto& in = user->inputs();
      auto ints = [&](size_t i) -> std::vector<int64_t> {
        const Tensor* t = i < in.size() && in[i].present() ? c.peek_known(in[i]) : nullptr;
        return t ? t->to_i64() : std::vector<int64_t>{};
      };
      const std::vector<int64_t> starts = ints(1), ends = ints(2), axes = ints(3), steps = ints(4);
      if (starts.size() != 1 || ends.size() != 1) return false;
      const int64_t axis = axes.empty() ? 0 : axes.size() == 1 ? (axes[0] < 0 ? axes[0] + rank : axes[0]) : -1;
      if (axis != 1) continue;
      const ops::AxisSlice s = ops::slice_axis(starts[0], ends[0], steps.empty() ? 1 : steps[0], dims[1]);
      if (s.step != 1) return false;
      cuts = {s.start, s.start + s.count};
    } else {
      continue;
    }
    for (int64_t cut : cuts)
      if (cut % block != 0 && cut != extent) return false;
    any = true;
  }
  return any;
}
// A SiLU or sigmoid that ends a large convolution's post-ops, taken out of them to
// run as a step of isomer's own right after it, in place on its output (in the
// convolution's layout, so nothing else changes): oneDNN's jit kernels apply these
// one vector at a time, waiting on each exponential, where the pointwise kernel
// keeps several in flight. EfficientNet's 16 -> 96 1x1 expansion on 112 x 112:
// 1.10 ms with the SiLU as a post-op, 0.40 + 0.40 ms as two steps (the convolution
// alone 0.40). From 32K elements up: EfficientNet-B0 took 2% less CPU time than with
// 128K and above only, and as much as with 8K (one core, CPU time of whole runs).
// Returns the gate's activation, or nothing.
std::optional<kernels::PwOp> take_gate(Fusion& f, int64_t out_elements) {
  constexpr int64_t kMinElements = 32 * 1024;
  if (f.ops.empty() || out_elements < kMinElements || !f.ops.back().eltwise) return std::nullopt;
  const EltwiseSpec& e = *f.ops.back().eltwise;
  std::optional<kernels::PwOp> op;
  if (e.alg == dnnl::algorithm::eltwise_swish && e.alpha == 1.0f) op = kernels::PwOp::Silu;
  if (e.alg == dnnl::algorithm::eltwise_logistic) op = kernels::PwOp::Sigmoid;
  if (!op) return std::nullopt;
  for (const Node* n : f.ops.back().nodes) f.nodes.erase(std::find(f.nodes.begin(), f.nodes.end(), n));
  f.ops.pop_back();
  f.last = f.ops.empty() ? f.first : f.ops.back().out;
  return op;
}

// `gate` applied in place to every element of value `id`'s buffer (its layout's
// padding too, where sigmoid(0) = 0.5 would be read as a channel that is not
// there: callers pass Sigmoid only for a layout without padding).
void add_gate_step(Compiler& c, int id, kernels::PwOp gate, StepInfo info) {
  const int64_t n = static_cast<int64_t>(c.val(id).bytes / sizeof(float));
  auto prog = std::make_shared<kernels::PwProgram>();
  prog->num_inputs = prog->num_regs = 1;
  prog->results = {prog->emit(gate, 0)};
  info.kind = "pointwise";
  info.signature = "pointwise f32 in place " + prog->text() + " n" + std::to_string(n);
  info.flops = static_cast<double>(n);
  add_native_step(c, info, {id}, {id}, [prog, n](const std::vector<char*>& p) {
    const kernels::StridedRef io[] = {{p[0], DType::Float32, {1}, 0}};
    kernels::run_pointwise(*prog, io, io, std::span<const int64_t>(&n, 1));
  });
}

}  // namespace

namespace {

// The convolution `n`, reading `pad`'s input with its padding where `pad` is set.
bool lower_conv_reading(Compiler& c, const Node& n, const FoldedPad* pad) {
  if (!all_float32(n)) return false;
  const Tensor* wt = c.known(n.inputs()[1]);
  if (!wt) return false;  // weights computed at run time: the reference kernel handles it
  const Value& input = pad ? pad->src : n.inputs()[0];
  const std::vector<Value>* parts = pad ? nullptr : c.deferred_concat(input);
  std::vector<int64_t> xd;
  if (parts) {
    xd = c.dims((*parts)[0]);
    xd[1] = 0;
    for (const Value& p : *parts) xd[1] += c.dims(p)[1];
  } else {
    xd = c.dims(input);
  }
  const std::vector<int64_t>& wd = wt->dims();
  size_t sp = xd.size() - 2;
  if (sp < 1 || sp > 3) return false;
  int64_t groups = n.attrs().get_int("group", 1);
  int64_t oc = wd[0];
  ops::Window win = ops::read_window(n.attrs(), std::vector<int64_t>(wd.begin() + 2, wd.end()));
  std::vector<ops::WindowAxis> axes =
      plan_padded_window(win, std::vector<int64_t>(xd.begin() + 2, xd.end()), pad ? pad->extra : std::vector<int64_t>{});
  // A grouped 1-D convolution (a conformer's depthwise one) runs as a 2-D one of
  // unit height: oneDNN 2.6 has only its gemm kernel for the 1-D form (2.7 ms for
  // 64 channels of 399 with a kernel of 7, ONNX Runtime 0.05 ms), its depthwise
  // kernels for the 2-D one. Graph values stay 1-D; the primitive sees 4-D views.
  const bool unit_height = sp == 1 && groups > 1 && !parts && c.opts().blocked_layouts;
  std::vector<int64_t> graph_od;  // the 1-D output's dims, where unit_height
  std::vector<int64_t> wd4 = wd;
  if (unit_height) {
    xd.insert(xd.begin() + 2, 1);
    wd4.insert(wd4.begin() + 2, 1);
    axes.insert(axes.begin(), ops::WindowAxis{1, 1, 1, 1, 1, 0});
    sp = 2;
  }

  std::vector<double> w = wt->to_f64();
  std::vector<double> bias(static_cast<size_t>(oc), 0.0);
  bool has_bias = n.inputs().size() > 2 && n.inputs()[2].present();
  if (has_bias) {
    const Tensor* bt = c.known(n.inputs()[2]);
    if (!bt) return false;
    bias = bt->to_f64();
  }
  // BatchNormalization right after the convolution folds into it.
  Value cur = n.output(0);
  std::vector<const Node*> folded;
  if (c.opts().fuse)
    if (const Node* bn = c.sole_consumer(cur); bn && bn->inputs()[0] == cur && fold_batchnorm(c, *bn, w, bias, oc)) {
      folded.push_back(bn);
      cur = bn->output(0);
      has_bias = true;
    }
  // Then products and sums by one constant per channel.
  const size_t before_affine = folded.size();
  cur = fold_channel_affines(c, cur, cur.type().rank(), w, bias, oc, folded);
  has_bias = has_bias || folded.size() > before_affine;

  const ConvGeometry geometry = conv_geometry(xd[0], oc, axes);
  const std::vector<int64_t>& od = geometry.out;
  const dims_t &strides = geometry.strides, &dil = geometry.dilations, &pl = geometry.pad_begin,
               &pr = geometry.pad_end;
  if (unit_height) graph_od = {od[0], od[1], od[3]};
  Fusion fusion = plan_fusion(c, cur, unit_height ? graph_od : od, /*allow_add=*/parts == nullptr && !unit_height,
                              /*full_binary=*/false);
  if (unit_height && fusion.has_binary() && !fusion.drop_binary()) return false;
  fusion.nodes.insert(fusion.nodes.begin(), folded.begin(), folded.end());
  // Before the parts: a merged convolution of a deferred concatenation (NasNet-A's
  // summed branches merged with their neighbours) keeps its branches' activation too.
  // A 1-D convolution run as a 2-D one of height 1 has no Split of its own dims.
  const SplitActivation split = unit_height ? SplitActivation{} : split_activation(c, cur, od, fusion);
  if (parts) return lower_conv_of_parts(c, n, *parts, w, has_bias, bias, od, fusion, split);
  int x = c.id(input);
  if (unit_height) x = c.alias(c.as_plain(x), xd, plain_md(xd, dt::f32), c.val(x).name);
  const double macs = static_cast<double>(num_elements(od)) * static_cast<double>(num_elements(wd) / oc);
  // A thread joins from 64K multiply-adds (kernels::team_for_work): a smaller
  // convolution (squeeze-excitation's 1x1 ones on a 1x1 image, a few hundred to
  // some 80K) spent longer waking and waiting for the second thread than computing.
  const Compiler::TeamScope team(c, kernels::team_for_work(c.threads(), macs / (64.0 * 1024)));
  std::vector<int64_t> wshape = wd4;
  dims_t wdims;
  md_t wei_any;
  auto set_groups = [&](int64_t g) {
    groups = g;
    wdims = to_dims(wshape);
    if (groups > 1) {
      wdims = {groups, oc / groups};
      for (size_t i = 1; i < wshape.size(); ++i) wdims.push_back(wshape[i]);
    }
    wei_any = md_t(wdims, dt::f32, tag::any);
  };
  set_groups(groups);
  bool blocked = c.opts().blocked_layouts;
  md_t src_any(to_dims(xd), dt::f32, blocked ? tag::any : (sp == 1 ? tag::ncw : sp == 2 ? tag::nchw : tag::ncdhw));
  md_t dst_any(to_dims(od), dt::f32, blocked ? tag::any : (sp == 1 ? tag::ncw : sp == 2 ? tag::nchw : tag::ncdhw));
  md_t bias_md(dims_t{oc}, dt::f32, tag::a);
  bool avoid_brgconv = false;  // see brgconv_streams_weights
  auto make_pd = [&](const md_t& dst, const dnnl::primitive_attr& attr) {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      src_any, wei_any, has_bias ? bias_md : md_t(), dst, strides, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc first(d, attr, c.engine());
    if (avoid_brgconv && brgconv(first))
      for (auto next = first; next.next_impl();)
        if (!brgconv(next)) {
          if (!is_reference(next) && impl_isa(next) == impl_isa(first)) return next;
          break;
        }
    return first;
  };
  // First without a residual add, to learn the layout the convolution wants for
  // its output; binary post-ops oneDNN has only its reference kernel for are left
  // to their own steps.
  auto pd = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
  if (blocked && groups > 1 && std::string(pd.impl_info_str()).find("gemm") != std::string::npos)
    for (const int64_t f : merge_factors(wshape[1], oc / groups, groups)) {
      // Groups narrower than the vector block (ResNeXt's first stage: 32 groups of
      // 4 channels) get only oneDNN's gemm kernel, several times slower than its
      // blocked ones; so do groups of whole blocks under a wide kernel (data2vec's
      // positional convolution: 4 groups of 16 channels, width 19: 0.17 ms, ONNX
      // Runtime 0.08). f groups merged into one, with zero weights between them
      // (block-diagonal), run on a blocked kernel: f times the arithmetic, less time.
      const std::vector<double> narrow = w;
      const std::vector<int64_t> narrow_shape = wshape;
      const int64_t narrow_groups = groups;
      w = merge_groups(w, wshape, oc / groups, f);
      set_groups(groups / f);
      auto wide = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
      const std::string impl = wide.impl_info_str();
      if (impl.find("gemm") == std::string::npos && impl.find("ref") == std::string::npos) {
        pd = wide;
        break;
      }
      w = narrow;
      wshape = narrow_shape;
      set_groups(narrow_groups);
    }
  // The direct kernel on brgconv's channels-last tensors where brgconv would read
  // its weights once per image.
  if (blocked && groups == 1 && brgconv(pd) && brgconv_streams_weights(od, static_cast<double>(w.size()))) {
    const md_t any_src = src_any, any_dst = dst_any;
    src_any = pd.src_desc();
    dst_any = pd.dst_desc();
    avoid_brgconv = true;
    if (auto direct = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false)); !brgconv(direct)) {
      pd = direct;
    } else {
      avoid_brgconv = false;
      src_any = any_src;
      dst_any = any_dst;
    }
  }
  if (blocked && !is_reference(pd)) {
    // An input in a channel-blocked layout (a part of a convolution's output,
    // kept blocked for its Split) is read as it is where a kernel of the same
    // instruction set takes it: a reorder would cost more than the layout saves.
    const md_t& xm = c.val(x).md;
    if (channel_blocked(xm) && !(xm == pd.src_desc())) {
      const md_t any = src_any;
      src_any = xm;
      try {
        auto as_is = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
        // oneDNN's depthwise kernel takes a blocked input only with its output's
        // layout named (with `any`, its reference kernel): NasNet-A's separable
        // convolutions reordered every blocked part they read to channels last.
        std::optional<md_t> named;
        if (is_reference(as_is))
          if (const std::optional<md_t> same = same_blocks(xm, od))
            try {
              auto with = make_pd(*same, probe_attr(c, fusion, od.size(), 0, false));
              if (!is_reference(with)) as_is = with, named = same;
            } catch (const dnnl::error&) {
            }
        if (!is_reference(as_is) && as_fast(as_is, pd, macs, static_cast<double>(num_elements(xd)))) {
          pd = as_is;
          if (named) dst_any = *named;
        } else {
          src_any = any;
        }
      } catch (const dnnl::error&) {
        src_any = any;
      }
    }
    // An output the graph cuts into channel parts on block boundaries (merged
    // convolutions: Inception's parallel branches as one) is written in channel
    // blocks, so that every part is a view with no copy.
    if (!channel_blocked(pd.dst_desc()))
      for (const int64_t block : {16, 8}) {
        if (sp != 2 || unit_height || !cut_on_blocks(c, fusion.last, od, block)) continue;
        const md_t want(to_dims(od), dt::f32, block == 16 ? tag::nChw16c : tag::nChw8c);
        try {
          auto cut = make_pd(want, probe_attr(c, fusion, od.size(), 0, false));
          if (!is_reference(cut) && as_fast(cut, pd, macs, static_cast<double>(num_elements(od)))) {
            pd = cut;
            dst_any = want;
            break;
          }
        } catch (const dnnl::error&) {
        }
      }
  }
  if (is_reference(pd) && fusion.drop_binary()) pd = make_pd(dst_any, probe_attr(c, fusion, od.size(), 0, false));
  // An operand broadcast over some of the output's dims (a diffusion UNet's time
  // embedding, [N, C, 1, 1], added to its convolution's output) keeps oneDNN's
  // direct kernels away: it takes im2col and GEMM instead, 8 times slower than the
  // kernel it takes without the operand (2x64x16x16, 3x3: 1.15 ms against 0.14).
  // The binary then runs as its own step after the convolution. (A 1x1 kernel's
  // GEMM needs no im2col: it keeps its operand.)
  const bool pointwise_kernel = std::all_of(wshape.begin() + 2, wshape.end(), [](int64_t k) { return k == 1; });
  if (blocked && !pointwise_kernel && fusion.has_binary() &&
      std::string(pd.impl_info_str()).find("gemm") != std::string::npos) {
    Fusion direct = fusion;
    direct.drop_binary();
    auto without = make_pd(dst_any, probe_attr(c, direct, od.size(), 0, false));
    const std::string impl = without.impl_info_str();
    if (!is_reference(without) && impl.find("gemm") == std::string::npos) {
      fusion = direct;
      pd = without;
    }
  }
  // A gate ending the post-ops runs after the convolution, on its output in the
  // layout chosen with the gate among the post-ops (taking it out changes none).
  Fusion prim_fusion = fusion;
  std::optional<kernels::PwOp> gate;
  if (!is_reference(pd))
    if (gate = take_gate(prim_fusion, num_elements(od)); gate) {
      try {
        auto ungated = make_pd(dst_any, probe_attr(c, prim_fusion, od.size(), 0, false));
        const bool padded = ungated.dst_desc().get_size() != static_cast<size_t>(num_elements(od)) * sizeof(float);
        if (!(ungated.dst_desc() == pd.dst_desc()) || is_reference(ungated) || (padded && *gate != kernels::PwOp::Silu))
          gate.reset();
        else
          pd = ungated;
      } catch (const dnnl::error&) {
        gate.reset();
      }
      if (!gate) prim_fusion = fusion;
    }
  // A depthwise convolution's gate in its own kernel's epilogue (depthwise_step.h).
  if (gate && sp == 2 && !unit_height && groups == oc && xd[1] == oc && wshape[1] == 1 && prim_fusion.ops.empty()) {
    DepthwiseConv d{xd, od, {wshape[2], wshape[3]}, strides, dil, pl, w, bias, *gate};
    for (int64_t& k : d.dilations) ++k;  // oneDNN counts the gaps
    if (native_depthwise_wins(d, pd.src_desc(), pd.dst_desc())) {
      StepInfo info;
      info.label = n.name();
      info.ops = fusion_ops("Conv", {}, fusion);
      info.nodes = fusion_nodes(n, fusion);
      info.flops = 2 * macs;
      if (pad) {
        info.ops.insert(info.ops.begin() + 1, "Pad");
        info.nodes.insert(info.nodes.begin() + 1, node_key(*pad->pad));
      }
      finish_fusion(c, fusion, add_native_depthwise(c, d, c.as_layout(x, pd.src_desc()), pd.dst_desc(), info, n.name()));
      bind_split_activation(c, split);
      return true;
    }
  }
  md_t dst_md = pd.dst_desc();
  std::vector<std::pair<int, int>> args;
  std::string post;
  int acc = -1;
  dnnl::primitive_attr attr = fusion_attr(c, prim_fusion, dst_md, acc, post, args);
  if (prim_fusion.has_add() || prim_fusion.has_binary()) pd = make_pd(dst_md, attr);

  Tensor wfold = Tensor::from_f64(DType::Float32, std::vector<int64_t>(wdims.begin(), wdims.end()), w);
  int wid = c.as_layout(c.constant_value(wfold, n.name() + ".weight"), pd.weights_desc());
  int src = c.as_layout(x, pd.src_desc());
  int dst = acc >= 0 ? c.alias(acc, od, pd.dst_desc(), n.name()) : c.new_value(DType::Float32, od, pd.dst_desc(), n.name());
  c.val(dst).accumulated = acc >= 0;
  args.insert(args.begin(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, dst}});
  if (has_bias) {
    Tensor bt = Tensor::from_f64(DType::Float32, {oc}, bias);
    args.push_back({DNNL_ARG_BIAS, c.constant_value(bt, n.name() + ".bias")});
  }
  StepInfo info;
  info.kind = "conv";
  info.label = n.name();
  info.ops = fusion_ops("Conv", {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  std::ostringstream sig;
  sig << "conv src " << describe_md(pd.src_desc()) << " wei " << describe_md(pd.weights_desc()) << " dst "
      << describe_md(pd.dst_desc()) << " s" << to_string(std::vector<int64_t>(strides.begin(), strides.end()))
      << " d" << to_string(std::vector<int64_t>(dil.begin(), dil.end())) << " pl"
      << to_string(std::vector<int64_t>(pl.begin(), pl.end())) << " pr"
      << to_string(std::vector<int64_t>(pr.begin(), pr.end())) << " g" << groups << (has_bias ? " bias" : "")
      << post << " impl " << pd.impl_info_str();
  info.signature = sig.str();
  info.flops = 2 * macs;  // the model's arithmetic, not the merged groups' zeros
  if (gate) {
    info.ops = fusion_ops("Conv", {}, prim_fusion);
    info.nodes = fusion_nodes(n, prim_fusion);
  }
  if (pad) {
    info.ops.insert(info.ops.begin() + 1, "Pad");
    info.nodes.insert(info.nodes.begin() + 1, node_key(*pad->pad));
  }
  c.add_primitive(pd, args, info);
  if (gate) {
    StepInfo g;
    g.label = n.name();
    for (size_t k = prim_fusion.nodes.size(); k < fusion.nodes.size(); ++k) {
      g.ops.push_back(fusion.nodes[k]->op_type());
      g.nodes.push_back(node_key(*fusion.nodes[k]));
    }
    add_gate_step(c, dst, *gate, std::move(g));
  }
  finish_fusion(c, fusion, unit_height ? c.alias(dst, graph_od, pd.dst_desc().reshape(to_dims(graph_od)), n.name()) : dst);
  bind_split_activation(c, split);
  return true;
}

}  // namespace

bool lower_conv(Compiler& c, const Node& n) { return lower_conv_reading(c, n, nullptr); }

bool lower_conv_padded(Compiler& c, const Node& conv, const FoldedPad& pad) {
  return lower_conv_reading(c, conv, &pad);
}

}  // namespace isomer::runtime
