#include "check/inputs.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <unordered_map>

#include "eval/evaluator.h"
#include "ir/error.h"

namespace isomer {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// What one graph input's values must be. A range and fixed values may both be
// required (then the values must lie in the range); `conflict` says why two
// consumers cannot both be satisfied.
struct Need {
  std::optional<std::pair<int64_t, int64_t>> range;  // [lo, hi)
  std::optional<std::pair<double, double>> real;     // floats uniform in [lo, hi)
  std::optional<std::vector<int64_t>> fixed;         // exactly these, row-major
  std::vector<std::string> why;
  std::string conflict;
};

std::string range_text(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

std::string real_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string values_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + (v.size() > 8 ? ",...]" : "]");
}

void need_range(Need& n, int64_t lo, int64_t hi, const std::string& why) {
  if (!n.conflict.empty()) return;
  int64_t a = n.range ? std::max(n.range->first, lo) : lo, b = n.range ? std::min(n.range->second, hi) : hi;
  if (a >= b) {
    n.conflict = why + " needs values in " + range_text(lo, hi) + ", which no value in " +
                 (n.range ? range_text(n.range->first, n.range->second) + " (" + n.why.back() + ")" : "it") + " meets";
    return;
  }
  n.range = {a, b};
  n.why.push_back(why);
}

void need_real(Need& n, double lo, double hi, const std::string& why) {
  if (!n.conflict.empty()) return;
  if (n.real && (n.real->first != lo || n.real->second != hi)) {
    n.conflict = why + " and " + n.why.back() + " need different ranges";
    return;
  }
  n.real = {lo, hi};
  n.why.push_back(why);
}

void need_fixed(Need& n, std::vector<int64_t> values, const std::string& why) {
  if (!n.conflict.empty()) return;
  if (n.fixed && *n.fixed != values) {
    n.conflict = why + " needs " + values_text(values) + ", " + n.why.back() + " needs " + values_text(*n.fixed);
    return;
  }
  n.fixed = std::move(values);
  n.why.push_back(why);
}

// Attributes of native and opaque nodes alike (an opaque node keeps its NodeProto).
const onnx::AttributeProto* opaque_attr(const Node& n, const std::string& name, onnx::NodeProto& holder) {
  if (!n.opaque() || !holder.ParseFromString(n.opaque()->node_proto)) return nullptr;
  for (const onnx::AttributeProto& a : holder.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t int_attr(const Node& n, const std::string& name, int64_t dflt) {
  if (n.kind() == NodeKind::Op) return n.attrs().get_int(name, dflt);
  onnx::NodeProto p;
  const onnx::AttributeProto* a = opaque_attr(n, name, p);
  return a && a->type() == onnx::AttributeProto::INT ? a->i() : dflt;
}

std::vector<int64_t> ints_attr(const Node& n, const std::string& name) {
  if (n.kind() == NodeKind::Op) return n.attrs().get_ints(name, {});
  onnx::NodeProto p;
  const onnx::AttributeProto* a = opaque_attr(n, name, p);
  if (!a || a->type() != onnx::AttributeProto::INTS) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string string_attr(const Node& n, const std::string& name, const std::string& dflt) {
  if (n.kind() == NodeKind::Op) return n.attrs().get_string(name, dflt);
  onnx::NodeProto p;
  const onnx::AttributeProto* a = opaque_attr(n, name, p);
  return a && a->type() == onnx::AttributeProto::STRING ? a->s() : dflt;
}

// The graph's value types with the inputs at their concrete dims, re-inferred
// through the operator table where it can (intermediate dims that were symbolic
// become static); otherwise the types the graph has.
class ConcreteTypes {
 public:
  ConcreteTypes(const Graph& g, const std::vector<std::vector<int64_t>>& dims) {
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const NodePtr& in = g.inputs()[i];
      if (in->onnx_type()) continue;
      map_[in.get()] = Node::make_input(in->name(), {in->output_types()[0].dtype, make_shape(dims[i])});
    }
    for (const NodePtr& n : g.topo_order()) {
      if (n->kind() != NodeKind::Op) continue;
      std::vector<Value> ins;
      for (const Value& v : n->inputs()) ins.push_back(v.present() ? Value{node(v.node), v.index} : v);
      try {
        map_[n.get()] = Node::make_op(*n->op(), ins, n->attrs(), n->num_outputs());
      } catch (const Error&) {  // a shape rule that needs what only running shows: keep the graph's types
      }
    }
  }
  const TensorType& type(const Value& v) const { return node(v.node)->output_types()[v.index]; }
  // Static dims of `v`, or nullopt.
  std::optional<std::vector<int64_t>> dims(const Value& v) const {
    const Shape& s = type(v).shape;
    if (!is_static(s)) return std::nullopt;
    return static_dims(s);
  }

 private:
  NodePtr node(const NodePtr& n) const {
    auto it = map_.find(n.get());
    return it == map_.end() ? n : it->second;
  }
  std::unordered_map<const Node*, NodePtr> map_;
};

// The graph input whose values reach `v` unchanged but for a constant shift (w =
// x + offset), through ops that keep values. `same_order`: the elements keep
// their row-major order and count (fixed values carry over).
struct Source {
  size_t input = kNone;
  int64_t offset = 0;
  bool same_order = true;
};

std::optional<int64_t> integer_scalar(const Value& v) {
  const Tensor* t = v.constant();
  if (!t || t->numel() != 1) return std::nullopt;
  double x = t->f64_at(0);
  if (x != static_cast<double>(static_cast<int64_t>(x))) return std::nullopt;
  return static_cast<int64_t>(x);
}

std::optional<Source> trace(Value v, const std::unordered_map<const Node*, size_t>& input_index) {
  Source s;
  for (int steps = 0; steps < 64 && v.present(); ++steps) {
    const Node& n = *v.node;
    if (n.kind() == NodeKind::Input) {
      auto it = input_index.find(&n);
      if (it == input_index.end()) return std::nullopt;
      s.input = it->second;
      return s;
    }
    if (n.kind() != NodeKind::Op && n.kind() != NodeKind::Opaque) return std::nullopt;
    const std::string& op = n.op_type();
    if (n.inputs().empty() || !n.inputs()[0].present()) return std::nullopt;
    if ((op == "Cast" && n.output_types()[0].dtype != DType::Bool) || op == "Identity" || op == "Reshape" ||
        op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      v = n.inputs()[0];
    } else if (op == "Expand") {
      s.same_order = false;
      v = n.inputs()[0];
    } else if ((op == "Add" || op == "Sub") && n.inputs().size() == 2) {
      if (auto c = integer_scalar(n.inputs()[1])) {
        s.offset += op == "Add" ? *c : -*c;
        v = n.inputs()[0];
      } else if (auto c0 = integer_scalar(n.inputs()[0]); c0 && op == "Add") {
        s.offset += *c0;
        v = n.inputs()[1];
      } else {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Reshape's target: the data's dims, the leading ones merged into the last entry
// or padded with ones in front, so that it has `k` entries.
std::optional<std::vector<int64_t>> reshape_target(const std::vector<int64_t>& d, size_t k) {
  if (k == d.size()) return d;
  if (k == 0) return num_elements(d) == 1 ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{}) : std::nullopt;
  std::vector<int64_t> out;
  if (k < d.size()) {
    out.assign(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k - 1));
    out.push_back(num_elements(std::vector<int64_t>(d.begin() + static_cast<std::ptrdiff_t>(k - 1), d.end())));
  } else {
    out.assign(k - d.size(), 1);
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

std::vector<int64_t> iota(size_t k) {
  std::vector<int64_t> v(k);
  for (size_t i = 0; i < k; ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

// What node `n` needs of its operand `k`: calls range(lo, hi, why) or
// fixed(values, why), or impossible(why) when the graph does not say enough.
struct Emit {
  std::function<void(int64_t, int64_t, const std::string&)> range;
  std::function<void(double, double, const std::string&)> real;
  std::function<void(std::vector<int64_t>, const std::string&)> fixed;
  std::function<void(const std::string&)> impossible;
};

void needs_of(const Node& n, size_t k, const ConcreteTypes& types, const Emit& emit) {
  const std::string& op = n.op_type();
  const std::string who = describe(n);
  auto in_dims = [&](size_t i) { return i < n.inputs().size() && n.inputs()[i].present() ? types.dims(n.inputs()[i]) : std::nullopt; };
  auto rank_of = [&](size_t i) { return types.type(n.inputs()[i]).rank(); };
  const auto operand = in_dims(k);
  const size_t count = operand ? static_cast<size_t>(num_elements(*operand)) : 0;
  auto axis_extent = [&](size_t data, int64_t axis, const std::string& what) {
    auto d = in_dims(data);
    int64_t r = rank_of(data);
    if (axis < 0) axis += r;
    if (d && axis >= 0 && axis < r) {
      emit.range(0, (*d)[static_cast<size_t>(axis)],
                 what + " of " + who + ", axis " + std::to_string(axis) + " of extent " +
                     std::to_string((*d)[static_cast<size_t>(axis)]));
    } else {
      emit.range(0, 1, what + " of " + who + " (axis extent unknown: index 0)");
    }
  };
  const bool int_result = n.num_outputs() > 0 && !is_float(n.output_types()[0].dtype);

  if (k == 1 && (op == "Gather" || op == "GatherElements" || op == "ScatterElements" || op == "Scatter")) {
    axis_extent(0, int_attr(n, "axis", 0), "indices");
  } else if (k == 1 && (op == "GatherND" || op == "ScatterND")) {
    const int64_t b = int_attr(n, "batch_dims", 0);
    auto d = in_dims(0);
    if (!operand || operand->empty() || !d) return emit.range(0, 1, "indices of " + who + " (extents unknown: index 0)");
    int64_t q = operand->back(), extent = INT64_MAX;
    for (int64_t a = b; a < b + q && a < static_cast<int64_t>(d->size()); ++a) extent = std::min(extent, (*d)[a]);
    emit.range(0, extent == INT64_MAX ? 1 : extent, "indices of " + who);
  } else if (k == 0 && op == "OneHot") {
    auto depth = n.inputs().size() > 1 ? integer_scalar(n.inputs()[1]) : std::nullopt;
    emit.range(0, depth ? *depth : 4, "indices of " + who + " (depth " + std::to_string(depth ? *depth : 4) + ")");
  } else if (k == 1 && op == "OneHot") {
    emit.fixed({4}, "depth of " + who);
  } else if (k == 4 && (op == "LSTM" || op == "GRU" || op == "RNN")) {
    auto d = in_dims(0);
    int64_t steps = d && d->size() == 3 ? (*d)[int_attr(n, "layout", 0) == 0 ? 0 : 1] : 1;
    emit.range(1, steps + 1, "sequence lengths of " + who + " (at most " + std::to_string(steps) + " steps)");
  } else if (k == 2 && op == "RoiAlign") {
    auto d = in_dims(0);
    emit.range(0, d && !d->empty() ? (*d)[0] : 1, "batch indices of " + who);
  } else if ((k == 3 || k == 4) && op == "NonMaxSuppression") {
    emit.real(0, 1, std::string(k == 3 ? "IoU" : "score") + " threshold of " + who);
  } else if ((k == 2 && op == "Resize") || (k == 1 && op == "Upsample")) {
    emit.fixed(std::vector<int64_t>(count, 1), "scales of " + who + " (ones)");
  } else if (k == 3 && op == "Resize") {
    auto d = in_dims(0);
    if (!d || d->size() != count) return emit.impossible("the sizes of " + who + " (the data's dims are not known)");
    emit.fixed(*d, "sizes of " + who + " (the data's own dims)");
  } else if (k == 2 && op == "MaxUnpool") {
    auto d = in_dims(0);
    std::vector<int64_t> kernel = ints_attr(n, "kernel_shape");
    if (!d || d->size() != count || kernel.size() + 2 != count)
      return emit.impossible("the output shape of " + who + " (the data's dims are not known)");
    std::vector<int64_t> strides = ints_attr(n, "strides"), pads = ints_attr(n, "pads"), out = *d;
    for (size_t a = 0; a < kernel.size(); ++a) {
      int64_t s = a < strides.size() ? strides[a] : 1;
      int64_t p = a + kernel.size() < pads.size() ? pads[a] + pads[a + kernel.size()] : 0;
      out[a + 2] = ((*d)[a + 2] - 1) * s - p + kernel[a];
    }
    emit.fixed(out, "output shape of " + who + " (the default unpooled shape)");
  } else if (op == "MelWeightMatrix" && k < 5) {
    // num_mel_bins, dft_length, sample_rate, lower and upper edge (Hz): a valid filter bank.
    static const int64_t kMel[] = {8, 16, 16, 0, 8};
    emit.fixed({kMel[k]}, "argument " + std::to_string(k) + " of " + who + " (a valid filter bank)");
  } else if (k == 1 && (op == "Div" || op == "Mod") && int_result) {
    emit.range(1, 4, "integer divisor of " + who + " (non-zero)");
  } else if (k == 1 && op == "Pow" && int_result) {
    emit.range(0, 4, "exponent of " + who + " (integer result: non-negative)");
  } else if (k == 2 && op == "Range") {
    emit.range(1, 4, "delta of " + who + " (non-zero)");
  } else if (k == 1 && op == "Reshape") {
    auto d = in_dims(0);
    auto target = d && operand && operand->size() == 1 ? reshape_target(*d, count) : std::nullopt;
    if (!target) return emit.impossible("the shape of " + who + " (the data's dims are not known)");
    emit.fixed(*target, "shape of " + who + " (the data's own dims)");
  } else if (k == 1 && op == "Expand") {
    emit.fixed(std::vector<int64_t>(count, 1), "shape of " + who + " (ones: the data's own shape)");
  } else if (k == 1 && op == "Tile") {
    emit.range(1, 3, "repeats of " + who);
  } else if (k == 1 && op == "Unsqueeze") {
    emit.fixed(iota(count), "axes of " + who);
  } else if (k == 1 && op == "Squeeze") {
    auto d = in_dims(0);
    std::vector<int64_t> unit;
    for (size_t a = 0; d && a < d->size(); ++a)
      if ((*d)[a] == 1) unit.push_back(static_cast<int64_t>(a));
    if (!d || unit.size() < count)
      return emit.impossible("the axes of " + who + " (the data has fewer than " + std::to_string(count) +
                             " axes of extent 1)");
    unit.resize(count);
    emit.fixed(unit, "axes of " + who + " (the data's unit axes)");
  } else if (k == 1 && op.rfind("Reduce", 0) == 0) {
    if (static_cast<int64_t>(count) > rank_of(0))
      return emit.impossible("the axes of " + who + " (more axes than the data's rank)");
    emit.fixed(iota(count), "axes of " + who);
  } else if (k == 3 && op == "Slice") {
    if (static_cast<int64_t>(count) > rank_of(0))
      return emit.impossible("the axes of " + who + " (more axes than the data's rank)");
    emit.fixed(iota(count), "axes of " + who);
  } else if (k == 4 && op == "Slice") {
    emit.range(1, 3, "steps of " + who);
  } else if (k == 1 && op == "Split") {
    auto d = in_dims(0);
    int64_t axis = int_attr(n, "axis", 0), r = rank_of(0);
    if (axis < 0) axis += r;
    if (!d || axis < 0 || axis >= r || count == 0)
      return emit.impossible("the split sizes of " + who + " (the split axis' extent is not known)");
    int64_t extent = (*d)[static_cast<size_t>(axis)];
    std::vector<int64_t> sizes(count, extent / static_cast<int64_t>(count));
    for (int64_t i = 0; i < extent % static_cast<int64_t>(count); ++i) ++sizes[static_cast<size_t>(i)];
    emit.fixed(sizes, "split sizes of " + who + " (extent " + std::to_string(extent) + " shared out)");
  } else if (k == 1 && op == "CumSum") {
    emit.range(0, std::max<int64_t>(rank_of(0), 1), "axis of " + who);
  } else if (k == 1 && op == "TopK") {
    auto d = in_dims(0);
    int64_t axis = int_attr(n, "axis", -1), r = rank_of(0);
    if (axis < 0) axis += r;
    int64_t extent = d && axis >= 0 && axis < r ? (*d)[static_cast<size_t>(axis)] : 1;
    emit.range(1, std::min<int64_t>(4, extent + 1), "k of " + who);
  } else if (k == 1 && op == "Pad") {
    std::string mode = string_attr(n, "mode", "constant");
    if (mode == "constant") return;
    auto d = in_dims(0);
    int64_t smallest = d && !d->empty() ? *std::min_element(d->begin(), d->end()) : 1;
    emit.range(0, std::max<int64_t>(1, std::min<int64_t>(4, smallest)), "pads of " + who + " (" + mode + " mode)");
  }
}

Tensor draw(DType t, const std::vector<int64_t>& dims, const Need& need, std::mt19937_64& rng) {
  const int64_t n = num_elements(dims);
  if (need.fixed) {
    if (is_float(t)) {
      std::vector<double> v(need.fixed->begin(), need.fixed->end());
      return Tensor::from_f64(t, dims, v);
    }
    return Tensor::from_i64(t, dims, *need.fixed);
  }
  if (is_float(t) && !need.range) {
    std::uniform_real_distribution<double> u(need.real ? need.real->first : -1.0, need.real ? need.real->second : 1.0);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = u(rng);
    return Tensor::from_f64(t, dims, v);
  }
  int64_t lo = need.range ? need.range->first : 0, hi = need.range ? need.range->second : (t == DType::Bool ? 2 : 4);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = u(rng);
  if (is_float(t)) return Tensor::from_f64(t, dims, std::vector<double>(v.begin(), v.end()));
  return Tensor::from_i64(t, dims, v);
}

}  // namespace

std::map<std::string, int64_t> bindings_of(const Graph& g, const std::vector<Tensor>& tensors) {
  std::map<std::string, int64_t> b;
  for (size_t i = 0; i < g.inputs().size() && i < tensors.size(); ++i) {
    const Shape& s = g.inputs()[i]->output_types()[0].shape;
    for (size_t d = 0; d < s.size() && d < tensors[i].dims().size(); ++d)
      if (!s[d].is_static() && !s[d].symbol.empty()) b[s[d].symbol] = tensors[i].dims()[d];
  }
  return b;
}

ModelInputs valid_random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings) {
  ModelInputs out;
  out.source = "random (seed " + std::to_string(seed) + ")";
  out.bindings = bindings;
  for (const NodePtr& in : g.inputs()) {
    DType t = in->output_types()[0].dtype;
    if (in->onnx_type()) {
      out.impossible = "input '" + in->name() + "' has a type isomer cannot state, so no random data can be made for it";
      return out;
    }
    if (!is_numeric(t) || t == DType::BFloat16) {
      out.impossible = "input '" + in->name() + "' has type " + std::string(dtype_name(t)) +
                       ", for which isomer makes no random data";
      return out;
    }
  }
  std::vector<std::vector<int64_t>> dims = concrete_input_dims(g, bindings);
  // A dim fixed huge (--input-shape x:1048576,1048576) is refused before anything is drawn.
  for (size_t i = 0; i < g.inputs().size(); ++i)
    require_allocatable(dims[i], dtype_size(g.inputs()[i]->output_types()[0].dtype),
                        "graph input '" + g.inputs()[i]->name() + "'");
  std::unordered_map<const Node*, size_t> input_index;
  for (size_t i = 0; i < g.inputs().size(); ++i) input_index[g.inputs()[i].get()] = i;
  std::vector<Need> needs(g.inputs().size());
  const ConcreteTypes types(g, dims);
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
    for (size_t k = 0; k < n->inputs().size(); ++k) {
      const Value& v = n->inputs()[k];
      if (!v.present() || v.constant()) continue;
      std::optional<Source> src = trace(v, input_index);
      if (!src) continue;
      Need& need = needs[src->input];
      const std::string& name = g.inputs()[src->input]->name();
      Emit emit;
      emit.range = [&](int64_t lo, int64_t hi, const std::string& why) {
        need_range(need, lo - src->offset, hi - src->offset, why);
      };
      emit.real = [&](double lo, double hi, const std::string& why) {
        if (src->offset == 0) need_real(need, lo, hi, why);
      };
      emit.fixed = [&](std::vector<int64_t> values, const std::string& why) {
        if (!src->same_order || static_cast<int64_t>(values.size()) != num_elements(dims[src->input])) {
          need.conflict = "the " + why + " cannot be made from input '" + name + "'";
          return;
        }
        for (int64_t& x : values) x -= src->offset;
        need_fixed(need, std::move(values), why);
      };
      emit.impossible = [&](const std::string& why) {
        if (need.conflict.empty()) need.conflict = "no valid value for " + why;
      };
      needs_of(*n, k, types, emit);
    }
  }
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Need& need = needs[i];
    const std::string& name = g.inputs()[i]->name();
    if (!need.conflict.empty()) {
      out.impossible = "input '" + name + "': " + need.conflict;
      out.tensors.clear();
      return out;
    }
    if (need.fixed && need.range)
      for (int64_t x : *need.fixed)
        if (x < need.range->first || x >= need.range->second) {
          out.impossible = "input '" + name + "': the " + need.why.front() + " and the " + need.why.back() +
                           " cannot both hold";
          out.tensors.clear();
          return out;
        }
    out.tensors.push_back(draw(g.inputs()[i]->output_types()[0].dtype, dims[i], need, rng));
    if (!need.why.empty()) {
      std::string how = need.fixed   ? values_text(*need.fixed)
                        : need.range ? "integers in " + range_text(need.range->first, need.range->second)
                                     : "floats in [" + real_text(need.real->first) + ", " +
                                           real_text(need.real->second) + ")";
      std::string why;
      for (const std::string& w : need.why) why += (why.empty() ? "" : "; ") + w;
      out.notes.push_back("'" + name + "' = " + how + ": " + why);
    }
  }
  return out;
}

std::vector<Tensor> seeded_random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings) {
  ModelInputs valid = valid_random_inputs(g, seed, bindings);
  if (valid.ok()) return valid.tensors;
  return random_inputs(g, seed, bindings);
}

ModelInputs given_inputs(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& given,
                         const std::string& what, const std::vector<std::pair<std::string, Tensor>>& defaults) {
  ModelInputs out;
  out.source = "given (" + what + ")";
  for (const NodePtr& in : g.inputs()) {
    const Tensor* found = nullptr;
    for (const auto& [name, t] : given)
      if (name == in->name()) found = &t;
    for (const auto& [name, t] : defaults)
      if (!found && name == in->name()) {
        found = &t;
        out.notes.push_back("input '" + name + "': its default value (the model's initializer), not given");
      }
    require(found != nullptr, what + " has no array for input '" + in->name() + "'");
    const TensorType& want = in->output_types()[0];
    // .npz and numpy have no bfloat16: a bf16 input is given as float32 and rounded
    // to nearest even, as a Cast would (exact for arrays written from bf16).
    Tensor rounded;
    if (want.dtype == DType::BFloat16 && found->dtype() == DType::Float32) {
      rounded = Tensor::from_f64(DType::BFloat16, found->dims(), found->to_f64());
      found = &rounded;
    }
    require(found->dtype() == want.dtype, what + ": input '" + in->name() + "' is " + to_string(found->type()) +
                                              ", the model declares " + to_string(want));
    // A tensor input of unknown rank (kept as its ONNX type) takes an array of any rank.
    bool fits = in->onnx_type() || found->rank() == want.rank();
    for (size_t d = 0; fits && d < want.shape.size(); ++d)
      fits = !want.shape[d].is_static() || want.shape[d].value == found->dims()[d];
    require(fits, what + ": input '" + in->name() + "' is " + to_string(found->type()) + ", the model declares " +
                      to_string(want));
    out.tensors.push_back(*found);
  }
  // An array for no input is most likely a misspelt name (ONNX Runtime refuses it too).
  for (const auto& [name, t] : given)
    require(std::any_of(g.inputs().begin(), g.inputs().end(), [&](const NodePtr& in) { return in->name() == name; }),
            what + " has an array '" + name + "', which is no input of the model");
  out.bindings = bindings_of(g, out.tensors);
  return out;
}

void use_defaults(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& defaults, ModelInputs* in) {
  if (defaults.empty() || !in->ok()) return;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    for (const auto& [name, t] : defaults)
      if (name == g.inputs()[i]->name()) {
        in->tensors[i] = t;
        in->notes.push_back("input '" + name + "': its default value (the model's initializer)");
      }
  in->bindings = bindings_of(g, in->tensors);
}

}  // namespace isomer
