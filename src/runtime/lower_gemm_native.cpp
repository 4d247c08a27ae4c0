// Contractions on isomer's own GEMMs (kernels/gemm.h): packed constant weights or
// two run-time operands batched, with the fused nodes after the product run as one
// pointwise epilogue on each tile.
#include <cmath>

#include "kernels/gemm.h"
#include "runtime/contraction.h"
#include "runtime/fusion.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// Emits fused nodes [first, end) into an epilogue program, each from its pointwise
// form: input j of node i reads register ins[i][j] (an operand), or, where that is
// -2, the register `reg` holds for the value (the product or an earlier node).
// Returns the result's register (a Copy of the product when nothing was emitted
// after `result`), or -1 if a node has no pointwise form.
int emit_epilogue_nodes(Compiler& c, kernels::PwProgram& prog, const std::vector<const Node*>& nodes, size_t first,
                        const std::vector<std::vector<int>>& ins, std::unordered_map<Value, int, ValueHash>& reg,
                        int result) {
  for (size_t i = first; i < nodes.size(); ++i) {
    std::vector<int> r;
    std::vector<const Tensor*> consts;
    for (size_t j = 0; j < nodes[i]->inputs().size(); ++j) {
      const Value& v = nodes[i]->inputs()[j];
      r.push_back(ins[i][j] == -2 ? reg.at(v) : ins[i][j]);
      consts.push_back(v.present() && ins[i][j] >= 0 ? c.peek_known(v) : nullptr);
    }
    const int out = nodes[i]->op()->emit_pointwise(prog, nodes[i]->attrs(), r, consts);
    if (out < 0) return -1;
    reg[nodes[i]->output(0)] = result = out;
  }
  return result == 0 ? prog.emit(kernels::PwOp::Copy, 0) : result;
}

// The epilogue specialized to what is known when it is built (kernels::specialize:
// scalar constants as immediates, an exported exact GELU as one instruction,
// operands nothing reads dropped). `per_operand` lists follow the operands.
template <class... Lists>
void specialize_epilogue(Compiler& c, kernels::GemmEpilogue& epi, std::vector<int>& operand_ids, Lists&... per_operand) {
  std::vector<std::optional<float>> known(1 + operand_ids.size());
  for (size_t i = 0; i < operand_ids.size(); ++i) {
    const auto& t = c.val(operand_ids[i]).known;
    if (t && t->numel() == 1 && is_float(t->dtype())) known[i + 1] = static_cast<float>(t->to_f64()[0]);
  }
  kernels::SpecializedProgram s = kernels::specialize(epi.program, known);
  if (s.operands.empty() || s.operands[0] != 0) return;  // the product must stay register 0
  auto keep = [&](auto& list) {
    std::remove_reference_t<decltype(list)> kept;
    for (size_t j = 1; j < s.operands.size(); ++j) kept.push_back(list[static_cast<size_t>(s.operands[j] - 1)]);
    list = std::move(kept);
  };
  keep(epi.operands);
  keep(operand_ids);
  (keep(per_operand), ...);
  epi.program = std::move(s.program);
}

}  // namespace

