// Lowering of MatMul and Gemm: oneDNN matmul primitives or isomer's packed and
// batched GEMMs (kernels/gemm.h), with a bias, activations, a residual Add and the
// pointwise group after the product fused in.
#include <cmath>
#include <sstream>

#include "ops/nn_common.h"
#include "runtime/contraction.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "runtime/fusion.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// The multiply-adds that pay for one more thread (see emit_contraction).
constexpr double kMatmulTeamMacs = 256.0 * 1024;

// An md for value `id` that matmul can read without a copy: its own when it is a
// plain or strided (unblocked) layout, else a plain reorder of it.
int matmul_operand(Compiler& c, int id) {
  if (c.val(id).md.data.format_desc.blocking.inner_nblks == 0) return id;
  return c.as_plain(id);
}

// `md` (unblocked) seen with `rank` dims: leading 1s added.
md_t with_leading_ones(const md_t& md, size_t rank) {
  const dnnl_memory_desc_t& d = md.data;
  size_t add = rank - static_cast<size_t>(d.ndims);
  if (add == 0) return md;
  dims_t dims(add, 1), strides(add, 1);
  int64_t span = 1;
  for (int i = 0; i < d.ndims; ++i) span = std::max<int64_t>(span, d.dims[i] * d.format_desc.blocking.strides[i]);
  for (size_t i = 0; i < add; ++i) strides[i] = span;
  for (int i = 0; i < d.ndims; ++i) {
    dims.push_back(d.dims[i]);
    strides.push_back(d.format_desc.blocking.strides[i]);
  }
  return md_t(dims, md.data_type(), strides);
}

// `md` (unblocked) with every dim of extent 1 given the stride of the whole span.
// A view gives such a dim the stride a dense layout would (the next dim's extent
// times its stride), which for a permuted view (attention's heads taken from
// [seq, heads x d]) ties with a real dim's stride; oneDNN then reads the layout
// with the unit dim inside (format cabd, not acbd) and its batched matmul falls
// from brgemm to its slower gemm (ViT-S/16's Q K^T: 0.37 ms, brgemm 0.29).
md_t unit_dims_outermost(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0) return md;
  int64_t span = 1;
  bool any = false;
  for (int i = 0; i < d.ndims; ++i) {
    if (d.dims[i] == 1) any = true;
    else span = std::max<int64_t>(span, d.dims[i] * d.format_desc.blocking.strides[i]);
  }
  if (!any) return md;
  dims_t dims(d.dims, d.dims + d.ndims), strides(d.format_desc.blocking.strides, d.format_desc.blocking.strides + d.ndims);
  for (int i = 0; i < d.ndims; ++i)
    if (d.dims[i] == 1) strides[static_cast<size_t>(i)] = span;
  return md_t(dims, md.data_type(), strides);
}

// The bias an Add contributes after a contraction with output dims `out`: a
// constant with one value per output column (last dim), or nothing.
std::optional<Tensor> column_bias(Compiler& c, const Node& add, const Value& from, size_t rank, int64_t n) {
  if (add.op_type() != "Add" || add.inputs().size() != 2) return std::nullopt;
  const Value& other = add.inputs()[0] == from ? add.inputs()[1] : add.inputs()[0];
  if (other == from) return std::nullopt;
  const Tensor* t = c.peek_known(other);
  if (!t || t->dtype() != DType::Float32 || t->numel() != n || (t->rank() > 0 && t->dims().back() != n))
    return std::nullopt;
  if (static_cast<size_t>(t->rank()) > rank) return std::nullopt;
  return *t;
}

}  // namespace

namespace {

// Rows of A when the contraction can run as one 2-D matmul [rows, K] x [K, N]:
// B is a constant weight without batch (batch dims all 1), A is plain row-major
// (so [.., M, K] is a [rows, K] view, no copy) and the bias, if any, is per
// column. oneDNN (2.6) keeps the weights of a 3-D f32 matmul plain, but packs
// them for the 2-D form; 0 when the form does not apply.
// True if a weight's batch dims (all but its last two) are all 1.
bool batchless(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i + 2 < dims.size(); ++i)
    if (dims[i] != 1) return false;
  return true;
}

int64_t flat_rows(Compiler& c, const Contraction& k) {
  size_t rank = k.out.size();
  if (rank <= 2 || !k.b_const || !batchless(k.b_const->dims())) return 0;
  if (k.bias && k.bias->numel() != k.out.back()) return 0;
  dims_t ad = k.a_md.dims();
  if (!(k.a_md == plain_md(std::vector<int64_t>(ad.begin(), ad.end()), dt::f32))) return 0;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < rank; ++i) rows *= k.out[i];
  int64_t a_rows = 1;
  for (size_t i = 0; i + 1 < ad.size(); ++i) a_rows *= ad[i];
  return a_rows == rows ? rows : 0;
}

// A view right after a product with constant weights (an exporter's Reshape from
// the Gemm's [rows, N] back to [batch, seq, N], or the reverse) keeps the
// element order: the product then runs in the 2-D form (flat_rows) and its dst
// is the view's value, so that the nodes after the view (GPT-2's GELU, the
// residual Add) fuse into it as post-ops. Returns the view, k retargeted at it;
// nullptr, k unchanged, where that does not apply.
const Node* adopt_view(Compiler& c, Contraction& k) {
  if (!c.opts().fuse || !k.b_const || c.is_output(k.from)) return nullptr;
  const Node* view = c.sole_consumer(k.from);
  if (!view || c.lowered(*view) || view->inputs().empty() || view->inputs()[0] != k.from || view->num_outputs() != 1)
    return nullptr;
  const std::string& op = view->op_type();
  if (op != "Reshape" && op != "Flatten" && op != "Squeeze" && op != "Unsqueeze") return nullptr;
  const Shape& sh = view->output_types()[0].shape;
  if (!is_static(sh) || view->output_types()[0].dtype != DType::Float32) return nullptr;
  const std::vector<int64_t> vd = static_dims(sh);
  if (vd.size() < 3 || vd.back() != k.out.back() || num_elements(vd) != num_elements(k.out)) return nullptr;
  Contraction t = k;
  t.out = vd;
  t.from = view->output(0);
  if (flat_rows(c, t) == 0) return nullptr;
  k = std::move(t);
  return view;
}

