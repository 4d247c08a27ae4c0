// Compiling a graph for the CPU runtime: concrete shapes, compile-time folding,
// views, layouts and the dispatch to the operator lowerings. Operators without a
// oneDNN lowering run through the operator table's reference `eval` hook.
#include "runtime/compiler.h"

#include <omp.h>

#include <cstring>
#include <sstream>

#include "eval/empty_outputs.h"
#include "eval/evaluator.h"
#include "ops/fold_cost.h"
#include "kernels/parallel.h"
#include "runtime/delegate.h"
#include "runtime/lower_control.h"
#include "runtime/native.h"
#include "runtime/shared_derived.h"

namespace isomer::runtime {

std::optional<dt> dnnl_type(DType t) {
  switch (t) {
    case DType::Float32: return dt::f32;
    default: return std::nullopt;  // everything else runs on the reference kernels
  }
}

dims_t to_dims(const std::vector<int64_t>& v) { return dims_t(v.begin(), v.end()); }

md_t plain_md(const std::vector<int64_t>& dims, dt type) {
  if (dims.empty()) return md_t(dims_t{1}, type, dims_t{1});  // scalars as [1]
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return md_t(to_dims(dims), type, to_dims(strides));
}

bool is_plain(const md_t& md, const std::vector<int64_t>& dims) {
  if (md.data.ndims == 0) return true;
  return md == plain_md(dims, md.data_type());
}

std::string describe_md(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  std::ostringstream s;
  for (int i = 0; i < d.ndims; ++i) s << (i ? "x" : "") << d.dims[i];
  if (d.format_kind == dnnl_blocked) {
    const auto& b = d.format_desc.blocking;
    s << ":s";
    for (int i = 0; i < d.ndims; ++i) s << (i ? "," : "") << b.strides[i];
    for (int i = 0; i < b.inner_nblks; ++i) s << ":b" << b.inner_idxs[i] << "/" << b.inner_blks[i];
    if (d.offset0) s << ":o" << d.offset0;
  } else {
    s << ":fmt" << static_cast<int>(d.format_kind);
  }
  if (d.extra.flags) s << ":x" << d.extra.flags;
  return s.str();
}

void Compiler::require_fits_memory(const Node& n, const std::vector<TensorType>& types) const {
  for (size_t i = 0; i < types.size(); ++i)
    if (is_static(types[i].shape))
      require_allocatable(static_dims(types[i].shape), dtype_size(types[i].dtype),
                          describe(n) + ": output " + std::to_string(i));
}

Compiler::Compiler(const Graph& g, const RuntimeOptions& opts, dnnl::engine eng)
    : g_(g), opts_(opts), eng_(std::move(eng)) {
  for (const NodePtr& n : g.topo_order())
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (n->inputs()[i].present()) consumers_[n->inputs()[i]].emplace_back(n.get(), i);
  for (const Value& v : g.outputs()) outputs_.insert(v);
}

const std::vector<std::pair<const Node*, size_t>>& Compiler::consumers(const Value& v) {
  auto it = consumers_.find(v);
  return it == consumers_.end() ? no_consumers_ : it->second;
}

bool Compiler::all_read(const Value& v, const std::function<bool(const Node*)>& within) {
  for (const auto& [user, idx] : consumers(v)) {
    if (within(user)) continue;
    if (!lowered(*user)) return false;
    for (size_t o = 0; o < user->num_outputs(); ++o) {
      const Value out = user->output(o);
      if ((deferred_concat(out) || split_view(out)) && (is_output(out) || !all_read(out, within))) return false;
    }
  }
  return true;
}

bool Compiler::is_output(const Value& v) const { return outputs_.count(v) > 0; }

const Node* Compiler::sole_consumer(const Value& v) {
  if (is_output(v)) return nullptr;
  const auto& c = consumers(v);
  if (c.size() != 1) return nullptr;
  // A node reading v twice (x * x) is one consumer, but not a fusable one.
  const Node* n = c[0].first;
  return n->kind() == NodeKind::Op ? n : nullptr;
}

int Compiler::new_value(DType dtype, std::vector<int64_t> dims, const md_t& md, const std::string& name) {
  RtValue v;
  v.dtype = dtype;
  v.dims = std::move(dims);
  v.md = canonical_unit_strides(md);
  int64_t numel = num_elements(v.dims);
  v.bytes = md.data.ndims ? md.get_size() : static_cast<size_t>(numel) * dtype_size(dtype);
  v.name = name;
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

void Compiler::bind(const Value& v, int id) { ids_[v] = id; }

std::shared_ptr<const kernels::PackedB> Compiler::packed_weights(const Tensor& b, int64_t K, int64_t N) {
  // Weights this compiler converted (gemm_weights) die with it: they are packed for it alone.
  bool converted = false;
  for (const auto& entry : gemm_weights_) converted = converted || entry.second.second.bytes().data() == b.bytes().data();
  if (!converted)
    return shared_derived<kernels::PackedB>(b, "packed " + std::to_string(K) + "x" + std::to_string(N), [&] {
      return kernels::pack_b(reinterpret_cast<const float*>(b.bytes().data()), K, N, N);
    });
  const auto key = std::make_tuple(b.bytes().data(), K, N);
  auto it = packed_.find(key);
  if (it == packed_.end()) {
    auto packed = std::make_shared<const kernels::PackedB>(
        kernels::pack_b(reinterpret_cast<const float*>(b.bytes().data()), K, N, N));
    it = packed_.emplace(key, std::make_pair(b, std::move(packed))).first;
  }
  return it->second.second;
}

const Tensor& Compiler::gemm_weights(const Tensor& b, int64_t K, int64_t N, bool transposed, double alpha) {
  if (!transposed && alpha == 1.0 && b.dtype() == DType::Float32) return b;
  const auto key = std::make_tuple(b.bytes().data(), transposed, alpha);
  auto it = gemm_weights_.find(key);
  if (it == gemm_weights_.end()) {
    std::vector<double> v = b.to_f64(), t(v.size());
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < N; ++j)
        t[static_cast<size_t>(i * N + j)] = alpha * v[static_cast<size_t>(transposed ? j * K + i : i * N + j)];
    it = gemm_weights_.emplace(key, std::make_pair(b, Tensor::from_f64(DType::Float32, {K, N}, t))).first;
  }
  return it->second.second;
}

int Compiler::constant_value(const Tensor& t, const std::string& name) {
  auto type = dnnl_type(t.dtype());
  int id = new_value(t.dtype(), t.dims(), type ? plain_md(t.dims(), *type) : md_t(), name);
  values_[id].known = t;
  return id;
}

const Tensor* Compiler::known(const Value& v) {
  const RtValue& r = val(id(v));
  return r.known ? &*r.known : nullptr;
}

const Tensor* Compiler::peek_known(const Value& v) {
  auto it = ids_.find(v);
  if (it != ids_.end()) return values_[it->second].known ? &*values_[it->second].known : nullptr;
  const Node& n = *v.node;
  if (n.kind() == NodeKind::Constant) return n.value();
  // An operator of constants (Identity of an initializer, as exporters write them)
  // folds now: it depends on nothing pending.
  if (n.kind() != NodeKind::Op || done_.count(&n) || in_progress_.count(&n) || !n.op()->props.deterministic)
    return nullptr;
  for (const Value& in : n.inputs())
    if (in.present() && !peek_known(in)) return nullptr;
  lower_node(n);
  it = ids_.find(v);
  return it != ids_.end() && values_[it->second].known ? &*values_[it->second].known : nullptr;
}

bool Compiler::depends_on_pending(const Value& v) {
  std::vector<const Node*> stack{v.node.get()};
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second || done_.count(n) || n->kind() == NodeKind::Input || n->kind() == NodeKind::Constant)
      continue;
    if (in_progress_.count(n)) return true;
    for (const Value& in : n->inputs())
      if (in.present() && !ids_.count(in)) stack.push_back(in.node.get());
  }
  return false;
}

