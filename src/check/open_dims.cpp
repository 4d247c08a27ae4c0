#include "check/open_dims.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include "check/engines.h"
#include "eval/evaluator.h"
#include "onnx/onnx_io.h"

namespace isomer {

namespace {

// The words of a dim name, lower case: "past_sequence_length" -> past, sequence,
// length; "seqLen" -> seq, len.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = name[i];
    const bool starts_word = std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]));
    if (!std::isalnum(c) || starts_word) {
      if (!out.back().empty()) out.emplace_back();
      if (!std::isalnum(c)) continue;
    }
    out.back() += static_cast<char>(std::tolower(c));
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

bool any_word(const std::vector<std::string>& words, std::initializer_list<std::string_view> wanted) {
  return std::any_of(words.begin(), words.end(), [&](const std::string& w) {
    return std::find(wanted.begin(), wanted.end(), w) != wanted.end();
  });
}

// A dim_param that is one name, not an expression of names ("s0 + 1").
bool plain_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '.'; });
}

size_t opaque_nodes(const Graph& g) {
  size_t n = 0;
  for (const NodePtr& node : g.topo_order()) n += node->kind() == NodeKind::Opaque;
  return n;
}

}  // namespace

std::optional<int64_t> extent_by_name(std::string_view name) {
  const std::vector<std::string> words = words_of(name);
  if (words.size() == 1 && (words[0] == "n" || words[0] == "b" || words[0] == "bs")) return 1;
  if (any_word(words, {"batch", "batches"})) return 1;
  if (std::any_of(words.begin(), words.end(), [](const std::string& w) { return w.starts_with("seq"); }) ||
      any_word(words, {"len", "length", "token", "tokens", "time", "frames", "steps", "positions"}))
    return 64;
  if (any_word(words, {"height", "width", "h", "w"})) return 224;
  return std::nullopt;
}

int64_t drawn_extent(std::string_view name) { return extent_by_name(name).value_or(1); }

std::map<std::string, int64_t> extents_by_use(const Graph& g) {
  std::map<std::string, int64_t> out;
  // The first use that tells wins: a dim is read where the graph first consumes it.
  const auto mark = [&out](const Value& v, size_t axis, int64_t extent) {
    if (!v.present() || v.type().rank() <= axis) return;
    const Dim& d = v.type().shape[axis];
    if (!d.is_static() && plain_name(d.symbol)) out.emplace(d.symbol, extent);
  };
  for (const NodePtr& node : g.topo_order()) {
    if (node->kind() != NodeKind::Op) continue;
    const std::string& op = node->op_type();
    const std::vector<Value>& in = node->inputs();
    if (op == "Gather" && in.size() == 2 && in[0].constant() && in[0].type().rank() == 2 &&
        node->attrs().get_int("axis", 0) == 0 && in[1].type().rank() >= 1) {
      mark(in[1], in[1].type().rank() - 1, 64);  // token ids into an embedding table
    } else if (op == "Conv" && !in.empty()) {
      const size_t rank = in[0].type().rank();
      if (rank == 3) mark(in[0], 2, 64);  // a 1-D convolution's time axis
      if (rank == 4) mark(in[0], 2, 224), mark(in[0], 3, 224);
      if (rank == 5) mark(in[0], 2, 16), mark(in[0], 3, 112), mark(in[0], 4, 112);
    } else if (op == "MatMul" && !in.empty() && in[0].type().rank() >= 3 &&
               in[0].type().shape.back().is_static()) {
      mark(in[0], in[0].type().rank() - 2, 64);  // the rows of [batch, seq, hidden] @ W
    } else if ((op == "LSTM" || op == "GRU" || op == "RNN") && !in.empty() && in[0].type().rank() == 3) {
      mark(in[0], node->attrs().get_int("layout", 0) == 0 ? 0 : 1, 64);
    }
  }
  return out;
}