// An inference BatchNormalization over the product's columns (its input [rows, N]:
// the product's output, or a Reshape of it to two dims; LeViT's Linear and
// BatchNorm1d, a tabular MLP's) folds into the weights and bias, as a convolution's
// does (lower_conv.cpp): w' = w f per column, b' = (b - mean) f + beta, f = scale /
// sqrt(var + eps), with a bias Add between them. LeViT-128S ran 23 such
// BatchNormalizations as steps of their own.
// Returns the nodes folded (the view, the BatchNormalization), k retargeted at the
// BatchNormalization's output; none, k unchanged, where that does not apply.
std::vector<const Node*> fold_column_batchnorm(Compiler& c, Contraction& k) {
  if (!c.opts().fuse || !k.b_const || k.scale != 1 || !batchless(k.b_const->dims()) || c.is_output(k.from))
    return {};
  const int64_t n = k.out.back(), kdim = k.b_const->dims()[k.b_const->rank() - 2];
  if (k.bias && k.bias->numel() != n) return {};
  std::vector<const Node*> folded;
  Value cur = k.from;
  const Node* next = c.sole_consumer(cur);
  std::optional<Tensor> bias = k.bias;  // the product's, or an Add's per column before the view
  if (next && !bias && c.takeable(*next))
    if ((bias = column_bias(c, *next, cur, k.out.size(), n))) {
      folded.push_back(next);
      cur = next->output(0);
      next = c.sole_consumer(cur);
    }
  if (next && (next->op_type() == "Reshape" || next->op_type() == "Flatten") && !c.lowered(*next) && !c.is_pending(*next) &&
      next->inputs()[0] == cur && next->num_outputs() == 1 && !c.is_output(next->output(0))) {
    folded.push_back(next);
    cur = next->output(0);
    next = c.sole_consumer(cur);
  }
  if (!next || next->op_type() != "BatchNormalization" || c.lowered(*next) || c.is_pending(*next) || next->inputs()[0] != cur ||
      next->num_outputs() != 1 || next->attrs().get_int("training_mode", 0) != 0)
    return {};
  if (!is_static(cur.type().shape) || cur.type().dtype != DType::Float32) return {};
  const std::vector<int64_t> bn_dims = static_dims(cur.type().shape);  // (not lowered yet: no value)
  if (bn_dims.size() != 2 || bn_dims[1] != n || num_elements(bn_dims) != num_elements(k.out)) return {};
  // A read as [rows, K]: its own layout must be row-major then.
  const dims_t ad = k.a_md.dims();
  if (k.out.size() > 2 && !(k.a_md == plain_md(std::vector<int64_t>(ad.begin(), ad.end()), dt::f32))) return {};
  std::vector<double> p[4];
  for (int i = 0; i < 4; ++i) {
    const Tensor* t = c.peek_known(next->inputs()[static_cast<size_t>(i) + 1]);
    if (!t || t->numel() != n) return {};
    p[i] = t->to_f64();
  }
  const double eps = next->attrs().get_float("epsilon", 1e-5);
  std::vector<double> w = k.b_const->to_f64();
  std::vector<double> b = bias ? bias->to_f64() : std::vector<double>(static_cast<size_t>(n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const double f = p[0][j] / std::sqrt(p[3][j] + eps);
    for (int64_t i = 0; i < kdim; ++i) w[static_cast<size_t>(i * n + j)] *= f;
    b[j] = (b[j] - p[2][j]) * f + p[1][j];
  }
  k.b_const = Tensor::from_f64(DType::Float32, {kdim, n}, w);
  k.bias = Tensor::from_f64(DType::Float32, {n}, b);
  if (k.out.size() > 2) {
    k.a = c.alias(k.a, {bn_dims[0], kdim}, plain_md({bn_dims[0], kdim}, dt::f32), k.node->name() + ".rows");
    k.a_md = c.val(k.a).md;
  }
  k.out = bn_dims;
  k.from = next->output(0);
  folded.push_back(next);
  return folded;
}

bool jit_matmul(Compiler& c, const md_t& a, const md_t& b, const std::vector<int64_t>& out) {
  dnnl::matmul::desc d(a, b, md_t(), plain_md(out, dt::f32));
  return std::string(dnnl::matmul::primitive_desc(d, c.engine()).impl_info_str()).rfind("ref", 0) != 0;
}

// True when A is a view that oneDNN has only its reference matmul for, with these
// weights (a constant read plain, as the probe).
bool a_needs_reference(Compiler& c, const Contraction& k) {
  const dims_t ad = k.a_md.dims();
  if (k.a_md == plain_md(std::vector<int64_t>(ad.begin(), ad.end()), dt::f32)) return false;
  std::vector<int64_t> bd = k.b_const ? k.b_const->dims() : c.val(k.b).dims;
  const std::vector<int64_t>& out = k.prim_out.empty() ? k.out : k.prim_out;
  while (bd.size() < out.size()) bd.insert(bd.begin(), 1);
  try {
    return !jit_matmul(c, k.a_md, k.b_const ? plain_md(bd, dt::f32) : k.b_md, out);
  } catch (const dnnl::error&) {
    return false;
  }
}

bool emit_contraction(Compiler& c, Contraction& k) {
  if (emit_packed_gemm(c, k) || emit_batched_gemm(c, k)) return true;
  // A view neither native GEMM reads and oneDNN has only its reference matmul for
  // (PatchTST's patches: a Gather's output transposed, K at a stride of the channel
  // count, 2.4 ms for a [1,7,11,16] x [16,64] product) is made dense first: one copy,
  // then the packed GEMM (0.01 ms).
  if (a_needs_reference(c, k)) {
    if (!k.prim_out.empty()) return false;  // a split view of A: its dims are not the graph's
    k.a = c.as_plain(k.a);
    k.a_md = unit_dims_outermost(with_leading_ones(c.val(k.a).md, k.out.size()));
    if (emit_packed_gemm(c, k) || emit_batched_gemm(c, k)) return true;
  }
  const Node& n = *k.node;
  std::vector<const Node*> absorbed = fold_column_batchnorm(c, k);
  if (absorbed.empty())
    if (const Node* view = adopt_view(c, k)) absorbed.push_back(view);
  size_t rank = k.out.size();
  Value cur = k.from;
  // (a per-column bias is added after the product's scale, so with one it stays a post-op)
  if (c.opts().fuse && !k.bias && k.scale == 1)
    if (const Node* add = c.sole_consumer(cur); add && c.takeable(*add))
      if (auto b = column_bias(c, *add, cur, rank, k.out.back())) {
        k.bias = b;
        absorbed.push_back(add);
        cur = add->output(0);
      }
  Fusion fusion = plan_fusion(c, cur, k.out, /*allow_add=*/true);
  fusion.nodes.insert(fusion.nodes.begin(), absorbed.begin(), absorbed.end());
  if (k.scale != 1) {
    // The operands' factor, first of the post-ops: dst = scale (A B), then the rest.
    PostOp p;
    p.eltwise = EltwiseSpec{dnnl::algorithm::eltwise_linear, k.scale, 0};
    p.out = k.from;
    fusion.ops.insert(fusion.ops.begin(), p);
    fusion.nodes.insert(fusion.nodes.begin(), k.scaled.begin(), k.scaled.end());
  }
  // A bias that is not one value per column (a Gemm's C of the output's full
  // shape) is added by a binary post-op: oneDNN's matmul has only its reference
  // kernel for such a bias.
  if (k.bias && k.bias->numel() != k.out.back()) {
    PostOp p;
    p.binary = dnnl::algorithm::binary_add;
    p.other_const = k.bias;
    p.out = fusion.first;
    fusion.ops.insert(fusion.ops.begin(), p);
    k.bias.reset();
  }
  fusion.drop_repeated_eltwise();  // the operands' factor, now first, may repeat a later affine map
  // A trailing erf GELU runs as isomer's own pointwise pass over the product (still
  // in cache) where the vector unit has AVX-512: oneDNN's gelu_erf post-op took 2
  // cycles an element on a Zen 4 (0.3 ms of BERT-base's 5.8 ms FFN product), the
  // pass's piecewise erf (kernels/vmath.h) under a third of that.
  if (!fusion.ops.empty() && fusion.ops.back().eltwise &&
      fusion.ops.back().eltwise->alg == dnnl::algorithm::eltwise_gelu_erf &&
      kernels::best_vector_isa() == kernels::VectorIsa::Avx512) {
    for (const Node* m : fusion.ops.back().nodes) {
      auto at = std::find(fusion.nodes.begin(), fusion.nodes.end(), m);
      if (at != fusion.nodes.end()) fusion.nodes.erase(at);
    }
    fusion.ops.pop_back();
    fusion.last = fusion.ops.empty() ? fusion.first : fusion.ops.back().out;
  }
  // A binary post-op reading a run-time operand of the product's full shape
  // (SwiGLU's silu(gate) x up) runs, with the activations before it, as isomer's
  // own pointwise pass after the product where each thread's share of that operand
  // exceeds its L2: oneDNN's brgemm epilogue then reads it tile by tile from
  // farther away, while the weights stream through. Zen 5 (1 MB L2), processor
  // time: LLaMA's 128 x 2816 gate at 1 thread 3.22 + 3.52 ms fused -> 3.22 + 3.23
  // + 0.11 ms, 512 rows 25.1 -> 24.9 ms (at 2 threads 25.9 -> 24.9); at 128 rows on
  // 2 threads (0.7 MB a thread) and at 32 rows the fused epilogue ties or wins.
  // A thread joins from 256K multiply-adds (kernels::team_for_work: 1M while the
  // threads sleep): a transformer's small products (DeiT-tiny's 66x64x64, 270K,
  // 5 us on one thread) took 2.5x as long on two, waiting for the second thread.
  const int64_t kdim = k.a_md.dims().back(), ncols = k.out.back();
  const double macs = static_cast<double>(num_elements(k.out)) * static_cast<double>(kdim);
  const int team_size = kernels::team_for_work(c.threads(), macs / kMatmulTeamMacs);
  if (static_cast<double>(num_elements(k.out)) * sizeof(float) / team_size >
      static_cast<double>(kernels::l2_bytes_per_core()))
    fusion.drop_full_binary(num_elements(k.out), c);
  // The primitive's own view: the N-D shapes, or the 2-D form (see flat_rows).
  const int64_t rows = flat_rows(c, k);
  const bool regrouped = rows || !k.prim_out.empty();
  std::vector<int64_t> pout = rows ? std::vector<int64_t>{rows, ncols} : !k.prim_out.empty() ? k.prim_out : k.out;
  // In the 2-D form (or another grouping of the dims) a binary operand must be
  // per column or of the full shape.
  // (A split batch dim has no such rule for a broadcast operand: its binary ops run as steps.)
  if (!k.prim_out.empty() && fusion.has_binary()) fusion.drop_binary();
  if (regrouped)
    for (const PostOp& p : fusion.ops)
      if (p.binary) {
        std::vector<int64_t> d = p.other_const ? p.other_const->dims() : c.dims(p.other);
        const int64_t m = num_elements(d);
        if (m != 1 && m != ncols && d != k.out) {
          fusion.drop_binary();
          break;
        }
      }
  const size_t prank = pout.size();
  md_t a_md = rows ? plain_md({rows, kdim}, dt::f32) : k.a_md;
  md_t pdst_md = plain_md(pout, dt::f32);
  std::vector<int64_t> wdims;
  md_t wmd;
  if (k.b_const) {
    wdims = k.b_const->dims();
    if (rows) wdims = {wdims[wdims.size() - 2], wdims.back()};
    while (wdims.size() < prank) wdims.insert(wdims.begin(), 1);
    // format_tag::any: the primitive picks the weights' layout (packed), and the
    // constant is reordered into it once, here.
    wmd = md_t(to_dims(wdims), dt::f32, tag::any);
  } else {
    wmd = k.b_md;
  }
  md_t bias_md;
  if (k.bias) {
    std::vector<int64_t> bd(prank, 1);
    bd.back() = ncols;
    bias_md = plain_md(bd, dt::f32);
  }
  const Compiler::TeamScope team(c, team_size);
  dnnl::matmul::desc d(a_md, wmd, bias_md, pdst_md);
  // Binary post-ops oneDNN has only its reference kernel for are left to their
  // own steps (a bias of the full shape cannot be: then the reference kernel runs
  // the node, and says so).
  if (fusion.has_binary() &&
      is_reference(dnnl::matmul::primitive_desc(d, probe_attr(c, fusion, k.out.size(), prank), c.engine()))) {
    if (!fusion.ops.front().nodes.empty() || !fusion.ops.front().binary) fusion.drop_binary();
    else return false;
  }
  md_t dst_md = plain_md(k.out, dt::f32);
  // A product of two run-time operands (attention's P V) whose result goes
  // through a Transpose that keeps the last dim (back from [batch, heads, seq, d]
  // to [batch, seq, heads, d] before a Reshape): written in the layout that makes
  // the Transpose dense, so that it and the Reshape are views, no reorder. oneDNN
  // writes a strided dst at the same speed (ViT-S/16's P V: a little faster).
  int tdst = -1;
  if (!k.b_const && !regrouped && !fusion.has_add() && c.opts().fuse && prank >= 3 && !c.is_output(fusion.last))
    if (const Node* tr = c.sole_consumer(fusion.last); tr && tr->op_type() == "Transpose" && !c.lowered(*tr)) {
      const std::vector<int64_t> perm = tr->attrs().get_ints("perm", {});
      bool moves = false;
      for (size_t i = 0; i < perm.size(); ++i) moves = moves || perm[i] != static_cast<int64_t>(i);
      if (perm.size() == prank && perm.back() == static_cast<int64_t>(prank) - 1 && moves) {
        std::vector<int64_t> td;
        for (int64_t q : perm) td.push_back(k.out[static_cast<size_t>(q)]);
        const std::vector<int64_t> ts = row_major(td);
        std::vector<int64_t> os(prank);
        for (size_t i = 0; i < prank; ++i) os[static_cast<size_t>(perm[i])] = ts[i];
        const md_t tmd = unit_dims_outermost(md_t(to_dims(k.out), dt::f32, to_dims(os)));
        dnnl::matmul::desc td_desc(a_md, wmd, bias_md, tmd);
        if (!is_reference(dnnl::matmul::primitive_desc(td_desc, probe_attr(c, fusion, k.out.size(), prank), c.engine()))) {
          const int buffer = c.new_value(DType::Float32, td, plain_md(td, dt::f32), n.name());
          tdst = c.view(buffer, k.out, os, 0, n.name());
          dst_md = pdst_md = tmd;
          d = dnnl::matmul::desc(a_md, wmd, bias_md, pdst_md);
        }
      }
    }
  std::vector<std::pair<int, int>> args;
  std::string post;
  int acc = -1;
  dnnl::primitive_attr attr = fusion_attr(c, fusion, dst_md, acc, post, args, pout);
  dnnl::matmul::primitive_desc pd(d, attr, c.engine());
  int wid = k.b;
  if (k.b_const) {
    wid = c.as_layout(c.constant_value(k.b_const->reshaped(wdims), n.name() + ".weight"), pd.weights_desc());
  } else if (!(c.val(wid).md == k.b_md)) {
    wid = c.alias(wid, c.val(wid).dims, k.b_md, n.name() + ".b");
    c.val(wid).step_local = true;
  }
  int aid = k.a;
  if (!(c.val(k.a).md == a_md)) {
    aid = c.alias(k.a, rows ? std::vector<int64_t>{rows, kdim} : c.val(k.a).dims, a_md, n.name() + ".a");
    c.val(aid).step_local = true;
  }
  // `dst` holds the result with the graph's dims; `pdst` is the primitive's view of it.
  int dst = acc >= 0    ? c.alias(acc, k.out, dst_md, n.name())
            : tdst >= 0 ? tdst
                        : c.new_value(DType::Float32, k.out, dst_md, n.name());
  c.val(dst).accumulated = acc >= 0;
  int pdst = dst;
  if (tdst >= 0 && !(c.val(tdst).md == pdst_md)) {
    pdst = c.alias(dst, k.out, pdst_md, n.name() + ".t");
    c.val(pdst).step_local = true;
  }
  if (regrouped) {
    pdst = c.alias(dst, pout, pdst_md, n.name() + ".2d");
    c.val(pdst).accumulated = acc >= 0;
    c.val(pdst).step_local = true;
  }
  args.insert(args.begin(), {{DNNL_ARG_SRC, aid}, {DNNL_ARG_WEIGHTS, wid}, {DNNL_ARG_DST, pdst}});
  if (k.bias) {
    dims_t bd = bias_md.dims();
    Tensor bt = k.bias->reshaped(std::vector<int64_t>(bd.begin(), bd.end()));
    args.push_back({DNNL_ARG_BIAS, c.constant_value(bt, n.name() + ".bias")});
  }
  StepInfo info;
  info.kind = "matmul";
  info.label = n.name();
  info.ops = fusion_ops(k.kind, {}, fusion);
  info.nodes = fusion_nodes(n, fusion);
  info.signature = "matmul src " + describe_md(a_md) + " wei " + describe_md(pd.weights_desc()) +
                   (k.b_const ? "c" : "") + " dst " + describe_md(pdst_md) + (k.bias ? " bias " + describe_md(bias_md) : "") +
                   post + " impl " + pd.impl_info_str();
  info.flops = k.flops;
  c.add_primitive(pd, args, info);
  finish_fusion(c, fusion, dst);
  return true;
}

}  // namespace