int Compiler::id(const Value& v) {
  auto it = ids_.find(v);
  if (it != ids_.end()) return it->second;
  if (auto sv = split_views_.find(v); sv != split_views_.end()) {
    // Its dense copy, as a Reshape of a broadcast view made before.
    const SplitView& s = sv->second;
    std::vector<int64_t> fd, fs;
    for (const auto& p : s.parts)
      for (const auto& [e, st] : p) fd.push_back(e), fs.push_back(st);
    const std::string name = values_[s.src].name;
    const int dense = as_plain(view(s.src, fd, fs, 0, name + ".parts"));
    const int out = view(dense, s.dims, row_major(s.dims), 0, name);
    bind(v, out);
    return out;
  }
  const Node& n = *v.node;
  if (n.kind() == NodeKind::Constant) {
    int c = constant_value(*n.value(), n.name());
    bind(v, c);
    return c;
  }
  require(n.kind() != NodeKind::Input, "graph input '" + n.name() + "' is not among the graph's inputs");
  require(!in_progress_.count(&n), describe(n) + " depends on itself");
  lower_node(n);
  it = ids_.find(v);
  require(it != ids_.end(), describe(n) + " did not produce output " + std::to_string(v.index));
  return it->second;
}

int Compiler::alias(int src, std::vector<int64_t> dims, const md_t& md, const std::string& name) {
  int root = values_[src].alias_of >= 0 ? values_[src].alias_of : src;
  int id = new_value(values_[src].dtype, std::move(dims), md, name);
  values_[id].alias_of = root;
  values_[id].byte_offset = values_[src].byte_offset;
  if (!md.data.ndims && !values_[src].strides.empty() && values_[id].dims == values_[src].dims)
    values_[id].strides = values_[src].strides;
  return id;
}