std::map<std::string, int64_t> drawn_bindings(const Graph& g, std::map<std::string, int64_t> bound, bool by_name) {
  // An input with a default value (onnx_io.h) runs on it unless fed: its open dims
  // have the default's extents (an input of 1 row would not take a default of 3).
  for (const auto& [name, value] : input_defaults(g))
    for (const NodePtr& in : g.inputs()) {
      const Shape& shape = in->output_types()[0].shape;
      if (in->name() != name || in->onnx_type() || shape.size() != value.rank()) continue;
      for (size_t axis = 0; axis < shape.size(); ++axis)
        if (!shape[axis].is_static() && plain_name(shape[axis].symbol))
          bound.emplace(shape[axis].symbol, value.dims()[axis]);
    }
  std::optional<std::map<std::string, int64_t>> by_use;
  // The extent a dim's name or its use gives it; nullopt where neither says.
  const auto role_extent = [&](const Dim& d) -> std::optional<int64_t> {
    if (d.is_static() || !plain_name(d.symbol)) return std::nullopt;
    if (std::optional<int64_t> named = extent_by_name(d.symbol)) return named;
    if (!by_use) by_use = extents_by_use(g);
    const auto it = by_use->find(d.symbol);
    return it == by_use->end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  // An integer input's dim neither says takes the role of the same axis of another
  // integer input of its rank: dynamo names an attention mask [s6, s81] apart from its
  // token ids [s33, s50], and reads the mask at positions it computes from s50.
  const auto sibling_extent = [&](const NodePtr& self, size_t axis, size_t rank) -> std::optional<int64_t> {
    if (!is_integer(self->output_types()[0].dtype)) return std::nullopt;
    for (const NodePtr& other : g.inputs()) {
      if (other == self || other->onnx_type() || other->output_types()[0].rank() != rank ||
          !is_integer(other->output_types()[0].dtype))
        continue;
      if (std::optional<int64_t> e = role_extent(other->output_types()[0].shape[axis])) return e;
    }
    return std::nullopt;
  };
  for (const NodePtr& in : g.inputs()) {
    if (in->onnx_type()) continue;
    const Shape& shape = in->output_types()[0].shape;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      const Dim& d = shape[axis];
      if (d.is_static() || !plain_name(d.symbol) || bound.count(d.symbol)) continue;
      int64_t extent = 1;
      if (by_name) {
        std::optional<int64_t> e = role_extent(d);
        if (!e) e = sibling_extent(in, axis, shape.size());
        extent = e.value_or(1);
      }
      bound[d.symbol] = extent;
    }
  }
  return bound;
}

std::map<std::string, std::vector<int64_t>> open_input_shapes(const Graph& g,
                                                              const std::map<std::string, int64_t>& bindings) {
  std::map<std::string, std::vector<int64_t>> out;
  const std::vector<std::vector<int64_t>> dims = concrete_input_dims(g, bindings);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const NodePtr& in = g.inputs()[i];
    if (!in->onnx_type() && !is_static(in->output_types()[0].shape)) out[in->name()] = dims[i];
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> open_input_shapes(const Graph& g, const std::vector<Tensor>& tensors) {
  std::map<std::string, std::vector<int64_t>> out;
  for (size_t i = 0; i < g.inputs().size() && i < tensors.size(); ++i) {
    const NodePtr& in = g.inputs()[i];
    const TensorType& t = in->output_types()[0];
    // A tensor input of unknown rank (kept as its ONNX type) is fixed to the array's dims too.
    if (in->onnx_type() ? t.dtype != DType::Undefined : !is_static(t.shape) && t.rank() == tensors[i].rank())
      out[in->name()] = tensors[i].dims();
  }
  return out;
}

std::map<std::string, int64_t> importable_drawn_bindings(const Graph& g, const std::map<std::string, int64_t>& bound) {
  std::map<std::string, int64_t> named = drawn_bindings(g, bound);
  const std::map<std::string, std::vector<int64_t>> shapes = open_input_shapes(g, named);
  return shapes.empty() || with_input_shapes(g, shapes) ? named : drawn_bindings(g, bound, false);
}

std::string extents_text(const std::map<std::string, int64_t>& bindings) {
  std::string out;
  for (const auto& [name, extent] : bindings) out += (out.empty() ? "" : ", ") + name + "=" + std::to_string(extent);
  return out;
}

namespace {

thread_local FixedGraphs* current_fixed_graphs = nullptr;

// Whether `a` and `b` are the same graph: the same input and output nodes (nodes are
// immutable, so an output node stands for everything it is computed from).
bool same_nodes(const Graph& a, const Graph& b) {
  if (a.inputs() != b.inputs() || a.output_names() != b.output_names() || a.outputs().size() != b.outputs().size())
    return false;
  for (size_t i = 0; i < a.outputs().size(); ++i)
    if (a.outputs()[i].node != b.outputs()[i].node || a.outputs()[i].index != b.outputs()[i].index) return false;
  return true;
}

std::optional<Graph> fix_input_shapes(const Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes) {
  ImportOptions io;
  io.input_shapes = shapes;
  try {
    Graph fixed = import_onnx_bytes(export_onnx_bytes(g), "", io);
    if (fixed.inputs().size() != g.inputs().size() || fixed.output_names() != g.output_names() ||
        opaque_nodes(fixed) > opaque_nodes(g))
      return std::nullopt;
    return fixed;
  } catch (const std::exception&) {  // the model runs as written, with the dims bound
    return std::nullopt;
  }
}

}  // namespace

FixedGraphs::FixedGraphs() : outer_(current_fixed_graphs) { current_fixed_graphs = this; }
FixedGraphs::~FixedGraphs() { current_fixed_graphs = outer_; }

std::optional<Graph> with_input_shapes(const Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return std::nullopt;
  FixedGraphs* kept = current_fixed_graphs;
  if (kept)
    for (const FixedGraphs::Entry& e : kept->entries_)
      if (e.shapes == shapes && same_nodes(e.original, g)) {
        ++kept->reused_;
        return e.fixed;
      }
  std::optional<Graph> fixed = fix_input_shapes(g, shapes);
  if (kept) {
    ++kept->fixed_;
    if (g.constant_bytes() < kLargeGraphBytes) kept->entries_.push_back({g, shapes, fixed});
  }
  return fixed;
}

}  // namespace isomer