std::optional<float> matmul_operand_scale(Compiler& c, const Node& mul) {
  if (!c.opts().fuse || mul.kind() != NodeKind::Op || mul.op_type() != "Mul" || mul.inputs().size() != 2 ||
      mul.num_outputs() != 1 || mul.output_types()[0].dtype != DType::Float32)
    return std::nullopt;
  const Node* mm = c.sole_consumer(mul.output(0));
  if (!mm || mm->op_type() != "MatMul" || mm->inputs().size() != 2 || c.lowered(*mm) || c.is_pending(*mm))
    return std::nullopt;
  const Tensor* s = c.peek_known(mul.inputs()[1]);
  const Value& x = s ? mul.inputs()[0] : mul.inputs()[1];
  if (!s) s = c.peek_known(mul.inputs()[0]);
  if (!s || s->numel() != 1 || s->dtype() != DType::Float32 || c.peek_known(x)) return std::nullopt;
  // x * s keeps x's shape (a scalar of higher rank would add dims).
  const TensorType& xt = x.node->output_types()[x.index];
  if (xt.dtype != DType::Float32 || !(xt.shape == mul.output_types()[0].shape)) return std::nullopt;
  // Both of the product's operands are run-time values (a constant weight would
  // rather take the factor itself, which is the optimizer's rewrite to make).
  for (const Value& in : mm->inputs())
    if (!in.present() || c.peek_known(in)) return std::nullopt;
  const float f = static_cast<float>(s->f64_at(0));
  if (!std::isfinite(f)) return std::nullopt;
  return f;
}