int Compiler::view(int src, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t extra_bytes,
                   const std::string& name) {
  const RtValue& s = values_[src];
  // A dim of extent 1 gets the stride a dense layout would give it (never 0):
  // oneDNN's matmul takes a zero stride for broadcasting and picks its reference
  // implementation.
  auto type = dnnl_type(s.dtype);
  if (!type) unit_axis_strides(dims, strides, 1);  // (new_value makes a descriptor's so)
  md_t md = type ? md_t(to_dims(dims), *type, to_dims(strides)) : md_t();
  int id = alias(src, dims, md, name);
  RtValue& v = values_[id];
  v.byte_offset += extra_bytes;
  if (!type) v.strides = std::move(strides);
  // A view's size is its span, not what a dense tensor of its dims would take.
  v.bytes = static_cast<size_t>(num_elements(v.dims)) * dtype_size(v.dtype);
  return id;
}

std::optional<std::vector<int64_t>> Compiler::strides_of(int id) const {
  const RtValue& v = values_[id];
  if (v.md.data.ndims) {
    const auto& b = v.md.data.format_desc.blocking;
    if (v.md.data.format_kind != dnnl_blocked || b.inner_nblks != 0) return std::nullopt;
    if (v.dims.empty()) return std::vector<int64_t>{};
    return std::vector<int64_t>(b.strides, b.strides + v.md.data.ndims);
  }
  if (!v.strides.empty() || v.dims.empty()) return v.strides;
  std::vector<int64_t> s(v.dims.size(), 1);
  for (size_t i = v.dims.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(v.dims[i], 1);
  return s;
}

// A view that repeats its source along a dim of stride 0 (Expand: grouped-query
// attention's K and V heads repeated for each query head). oneDNN's reorder walks
// such a view element by element (a decode step's 4 x 264 KB of repeated heads took
// 0.035-0.044 ms each); isomer's strided copy repeats whole contiguous runs.
bool Compiler::broadcast_view(int id) const {
  auto s = strides_of(id);
  if (!s) return false;
  const std::vector<int64_t>& d = values_[id].dims;
  for (size_t i = 0; i < s->size() && i < d.size(); ++i)
    if (d[i] > 1 && (*s)[i] == 0) return true;
  return false;
}

bool Compiler::is_dense(int id) const {
  auto s = strides_of(id);
  if (!s) return false;
  const std::vector<int64_t>& d = values_[id].dims;
  if (s->size() != d.size()) return d.empty() || num_elements(d) == 1;
  int64_t expect = 1;
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] == 1) continue;
    if ((*s)[i] != expect) return false;
    expect *= d[i];
  }
  return true;
}

namespace {

// True for float32 `md` of `dims` (rank 3 and more) laid out densely in `order`
// of its axes, outermost first, with no blocks or padding (extent-1 axes not
// compared).
bool dense_in_order(const md_t& md, const std::vector<int64_t>& dims, const std::vector<size_t>& order) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 ||
      d.ndims != static_cast<int>(dims.size()) || d.offset0 != 0)
    return false;
  int64_t stride = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const size_t a = order[k];
    if (d.dims[a] != dims[a] || d.padded_dims[a] != dims[a]) return false;
    if (dims[a] > 1 && d.format_desc.blocking.strides[a] != stride) return false;
    stride *= dims[a];
  }
  return true;
}

