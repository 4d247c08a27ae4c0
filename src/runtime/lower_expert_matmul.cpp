// A product with weights picked at run time from a constant stack of matrices: a
// mixture of experts' Gather or GatherND of W [E, P, Q] along E by the router's
// choice, perhaps a Transpose of the picked matrices, then MatMul with the tokens
// (transformers' batched-matmul MoE: W[idx] @ x per token; or x @ W[idx]). Copying
// the picked matrices out cost more than the product: GraniteMoE's four GatherNDs
// wrote 4 MB a run from 256 KB of weights. Here every expert's matrix is packed
// once, when the graph is compiled (kernels::pack_panels), and at run time the
// rows the product multiplies are grouped by expert, so that each expert's rows
// run as one product over its panels, the weights read where they lie, once.
#include <algorithm>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// The multiply-adds that pay for one more thread (as lower_matmul's).
constexpr double kTeamMacs = 256.0 * 1024;
// The most bytes of packed expert matrices one step keeps.
constexpr double kMaxPackedBytes = 512.0 * 1024 * 1024;

// Where the product's operand `v` lies: the value its strides start at and, per
// dim, its parts (extent, element stride), outermost first; a dim of extent 1
// has none. A split view (a repeat merged into a real dim: torch's
// repeat_interleave of the tokens, one row per chosen expert) keeps its parts.
struct Operand {
  int src = -1;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> parts;
};

std::optional<Operand> operand_of(Compiler& c, const Value& v) {
  Operand o;
  if (const SplitView* s = c.split_view(v)) {
    o.src = s->src;
    o.parts = s->parts;
    if (!c.strides_of(o.src)) return std::nullopt;
  } else {
    o.src = c.id(v);
    if (!c.strides_of(o.src)) o.src = c.as_plain(o.src);
    const std::vector<int64_t> st = *c.strides_of(o.src), d = c.val(o.src).dims;
    for (size_t i = 0; i < d.size(); ++i)
      o.parts.push_back(d[i] == 1 ? std::vector<std::pair<int64_t, int64_t>>{}
                                  : std::vector<std::pair<int64_t, int64_t>>{{d[i], st[i]}});
  }
  return o;
}

// The element offset of index i along a dim made of `parts`.
int64_t part_offset(const std::vector<std::pair<int64_t, int64_t>>& parts, int64_t i) {
  int64_t off = 0;
  for (size_t p = parts.size(); p-- > 0;) {
    off += (i % parts[p].first) * parts[p].second;
    i /= parts[p].first;
  }
  return off;
}

// The one stride of a matrix dim (0 for extent 1); nullopt if it is split.
std::optional<int64_t> single_stride(const std::vector<std::pair<int64_t, int64_t>>& parts) {
  if (parts.size() > 1) return std::nullopt;
  return parts.empty() ? 0 : parts[0].second;
}

// The plan of one step: C rows = A rows x Wt[e], each of `rows` rows per batch.
struct ExpertPlan {
  int64_t experts = 0, K = 0, N = 0, rows = 0, batches = 0;
  int64_t x_row = 0, x_elem = 0;  // row r, element k of batch b's A at x_off[b] + r x_row + k x_elem
  int64_t y_row = 0, y_elem = 0;  // row r, column n of batch b's C at b y_batch + r y_row + n y_elem
  int64_t y_batch = 0;
  std::vector<int64_t> x_off, pick;  // per batch: A's offset, the position of its index
  size_t index_bytes = 8;
  kernels::VectorIsa isa = kernels::VectorIsa::Baseline;
  int64_t panel_floats = 0;  // per expert
  std::shared_ptr<const std::vector<float>> panels;
  int team = 1;
};

