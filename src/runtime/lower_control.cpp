// Native If and Loop (see lower_control.h).
#include "runtime/lower_control.h"

#include <cstring>
#include <limits>
#include <sstream>

#include "onnx/body_model.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

namespace {

// Why a node stays on ONNX Runtime; caught by lower_control_flow.
struct NotNative : Error {
  using Error::Error;
};

// At most this many iterations are planned one by one for a loop whose carried values
// change shape, and at most this many distinct bodies compiled for it.
constexpr int64_t kMaxPlannedIterations = 4096;
constexpr size_t kMaxBodyVariants = 16;

std::string type_text(const RtValue& r) { return to_string(TensorType{r.dtype, make_shape(r.dims)}); }

std::string types_text(const std::vector<TensorType>& types) {
  std::string s;
  for (const TensorType& t : types) s += (s.empty() ? "" : ", ") + to_string(t);
  return "(" + s + ")";
}

size_t byte_size(const TensorType& t) {
  return static_cast<size_t>(num_elements(static_dims(t.shape))) * dtype_size(t.dtype);
}

// A value a body can be fed: a tensor of a type the runtime computes with in its own
// type (half types are widened to float32 in the main graph, not inside a body).
void require_feedable(const RtValue& r, const std::string& what) {
  if (dtype_size(r.dtype) == 0 || r.dtype == DType::String)
    throw NotNative(what + " is " + type_text(r) + ", not a tensor the runtime can hand to a body");
  if (r.dtype == DType::Float16 || r.dtype == DType::BFloat16)
    throw NotNative(what + " is " + type_text(r) + " (half precision)");
}

// The values the node's bodies read from enclosing graphs (its inputs from `first` on).
struct Outer {
  std::vector<OuterValue> values;  // one per outer name, for import_body
  std::vector<int> ids;            // the ones fed at run time, dense
};

Outer outer_values(Compiler& c, const Node& n, size_t first) {
  Outer o;
  for (size_t k = first; k < n.inputs().size(); ++k) {
    int id = c.id(n.inputs()[k]);
    const RtValue& r = c.val(id);
    if (!r.known) require_feedable(r, "outer value " + std::to_string(k - first));
    o.values.push_back({TensorType{r.dtype, make_shape(r.dims)}, r.known ? &*r.known : nullptr});
    if (!r.known) o.ids.push_back(c.as_plain(id));
  }
  return o;
}

std::shared_ptr<Executable> compile_graph(Compiler& c, const Graph& g, const std::string& attribute) {
  RuntimeOptions o = c.opts();
  o.bindings.clear();
  try {
    return compile(g, o);
  } catch (const std::exception& e) {
    throw NotNative("its " + attribute + " does not compile: " + e.what());
  }
}

Graph body_graph(Compiler& c, const Node& n, const std::string& attribute, const std::vector<TensorType>& formal,
                 const Outer& outer) {
  try {
    return import_body(n.opaque()->node_proto, attribute, c.graph().info(), formal, outer.values);
  } catch (const Error& e) {
    throw NotNative(std::string("its ") + attribute + " cannot be imported at these types: " + e.what());
  }
}

// The node's outputs as new values of `types`, bound; their ids.
std::vector<int> bind_outputs(Compiler& c, const Node& n, const std::vector<TensorType>& types) {
  std::vector<int> ids;
  for (size_t k = 0; k < types.size(); ++k) {
    if (k < n.output_types().size() && n.output_types()[k].dtype != DType::Undefined &&
        n.output_types()[k].dtype != types[k].dtype)
      throw NotNative("output " + std::to_string(k) + " is declared " + to_string(n.output_types()[k]) +
                      ", its body gives " + to_string(types[k]));
  }
  for (size_t k = 0; k < types.size(); ++k) {
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    int id = c.new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
    c.bind(n.output(static_cast<uint32_t>(k)), id);
    ids.push_back(id);
  }
  return ids;
}

StepInfo control_step_info(const Node& n, const std::string& kind, const std::string& signature,
                           const std::vector<const Executable*>& bodies, double repeats) {
  StepInfo info = step_info(n, kind, signature);
  for (const Executable* b : bodies)
    for (const StepInfo& s : b->steps()) {
      info.body.push_back(s);
      info.flops += s.flops * repeats;
      info.bytes += s.bytes * repeats;
    }
  return info;
}

// A scalar input of the node (If's cond, Loop's M and cond): absent, known when
// compiling, or read from a value at run time.
struct Scalar {
  bool present = false;
  std::optional<int64_t> known;
  int id = -1;
};

Scalar scalar_input(Compiler& c, const Node& n, size_t k, DType want, const std::string& what) {
  Scalar s;
  if (k >= n.inputs().size() || !n.inputs()[k].present()) return s;
  s.present = true;
  int id = c.id(n.inputs()[k]);
  const RtValue& r = c.val(id);
  if (r.dtype != want || num_elements(r.dims) != 1)
    throw NotNative(what + " is " + type_text(r) + ", not a single " + std::string(dtype_name(want)));
  if (r.known) s.known = r.known->i64_at(0);
  else s.id = c.as_plain(id);
  return s;
}

int64_t read_scalar(const char* p, DType t) {
  if (t == DType::Bool) return *p != 0;
  int64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void lower_if(Compiler& c, const Node& n) {
  const Scalar cond = scalar_input(c, n, 0, DType::Bool, "its condition");
  const Outer outer = outer_values(c, n, 1);
  std::shared_ptr<Executable> then_b, else_b;
  if (!cond.known || *cond.known) then_b = compile_graph(c, body_graph(c, n, "then_branch", {}, outer), "then_branch");
  if (!cond.known || !*cond.known) else_b = compile_graph(c, body_graph(c, n, "else_branch", {}, outer), "else_branch");
  const std::vector<TensorType> types = (then_b ? then_b : else_b)->output_types();
  if (then_b && else_b && else_b->output_types() != types)
    throw NotNative("its branches give different output types, " + types_text(types) + " and " +
                    types_text(else_b->output_types()) + ", and its condition is known only when it runs");
  if (types.size() != n.num_outputs())
    throw NotNative("its branches give " + std::to_string(types.size()) + " outputs for " +
                    std::to_string(n.num_outputs()));
  const std::vector<int> outs = bind_outputs(c, n, types);
  std::ostringstream sig;
  sig << "if p" << std::hex << stable_hash(n.opaque()->node_proto) << std::dec;
  for (const OuterValue& v : outer.values) sig << " " << to_string(v.type) << (v.known ? "c" : "");
  if (cond.known) sig << " cond=" << *cond.known;
  std::vector<const Executable*> bodies;
  for (const auto& b : {then_b, else_b})
    if (b) bodies.push_back(b.get());
  RtStep s;
  s.info = control_step_info(n, "if", sig.str(), bodies, 1.0 / static_cast<double>(bodies.size()));
  if (cond.id >= 0) s.reads.push_back(cond.id);
  s.reads.insert(s.reads.end(), outer.ids.begin(), outer.ids.end());
  s.writes = outs;
  const int cond_id = cond.id;
  const bool fixed = cond.known && *cond.known;
  const std::vector<int> ins = outer.ids;
  s.make_fn = [then_b, else_b, cond_id, fixed, ins, outs](const std::function<char*(int)>& data) {
    const char* flag = cond_id >= 0 ? data(cond_id) : nullptr;
    std::vector<const char*> in;
    std::vector<char*> out;
    for (int i : ins) in.push_back(data(i));
    for (int o : outs) out.push_back(data(o));
    return std::function<void()>([then_b, else_b, flag, fixed, in, out] {
      const bool take_then = flag ? *flag != 0 : fixed;
      (take_then ? then_b : else_b)->run_raw(in, out);
    });
  };
  c.add_step(std::move(s));
}

// True if a Loop body's condition output is always true given a true condition input:
// the input itself (through Identity nodes), or a constant true.
bool condition_stays_true(const Graph& body) {
  Value v = body.outputs().at(0);
  while (v.node->kind() == NodeKind::Op && v.node->op_type() == "Identity") v = v.node->inputs()[0];
  if (v.node->kind() == NodeKind::Constant) {
    const Tensor& t = *v.node->value();
    if (t.numel() != 1) return false;
    return t.i64_at(0) != 0;
  }
  return body.inputs().size() > 1 && v.node == body.inputs()[1];
}

// How a loop's body runs: one executable for every iteration where the carried values
// keep their shapes, else one per iteration (shared between iterations of the same
// shapes), with the carried values' bytes before each iteration and after the last.
struct LoopPlan {
  std::vector<std::shared_ptr<Executable>> variants;
  std::vector<Executable*> per_iteration;  // empty: variants[0] always
  std::vector<std::vector<size_t>> carried_bytes;  // per iteration (one entry: stable), then the final
  std::vector<TensorType> final_types, scan_types;  // carried after the loop; one scan element
};

// `first`: the body imported at `formal`, the types of the first iteration.
LoopPlan plan_loop(Compiler& c, const Node& n, std::vector<TensorType> formal, Graph first_graph, const Outer& outer,
                   size_t N, size_t K, std::optional<int64_t> trips) {
  LoopPlan p;
  std::map<std::string, std::shared_ptr<Executable>> by_types;
  auto carried_of = [&](const std::vector<TensorType>& types, size_t first) {
    return std::vector<TensorType>(types.begin() + first, types.begin() + first + N);
  };
  auto bytes_of = [](const std::vector<TensorType>& types) {
    std::vector<size_t> b;
    for (const TensorType& t : types) b.push_back(byte_size(t));
    return b;
  };
  auto body_for = [&](const std::vector<TensorType>& f) {
    const std::string key = types_text(f);
    if (auto it = by_types.find(key); it != by_types.end()) return it->second;
    if (by_types.size() >= kMaxBodyVariants)
      throw NotNative("its loop-carried values take more than " + std::to_string(kMaxBodyVariants) + " shapes");
    std::shared_ptr<Executable> exe =
        compile_graph(c, by_types.empty() ? first_graph : body_graph(c, n, "body", f, outer), "body");
    const std::vector<TensorType> out = exe->output_types();
    if (out.size() != 1 + N + K)
      throw NotNative("its body gives " + std::to_string(out.size()) + " outputs for " + std::to_string(N) +
                      " loop-carried values and " + std::to_string(K) + " scan outputs");
    if (out[0].dtype != DType::Bool || num_elements(static_dims(out[0].shape)) != 1)
      throw NotNative("its body's condition output is " + to_string(out[0]));
    for (size_t k = 0; k < N; ++k)
      if (out[1 + k].dtype != f[2 + k].dtype)
        throw NotNative("loop-carried value " + std::to_string(k) + " goes from " + to_string(f[2 + k]) + " to " +
                        to_string(out[1 + k]));
    std::vector<TensorType> scan(out.begin() + 1 + N, out.end());
    if (by_types.empty()) p.scan_types = scan;
    else if (scan != p.scan_types)
      throw NotNative("its scan outputs change shape between iterations, " + types_text(p.scan_types) + " and " +
                      types_text(scan));
    p.variants.push_back(exe);
    return by_types[key] = exe;
  };
  std::shared_ptr<Executable> first = body_for(formal);
  std::vector<TensorType> carried = carried_of(formal, 2);
  std::vector<TensorType> next = carried_of(first->output_types(), 1);
  p.carried_bytes.push_back(bytes_of(carried));
  if (next == carried) {
    p.final_types = carried;
    return p;
  }
  if (!trips)
    throw NotNative("loop-carried values change shape, " + types_text(carried) + " to " + types_text(next) +
                    ", and its trip count is known only when it runs");
  if (*trips > kMaxPlannedIterations)
    throw NotNative("loop-carried values change shape over " + std::to_string(*trips) + " iterations (at most " +
                    std::to_string(kMaxPlannedIterations) + " are planned one by one)");
  for (int64_t i = 0; i < *trips; ++i) {
    std::copy(carried.begin(), carried.end(), formal.begin() + 2);
    std::shared_ptr<Executable> exe = body_for(formal);
    p.per_iteration.push_back(exe.get());
    if (i > 0) p.carried_bytes.push_back(bytes_of(carried));
    carried = carried_of(exe->output_types(), 1);
  }
  p.carried_bytes.push_back(bytes_of(carried));
  p.final_types = carried;
  return p;
}

void lower_loop(Compiler& c, const Node& n) {
  const std::string& proto = n.opaque()->node_proto;
  const size_t explicit_inputs = n.inputs().size() - body_outer_names(proto).size();
  if (explicit_inputs < 2 || explicit_inputs - 2 > n.num_outputs())
    throw NotNative("it has " + std::to_string(explicit_inputs) + " inputs for " + std::to_string(n.num_outputs()) +
                    " outputs");
  const size_t N = explicit_inputs - 2, K = n.num_outputs() - N;
  const Scalar max_trips = scalar_input(c, n, 0, DType::Int64, "its trip count");
  const Scalar cond = scalar_input(c, n, 1, DType::Bool, "its condition");
  std::vector<TensorType> formal;
  for (auto [index, dtype] : {std::pair{0, DType::Int64}, std::pair{1, DType::Bool}}) {
    std::optional<std::vector<int64_t>> dims = declared_input_dims(proto, "body", index);
    formal.push_back({dtype, make_shape(dims && num_elements(*dims) == 1 ? *dims : std::vector<int64_t>{})});
  }
  std::vector<int> init;
  for (size_t k = 0; k < N; ++k) {
    int id = c.id(n.inputs()[2 + k]);
    require_feedable(c.val(id), "loop-carried value " + std::to_string(k));
    formal.push_back({c.val(id).dtype, make_shape(c.val(id).dims)});
    init.push_back(c.as_plain(id));
  }
  const Outer outer = outer_values(c, n, explicit_inputs);
  // The trip count when compiling: none if the condition starts false or M is 0; M if
  // the condition cannot end the loop early (checked once the body is imported).
  std::optional<int64_t> trips;
  const bool starts_false = cond.known && !*cond.known;
  if (starts_false || (max_trips.known && *max_trips.known <= 0)) trips = 0;
  Graph first = body_graph(c, n, "body", formal, outer);
  if (!trips && max_trips.known && cond.id < 0 && condition_stays_true(first)) trips = *max_trips.known;
  LoopPlan plan = plan_loop(c, n, formal, std::move(first), outer, N, K, trips);
  if (K > 0 && !trips)
    throw NotNative("its " + std::to_string(K) + " scan outputs are as long as the loop runs, known only when it runs");
  std::vector<TensorType> types = plan.final_types;
  for (size_t k = 0; k < K; ++k) {
    const TensorType& t = plan.scan_types[k];
    std::vector<int64_t> dims = static_dims(t.shape);
    dims.insert(dims.begin(), *trips);
    // No iteration: ONNX does not say. ONNX Runtime gives 0 elements of the shape its
    // inference knows for one (ONNX's inference knows it where isomer's import typed
    // the output), else an empty vector.
    if (*trips == 0 && type_unknown(n.output(static_cast<uint32_t>(N + k)))) dims = {0};
    types.push_back({t.dtype, make_shape(dims)});
  }
  const std::vector<int> outs = bind_outputs(c, n, types);
  std::ostringstream sig;
  sig << "loop p" << std::hex << stable_hash(proto) << std::dec << " " << types_text(formal);
  if (trips) sig << " trips=" << *trips;
  for (const OuterValue& v : outer.values) sig << " " << to_string(v.type) << (v.known ? "c" : "");
  std::vector<const Executable*> bodies{plan.variants.front().get()};
  RtStep s;
  s.info = control_step_info(n, "loop", sig.str(), bodies, trips ? static_cast<double>(*trips) : 1.0);
  for (int id : {max_trips.id, cond.id})
    if (id >= 0) s.reads.push_back(id);
  s.reads.insert(s.reads.end(), init.begin(), init.end());
  s.reads.insert(s.reads.end(), outer.ids.begin(), outer.ids.end());
  s.writes = outs;
  std::vector<size_t> scan_bytes;
  for (const TensorType& t : plan.scan_types) scan_bytes.push_back(byte_size(t));
  const int64_t limit = max_trips.present ? max_trips.known.value_or(0) : std::numeric_limits<int64_t>::max();
  const bool start = cond.present ? cond.known.value_or(1) != 0 : true;
  const int m_id = max_trips.id, cond_id = cond.id;
  const std::vector<int> ins = outer.ids;
  const std::string who = describe(n);
  auto shared_plan = std::make_shared<const LoopPlan>(std::move(plan));
  s.make_fn = [=](const std::function<char*(int)>& data) {
    const char* m_at = m_id >= 0 ? data(m_id) : nullptr;
    const char* cond_at = cond_id >= 0 ? data(cond_id) : nullptr;
    std::vector<const char*> init_at, outer_at;
    std::vector<char*> out_at;
    for (int i : init) init_at.push_back(data(i));
    for (int i : ins) outer_at.push_back(data(i));
    for (int o : outs) out_at.push_back(data(o));
    return std::function<void()>([=] {
      const LoopPlan& p = *shared_plan;
      const int64_t m = m_at ? read_scalar(m_at, DType::Int64) : limit;
      bool go = cond_at ? read_scalar(cond_at, DType::Bool) != 0 : start;
      const bool stable = p.per_iteration.empty();
      std::vector<std::string> cur(N), next(N);
      for (size_t k = 0; k < N; ++k) cur[k].assign(init_at[k], p.carried_bytes[0][k]);
      int64_t i = 0;
      char flag = 1;
      std::vector<const char*> in(2 + N);
      in.insert(in.end(), outer_at.begin(), outer_at.end());
      std::vector<char*> out(1 + N + K);
      out[0] = &flag;
      in[0] = reinterpret_cast<const char*>(&i);
      in[1] = &flag;
      for (; i < m && go; ++i) {
        if (K > 0 && i >= *trips) throw Error(who + " ran past the " + std::to_string(*trips) + " iterations planned");
        Executable& body = stable ? *p.variants[0] : *p.per_iteration[static_cast<size_t>(i)];
        const std::vector<size_t>& after = p.carried_bytes[stable ? 0 : static_cast<size_t>(i) + 1];
        flag = 1;
        for (size_t k = 0; k < N; ++k) {
          next[k].resize(after[k]);
          in[2 + k] = cur[k].data();
          out[1 + k] = next[k].data();
        }
        for (size_t j = 0; j < K; ++j) out[1 + N + j] = out_at[N + j] + static_cast<size_t>(i) * scan_bytes[j];
        body.run_raw(in, out);
        go = flag != 0;
        cur.swap(next);
      }
      if (K > 0 && i != *trips)
        throw Error(who + " ended after " + std::to_string(i) + " iterations, " + std::to_string(*trips) + " planned");
      for (size_t k = 0; k < N; ++k) std::memcpy(out_at[k], cur[k].data(), cur[k].size());
    });
  };
  c.add_step(std::move(s));
}


// A tensor seen as `outer` blocks of `extent` slices of `inner` bytes each: the slices
// along one axis, as Scan reads its inputs and writes its outputs.
struct AxisSlices {
  size_t outer = 1, inner = 0;
  int64_t extent = 0;
  // The address of block o of slice t.
  size_t at(size_t o, int64_t t) const { return (o * static_cast<size_t>(extent) + static_cast<size_t>(t)) * inner; }
};

AxisSlices slices_of(const std::vector<int64_t>& dims, size_t axis, DType t) {
  AxisSlices s;
  s.extent = dims[axis];
  s.inner = dtype_size(t);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < axis) s.outer *= static_cast<size_t>(dims[d]);
    if (d > axis) s.inner *= static_cast<size_t>(dims[d]);
  }
  return s;
}