// Channel planes reordered to channels last for a few channels (an image's RGB
// planes, the first convolution's input): kernels::planes_to_channels_last, where
// oneDNN's reorder stores one float at a time. nullopt elsewhere.
std::optional<int64_t> few_planes_to_channels_last(const md_t& from, const md_t& to, const std::vector<int64_t>& dims) {
  constexpr int64_t kMaxChannels = 4;
  if (dims.size() < 3 || dims[1] < 2 || dims[1] > kMaxChannels || num_elements(dims) == 0) return std::nullopt;
  std::vector<size_t> planes(dims.size()), last{0};
  for (size_t a = 0; a < dims.size(); ++a) planes[a] = a;
  for (size_t a = 2; a < dims.size(); ++a) last.push_back(a);
  last.push_back(1);
  if (!dense_in_order(from, dims, planes) || !dense_in_order(to, dims, last)) return std::nullopt;
  return num_elements(dims) / (dims[0] * dims[1]);
}

}  // namespace

int Compiler::as_layout(int src, const md_t& md, bool boundary) {
  if (values_[src].md == md) return src;
  auto key = std::make_pair(src, describe_md(md));
  auto it = layout_cache_.find(key);
  if (it != layout_cache_.end()) return it->second;
  RtValue& s = values_[src];
  int out;
  if (s.known) {
    // Constants (weights) are reordered once, here.
    out = new_value(s.dtype, s.dims, md, s.name);
    RtValue& o = values_[out];
    const RtValue& si = values_[src];
    // Keyed by both descriptors whole (data type, and layouts describe_md does not spell out).
    auto md_bytes = [](const md_t& m) { return std::string(reinterpret_cast<const char*>(&m.data), sizeof m.data); };
    o.storage = shared_derived<std::vector<char>>(*si.known, "reorder " + md_bytes(si.md) + md_bytes(md), [&] {
      std::vector<char> bytes(o.bytes);
      dnnl::memory from(si.md, eng_, const_cast<char*>(si.known->bytes().data()));
      dnnl::memory to(md, eng_, bytes.data());
      dnnl::stream st(eng_);
      dnnl::reorder(from, to).execute(st, from, to);
      st.wait();
      return bytes;
    });
  } else {
    std::string name = s.name;
    md_t from = s.md;
    out = new_value(s.dtype, s.dims, md, name + ".reorder");
    StepInfo info;
    info.kind = "reorder";
    info.label = name;
    info.ops = {"Reorder"};
    info.signature = "reorder " + describe_md(from) + " -> " + describe_md(md);
    info.bytes = static_cast<double>(values_[src].bytes + values_[out].bytes);
    info.boundary = boundary;
    const int team = kernels::team_for_work(threads(), info.bytes / kernels::kTeamBytes);
    if (const std::optional<int64_t> pixels = few_planes_to_channels_last(from, md, s.dims)) {
      info.kind = "copy";
      info.signature = "planes to channels last " + describe_md(from) + " -> " + describe_md(md);
      const int64_t batch = s.dims[0], channels = s.dims[1];
      add_native_step(*this, info, {src}, {out}, [batch, channels, pixels = *pixels, team](const std::vector<char*>& p) {
        kernels::planes_to_channels_last(reinterpret_cast<const float*>(p[0]), batch, channels, pixels,
                                         reinterpret_cast<float*>(p[1]), team);
      });
    } else {
      const TeamScope scope(*this, team);
      dnnl::reorder::primitive_desc pd(eng_, from, eng_, md);
      add_primitive(dnnl::reorder(pd), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, out}}, info);
    }
  }
  layout_cache_[key] = out;
  return out;
}

bool Compiler::has_writer(int id) const {
  for (const RtStep& s : steps_)
    for (int w : s.writes)
      if (w == id || values_[w].alias_of == id) return true;
  return false;
}

bool Compiler::retarget(int id, int root, int64_t byte_offset) { return retarget_all({id}, root, {byte_offset}); }

bool Compiler::retarget_all(const std::vector<int>& ids, int root, const std::vector<int64_t>& byte_offsets) {
  std::unordered_set<int> seen;
  for (int id : ids) {
    const RtValue& v = values_[id];
    if (id == root || !seen.insert(id).second || v.alias_of >= 0 || v.known || v.storage || is_input(id) ||
        values_[root].alias_of >= 0)
      return false;
    if (!has_writer(id)) return false;
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    const int id = ids[k];
    for (RtValue& v : values_)
      if (v.alias_of == id) {
        v.alias_of = root;
        v.byte_offset += byte_offsets[k];
      }
    values_[id].alias_of = root;
    values_[id].byte_offset = byte_offsets[k];
  }
  return true;
}