// Rows of C from `count` consecutive rows of the expert-sorted order starting at
// `first` (all of expert e): A's rows gathered dense (or read in place when they
// are one batch's rows at unit element stride), the product over e's panels in
// column blocks that stay in L2, the result scattered (or written in place).
void run_rows(const ExpertPlan& p, const float* x, float* y, const std::vector<size_t>& order, int64_t e,
              int64_t first, int64_t count, std::vector<float>& a_buf, std::vector<float>& c_buf) {
  const auto b0 = static_cast<int64_t>(order[static_cast<size_t>(first / p.rows)]);
  const int64_t r0 = first % p.rows;
  const bool one_batch = r0 + count <= p.rows;
  const bool a_direct = one_batch && p.x_elem == 1 && count >= kernels::kMaxTileRows;
  const bool c_direct = one_batch && p.y_elem == 1 && count >= kernels::kMaxTileRows;
  const float* a = x + p.x_off[static_cast<size_t>(b0)] + r0 * p.x_row;
  int64_t a_row = p.x_row;
  if (!a_direct) {
    a_buf.resize(static_cast<size_t>(count * p.K));
    for (int64_t q = 0; q < count; ++q) {
      const int64_t s = first + q, r = s % p.rows;
      const size_t b = order[static_cast<size_t>(s / p.rows)];
      const float* src = x + p.x_off[b] + r * p.x_row;
      float* dst = a_buf.data() + q * p.K;
      if (p.x_elem == 1) std::memcpy(dst, src, static_cast<size_t>(p.K) * sizeof(float));
      else
        for (int64_t k = 0; k < p.K; ++k) dst[k] = src[k * p.x_elem];
    }
    a = a_buf.data();
    a_row = p.K;
  }
  float* c = y + b0 * p.y_batch + r0 * p.y_row;
  int64_t c_row = p.y_row;
  if (!c_direct) {
    c_buf.resize(static_cast<size_t>(count * p.N));
    c = c_buf.data();
    c_row = p.N;
  }
  // Column blocks of panels of about half of L2, read once for all `count` rows.
  const int64_t nr = kernels::panel_columns(p.isa, p.N);
  const auto half_l2 = static_cast<int64_t>(kernels::l2_bytes_per_core() / 2 / sizeof(float));
  const int64_t fit = half_l2 / std::max<int64_t>(p.K, 1);
  const int64_t block = std::max<int64_t>(nr, fit / nr * nr);
  const float* panels = p.panels->data() + e * p.panel_floats;
  for (int64_t n0 = 0; n0 < p.N; n0 += block) {
    kernels::PanelGemm g;
    g.M = count;
    g.K = g.packed_k = p.K;
    g.N = g.packed_n = std::min(block, p.N - n0);
    g.a_row = a_row;
    g.c_row = c_row;
    kernels::gemm_panels(p.isa, a, panels + n0 / nr * p.K * nr, c + n0, g);
  }
  if (c_direct) return;
  for (int64_t q = 0; q < count; ++q) {
    const int64_t s = first + q, r = s % p.rows;
    const auto b = static_cast<int64_t>(order[static_cast<size_t>(s / p.rows)]);
    float* dst = y + b * p.y_batch + r * p.y_row;
    const float* src = c_buf.data() + q * p.N;
    if (p.y_elem == 1) std::memcpy(dst, src, static_cast<size_t>(p.N) * sizeof(float));
    else
      for (int64_t n = 0; n < p.N; ++n) dst[n * p.y_elem] = src[n];
  }
}

// The expert of each batch (its index read, range-checked and wrapped), the
// batches sorted by expert (a counting sort), then the products.
void run_experts(const ExpertPlan& p, const char* index, const float* x, float* y, const std::string& who) {
  thread_local std::vector<size_t> expert, order, start, next;
  const auto E = static_cast<size_t>(p.experts), B = static_cast<size_t>(p.batches);
  expert.resize(B);
  order.resize(B);
  start.assign(E + 1, 0);
  for (size_t b = 0; b < B; ++b) {
    const int64_t at = p.pick[b];
    int64_t e;
    if (p.index_bytes == 4) {
      int32_t v;
      std::memcpy(&v, index + at * 4, 4);
      e = v;
    } else {
      std::memcpy(&e, index + at * 8, 8);
    }
    if (e < -p.experts || e >= p.experts)
      throw Error(who + ": index " + std::to_string(e) + " is out of range for an axis of extent " +
                  std::to_string(p.experts));
    expert[b] = static_cast<size_t>(e < 0 ? e + p.experts : e);
    ++start[expert[b] + 1];
  }
  for (size_t e = 0; e < E; ++e) start[e + 1] += start[e];
  next.assign(start.begin(), start.end() - 1);
  for (size_t b = 0; b < B; ++b) order[next[expert[b]]++] = b;
  // Each thread takes an equal share of the sorted rows, cut at experts' ends and
  // into chunks of A of at most 256 KB.
  const int64_t total = p.batches * p.rows;
  const int64_t chunk = std::clamp<int64_t>(64 * 1024 / std::max<int64_t>(p.K, 1), kernels::kMaxTileRows, 256);
  const std::vector<size_t>& sorted = order;
  const std::vector<size_t>& first = start;
  kernels::parallel_teams(p.team, [&](int t, int nt) {
    thread_local std::vector<float> a_buf, c_buf;
    const int64_t lo = total * t / nt, hi = total * (t + 1) / nt;
    for (size_t e = 0; e < E; ++e) {
      const int64_t s0 = std::max(lo, static_cast<int64_t>(first[e]) * p.rows);
      const int64_t s1 = std::min(hi, static_cast<int64_t>(first[e + 1]) * p.rows);
      for (int64_t s = s0; s < s1;) {
        // Where a batch's rows are read in place, a run ends with its batch.
        int64_t n = std::min(chunk, s1 - s);
        const int64_t in_batch = p.rows - s % p.rows;
        if (n > in_batch && in_batch >= kernels::kMaxTileRows) n = in_batch;
        run_rows(p, x, y, sorted, static_cast<int64_t>(e), s, n, a_buf, c_buf);
        s += n;
      }
    }
  });
}