namespace {

std::string matmul_impl(Compiler& c, const md_t& a, const md_t& b, const std::vector<int64_t>& out) {
  dnnl::matmul::desc d(a, b, md_t(), plain_md(out, dt::f32));
  return dnnl::matmul::primitive_desc(d, c.engine()).impl_info_str();
}

// True when oneDNN runs the product of run-time values a and b, read where they
// are, on the kernel it picks for dense copies of them.
bool keeps_matmul_kernel(Compiler& c, const Value& a, const Value& b) {
  const int ia = c.id(a), ib = c.id(b);
  const md_t& ma = c.val(ia).md;
  const md_t& mb = c.val(ib).md;
  if (ma.data.format_kind != dnnl_blocked || mb.data.format_kind != dnnl_blocked ||
      ma.data.format_desc.blocking.inner_nblks != 0 || mb.data.format_desc.blocking.inner_nblks != 0)
    return false;
  const std::vector<int64_t>& ad = c.val(ia).dims;
  const std::vector<int64_t>& bd = c.val(ib).dims;
  const size_t rank = std::max(ad.size(), bd.size());
  std::vector<int64_t> out = broadcast_dims(std::vector<int64_t>(ad.begin(), ad.end() - 2),
                                            std::vector<int64_t>(bd.begin(), bd.end() - 2));
  out.push_back(ad[ad.size() - 2]);
  out.push_back(bd.back());
  try {
    const std::string here = matmul_impl(c, unit_dims_outermost(with_leading_ones(ma, rank)),
                                         unit_dims_outermost(with_leading_ones(mb, rank)), out);
    const std::string dense = matmul_impl(c, with_leading_ones(plain_md(ad, dt::f32), rank),
                                          with_leading_ones(plain_md(bd, dt::f32), rank), out);
    return here == dense;
  } catch (const dnnl::error&) {
    return false;
  }
}

using Parts = std::vector<std::pair<int64_t, int64_t>>;  // a dim as strided parts (extent, stride)

int64_t extent(const Parts& p) {
  int64_t e = 1;
  for (const auto& q : p) e *= q.first;
  return e;
}

// Operand v's dims as parts, `rank` of them (leading 1s: no parts): a split
// view's own, else one per dim of extent > 1 of the strided value; *src is the
// value the strides start at. `dense`: its elements first copied dense, once each
// (a repeat stays a stride 0), for oneDNN's kernels that read only dense batches.
std::optional<std::vector<Parts>> operand_parts(Compiler& c, const Value& v, size_t rank, int* src, bool dense) {
  std::vector<Parts> p;
  if (const SplitView* s = c.split_view(v)) {
    *src = s->src;
    p = s->parts;
  } else {
    *src = c.id(v);
    if (!c.strides_of(*src)) *src = c.as_plain(*src);
    const std::vector<int64_t> st = *c.strides_of(*src), d = c.val(*src).dims;
    for (size_t i = 0; i < d.size(); ++i) p.push_back(d[i] == 1 ? Parts{} : Parts{{d[i], st[i]}});
  }
  if (p.size() > rank) return std::nullopt;
  std::vector<int64_t> cd, cs;
  for (const Parts& q : p)
    for (const auto& [e, st] : q)
      if (st != 0) cd.push_back(e), cs.push_back(st);
  if (dense && !cd.empty()) {
    *src = c.as_plain(c.view(*src, cd, cs, 0, c.val(*src).name + ".dense"));
    const std::vector<int64_t> rs = row_major(cd);
    size_t j = 0;
    for (Parts& q : p)
      for (auto& part : q)
        if (part.second != 0) part.second = rs[j++];
  }
  p.insert(p.begin(), rank - p.size(), Parts{});
  return p;
}

// A product reading a split view (a Reshape of repeat_kv's Expand: K or V heads
// repeated for each query head) in place, where it was copied dense first (a tenth
// of a LLaMA decode step). Each batch dim is split into the split operand's parts,
// in both operands (a plain dim of the other one by its stride, a broadcast one as
// 1s); a repeat (stride 0) is a broadcast dim of B; a repeat that is the last batch
// dim joins A's rows where they continue in step (M x the row stride), so a group's
// query heads are the rows of one product against their K or V head. The output's
// dense element order is the graph's. Where A's rows do not continue in step (Q
// read as a view of [batch, seq, heads, d]) A is copied dense first if it is no
// larger than B's repeats (M <= N): oneDNN's matmul over a broadcast batch dim is
// its slow gemm:jit (3.4x the time of brgemm on the dense copies); where oneDNN
// still picks another kernel than for dense copies, both operands' own elements are
// copied dense, not repeated. False, nothing bound, where some dim does not split
// so, oneDNN's kernel still differs, or the repeated heads' copy is the cheaper way
// (a mask or a transposed output after the product, below).
bool lower_split_matmul(Compiler& c, const Node& n, const Value (&ins)[2], float scale,
                        const std::vector<const Node*>& scaled, bool dense_a = false, bool dense_b = false) {
  auto rank_of = [&](const Value& v) {
    const SplitView* s = c.split_view(v);
    return s ? s->dims.size() : c.dims(v).size();
  };
  const size_t rank = std::max(rank_of(ins[0]), rank_of(ins[1]));
  if (rank < 2 || rank_of(ins[0]) < 2 || rank_of(ins[1]) < 2) return false;
  int sa = -1, sb = -1;
  auto pa = operand_parts(c, ins[0], rank, &sa, dense_a);
  auto pb = operand_parts(c, ins[1], rank, &sb, dense_b);
  if (!pa || !pb) return false;
  for (size_t i = rank - 2; i < rank; ++i)
    if ((*pa)[i].size() > 1 || (*pb)[i].size() > 1) return false;
  auto only = [](const Parts& p) { return p.empty() ? std::pair<int64_t, int64_t>{1, 1} : p[0]; };
  const auto [M0, am] = only((*pa)[rank - 2]);
  const auto [K, ak] = only((*pa)[rank - 1]);
  const auto [bK, bk] = only((*pb)[rank - 2]);
  const auto [N, bn] = only((*pb)[rank - 1]);
  if (bK != K) return false;
  std::vector<int64_t> out, od, ad, as, bd, bs;
  for (size_t i = 0; i + 2 < rank; ++i) {
    const Parts &x = (*pa)[i], &y = (*pb)[i];
    const int64_t ea = extent(x), eb = extent(y);
    if (ea != eb && ea != 1 && eb != 1) return false;
    out.push_back(std::max(ea, eb));
    const Parts& f = x.size() > 1 ? x : y.size() > 1 ? y : ea != 1 ? x : y;
    // One operand's dim in f's parts: its own, a plain one split by its stride, or 1s.
    auto spread = [&](const Parts& q, int64_t e, std::vector<int64_t>& dd, std::vector<int64_t>& ss) {
      for (size_t j = 0; j < f.size(); ++j) {
        int64_t d = 1, st = 0;
        if (e != 1 && q.size() == f.size()) {
          if (q[j].first != f[j].first) return false;
          d = q[j].first, st = q[j].second;
        } else if (e != 1) {
          int64_t inner = 1;
          for (size_t l = j + 1; l < f.size(); ++l) inner *= f[l].first;
          d = f[j].first, st = q[0].second * inner;
        }
        if (st == 0) d = 1;  // a repeat: broadcast
        dd.push_back(d);
        ss.push_back(st);
      }
      return true;
    };
    if (!spread(x, ea, ad, as) || !spread(y, eb, bd, bs)) return false;
    for (const auto& q : f) od.push_back(q.first);
  }
  // B's trailing broadcast batch dims whose A rows continue in step become rows.
  int64_t M = M0, a_row = am;
  while (!od.empty() && bd.back() == 1 && ad.back() == od.back() && (M == 1 || as.back() == M * a_row)) {
    if (M == 1) a_row = as.back();
    M *= od.back();
    od.pop_back(), ad.pop_back(), as.pop_back(), bd.pop_back(), bs.pop_back();
  }
  const bool native = c.opts().packed_gemm && kernels::prefer_packed_gemm();
  if (!native && !od.empty() && bd.back() == 1 && od.back() > 1) {
    if (dense_a || c.split_view(ins[0]) || M0 > N) return false;
    return lower_split_matmul(c, n, ins, scale, scaled, true, dense_b);
  }
  ad.insert(ad.end(), {M, K}), as.insert(as.end(), {a_row, ak});
  bd.insert(bd.end(), {K, N}), bs.insert(bs.end(), {bk, bn});
  od.insert(od.end(), {M, N});
  std::vector<int64_t> full = out;
  full.insert(full.end(), {M0, N});
  // A binary op after the product (a causal mask) is its own step in these dims
  // (oneDNN's post-op has no broadcast over the split ones), and a Transpose after
  // it (P V back to [batch, seq, heads, d]) a copy, where the product would
  // otherwise write the layout that makes it a view: where that touches at least
  // as much as the repeated heads' copy would, the copy is cheaper (LLaMA block's
  // mask over [16, 128, 128]: 0.07 ms as a step, the copy of K's heads 0.01).
  const Node* after = c.sole_consumer(n.output(0));
  const std::vector<int64_t> perm =
      after && after->op_type() == "Transpose" ? after->attrs().get_ints("perm", {}) : std::vector<int64_t>{};
  const bool transposed = perm.size() == rank && perm.back() == static_cast<int64_t>(rank) - 1;
  if (transposed || plan_fusion(c, n.output(0), full, true).has_binary()) {
    auto repeats = [](const std::vector<Parts>& p) {
      for (const Parts& q : p)
        for (const auto& [e, st] : q)
          if (e > 1 && st == 0) return true;
      return false;
    };
    const int64_t copied = num_elements(out) * ((repeats(*pa) ? M0 * K : 0) + (repeats(*pb) ? K * N : 0));
    if (num_elements(full) >= copied) return false;
  }
  const int av = c.view(sa, ad, as, 0, n.name() + ".a"), bv = c.view(sb, bd, bs, 0, n.name() + ".b");
  c.val(av).step_local = c.val(bv).step_local = true;
  Contraction k;
  k.a = av;
  k.a_md = unit_dims_outermost(c.val(av).md);
  k.b = bv;
  k.b_md = unit_dims_outermost(c.val(bv).md);
  k.out = full;
  if (native && ak != 1) return false;  // the batched GEMM reads A's rows dense
  if (!native) {
    std::vector<int64_t> gad, gbd;
    for (size_t i = 0; i < rank; ++i) gad.push_back(extent((*pa)[i])), gbd.push_back(extent((*pb)[i]));
    if (matmul_impl(c, k.a_md, k.b_md, od) != matmul_impl(c, plain_md(gad, dt::f32), plain_md(gbd, dt::f32), k.out)) {
      // oneDNN's slower kernel for a view (V read as [kv, T, D] from the projection's
      // [T, kv x D] rows): the operands' own elements copied dense, still not repeated.
      if (dense_a && dense_b) return false;
      return lower_split_matmul(c, n, ins, scale, scaled, true, true);
    }
  }
  k.prim_out = od;
  k.scale = scale;
  k.scaled = scaled;
  k.node = &n;
  k.kind = "MatMul";
  k.from = n.output(0);
  k.flops = 2.0 * static_cast<double>(num_elements(k.out)) * static_cast<double>(K);
  return emit_contraction(c, k);
}

}  // namespace