int Compiler::copy_of(int src) {
  const RtValue& s = values_[src];
  int out = new_value(s.dtype, s.dims, s.md, s.name + ".copy");
  StepInfo info;
  info.kind = "copy";
  info.label = s.name;
  info.ops = {"Copy"};
  info.signature = "copy " + describe_md(s.md);
  info.bytes = 2.0 * static_cast<double>(s.bytes);
  const TeamScope team(*this, kernels::team_for_work(threads(), info.bytes / kernels::kTeamBytes));
  dnnl::reorder::primitive_desc pd(eng_, s.md, eng_, s.md);
  add_primitive(dnnl::reorder(pd), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, out}}, info);
  return out;
}

int Compiler::as_plain(int src, bool boundary) {
  const RtValue& v = values_[src];
  if (v.known || is_dense(src)) return src;
  if (v.md.data.ndims && !broadcast_view(src)) return as_layout(src, plain_md(v.dims, v.md.data_type()), boundary);
  auto key = std::make_pair(src, std::string("dense"));
  if (auto it = layout_cache_.find(key); it != layout_cache_.end()) return it->second;
  int out = copy_strided(src, v.name + ".dense");
  steps_.back().info.boundary = boundary;
  layout_cache_[key] = out;
  return out;
}

void Compiler::add_primitive(dnnl::primitive prim, std::vector<std::pair<int, int>> args, StepInfo info) {
  RtStep s;
  s.prim = std::move(prim);
  for (const auto& [arg, id] : args) {
    if (arg == DNNL_ARG_DST) s.writes.push_back(id);
    else s.reads.push_back(id);
  }
  s.args = std::move(args);
  s.info = std::move(info);
  if (s.info.bytes == 0)
    for (const auto& [arg, id] : s.args) s.info.bytes += static_cast<double>(values_[id].bytes);
  s.info.signature += " t" + std::to_string(threads());
  add_step(std::move(s));
}

Compiler::TeamScope::TeamScope(Compiler& c, int team) : c_(c), saved_(c.team_) {
  if (team <= 0 || team >= c.threads()) return;
  c.team_ = team;
  omp_set_num_threads(team);
}

Compiler::TeamScope::~TeamScope() {
  if (c_.team_ == saved_) return;
  c_.team_ = saved_;
  omp_set_num_threads(c_.threads());
}

std::vector<TensorType> Compiler::concrete_types(const Node& n) {
  std::vector<TensorType> in;
  std::vector<const Tensor*> consts;
  for (const Value& v : n.inputs()) {
    if (!v.present()) {
      in.push_back({});
      consts.push_back(nullptr);
      continue;
    }
    // A deferred scalar factor (matmul_operand_scale) has its run-time input's
    // type; asking for its value would lower it.
    Value src = v;
    if (!ids_.count(v) && deferred_.count(v.node.get()))
      src = peek_known(v.node->inputs()[1]) ? v.node->inputs()[0] : v.node->inputs()[1];
    if (const SplitView* s = split_view(src)) {  // its type, without making its copy
      in.push_back({values_[s->src].dtype, make_shape(s->dims)});
      consts.push_back(nullptr);
      continue;
    }
    const RtValue& r = val(id(src));
    in.push_back({r.dtype, make_shape(r.dims)});
    consts.push_back(r.known && src == v ? &*r.known : nullptr);
  }
  InferContext ctx{n.attrs(), in, consts, n.num_outputs()};
  std::vector<TensorType> out = n.op()->infer(ctx);
  for (const TensorType& t : out)
    require(is_static(t.shape), describe(n) + ": output shape " + to_string(t.shape) +
                                    " is not known at compile time, which the runtime needs");
  return out;
}

namespace {
constexpr size_t kFoldBlowUpBytes = 64 << 20;
constexpr size_t kFoldEvalElements = size_t{128} << 20;  // 1 GB as doubles
constexpr double kFoldFlops = 4e9;
}  // namespace