// The contraction on isomer's packed-weights GEMM (kernels/gemm.h) where that is
// the faster kernel: constant weights seen as one [K, N] matrix, A read in place
// as rows of unit stride, and every fused node (bias, activations, residual add,
// gating) run as one pointwise epilogue on each tile, from the nodes' own
// pointwise forms. Returns false, having done nothing, where it does not apply.
bool emit_packed_gemm(Compiler& c, const Contraction& k) {
  if (!c.opts().packed_gemm || !k.b_const) return false;
  const std::vector<int64_t>& bd = k.b_const->dims();
  for (size_t i = 0; i + 2 < bd.size(); ++i)
    if (bd[i] != 1) return false;
  const int64_t K = bd[bd.size() - 2], N = bd.back();
  // A as rows: unit stride along K, one stride between rows, covering all output rows.
  auto as = c.strides_of(k.a);
  std::vector<int64_t> ad = c.val(k.a).dims;
  if (k.kind == "Gemm" && as) {  // transA lives in the view (a_md), not in the value
    const auto& bl = k.a_md.data.format_desc.blocking;
    as = std::vector<int64_t>{bl.strides[0], bl.strides[1]};
    ad = {k.a_md.data.dims[0], k.a_md.data.dims[1]};
  }
  if (!as || ad.size() < 2) return false;
  // Or A transposed, one matrix: unit stride along M (Gemm's transA, a token-mixing
  // MatMul on a transposed view); the micro-kernel then reads it k-major.
  bool a_transposed = as->back() != 1 && (*as)[ad.size() - 2] == 1;
  for (size_t i = 0; a_transposed && i + 2 < ad.size(); ++i) a_transposed = ad[i] == 1;
  if (as->back() != 1 && !a_transposed) return false;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < ad.size(); ++i) rows *= ad[i];
  int64_t out_rows = 1;
  for (size_t i = 0; i + 1 < k.out.size(); ++i) out_rows *= k.out[i];
  if (rows != out_rows || !kernels::prefer_packed_gemm(rows)) return false;
  const int64_t lda = a_transposed ? as->back() : (*as)[ad.size() - 2];
  for (size_t i = ad.size() - 1; i-- > 0 && !a_transposed;)
    if (ad[i] != 1 && i + 2 < ad.size() && (*as)[i] != (*as)[i + 1] * ad[i + 1]) return false;
  // The epilogue: the fused nodes in order, their other inputs as operands seen
  // in the [rows, N] space of the output (per column, per element or scalar).
  // A Reshape right after it (an exporter's view from [rows, N] back to
  // [batch, seq, N]) keeps the element order: the epilogue starts after it.
  Value from = k.from;
  std::vector<int64_t> dims = k.out;
  const Node* view = c.opts().fuse ? c.sole_consumer(from) : nullptr;
  if (view && (view->op_type() == "Reshape" || view->op_type() == "Flatten" || view->op_type() == "Squeeze" ||
               view->op_type() == "Unsqueeze") && view->inputs()[0] == from) {
    // Its output dims from its shape rule, the product's dims and its constant
    // inputs (the product is not lowered yet).
    std::vector<TensorType> in;
    std::vector<const Tensor*> consts;
    bool known = true;
    for (size_t i = 0; i < view->inputs().size(); ++i) {
      const Value& v = view->inputs()[i];
      const Tensor* t = i == 0 || !v.present() ? nullptr : c.peek_known(v);
      known = known && (i == 0 || !v.present() || t);
      in.push_back(i == 0 ? TensorType{DType::Float32, make_shape(k.out)} : t ? t->type() : TensorType{});
      consts.push_back(t);
    }
    std::vector<int64_t> vd;
    if (known) {
      InferContext ctx{view->attrs(), in, consts, 1};
      const Shape sh = view->op()->infer(ctx)[0].shape;
      if (is_static(sh)) vd = static_dims(sh);
    }
    if (!vd.empty() && vd.back() == N) {
      from = view->output(0);
      dims = vd;
    } else {
      view = nullptr;
    }
  } else {
    view = nullptr;
  }
  kernels::GemmEpilogue epi;
  epi.program.num_inputs = epi.program.num_regs = 1;
  std::vector<int> operand_ids;
  std::unordered_map<Value, int, ValueHash> reg = {{from, 0}};
  bool ok = true;
  auto operand = [&](int id) -> int {
    const std::vector<int64_t>& d = c.val(id).dims;
    const int64_t m = num_elements(d);
    kernels::StridedRef r;
    r.dtype = c.val(id).dtype;
    if (m == 1) r.strides = {0, 0};
    else if (m == N && d.back() == N) r.strides = {0, 1};
    else if (d.size() <= dims.size() && m == rows * N && d.back() == N) r.strides = {N, 1};
    else ok = false;
    if (!ok || c.val(id).known) {
      if (!c.val(id).known) return -1;
    } else if (!c.is_dense(id)) {
      id = c.as_plain(id);
    }
    operand_ids.push_back(id);
    epi.operands.push_back(r);
    return epi.program.num_inputs++;
  };
  const std::vector<const Node*> nodes = plan_epilogue(c, from, dims);
  // A constant bias per column goes into the packed weights: the micro-kernel
  // starts its sums from it. It is the Gemm's C, or a first fused Add.
  const Tensor* column_bias = nullptr;
  size_t first = 0;  // the first fused node the epilogue computes
  auto per_column = [&](const Tensor* t) {
    return t && t->dtype() == DType::Float32 && t->numel() == N && !t->dims().empty() && t->dims().back() == N;
  };
  if (k.bias && per_column(&*k.bias)) {
    column_bias = &*k.bias;
  } else if (!k.bias && !nodes.empty() && nodes[0]->op_type() == "Add" && nodes[0]->inputs().size() == 2 &&
             c.consumers(from).size() == 1) {
    const Node& add = *nodes[0];
    const Value other = add.inputs()[0] == from ? add.inputs()[1] : add.inputs()[0];
    const Tensor* t = add.inputs()[0] == from || add.inputs()[1] == from ? c.peek_known(other) : nullptr;
    if (per_column(t) && other != from) {
      column_bias = t;
      first = 1;
      reg[add.output(0)] = 0;
    }
  }
  // Operands first: registers of inputs come before computed ones.
  int bias = -1;
  if (k.bias && !column_bias && (bias = operand(c.constant_value(*k.bias, k.node->name() + ".bias"))) < 0) return false;
  std::vector<std::vector<int>> ins(nodes.size());
  for (size_t i = first; i < nodes.size() && ok; ++i) {
    if (!nodes[i]->op()->emit_pointwise) return false;
    for (const Value& v : nodes[i]->inputs()) {
      bool chain = v == from;
      for (size_t j = 0; j < i && !chain; ++j) chain = nodes[j]->output(0) == v;
      ins[i].push_back(!v.present() ? -1 : chain ? -2 : operand(c.id(v)));
    }
  }
  if (!ok) return false;
  epi.program.num_regs = epi.program.num_inputs;
  int result = 0;
  if (bias >= 0) reg[from] = result = epi.program.emit(kernels::PwOp::Add, 0, bias);
  if ((result = emit_epilogue_nodes(c, epi.program, nodes, first, ins, reg, result)) < 0) return false;
  epi.program.results = {result};
  specialize_epilogue(c, epi, operand_ids);
  const bool has_epilogue = epi.program.code.size() > 1 || epi.program.code[0].op != kernels::PwOp::Copy;

  std::shared_ptr<const kernels::PackedB> packed = c.packed_weights(*k.b_const, K, N);
  auto bias_row = std::make_shared<const std::vector<float>>(
      column_bias ? kernels::panel_bias(reinterpret_cast<const float*>(column_bias->bytes().data()), N)
                  : std::vector<float>{});
  const md_t dst_md = plain_md(dims, dt::f32);
  int dst = c.new_value(DType::Float32, dims, dst_md, k.node->name());
  std::vector<int> reads = {k.a};
  reads.insert(reads.end(), operand_ids.begin(), operand_ids.end());
  StepInfo info;
  info.kind = "matmul";
  info.label = k.node->name();
  info.ops = {k.kind};
  info.nodes = {node_key(*k.node)};
  if (view) info.nodes.push_back(node_key(*view));
  for (const Node* m : nodes) {
    info.ops.push_back(m->op_type());
    info.nodes.push_back(node_key(*m));
  }
  info.signature = "gemm-packed " + std::to_string(rows) + "x" + std::to_string(K) + "x" + std::to_string(N) +
                   " lda" + std::to_string(lda) + (a_transposed ? " aT" : "") + (column_bias ? " bias" : "") +
                   (has_epilogue ? " epi " + epi.program.text() : "");
  for (const auto& o : epi.operands) info.signature += " o" + to_string(o.strides);
  info.flops = k.flops;
  auto e = std::make_shared<kernels::GemmEpilogue>(std::move(epi));
  const size_t nops = e->operands.size();
  add_native_step(c, info, reads, {dst},
                  [packed, bias_row, e, rows, lda, a_transposed, N, nops, has_epilogue](const std::vector<char*>& p) {
                    kernels::GemmEpilogue local = *e;
                    for (size_t i = 0; i < nops; ++i) local.operands[i].data = p[1 + i];
                    kernels::gemm_packed(reinterpret_cast<const float*>(p[0]), lda, rows, *packed,
                                         reinterpret_cast<float*>(p[1 + nops]), N, has_epilogue ? &local : nullptr, 0,
                                         bias_row->empty() ? nullptr : bias_row->data(), a_transposed);
                  });
  c.bind(nodes.empty() ? from : nodes.back()->output(0), dst);
  for (const Node* m : nodes) c.mark_done(*m);
  if (view) c.mark_done(*view);
  return true;
}

