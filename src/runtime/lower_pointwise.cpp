// Fused pointwise kernels. Starting from an elementwise node, the lowering grows a
// group of elementwise nodes of the same output dims — its consumers, and the
// producers those need that are not lowered yet — and runs the whole group as
// one program of the pointwise engine (kernels/pointwise.h): one pass over
// memory, intermediates kept in registers, operands read through any strides
// (views, broadcasts). What an operator computes per element comes from its
// entry's emit_pointwise hook.
//
// A group computes in float32 or in int64. Its values inside are of that domain
// (float32 or bool, resp. integers or bool); a node whose output has another type
// (float16, an integer in a float group) may only end a group, where the store
// converts. Float64 never runs here.
//
// Layouts: operands in a blocked oneDNN layout (nChw16c from a convolution) are
// read in place: the iteration runs over the blocked layout's physical
// dimensions (channels split into blocks and lanes) and every other operand's
// strides are mapped onto them; the results take the blocked layout.
#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

using kernels::PwProgram;

constexpr size_t kMaxNodes = 32;
// How far back from a consumer a group takes unlowered elementwise producers of its
// dims (beyond, an input it reads is lowered on its own first): a tanh GELU written
// out by TorchScript (BLOOM: x * 0.5 * (1 + tanh(0.798 x (1 + 0.0447 x x)))) reaches
// back five producers from its last product, and at two came out as three steps.
constexpr int kProducerDepth = 6;
constexpr size_t kMaxOperands = 16;

bool pointwise(const Node& n) { return n.kind() == NodeKind::Op && n.op()->emit_pointwise && n.num_outputs() == 1; }

enum class Domain { Float, Int, None };

// The domain a node computes in, from its output type and its inputs' types.
Domain domain_of(Compiler& c, const Node& n) {
  const DType out = n.output_types()[0].dtype;
  if (out == DType::Float64 || dtype_size(out) == 0) return Domain::None;
  if (n.op_type() == "Cast") {
    const DType in = n.inputs()[0].type().dtype;
    // A group loads floats through int64, which loses what a uint64 past INT64_MAX
    // needs (ir/float_to_int.h's cast_float_to): the evaluator's Cast converts those.
    if (in == DType::Float64 || (is_float(in) && out == DType::UInt64)) return Domain::None;
    return is_float(out) || (out == DType::Bool && is_float(in)) ? Domain::Float : Domain::Int;
  }
  if (is_float(out)) return Domain::Float;
  bool float_in = false;
  for (const Value& v : n.inputs())
    if (v.present()) float_in = float_in || is_float(v.type().dtype);
  if (out == DType::Bool) return float_in ? Domain::Float : Domain::Int;
  return float_in ? Domain::None : Domain::Int;
}

// An integer group computes in int64; a node's result of a narrower type is brought back
// into it (modulo 2^bits) before anything reads it, as a kernel of that type computes it
// (int8 100 + 100 is -56, which a Div then halves). A Cast from a float to int32 or
// narrower converts through int32 first, as ir/float_to_int.h's cast_float_to (the group
// loaded the float through int64).
int in_own_type(PwProgram& p, const Node& m, int r) {
  const DType out = m.output_types()[0].dtype;
  if (out == DType::Bool || !is_integer(out)) return r;
  const int bits = 8 * static_cast<int>(dtype_size(out));
  if (m.op_type() == "Cast" && is_float(m.inputs()[0].type().dtype) && bits <= 32 && out != DType::UInt32)
    r = p.emit(kernels::PwOp::ToInt32, r);
  if (bits == 64) return r;
  const bool sign = out == DType::Int8 || out == DType::Int16 || out == DType::Int32;
  return p.emit(kernels::PwOp::WrapInt, r, 0, 0, static_cast<float>(bits), sign ? 1.0f : 0.0f);
}

// True if a value of type t can stay inside a group of domain d (not only be stored).
bool internal(Domain d, DType t) {
  if (d == Domain::Float) return t == DType::Float32 || t == DType::Bool;
  return is_integer(t);
}

struct Planner {
  Compiler& c;
  Domain domain;
  std::vector<int64_t> dims;
  std::vector<const Node*> nodes;
  std::set<const Node*> members;
  std::unordered_set<Value, ValueHash> sink_only;  // values of a type that cannot be read inside the group
  Value seed;  // a value the group reads as its own (an epilogue's product), if any