bool Compiler::try_fold(const Node& n, const std::vector<TensorType>& types) {
  if (!n.op()->props.deterministic) return false;
  for (const Value& v : n.inputs())  // a deferred scalar factor's value is a run-time one, as is a split view
    if (v.present() && !ids_.count(v) && (deferred_.count(v.node.get()) || split_views_.count(v))) return false;
  std::vector<Tensor> args;
  bool shape_of_runtime = n.op_type() == "Shape";
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const Value& v = n.inputs()[i];
    if (!v.present()) {
      args.emplace_back();
      continue;
    }
    const RtValue& r = val(id(v));
    if (r.known) {
      args.push_back(*r.known);
    } else if (shape_of_runtime && i == 0 && dtype_size(r.dtype) > 0) {
      // Shape reads only the dims: a zero tensor of those dims stands in for the data.
      args.emplace_back(r.dtype, r.dims, std::string(static_cast<size_t>(num_elements(r.dims)) * dtype_size(r.dtype), '\0'));
    } else {
      return false;
    }
  }
  // A blow-up of small constants (a scalar expanded to 10^9 elements under a ReduceSum)
  // runs as a step, not folded: folding materializes it with the reference kernels, which
  // hold an index table of 8 bytes an element beside it. Weights transformed at their
  // own size still fold.
  size_t in_bytes = 0, out_bytes = 0;
  for (const Tensor& t : args) in_bytes += t.byte_size();  // an omitted optional input holds no bytes
  for (const TensorType& t : types) out_bytes += static_cast<size_t>(num_elements(t.shape).value_or(0)) * dtype_size(t.dtype);
  if (out_bytes > kFoldBlowUpBytes && out_bytes > 2 * in_bytes) return false;
  // The other way round: a reduction of a constant of 10^9 elements (a ConstantOfShape
  // made known here under a ReduceMax) held every element again as a double in the
  // reference kernel, 8 GB, and `optimize` refused a model ONNX Runtime runs as out of
  // memory; it runs as a step over the constant.
  size_t in_elements = 0;
  for (const Tensor& t : args) in_elements += static_cast<size_t>(t.numel());
  if (in_elements > kFoldEvalElements && 2 * out_bytes < in_bytes) return false;
  // Arithmetic past the optimizer's folding limit (a convolution of a constant image,
  // products of large weights) runs as a step on the fast kernels: folded, it ran on the
  // reference ones at every compile (the optimizer compiles a graph several times).
  std::vector<TensorType> in_types;
  for (const Tensor& t : args) in_types.push_back({t.dtype(), Shape(t.dims().begin(), t.dims().end())});
  const std::optional<double> flops = fold_flops(n.op_type(), n.attrs(), in_types, types);
  if (flops && *flops > kFoldFlops) return false;
  // Summed as the optimizer's folding and any runtime sum a float32 product (OpDef::fold),
  // not in double: the reference evaluator spent minutes on products of large weights.
  EvalContext ctx{n.attrs(), args, n.num_outputs()};
  const OpDef& op = *n.op();
  const std::optional<std::vector<Tensor>> empty = empty_outputs(types);
  std::vector<Tensor> out = empty ? *empty : op.fold ? op.fold(ctx) : op.eval(ctx);
  for (size_t i = 0; i < out.size(); ++i) bind(n.output(static_cast<uint32_t>(i)), constant_value(out[i], n.name()));
  return true;
}

bool Compiler::touches_empty(const Node& n, const std::vector<TensorType>& types) {
  // An empty 1-D constant is how ONNX writes an input left out (Resize's roi and
  // scales): not data. Inputs not lowered yet (a scalar factor deferred into this
  // node) are not lowered here.
  for (const Value& v : n.inputs()) {
    if (!v.present()) continue;
    auto it = ids_.find(v);
    const std::vector<int64_t>* dims = it != ids_.end() ? &values_[it->second].dims
                                       : v.node->kind() == NodeKind::Constant ? &v.node->value()->dims()
                                                                              : nullptr;
    const bool constant = v.node->kind() == NodeKind::Constant || (it != ids_.end() && values_[it->second].known);
    if (dims && num_elements(*dims) == 0 && !(constant && dims->size() == 1)) return true;
  }
  for (const TensorType& t : types)
    if (is_static(t.shape) && num_elements(static_dims(t.shape)) == 0) return true;
  return false;
}

bool Compiler::all_empty(const std::vector<TensorType>& types) {
  for (const TensorType& t : types)
    if (!is_static(t.shape) || num_elements(static_dims(t.shape)) != 0) return false;
  return !types.empty();
}

bool Compiler::lower_nothing(const Node& n, const std::vector<TensorType>& types) {
  std::vector<int> outs;
  for (size_t k = 0; k < types.size(); ++k) {
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    outs.push_back(new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name()));
    bind(n.output(static_cast<uint32_t>(k)), outs.back());
  }
  add_native_step(*this, step_info(n, "empty", "empty " + n.op_type()), {}, outs, [](const std::vector<char*>&) {});
  return true;
}