bool lower_matmul(Compiler& c, const Node& n) {
  if (!all_float32(n)) return false;
  if (lower_attention_chain(c, n)) return true;
  // Scalar Muls on the operands that wait for this product (matmul_operand_scale)
  // are taken in: the product reads their inputs and scales its result.
  float scale = 1;
  std::vector<const Node*> scaled;
  Value ins[2] = {n.inputs()[0], n.inputs()[1]};
  for (Value& v : ins) {
    const Node& p = *v.node;
    if (p.kind() != NodeKind::Op || c.lowered(p) || c.bound_id(v) >= 0 || c.sole_consumer(v) != &n) continue;
    if (std::optional<float> f = matmul_operand_scale(c, p)) {
      scale *= *f;
      scaled.push_back(&p);
      v = c.peek_known(p.inputs()[1]) ? p.inputs()[0] : p.inputs()[1];
    }
  }
  // Heads repeated by a broadcast (repeat_kv's Expand; merged into the heads dim, a
  // split view; of one KV head, a stride 0) are read in place.
  auto repeats = [&](const Value& v) {
    return c.split_view(v) || (!c.peek_known(v) && c.broadcast_view(c.id(v)));
  };
  if ((repeats(ins[0]) || repeats(ins[1])) && lower_split_matmul(c, n, ins, scale, scaled)) return true;
  std::vector<int64_t> ad = c.dims(ins[0]), bd = c.dims(ins[1]);
  if (ad.size() < 2 || bd.size() < 2) return false;  // vector forms: the reference kernel
  const bool native = c.opts().packed_gemm && kernels::prefer_packed_gemm();
  if (!scaled.empty() && !native && !keeps_matmul_kernel(c, ins[0], ins[1])) {
    // The Muls' outputs are dense, their inputs are views oneDNN runs a slower
    // kernel on (ViT's Q and K^T, heads of one fused projection with a row
    // stride of 3 x hidden: its gemm:jit for brgemm): the Muls run as steps,
    // and make the operands dense on the way.
    ins[0] = n.inputs()[0];
    ins[1] = n.inputs()[1];
    scale = 1;
    scaled.clear();
  }
  Contraction k;
  k.scale = scale;
  k.scaled = scaled;
  k.node = &n;
  k.kind = "MatMul";
  k.from = n.output(0);
  size_t rank = std::max(ad.size(), bd.size());
  // Output dims: broadcast batch dims, then M and N.
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  k.out = broadcast_dims(ab, bb);
  k.out.push_back(ad[ad.size() - 2]);
  k.out.push_back(bd.back());
  k.a = matmul_operand(c, c.id(ins[0]));
  k.a_md = unit_dims_outermost(with_leading_ones(c.val(k.a).md, rank));
  if (const Tensor* b = c.known(ins[1])) {
    k.b_const = *b;
  } else {
    k.b = matmul_operand(c, c.id(ins[1]));
    k.b_md = unit_dims_outermost(with_leading_ones(c.val(k.b).md, rank));
  }
  // A permuted view of A's row dims times a weight without batch (nn.MultiheadAttention's
  // batch_first Transpose read by the input projection) is made dense first: a copy of
  // A, then one 2-D product on packed weights (flat_rows), where the view ran as a batch
  // of small products each reading the whole weight (0.76 -> 0.40 ms on [2,50,256] x
  // [256,768], the copy included).
  // (A read k-major, a transposed last axis, stays as it is: the packed GEMM reads it so.)
  if (const dims_t a_dims = k.a_md.dims();
      k.b_const && rank > 2 && batchless(k.b_const->dims()) && k.a_md.data.format_kind == dnnl_blocked &&
      k.a_md.data.format_desc.blocking.strides[k.a_md.data.ndims - 1] == 1 &&
      !(k.a_md == plain_md(std::vector<int64_t>(a_dims.begin(), a_dims.end()), dt::f32))) {
    k.a = c.as_plain(k.a);
    k.a_md = unit_dims_outermost(with_leading_ones(c.val(k.a).md, rank));
  }
  // Views oneDNN only has its reference matmul for (a broadcast's zero strides,
  // some transposed batch layouts) are made dense first.
  if (!k.b_const && !native && !jit_matmul(c, k.a_md, k.b_md, k.out)) {
    k.a = c.as_plain(k.a);
    k.a_md = with_leading_ones(c.val(k.a).md, rank);
    k.b = c.as_plain(k.b);
    k.b_md = with_leading_ones(c.val(k.b).md, rank);
  }
  k.flops = 2.0 * static_cast<double>(num_elements(k.out)) * static_cast<double>(ad.back());
  return emit_contraction(c, k);
}