  bool in_group(const Value& v) const { return v.present() && (members.count(v.node.get()) || v == seed); }

  // Dims of an input to a candidate: the group's for group values, else those of
  // the lowered value; nullopt if it is not available without the group.
  std::optional<std::vector<int64_t>> input_dims(const Value& v) {
    if (in_group(v)) return sink_only.count(v) ? std::nullopt : std::optional(dims);
    if (int id = c.bound_id(v); id >= 0) return c.val(id).dims;
    if (c.peek_known(v) || !c.depends_on_pending(v)) return c.dims(v);
    return std::nullopt;
  }

  // True if m's entry gives a pointwise form for this instance (its bounds and
  // exponents known as far as it needs them).
  bool emits(const Node& m) {
    PwProgram p;
    p.num_inputs = p.num_regs = static_cast<int>(m.inputs().size());
    std::vector<int> in;
    std::vector<const Tensor*> consts;
    for (size_t i = 0; i < m.inputs().size(); ++i) {
      const Value& v = m.inputs()[i];
      in.push_back(v.present() ? static_cast<int>(i) : -1);
      consts.push_back(v.present() && !in_group(v) ? c.peek_known(v) : nullptr);
    }
    if (m.op()->emit_pointwise(p, m.attrs(), in, consts) < 0) return false;
    // An integer group runs only instructions the int64 loop has. It holds a uint64 as its
    // bits, which order and divide as signed: a node that reads uint64 operands that way is
    // left to the evaluator, which reads them as unsigned (ops/kernels.h's keys).
    bool uint64_in = false;
    for (const Value& v : m.inputs()) uint64_in = uint64_in || (v.present() && v.type().dtype == DType::UInt64);
    for (const kernels::PwInstr& i : p.code)
      if (domain == Domain::Int && (!kernels::pw_integer_ok(i.op) || (uint64_in && kernels::pw_reads_sign(i.op))))
        return false;
    return true;
  }

  // Adds `m` (after the producers of its inputs that can join) if it fits. m is
  // pending while its inputs are looked at: lowering one of them starts another
  // group, which must not take m.
  bool try_add(const Node* m, int depth) {
    if (members.count(m) || c.lowered(*m) || c.is_pending(*m) || !pointwise(*m) || nodes.size() >= kMaxNodes)
      return false;
    if (domain_of(c, *m) != domain || !emits(*m)) return false;
    if ((m->op_type() == "Pow" || m->op_type() == "Mul") && is_rms_norm_root(c, *m)) return false;
    if (is_rope_node(c, *m)) return false;
    c.set_pending(*m, true);
    if (!fits(m, depth) || c.lowered(*m)) {
      c.set_pending(*m, false);
      return false;
    }
    members.insert(m);
    nodes.push_back(m);
    if (!internal(domain, m->output_types()[0].dtype)) sink_only.insert(m->output(0));
    return true;
  }

  bool fits(const Node* m, int depth) {
    // Unlowered elementwise producers of the same dims join first.
    if (depth > 0)
      for (const Value& v : m->inputs())
        if (v.present() && !in_group(v) && c.bound_id(v) < 0 && v.node->kind() == NodeKind::Op && pointwise(*v.node) &&
            !c.lowered(*v.node) && !c.peek_known(v) && is_static(v.type().shape) && static_dims(v.type().shape) == dims)
          try_add(v.node.get(), depth - 1);
    std::vector<int64_t> out;
    for (const Value& v : m->inputs()) {
      if (!v.present()) continue;
      auto d = input_dims(v);
      if (!d) return false;
      out = out.empty() ? *d : broadcast_dims(out, *d);
    }
    return out == dims;
  }

  void grow() {
    if (seed.present())
      for (const auto& [m, k] : c.consumers(seed)) try_add(m, kProducerDepth);
    for (size_t i = 0; i < nodes.size() && nodes.size() < kMaxNodes; ++i) {
      const Value out = nodes[i]->output(0);
      if (sink_only.count(out)) continue;
      for (const auto& [m, k] : c.consumers(out)) try_add(m, kProducerDepth);
    }
  }
};

// The physical iteration space of a layout with one inner block (nChw16c: the
// channel dim k split into k/16 blocks and a lane of 16).
struct Blocked {
  md_t md;
  size_t dim = 0;
  int64_t block = 1;
  std::vector<int64_t> dims;  // physical: logical dims with dim/blocks, then the lane