void Compiler::lower_fallback(const Node& n, const std::vector<TensorType>& types) {
  // lower_concat defers a Concat only for consumers lower_conv always handles.
  for (const Value& v : n.inputs())
    require(!v.present() || !deferred_concat(v),
            describe(n) + " reads a Concat that was lowered into its consumers, and cannot run without it");
  std::vector<int> ins;
  std::vector<std::optional<Tensor>> fixed;
  std::ostringstream sig;
  sig << "ref " << n.op_type() << " a" << n.attrs().hash();
  for (const Value& v : n.inputs()) {
    if (!v.present()) {
      ins.push_back(-1);
      fixed.emplace_back(Tensor());
      sig << " -";
      continue;
    }
    int i = id(v);
    const RtValue& r = val(i);
    sig << " " << dtype_name(r.dtype) << to_string(r.dims) << (r.known ? "c" : "");
    if (r.known) {
      ins.push_back(-1);
      fixed.emplace_back(*r.known);
    } else {
      ins.push_back(as_plain(i));
      fixed.emplace_back();
    }
  }
  std::vector<int> outs;
  for (size_t k = 0; k < types.size(); ++k) {
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    int o = new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
    bind(n.output(static_cast<uint32_t>(k)), o);
    outs.push_back(o);
  }
  RtStep s;
  s.info.kind = "reference";
  s.info.label = n.name();
  s.info.ops = {n.op_type()};
  s.info.nodes = {node_key(n)};
  s.info.signature = sig.str();
  for (int i : ins)
    if (i >= 0) {
      s.reads.push_back(i);
      s.info.bytes += static_cast<double>(values_[i].bytes);
    }
  for (int o : outs) s.info.bytes += static_cast<double>(values_[o].bytes);
  s.info.flops = s.info.bytes / 4;
  s.writes = outs;
  NodePtr keep = n.shared_from_this();
  std::vector<RtValue> in_types, out_types;
  for (int i : ins) in_types.push_back(i >= 0 ? values_[i] : RtValue());
  for (int o : outs) out_types.push_back(values_[o]);
  for (RtValue& r : in_types) r.md = md_t(), r.known.reset();
  for (RtValue& r : out_types) r.md = md_t(), r.known.reset();
  s.make_fn = [keep, ins, fixed, outs, in_types, out_types](const std::function<char*(int)>& data) {
    std::vector<char*> in_ptr, out_ptr;
    for (int i : ins) in_ptr.push_back(i >= 0 ? data(i) : nullptr);
    for (int o : outs) out_ptr.push_back(data(o));
    return std::function<void()>([keep, fixed, in_ptr, out_ptr, in_types, out_types] {
      std::vector<Tensor> args;
      for (size_t k = 0; k < fixed.size(); ++k) {
        if (fixed[k]) {
          args.push_back(*fixed[k]);
        } else {
          const RtValue& r = in_types[k];
          args.emplace_back(r.dtype, r.dims, std::string(in_ptr[k], r.bytes));
        }
      }
      EvalContext ctx{keep->attrs(), args, keep->num_outputs()};
      std::vector<Tensor> res = keep->op()->eval(ctx);
      for (size_t k = 0; k < res.size() && k < out_ptr.size(); ++k) {
        require(res[k].byte_size() == out_types[k].bytes,
                describe(*keep) + ": reference kernel returned " + to_string(res[k].type()));
        std::memcpy(out_ptr[k], res[k].bytes().data(), res[k].byte_size());
      }
    });
  };
  add_step(std::move(s));
}