// For a Transpose that keeps every axis but perhaps swaps the last two: whether it
// swaps them; nullopt for any other permutation.
std::optional<bool> swaps_last_two(const std::vector<int64_t>& perm) {
  const size_t r = perm.size();
  if (r < 2) return std::nullopt;
  for (size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != static_cast<int64_t>(i)) return std::nullopt;
  const auto a = static_cast<int64_t>(r) - 2, b = static_cast<int64_t>(r) - 1;
  if (perm[r - 2] == a && perm[r - 1] == b) return false;
  if (perm[r - 2] == b && perm[r - 1] == a) return true;
  return std::nullopt;
}

}  // namespace

bool lower_expert_matmul(Compiler& c, const Node& g) {
  if (!c.opts().fuse || g.num_outputs() != 1 || g.inputs().size() != 2) return false;
  const Tensor* w = c.peek_known(g.inputs()[0]);
  if (!w || w->dtype() != DType::Float32 || w->rank() != 3 || c.peek_known(g.inputs()[1])) return false;
  const DType it = g.inputs()[1].type().dtype;
  std::vector<int64_t> picks;  // the index's dims that pick a matrix
  if (g.op_type() == "Gather") {
    if (it != DType::Int64 && it != DType::Int32) return false;
    if (normalize_axis(g.attrs().get_int("axis", 0), 3) != 0) return false;
    picks = c.dims(g.inputs()[1]);
  } else if (g.op_type() == "GatherND") {
    if (it != DType::Int64 || g.attrs().get_int("batch_dims", 0) != 0) return false;
    picks = c.dims(g.inputs()[1]);
    if (picks.empty() || picks.back() != 1) return false;
    picks.pop_back();
  } else {
    return false;
  }
  if (c.is_output(g.output(0))) return false;
  // Transposes of the picked matrices (exporters without optimization write
  // identity ones too) and Identity nodes on the way to the product.
  std::vector<const Node*> views;
  bool tr = false;
  Value picked = g.output(0);
  const Node* mm = c.sole_consumer(picked);
  while (mm && (mm->op_type() == "Transpose" || mm->op_type() == "Identity") && mm->num_outputs() == 1 &&
         c.takeable(*mm) && !c.is_output(mm->output(0))) {
    if (mm->op_type() == "Transpose") {
      const std::optional<bool> swap = swaps_last_two(mm->attrs().get_ints("perm", {}));
      if (!swap || mm->attrs().get_ints("perm", {}).size() != picks.size() + 2) return false;
      tr = tr != *swap;
    }
    views.push_back(mm);
    picked = mm->output(0);
    mm = c.sole_consumer(picked);
  }
  if (!mm || mm->op_type() != "MatMul" || mm->inputs().size() != 2 || !c.takeable(*mm) ||
      mm->output_types()[0].dtype != DType::Float32)
    return false;
  if (mm->inputs()[0] == mm->inputs()[1]) return false;
  const bool left = mm->inputs()[0] == picked;  // W[idx] @ x, else x @ W[idx]
  const Value& xv = mm->inputs()[left ? 1 : 0];
  if (c.depends_on_pending(xv) || xv.type().dtype != DType::Float32) return false;
  c.lower_producer(xv);  // (a split view stays one: dims() would copy it)
  const std::vector<int64_t> xd = c.dims(xv);
  if (xd.size() < 2) return false;
  // The picked matrix [g0, g1] as W[e]'s strides: (Q, 1), or (1, Q) transposed.
  const int64_t E = w->dims()[0], P = w->dims()[1], Q = w->dims()[2];
  const int64_t g0 = tr ? Q : P, g1 = tr ? P : Q, s0 = tr ? 1 : Q, s1 = tr ? Q : 1;
  // The product as rows of A times Wt [K, N]: W[idx] @ x is (x^T Wt)^T with Wt = W[idx]^T.
  const int64_t K = left ? g1 : g0, N = left ? g0 : g1;
  const int64_t b_k = left ? s1 : s0, b_n = left ? s0 : s1;
  if (xd[xd.size() - (left ? 2 : 1)] != K || K == 0 || N == 0) return false;
  std::vector<int64_t> xb(xd.begin(), xd.end() - 2);
  std::vector<int64_t> ob = broadcast_dims(picks, xb);
  std::vector<int64_t> want = ob;
  want.push_back(left ? N : xd[xd.size() - 2]);
  want.push_back(left ? xd.back() : N);
  // (Not concrete_types(*mm): it would ask for the picked matrices, which are never made.)
  const Shape& declared = mm->output_types()[0].shape;
  if (is_static(declared) && static_dims(declared) != want) return false;
  const std::vector<int64_t>& od = want;
  const std::optional<Operand> x = operand_of(c, xv);
  if (!x || x->parts.size() != xd.size()) return false;
  const std::optional<int64_t> xs_m = single_stride(x->parts[xd.size() - 2]), xs_n = single_stride(x->parts.back());
  if (!xs_m || !xs_n) return false;
  const int idx = c.as_plain(c.id(g.inputs()[1]));

  ExpertPlan p;
  p.experts = E;
  p.K = K;
  p.N = N;
  p.rows = left ? xd.back() : xd[xd.size() - 2];
  p.x_row = left ? *xs_n : *xs_m;
  p.x_elem = left ? *xs_m : *xs_n;
  p.y_row = left ? 1 : N;
  p.y_elem = left ? od.back() : 1;
  p.y_batch = od[od.size() - 2] * od.back();
  p.batches = num_elements(ob);
  p.index_bytes = dtype_size(it);
  if (p.rows == 0 || p.batches == 0) return false;
  for (int64_t b = 0; b < p.batches; ++b) {
    // Batch b's index in the output's batch dims, then in each operand's (broadcast).
    int64_t rest = b, x_off = 0, pick = 0, pick_stride = 1;
    for (size_t d = ob.size(); d-- > 0;) {
      const int64_t i = rest % ob[d];
      rest /= ob[d];
      const size_t from_end = ob.size() - d;
      if (from_end <= xb.size()) {
        const size_t xdim = xb.size() - from_end;
        if (xb[xdim] != 1) x_off += part_offset(x->parts[xdim], i);
      }
      if (from_end <= picks.size()) {
        const size_t pdim = picks.size() - from_end;
        if (picks[pdim] != 1) pick += i * pick_stride;
        pick_stride *= picks[pdim];
      }
    }
    p.x_off.push_back(x_off);
    p.pick.push_back(pick);
  }
  p.isa = kernels::best_vector_isa();
  p.panel_floats = kernels::panels_size(p.isa, K, N);
  // The panels are a second copy of the weights, which the graph keeps: past
  // kMaxPackedBytes the picked matrices are gathered at run time as before.
  if (static_cast<double>(E) * static_cast<double>(p.panel_floats) * sizeof(float) > kMaxPackedBytes) return false;
  auto panels = std::make_shared<std::vector<float>>(static_cast<size_t>(E * p.panel_floats));
  const auto* wd = reinterpret_cast<const float*>(w->bytes().data());
  for (int64_t e = 0; e < E; ++e)
    kernels::pack_panels(p.isa, wd + e * P * Q, b_k, b_n, K, N, 1.0f, panels->data() + e * p.panel_floats);
  p.panels = std::move(panels);
  const double macs = static_cast<double>(p.batches * p.rows) * static_cast<double>(K * N);
  p.team = kernels::team_for_work(c.threads(), macs / kTeamMacs);

  const int y = c.new_value(DType::Float32, od, plain_md(od, dt::f32), mm->name());
  StepInfo info;
  info.kind = "matmul";
  info.label = mm->name();
  info.ops = {g.op_type()};
  info.nodes = {node_key(g)};
  views.push_back(mm);
  for (const Node* n : views) {
    info.ops.push_back(n->op_type());
    info.nodes.push_back(node_key(*n));
  }
  info.signature = "expert_matmul E" + std::to_string(E) + " K" + std::to_string(K) + " N" + std::to_string(N) +
                   " rows" + std::to_string(p.rows) + " x" + std::to_string(p.batches) + (left ? " left" : " right") +
                   " a" + std::to_string(p.x_row) + "," + std::to_string(p.x_elem);
  info.flops = 2 * macs;
  // The step reads the picked rows and writes C; the weights stay packed in the step.
  info.bytes = static_cast<double>(p.batches * p.rows) * static_cast<double>(K + N) * sizeof(float);
  const std::string who = describe(g);
  add_native_step(c, info, {idx, x->src}, {y}, [p, who](const std::vector<char*>& ptrs) {
    run_experts(p, ptrs[0], reinterpret_cast<const float*>(ptrs[1]), reinterpret_cast<float*>(ptrs[2]), who);
  });
  c.bind(mm->output(0), y);
  for (const Node* n : views) c.mark_done(*n);
  return true;
}

}  // namespace isomer::runtime