  // Physical strides of an operand with logical strides `t` (per logical dim).
  std::vector<int64_t> map(const std::vector<int64_t>& t) const {
    std::vector<int64_t> s = t;
    s[dim] = t[dim] * block;
    s.push_back(t[dim]);
    return s;
  }
};

std::optional<Blocked> blocked_space(const md_t& md, const std::vector<int64_t>& dims) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 1 ||
      static_cast<size_t>(d.ndims) != dims.size() || md.data_type() != dt::f32)
    return std::nullopt;
  for (int i = 0; i < d.ndims; ++i)
    if (d.padded_dims[i] != d.dims[i] || d.dims[i] != dims[static_cast<size_t>(i)]) return std::nullopt;
  Blocked b;
  b.md = md;
  b.dim = static_cast<size_t>(d.format_desc.blocking.inner_idxs[0]);
  b.block = d.format_desc.blocking.inner_blks[0];
  if (dims[b.dim] % b.block) return std::nullopt;
  b.dims = dims;
  b.dims[b.dim] /= b.block;
  b.dims.push_back(b.block);
  return b;
}

// Logical strides of value `id` (blocked layouts: its outer strides) right-aligned
// against `dims`, broadcast dims 0.
std::vector<int64_t> logical_strides(Compiler& c, int id, const std::vector<int64_t>& dims) {
  const RtValue& v = c.val(id);
  std::vector<int64_t> own;
  if (auto s = c.strides_of(id)) own = *s;
  else own.assign(v.md.data.format_desc.blocking.strides, v.md.data.format_desc.blocking.strides + v.md.data.ndims);
  std::vector<int64_t> out(dims.size(), 0);
  const size_t off = dims.size() - v.dims.size();
  for (size_t i = 0; i < v.dims.size(); ++i)
    if (v.dims[i] != 1) out[off + i] = own[i];
  return out;
}

bool is_blocked(const RtValue& v) {
  return v.md.data.ndims && (v.md.data.format_kind != dnnl_blocked || v.md.data.format_desc.blocking.inner_nblks != 0);
}

// The memory order of an operand of the full dims that is a transposed view
// (attention's q and k, permuted out of the QKV projection, perhaps a slice of
// it): its dims sorted by stride, outermost first. Empty when no operand is such
// a view (or it is in row-major order already).
std::vector<size_t> transposed_order(Compiler& c, const std::vector<int>& ids, const std::vector<int64_t>& dims) {
  for (int id : ids) {
    if (c.val(id).dims != dims) continue;
    const auto st = c.strides_of(id);
    if (!st) continue;
    std::vector<size_t> order(dims.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    // Extent-1 dims go first: where they lie in memory does not matter.
    auto key = [&](size_t d) { return dims[d] == 1 ? INT64_MAX : (*st)[d]; };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key(x) > key(y); });
    bool distinct = true, permuted = false;  // every dim has its own nonzero stride
    for (size_t i = 0; i + 1 < order.size() && distinct; ++i)
      if (dims[order[i]] != 1) distinct = (*st)[order[i]] > (*st)[order[i + 1]] && (*st)[order[i + 1]] > 0;
    size_t last = 0;  // the previous dim of extent > 1, in logical order
    bool seen = false;
    for (size_t i = 0; i < order.size(); ++i) {
      if (dims[order[i]] == 1) continue;
      permuted = permuted || (seen && order[i] < last);
      last = order[i];
      seen = true;
    }
    if (distinct && permuted) return order;
  }
  return {};
}

}  // namespace

std::vector<const Node*> plan_epilogue(Compiler& c, const Value& v, const std::vector<int64_t>& dims) {
  if (!c.opts().fuse || c.is_output(v)) return {};
  Planner plan{c, Domain::Float, dims, {}, {}, {}, v};
  plan.grow();
  auto release = [&] {
    for (const Node* m : plan.nodes) c.set_pending(*m, false);
  };
  // One result: the last node's value; v and every other value read only inside.
  bool ok = !plan.nodes.empty() && plan.sink_only.empty();
  for (const auto& [user, k] : c.consumers(v)) ok = ok && plan.members.count(user);
  for (size_t i = 0; ok && i + 1 < plan.nodes.size(); ++i) {
    const Value out = plan.nodes[i]->output(0);
    ok = !c.is_output(out);
    for (const auto& [user, k] : c.consumers(out)) ok = ok && plan.members.count(user);
  }
  ok = ok && plan.nodes.back()->output_types()[0].dtype == DType::Float32;
  release();
  return ok ? plan.nodes : std::vector<const Node*>{};
}