void Compiler::lower_node(const Node& n) {
  if (done_.count(&n)) return;
  if (n.kind() == NodeKind::Opaque) {
    in_progress_.insert(&n);
    const bool random = lower_random(*this, n) || lower_vendor(*this, n);
    // If, Loop and Scan run natively where their output types do not depend on the data.
    const bool control = !random && is_control_flow(n);
    const std::string why = control ? lower_control_flow(*this, n) : "";
    if (!random && (!control || !why.empty())) {
      const std::string not_native = control ? " (not native: " + why + ")" : "";
      require(opts_.delegate_opaque,
              describe_opaque(n) + not_native + "; the isomer runtime cannot run it without ONNX Runtime");
      try {
        lower_delegated(*this, n);
      } catch (const Error& e) {
        if (!control) throw;
        throw Error(e.what() + not_native);
      }
      if (control) steps_.back().info.note = "not native: " + why;
    }
    mark_done(n);
    in_progress_.erase(&n);
    return;
  }
  in_progress_.insert(&n);
  // Producers first: one of them may fuse this node into itself.
  for (const Value& v : n.inputs())
    if (v.present() && !ids_.count(v) && v.node->kind() == NodeKind::Op && !done_.count(v.node.get()) &&
        !deferred_.count(v.node.get()))
      lower_node(*v.node);
  if (done_.count(&n)) {
    in_progress_.erase(&n);
    return;
  }
  std::vector<TensorType> types = concrete_types(n);
  require_fits_memory(n, types);
  bool ok = try_fold(n, types);
  // A node of an empty tensor runs on the reference evaluator: there is nothing to
  // compute, and oneDNN and the kernels assume at least one element (a Conv of no
  // output channels divided by zero).
  // A Concat with an empty part and a result that is not empty concatenates the
  // other parts natively (lower_concat skips the empty ones): Phi-3's attention
  // concatenates its rotated head dims with the empty rest where the rotation
  // covers the whole head, and the reference kernel took 4 us for each.
  const bool empty = !ok && touches_empty(n, types) && !(n.op_type() == "Concat" && !all_empty(types));
  // Where every result is empty there is nothing to compute: a step that does
  // nothing, not the reference kernel (4-5 us a step to make its tensors).
  if (empty && all_empty(types)) ok = lower_nothing(n, types);
  if (LowerFn lower = ok || empty ? nullptr : lowering_of(n.op()->lower)) {
    try {
      ok = lower(*this, n);
    } catch (const dnnl::error&) {
      // oneDNN has no implementation for this instance: fall back (steps added
      // for a failed attempt only convert layouts and stay harmless).
      ok = false;
    }
  }
  if (!ok) lower_fallback(n, types);
  if (empty) {
    // Not a slow path: there is nothing to compute.
    steps_.back().info.kind = "empty";
    steps_.back().info.note = "a tensor of no elements";
  }
  mark_done(n);
  in_progress_.erase(&n);
}

void Compiler::run() {
  input_dims_ = concrete_input_dims(g_, opts_.bindings);
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    const NodePtr& in = g_.inputs()[i];
    DType t = in->output_types()[0].dtype;
    auto type = dnnl_type(t);
    require(dtype_size(t) > 0, "graph input '" + in->name() + "' has type " + std::string(dtype_name(t)) +
                                   ", which the runtime does not support");
    int id = new_value(t, input_dims_[i], type ? plain_md(input_dims_[i], *type) : md_t(), in->name());
    bind(in->output(0), id);
    input_ids_.push_back(id);
  }
  for (const NodePtr& n : g_.topo_order()) {
    if (n->kind() == NodeKind::Op && !done_.count(n.get()) && matmul_operand_scale(*this, *n)) {
      deferred_.insert(n.get());
      continue;
    }
    if (n->kind() == NodeKind::Op || n->kind() == NodeKind::Opaque) lower_node(*n);
  }
  for (const Value& v : g_.outputs()) output_ids_.push_back(as_plain(id(v), /*boundary=*/true));
}

bool is_runnable(const Graph& g, std::string* why, const RuntimeOptions& opts) {
  for (const NodePtr& in : g.inputs()) {
    if (in->onnx_type()) {
      if (why) *why = "graph input '" + in->name() + "' is not a tensor of known rank";
      return false;
    }
  }
  // Every value is laid out by a oneDNN memory descriptor, which holds at most
  // DNNL_MAX_NDIMS axes (ONNX sets no limit; ONNX Runtime runs rank 13 and more).
  auto rank_fits = [&](const Node& n) {
    for (const TensorType& t : n.output_types())
      if (t.rank() > DNNL_MAX_NDIMS) {
        if (why)
          *why = (n.kind() == NodeKind::Input ? "graph input '" + n.name() + "'" : describe(n)) + " has a value of rank " +
                 std::to_string(t.rank()) + ", past the " + std::to_string(DNNL_MAX_NDIMS) + " axes the runtime holds";
        return false;
      }
    return true;
  };
  for (const NodePtr& in : g.inputs())
    if (!rank_fits(*in)) return false;
  for (const NodePtr& n : g.topo_order()) {
    if (!rank_fits(*n)) return false;
    if (n->kind() == NodeKind::Opaque && !opts.delegate_opaque && !runs_natively(*n) && !vendor_runs_natively(*n) &&
        !is_control_flow(*n)) {
      if (why) *why = describe_opaque(*n);
      return false;
    }
    if (n->kind() == NodeKind::Constant && dtype_size(n->value()->dtype()) == 0) {
      if (why) *why = "constant '" + n->name() + "' has type " + std::string(dtype_name(n->value()->dtype()));
      return false;
    }
  }
  return true;
}

}  // namespace isomer::runtime