namespace {

// Per-batch element offsets of a tensor of `dims` (right-aligned against the
// batch dims `batch`, broadcast dims stride 0) with element strides `st`.
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& batch, const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& st, size_t trailing) {
  const int64_t count = num_elements(batch);
  std::vector<int64_t> off(static_cast<size_t>(count), 0);
  const size_t lead = dims.size() - trailing;  // the operand's own batch dims
  for (int64_t b = 0; b < count; ++b) {
    int64_t rem = b, o = 0;
    for (size_t i = batch.size(); i-- > 0;) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      const size_t from_end = batch.size() - 1 - i;
      if (from_end < lead) {
        const size_t d = lead - 1 - from_end;
        if (dims[d] != 1) o += idx * st[d];
      }
    }
    off[static_cast<size_t>(b)] = o;
  }
  return off;
}

}  // namespace

// A matmul of two tensors known only at run time (attention's Q K^T and P V) on
// isomer's GEMM: each batch's B packed on the fly, A read in place, and the
// elementwise nodes after it (scale, mask) as its epilogue. Returns false,
// having done nothing, where it does not apply.
bool emit_batched_gemm(Compiler& c, Contraction& k) {
  if (!c.opts().packed_gemm || k.b_const || !kernels::prefer_packed_gemm()) return false;
  auto as = c.strides_of(k.a);
  if (!as || as->back() != 1) return false;
  auto bs = c.strides_of(k.b);
  if (!bs) return false;
  const std::vector<int64_t>& ad = c.val(k.a).dims;
  const std::vector<int64_t>& bd = c.val(k.b).dims;
  // A split view's product runs in its own dims (the same dense order as out's).
  const bool split = !k.prim_out.empty();
  const std::vector<int64_t>& out = split ? k.prim_out : k.out;
  const size_t r = out.size();
  const std::vector<int64_t> batch(out.begin(), out.end() - 2);
  kernels::BatchedGemm g;
  g.batch = num_elements(batch);
  g.M = out[r - 2];
  g.N = out[r - 1];
  g.K = ad.back();
  g.a_row = (*as)[ad.size() - 2];
  g.b_k = (*bs)[bd.size() - 2];
  g.b_n = (*bs)[bd.size() - 1];
  g.a_off = batch_offsets(batch, ad, *as, 2);
  g.b_off = batch_offsets(batch, bd, *bs, 2);
  const std::vector<const Node*> nodes = split ? std::vector<const Node*>{} : plan_epilogue(c, k.from, k.out);
  kernels::GemmEpilogue epi;
  epi.program.num_inputs = 1;
  std::vector<int> operand_ids;
  std::unordered_map<Value, int, ValueHash> reg = {{k.from, 0}};
  std::vector<std::vector<int64_t>> offs;
  auto operand = [&](int id) -> int {
    if (!c.strides_of(id)) id = c.as_plain(id);
    const std::vector<int64_t> own = *c.strides_of(id), d = c.val(id).dims;
    kernels::StridedRef o;
    o.dtype = c.val(id).dtype;
    std::vector<int64_t> full(r, 0);
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] != 1) full[r - d.size() + i] = own[i];
    o.strides = {full[r - 2], full[r - 1]};
    std::vector<int64_t> fd(r, 1);
    for (size_t i = 0; i < d.size(); ++i) fd[r - d.size() + i] = d[i];
    offs.push_back(batch_offsets(batch, fd, full, 2));
    operand_ids.push_back(id);
    epi.operands.push_back(o);
    return epi.program.num_inputs++;
  };
  std::vector<std::vector<int>> ins(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value& v : nodes[i]->inputs()) {
      bool chain = v == k.from;
      for (size_t j = 0; j < i && !chain; ++j) chain = nodes[j]->output(0) == v;
      ins[i].push_back(!v.present() ? -1 : chain ? -2 : operand(c.id(v)));
    }
  epi.program.num_regs = epi.program.num_inputs;
  int product = 0;
  if (k.scale != 1) reg[k.from] = product = epi.program.emit(kernels::PwOp::Affine, 0, 0, 0, k.scale, 0);
  const int result = emit_epilogue_nodes(c, epi.program, nodes, 0, ins, reg, product);
  if (result < 0) return false;
  epi.program.results = {result};
  specialize_epilogue(c, epi, operand_ids, offs);
  const bool has_epilogue = epi.program.code.size() > 1 || epi.program.code[0].op != kernels::PwOp::Copy;
  const size_t nops = epi.operands.size();
  g.op_off.resize(static_cast<size_t>(g.batch) * nops);
  for (int64_t b = 0; b < g.batch; ++b)
    for (size_t i = 0; i < nops; ++i) g.op_off[static_cast<size_t>(b) * nops + i] = offs[i][static_cast<size_t>(b)];
  // Written in the layout a following Transpose makes dense (attention's output
  // going back from [batch, heads, seq, d] to [batch, seq, heads, d] before its
  // Reshape): the Transpose and the Reshape are then views, no copy.
  const Value last = nodes.empty() ? k.from : nodes.back()->output(0);
  const Node* tr = c.opts().fuse && !split ? c.sole_consumer(last) : nullptr;
  std::vector<int64_t> perm = tr && tr->op_type() == "Transpose" ? tr->attrs().get_ints("perm", {}) : std::vector<int64_t>{};
  int dst = -1;
  if (perm.size() == r && perm.back() == static_cast<int64_t>(r) - 1) {
    std::vector<int64_t> td;
    for (int64_t p : perm) td.push_back(k.out[static_cast<size_t>(p)]);
    const std::vector<int64_t> ts = row_major(td);
    std::vector<int64_t> os(r);
    for (size_t i = 0; i < r; ++i) os[static_cast<size_t>(perm[i])] = ts[i];
    int buffer = c.new_value(DType::Float32, td, plain_md(td, dt::f32), k.node->name());
    dst = c.view(buffer, k.out, os, 0, k.node->name());
    g.c_row = os[r - 2];
    g.c_off = batch_offsets(batch, k.out, os, 2);
  } else {
    dst = c.new_value(DType::Float32, k.out, plain_md(k.out, dt::f32), k.node->name());
  }
  std::vector<int> reads = {k.a, k.b};
  reads.insert(reads.end(), operand_ids.begin(), operand_ids.end());
  StepInfo info;
  info.kind = "matmul";
  info.label = k.node->name();
  info.ops = {k.kind};
  info.nodes = {node_key(*k.node)};
  for (const Node* m : k.scaled) {
    info.ops.push_back(m->op_type());
    info.nodes.push_back(node_key(*m));
  }
  for (const Node* m : nodes) {
    info.ops.push_back(m->op_type());
    info.nodes.push_back(node_key(*m));
  }
  info.signature = "gemm-batched " + std::to_string(g.batch) + "x" + std::to_string(g.M) + "x" + std::to_string(g.K) +
                   "x" + std::to_string(g.N) + " a" + std::to_string(g.a_row) + " b" + std::to_string(g.b_k) + "," +
                   std::to_string(g.b_n) + (has_epilogue ? " epi " + epi.program.text() : "");
  for (const auto& o : epi.operands) info.signature += " o" + to_string(o.strides);
  info.flops = k.flops;
  if (g.c_row) info.signature += " c" + std::to_string(g.c_row);
  auto shape = std::make_shared<kernels::BatchedGemm>(std::move(g));
  auto e = std::make_shared<kernels::GemmEpilogue>(std::move(epi));
  add_native_step(c, info, reads, {dst}, [shape, e, nops, has_epilogue](const std::vector<char*>& p) {
    kernels::GemmEpilogue local = *e;
    for (size_t i = 0; i < nops; ++i) local.operands[i].data = p[2 + i];
    kernels::gemm_batched(reinterpret_cast<const float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                          reinterpret_cast<float*>(p[2 + nops]), *shape, has_epilogue ? &local : nullptr);
  });
  c.bind(nodes.empty() ? k.from : nodes.back()->output(0), dst);
  for (const Node* m : nodes) c.mark_done(*m);
  for (const Node* m : k.scaled) c.mark_done(*m);
  return true;
}

}  // namespace isomer::runtime