// The operand whose buffer the group's one result may overwrite, or -1: one of the
// result's dims and type that nothing reads after the group (no later consumer, not
// a graph output, no other view of its buffer, not an input or a constant), dense in
// its layout, which the result then takes. Only the program's last instruction may
// write the result: the kernel stores it straight into the output's buffer, and an
// instruction after it would read the overwritten operand. A squeeze-excitation
// gate ([N,C,H,W] map times [N,C,1,1]) wrote a fresh map: EfficientNet-B0's 16
// gates took 0.48 ms at 1 thread against ONNX Runtime's 0.33.
int overwritable(Compiler& c, const kernels::PwProgram& prog, const std::set<const Node*>& members,
                 const std::vector<Value>& op_vals,
                 const std::vector<int>& op_ids, const std::vector<Value>& results, const std::vector<int64_t>& dims) {
  if (results.size() != 1 || prog.results.size() != 1 || prog.code.empty() || c.is_output(results[0])) return -1;
  const int res = prog.results[0];
  if (res < prog.num_inputs || prog.code.back().dst != res) return -1;
  for (size_t k = 0; k + 1 < prog.code.size(); ++k)
    if (prog.code[k].dst == res) return -1;
  // A concatenation takes a result with a buffer of its own as its part, written
  // where it lies in the output (Compiler::retarget); over an operand, it is copied.
  for (const auto& [user, idx] : c.consumers(results[0]))
    if (user->op_type() == "Concat") return -1;
  auto root_of = [&](int id) { return c.val(id).alias_of >= 0 ? c.val(id).alias_of : id; };
  for (size_t k = 0; k < op_ids.size(); ++k) {
    const int id = op_ids[k];
    const RtValue& v = c.val(id);
    const int root = root_of(id);
    const RtValue& r = c.val(root);
    if (v.dims != dims || v.dtype != results[0].type().dtype || c.is_output(op_vals[k])) continue;
    if ((v.alias_of >= 0 && !v.accumulated) || v.byte_offset || r.known || r.storage || c.is_input(root) ||
        c.has_views(root))
      continue;
    // A blocked or dense layout (the kernel walks it by its md); a value without an md only row-major.
    if (v.md.data.ndims ? v.md.get_size() != v.bytes : !v.strides.empty()) continue;
    bool read_later = !c.all_read(op_vals[k], [&](const Node* m) { return members.count(m) > 0; });
    for (size_t j = 0; j < op_ids.size(); ++j) read_later = read_later || (j != k && root_of(op_ids[j]) == root);
    if (!read_later) return static_cast<int>(k);
  }
  return -1;
}