bool lower_gemm(Compiler& c, const Node& n) {
  if (!all_float32(n)) return false;
  const Attributes& at = n.attrs();
  double alpha = at.get_float("alpha", 1.0), beta = at.get_float("beta", 1.0);
  bool ta = at.get_int("transA", 0) != 0, tb = at.get_int("transB", 0) != 0;
  std::vector<int64_t> ad = c.dims(n.inputs()[0]), bd = c.dims(n.inputs()[1]);
  if (ad.size() != 2 || bd.size() != 2) return false;
  int64_t m = ta ? ad[1] : ad[0], kk = ta ? ad[0] : ad[1], nn = tb ? bd[0] : bd[1];
  Contraction k;
  k.node = &n;
  k.kind = "Gemm";
  k.from = n.output(0);
  k.out = {m, nn};
  k.a = c.as_plain(c.id(n.inputs()[0]));
  k.a_md = ta ? md_t(dims_t{m, kk}, dt::f32, dims_t{1, m}) : plain_md({m, kk}, dt::f32);
  const Tensor* b = c.known(n.inputs()[1]);
  if (b) {
    // alpha and the transpose go into the weights, once per constant.
    k.b_const = c.gemm_weights(*b, kk, nn, tb, alpha);
  } else {
    if (alpha != 1.0) return false;
    k.b = c.as_plain(c.id(n.inputs()[1]));
    k.b_md = tb ? md_t(dims_t{kk, nn}, dt::f32, dims_t{1, kk}) : plain_md({kk, nn}, dt::f32);
  }
  if (n.inputs().size() > 2 && n.inputs()[2].present() && beta != 0.0) {
    const Tensor* ct = c.known(n.inputs()[2]);
    if (!ct) return false;
    std::vector<double> cv = ct->to_f64();
    for (double& x : cv) x *= beta;
    if (ct->numel() == 1) cv.assign(static_cast<size_t>(nn), cv[0]);
    else if (ct->numel() == m && (ct->rank() == 2 && ct->dims()[1] == 1)) {
      std::vector<double> full(static_cast<size_t>(m * nn));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nn; ++j) full[i * nn + j] = cv[i];
      cv = full;
    } else if (ct->numel() != nn && ct->numel() != m * nn) {
      return false;
    }
    std::vector<int64_t> bdims = static_cast<int64_t>(cv.size()) == nn ? std::vector<int64_t>{nn}
                                                                      : std::vector<int64_t>{m, nn};
    k.bias = Tensor::from_f64(DType::Float32, bdims, cv);
  }
  k.flops = 2.0 * static_cast<double>(m * nn * kk);
  return emit_contraction(c, k);
}

}  // namespace isomer::runtime