// Axis `a` of a rank-`rank` tensor, counted from the end where negative.
size_t scan_axis(int64_t a, size_t rank, const std::string& what) {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) throw NotNative(what + " axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  return static_cast<size_t>(a < 0 ? a + r : a);
}

void lower_scan(Compiler& c, const Node& n) {
  if (c.graph().info().opset() < 9) throw NotNative("Scan before opset 9 has a batch axis and sequence lengths");
  const std::string& proto = n.opaque()->node_proto;
  const size_t explicit_inputs = n.inputs().size() - body_outer_names(proto).size();
  const int64_t scans = node_int_attribute(proto, "num_scan_inputs").value_or(0);
  if (scans < 1 || static_cast<size_t>(scans) > explicit_inputs ||
      explicit_inputs - static_cast<size_t>(scans) > n.num_outputs())
    throw NotNative("it has " + std::to_string(scans) + " scan inputs of " + std::to_string(explicit_inputs));
  const size_t M = static_cast<size_t>(scans), N = explicit_inputs - M, K = n.num_outputs() - N;
  auto per_value = [&](const char* name, size_t count) {
    std::vector<int64_t> v = node_ints_attribute(proto, name);
    if (v.empty()) v.assign(count, 0);
    if (v.size() != count) throw NotNative(std::string(name) + " has " + std::to_string(v.size()) + " entries");
    // A direction is 0 (forward) or 1 (reverse); any other value has no meaning in ONNX.
    if (std::string(name).find("directions") != std::string::npos)
      for (int64_t d : v)
        if (d != 0 && d != 1) throw NotNative(std::string(name) + " holds " + std::to_string(d) + ", not 0 or 1");
    return v;
  };
  const std::vector<int64_t> in_axes = per_value("scan_input_axes", M), in_dirs = per_value("scan_input_directions", M);
  const std::vector<int64_t> out_axes = per_value("scan_output_axes", K),
                             out_dirs = per_value("scan_output_directions", K);
  std::vector<TensorType> formal;
  std::vector<int> state_ids, scan_ids;
  std::vector<AxisSlices> in_slices;
  for (size_t k = 0; k < N; ++k) {
    int id = c.id(n.inputs()[k]);
    require_feedable(c.val(id), "state " + std::to_string(k));
    formal.push_back({c.val(id).dtype, make_shape(c.val(id).dims)});
    state_ids.push_back(c.as_plain(id));
  }
  for (size_t j = 0; j < M; ++j) {
    int id = c.id(n.inputs()[N + j]);
    const RtValue& r = c.val(id);
    require_feedable(r, "scan input " + std::to_string(j));
    if (r.dims.empty()) throw NotNative("scan input " + std::to_string(j) + " is a scalar");
    const size_t axis = scan_axis(in_axes[j], r.dims.size(), "scan input " + std::to_string(j));
    in_slices.push_back(slices_of(r.dims, axis, r.dtype));
    if (in_slices.back().extent != in_slices.front().extent)
      throw NotNative("its scan inputs differ in length");
    std::vector<int64_t> elem = r.dims;
    elem.erase(elem.begin() + static_cast<std::ptrdiff_t>(axis));
    formal.push_back({r.dtype, make_shape(elem)});
    scan_ids.push_back(c.as_plain(id));
  }
  const int64_t T = in_slices.front().extent;
  const Outer outer = outer_values(c, n, explicit_inputs);
  std::shared_ptr<Executable> body = compile_graph(c, body_graph(c, n, "body", formal, outer), "body");
  const std::vector<TensorType> out = body->output_types();
  if (out.size() != N + K)
    throw NotNative("its body gives " + std::to_string(out.size()) + " outputs for " + std::to_string(N + K));
  for (size_t k = 0; k < N; ++k)
    if (out[k] != formal[k])
      throw NotNative("state " + std::to_string(k) + " goes from " + to_string(formal[k]) + " to " + to_string(out[k]));
  std::vector<TensorType> types(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(N));
  std::vector<AxisSlices> out_slices;
  for (size_t k = 0; k < K; ++k) {
    std::vector<int64_t> dims = static_dims(out[N + k].shape);
    const size_t axis = scan_axis(out_axes[k], dims.size() + 1, "scan output " + std::to_string(k));
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis), T);
    out_slices.push_back(slices_of(dims, axis, out[N + k].dtype));
    types.push_back({out[N + k].dtype, make_shape(dims)});
  }
  const std::vector<int> outs = bind_outputs(c, n, types);
  std::ostringstream sig;
  sig << "scan p" << std::hex << stable_hash(proto) << std::dec << " " << types_text(formal) << " T=" << T;
  for (const OuterValue& v : outer.values) sig << " " << to_string(v.type) << (v.known ? "c" : "");
  RtStep s;
  s.info = control_step_info(n, "scan", sig.str(), {body.get()}, static_cast<double>(T));
  s.reads = state_ids;
  s.reads.insert(s.reads.end(), scan_ids.begin(), scan_ids.end());
  s.reads.insert(s.reads.end(), outer.ids.begin(), outer.ids.end());
  s.writes = outs;
  std::vector<size_t> state_bytes;
  for (size_t k = 0; k < N; ++k) state_bytes.push_back(byte_size(formal[k]));
  const std::vector<int> ins = outer.ids;
  s.make_fn = [=](const std::function<char*(int)>& data) {
    std::vector<const char*> state_at, scan_at, outer_at;
    std::vector<char*> out_at;
    for (int i : state_ids) state_at.push_back(data(i));
    for (int i : scan_ids) scan_at.push_back(data(i));
    for (int i : ins) outer_at.push_back(data(i));
    for (int o : outs) out_at.push_back(data(o));
    return std::function<void()>([=] {
      std::vector<std::string> cur(N), next(N), in_elem(M), out_elem(K);
      for (size_t k = 0; k < N; ++k) {
        cur[k].assign(state_at[k], state_bytes[k]);
        next[k].resize(state_bytes[k]);
      }
      for (size_t j = 0; j < M; ++j) in_elem[j].resize(in_slices[j].outer * in_slices[j].inner);
      for (size_t k = 0; k < K; ++k) out_elem[k].resize(out_slices[k].outer * out_slices[k].inner);
      std::vector<const char*> in(N + M);
      in.insert(in.end(), outer_at.begin(), outer_at.end());
      std::vector<char*> res(N + K);
      for (int64_t t = 0; t < T; ++t) {
        for (size_t k = 0; k < N; ++k) {
          in[k] = cur[k].data();
          res[k] = next[k].data();
        }
        for (size_t j = 0; j < M; ++j) {
          const AxisSlices& sl = in_slices[j];
          const int64_t at = in_dirs[j] ? T - 1 - t : t;
          if (sl.outer == 1) {
            in[N + j] = scan_at[j] + sl.at(0, at);  // one contiguous slice: read in place
            continue;
          }
          for (size_t o = 0; o < sl.outer; ++o) std::memcpy(in_elem[j].data() + o * sl.inner, scan_at[j] + sl.at(o, at), sl.inner);
          in[N + j] = in_elem[j].data();
        }
        for (size_t k = 0; k < K; ++k) {
          const AxisSlices& sl = out_slices[k];
          const int64_t at = out_dirs[k] ? T - 1 - t : t;
          res[N + k] = sl.outer == 1 ? out_at[N + k] + sl.at(0, at) : out_elem[k].data();
        }
        body->run_raw(in, res);
        for (size_t k = 0; k < K; ++k) {
          const AxisSlices& sl = out_slices[k];
          const int64_t at = out_dirs[k] ? T - 1 - t : t;
          if (sl.outer != 1)
            for (size_t o = 0; o < sl.outer; ++o) std::memcpy(out_at[N + k] + sl.at(o, at), out_elem[k].data() + o * sl.inner, sl.inner);
        }
        cur.swap(next);
      }
      for (size_t k = 0; k < N; ++k) std::memcpy(out_at[k], cur[k].data(), state_bytes[k]);
    });
  };
  c.add_step(std::move(s));
}

}  // namespace

bool is_control_flow(const Node& n) {
  if (n.kind() != NodeKind::Opaque) return false;
  const std::string& domain = n.opaque()->domain;
  return (domain.empty() || domain == "ai.onnx") && (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan");
}

std::string lower_control_flow(Compiler& c, const Node& n) {
  for (size_t k = 0; k < n.num_outputs(); ++k)
    if (n.opaque()->output_type_unknown(k) && !is_tensor_type(*n.opaque()->onnx_output_types[k]))
      return "output " + std::to_string(k) + " is not a tensor (a sequence or an optional)";
  try {
    if (n.op_type() == "If") lower_if(c, n);
    else if (n.op_type() == "Loop") lower_loop(c, n);
    else lower_scan(c, n);
  } catch (const NotNative& e) {
    return e.what();
  }
  return "";
}

}  // namespace isomer::runtime