bool lower_pointwise(Compiler& c, const Node& n) {
  if (!pointwise(n)) return false;
  const Domain domain = domain_of(c, n);
  if (domain == Domain::None) return false;
  const std::vector<TensorType> types = c.concrete_types(n);  // lowers n's inputs
  if ((n.op_type() == "Pow" || n.op_type() == "Mul") && lower_rms_norm(c, n)) return true;
  if (lower_rope(c, n)) return true;
  Planner plan{c, domain, static_dims(types[0].shape), {}, {}, {}, {}};
  if (!plan.emits(n)) return false;
  plan.nodes.push_back(&n);
  plan.members.insert(&n);
  if (!internal(domain, types[0].dtype)) plan.sink_only.insert(n.output(0));
  if (c.opts().fuse) plan.grow();

  // Operands: the values the group reads from outside, each once.
  std::vector<Value> operands;
  std::unordered_map<Value, int, ValueHash> reg;
  for (const Node* m : plan.nodes)
    for (const Value& v : m->inputs())
      if (v.present() && !plan.in_group(v) && !reg.count(v)) {
        reg[v] = static_cast<int>(operands.size());
        operands.push_back(v);
      }
  for (const Node* m : plan.nodes) c.set_pending(*m, false);
  if (operands.size() > kMaxOperands) {
    // Too wide: run the first node alone.
    plan.nodes.resize(1);
    plan.members = {&n};
    operands.clear();
    reg.clear();
    for (const Value& v : n.inputs())
      if (v.present() && !reg.count(v)) {
        reg[v] = static_cast<int>(operands.size());
        operands.push_back(v);
      }
  }
  PwProgram prog;
  prog.compute = domain == Domain::Float ? PwProgram::Compute::Float32 : PwProgram::Compute::Int64;
  prog.num_inputs = prog.num_regs = static_cast<int>(operands.size());
  std::vector<int> op_ids;
  for (const Value& v : operands) op_ids.push_back(c.id(v));
  std::vector<Value> op_vals = operands;  // the Value each of op_ids holds
  std::vector<std::string> ops, keys;
  std::string label;
  for (const Node* m : plan.nodes) {
    std::vector<int> in;
    std::vector<const Tensor*> consts;
    for (const Value& v : m->inputs()) {
      in.push_back(v.present() ? reg.at(v) : -1);
      consts.push_back(v.present() && !plan.in_group(v) ? c.peek_known(v) : nullptr);
    }
    int r = m->op()->emit_pointwise(prog, m->attrs(), in, consts);
    if (r < 0) {
      if (m == &n) return false;
      throw Error(describe(*m) + ": its pointwise form is missing after it joined a fused kernel");
    }
    reg[m->output(0)] = domain == Domain::Int ? in_own_type(prog, *m, r) : r;
    ops.push_back(m->op_type());
    keys.push_back(node_key(*m));
    label += (label.empty() ? "" : "+") + m->name();
  }
  // Results: group values read outside the group (or graph outputs).
  std::vector<Value> results;
  for (const Node* m : plan.nodes) {
    const Value out = m->output(0);
    bool outside = c.is_output(out) || m == plan.nodes.back();
    for (const auto& [user, k] : c.consumers(out)) outside = outside || !plan.members.count(user);
    if (outside) results.push_back(out);
  }
  for (const Value& v : results) prog.results.push_back(reg.at(v));
  // Known scalar operands become immediates (and an exported exact GELU one
  // instruction); operands nothing reads any more are not read.
  std::vector<std::optional<float>> known(op_ids.size());
  for (size_t i = 0; i < op_ids.size(); ++i) {
    const auto& t = c.val(op_ids[i]).known;
    if (t && t->numel() == 1 && is_float(t->dtype())) known[i] = static_cast<float>(t->to_f64()[0]);
  }
  if (kernels::SpecializedProgram sp = kernels::specialize(prog, known); !sp.operands.empty()) {
    std::vector<int> kept;
    std::vector<Value> kept_vals;
    for (int o : sp.operands) {
      kept.push_back(op_ids[static_cast<size_t>(o)]);
      kept_vals.push_back(op_vals[static_cast<size_t>(o)]);
    }
    op_ids = std::move(kept);
    op_vals = std::move(kept_vals);
    prog = std::move(sp.program);
  }

  // The iteration space: blocked if an operand of the full dims is, and every result is float32.
  std::optional<Blocked> blk;
  bool f32_results = true;
  for (const Value& v : results) f32_results = f32_results && v.type().dtype == DType::Float32;
  for (int id : op_ids)
    if (!blk && f32_results && is_blocked(c.val(id)) && c.val(id).dims == plan.dims) blk = blocked_space(c.val(id).md, plan.dims);
  for (int& id : op_ids) {
    const RtValue& v = c.val(id);
    if (is_blocked(v) && !(blk && v.md == blk->md)) id = c.as_plain(id);
    // An operand of the full dims in a dense layout (channels last) beside a blocked
    // one is reordered into the blocks first: mapped onto the blocks, its runs were
    // a block's 16 lanes long and the pass walked them one strided element at a time
    // (NasNet-A's merged convolutions, channel blocks for their Split, added to a
    // branch written channels last: 0.84 ms for the Add, 0.05 for the reorder).
    else if (blk && !is_blocked(v) && v.md.data.ndims && v.dtype == DType::Float32 && v.dims == plan.dims)
      id = c.as_layout(id, blk->md);
  }
  std::vector<int64_t> space = blk ? blk->dims : plan.dims;
  std::vector<std::vector<int64_t>> in_strides;
  // In a blocked space, a value of the blocked layout walks its lanes with stride 1
  // (its logical strides are those of the blocks); any other is mapped.
  auto physical = [&](int id) {
    std::vector<int64_t> t = logical_strides(c, id, plan.dims);
    if (!blk) return t;
    if (!is_blocked(c.val(id))) return blk->map(t);
    t.push_back(1);
    return t;
  };
  for (int id : op_ids) in_strides.push_back(physical(id));
  // Results inside the graph follow a transposed operand's memory order: the pass
  // is then one contiguous stream, and consumers read the result as a view (a
  // batched matmul reads any strides), instead of a walk of short rows.
  bool inner_results = !blk;
  for (const Value& v : results) inner_results = inner_results && !c.is_output(v) && dnnl_type(v.type().dtype);
  const std::vector<size_t> order = inner_results ? transposed_order(c, op_ids, plan.dims) : std::vector<size_t>{};
  std::vector<int> out_ids;
  std::vector<std::vector<int64_t>> out_strides;
  // (In place over a transposed operand also follows its memory order.)
  const int over = overwritable(c, prog, plan.members, op_vals, op_ids, results, plan.dims);
  for (const Value& v : results) {
    const DType t = v.type().dtype;
    auto type = dnnl_type(t);
    int id = -1;
    if (over >= 0) {
      // In place: the result takes the operand's buffer and layout (blocked, channels
      // last or plain), as a residual sum post-op accumulates into its addend.
      const int o = op_ids[static_cast<size_t>(over)];
      const int src = c.id(op_vals[static_cast<size_t>(over)]);
      if (src != o) c.forget_layout(src, c.val(o).md);  // later readers get their own reorder
      id = c.alias(o, plan.dims, c.val(o).md, v.node->name());
      c.val(id).accumulated = true;
    } else if (!order.empty()) {
      std::vector<int64_t> td;
      for (size_t d : order) td.push_back(plan.dims[d]);
      const std::vector<int64_t> ts = row_major(td);
      std::vector<int64_t> os(plan.dims.size());
      for (size_t i = 0; i < order.size(); ++i) os[order[i]] = ts[i];
      id = c.view(c.new_value(t, td, plain_md(td, *type), v.node->name()), plan.dims, os, 0, v.node->name());
    } else {
      md_t md = blk ? blk->md : (type ? plain_md(plan.dims, *type) : md_t());
      id = c.new_value(t, plan.dims, md, v.node->name());
    }
    out_ids.push_back(id);
    out_strides.push_back(physical(id));
  }

  StepInfo info;
  info.kind = "pointwise";
  info.label = label;
  info.ops = ops;
  info.nodes = keys;
  std::ostringstream sig;
  sig << "pointwise " << prog.text() << " dims" << to_string(space);
  for (size_t k = 0; k < op_ids.size(); ++k) sig << " i" << dtype_name(c.val(op_ids[k]).dtype) << to_string(in_strides[k]);
  for (size_t k = 0; k < out_ids.size(); ++k) sig << " o" << dtype_name(c.val(out_ids[k]).dtype) << to_string(out_strides[k]);
  if (over >= 0) sig << " in place";
  info.signature = sig.str();
  info.flops = static_cast<double>(num_elements(plan.dims)) * static_cast<double>(std::max<size_t>(prog.code.size(), 1));
  std::vector<DType> in_types, out_types;
  for (int id : op_ids) in_types.push_back(c.val(id).dtype);
  for (int id : out_ids) out_types.push_back(c.val(id).dtype);
  const size_t nin = op_ids.size();
  add_native_step(c, info, op_ids, out_ids,
                  [prog, space, in_strides, out_strides, in_types, out_types, nin](const std::vector<char*>& p) {
                    std::vector<kernels::StridedRef> in(nin), out(out_types.size());
                    for (size_t k = 0; k < nin; ++k) in[k] = {p[k], in_types[k], in_strides[k], 0};
                    for (size_t k = 0; k < out.size(); ++k) out[k] = {p[nin + k], out_types[k], out_strides[k], 0};
                    kernels::run_pointwise(prog, in, out, space);
                  });
  for (size_t k = 0; k < results.size(); ++k) c.bind(results[k], out_ids[k]);
  for (const Node* m : plan.nodes) c.mark_done(*m);
  return true;
}

}  // namespace isomer::runtime
