#include "eval/evaluator.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>

#include "eval/empty_outputs.h"
#include "ir/error.h"
#include "ir/float_to_int.h"
#include "ir/run_limit.h"
#include "ops/op.h"

namespace isomer {

namespace {

// Counts how many times each node's outputs are read, so that intermediate values
// can be released as soon as their last reader has run.
std::unordered_map<const Node*, size_t> reader_counts(const Graph& g, const std::vector<NodePtr>& order) {
  std::unordered_map<const Node*, size_t> readers;
  for (const NodePtr& n : order)
    for (const Value& v : n->inputs())
      if (v.present()) ++readers[v.node.get()];
  for (const Value& v : g.outputs()) ++readers[v.node.get()];
  return readers;
}

void check_input(const Node& in, const std::vector<int64_t>& dims, DType dtype) {
  const TensorType& t = in.output_types()[0];
  require(dtype == t.dtype, "input '" + in.name() + "' has type " + std::string(dtype_name(dtype)) + ", expected " +
                                std::string(dtype_name(t.dtype)));
  bool ok = dims.size() == t.shape.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = !t.shape[i].is_static() || t.shape[i].value == dims[i];
  require(ok, "input '" + in.name() + "' has shape " + to_string(dims) + ", expected " + to_string(t.shape));
}

// Generic walk shared by both evaluators. `leaf` gives values of inputs/constants,
// `apply` runs an operator node.
template <class V, class Leaf, class Apply>
std::vector<V> walk(const Graph& g, Leaf leaf, Apply apply) {
  std::vector<NodePtr> order = g.topo_order();
  auto readers = reader_counts(g, order);
  std::unordered_map<const Node*, std::vector<V>> values;
  for (const NodePtr& n : order) {
    if (n->kind() == NodeKind::Input || n->kind() == NodeKind::Constant) {
      values[n.get()] = {leaf(*n)};
      continue;
    }
    check_run_limit();  // a Loop's body runs through here once per iteration
    std::vector<V> args;
    for (const Value& v : n->inputs()) {
      if (!v.present()) {
        args.emplace_back();
        continue;
      }
      args.push_back(values.at(v.node.get()).at(v.index));
      if (--readers[v.node.get()] == 0) values.erase(v.node.get());
    }
    try {
      values[n.get()] = apply(*n, args);
    } catch (const Error& e) {
      throw Error("evaluating " + describe(*n) + ": " + e.what());
    }
  }
  std::vector<V> out;
  for (const Value& v : g.outputs()) out.push_back(values.at(v.node.get()).at(v.index));
  return out;
}

}  // namespace

// Inputs whose ONNX type a TensorType cannot state (sequence, optional, map, tensor
// of unknown rank or element type) have no tensor value isomer could feed.
static std::string untyped_input_reason(const Node& in) {
  return "graph input '" + in.name() + "' has an ONNX type isomer cannot state as a tensor type";
}

bool is_evaluable(const Graph& g, std::string* why) {
  for (const NodePtr& in : g.inputs()) {
    if (in->onnx_type()) {
      if (why) *why = untyped_input_reason(*in);
      return false;
    }
  }
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() == NodeKind::Opaque) {
      if (why) *why = describe(*n) + " is an operator isomer does not evaluate";
      return false;
    }
    if (n->kind() == NodeKind::Constant && !is_numeric(n->value()->dtype())) {
      if (why) *why = "constant '" + n->name() + "' has non-numeric type";
      return false;
    }
  }
  return true;
}

std::vector<Tensor> evaluate(const Graph& g, const std::vector<Tensor>& inputs) {
  std::string why;
  const bool evaluable = is_evaluable(g, &why);  // fills `why` before it is read
  require(evaluable, why);
  require(inputs.size() == g.inputs().size(), "graph has " + std::to_string(g.inputs().size()) + " inputs, " +
                                                  std::to_string(inputs.size()) + " given");
  std::unordered_map<const Node*, const Tensor*> given;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_input(*g.inputs()[i], inputs[i].dims(), inputs[i].dtype());
    given[g.inputs()[i].get()] = &inputs[i];
  }
  auto leaf = [&](const Node& n) -> Tensor { return n.kind() == NodeKind::Constant ? *n.value() : *given.at(&n); };
  auto apply = [](const Node& n, const std::vector<Tensor>& args) {
    if (n.kind() == NodeKind::Op)
      if (std::optional<std::vector<Tensor>> empty = empty_outputs(n.output_types())) return *empty;
    EvalContext ctx{n.attrs(), args, n.num_outputs()};
    std::vector<Tensor> out = n.op()->eval(ctx);
    require(out.size() == n.num_outputs(), "operator returned " + std::to_string(out.size()) + " outputs, expected " +
                                               std::to_string(n.num_outputs()));
    for (size_t i = 0; i < out.size(); ++i)
      require(out[i].dtype() == n.output_types()[i].dtype, "operator returned type " +
                                                              std::string(dtype_name(out[i].dtype())) + " for output " +
                                                              std::to_string(i));
    return out;
  };
  return walk<Tensor>(g, leaf, apply);
}

std::vector<FieldArray> evaluate_field(const Graph& g, const std::vector<FieldArray>& inputs) {
  require(inputs.size() == g.inputs().size(), "graph has " + std::to_string(g.inputs().size()) + " inputs, " +
                                                  std::to_string(inputs.size()) + " given");
  std::unordered_map<const Node*, const FieldArray*> given;
  for (size_t i = 0; i < inputs.size(); ++i) given[g.inputs()[i].get()] = &inputs[i];
  auto leaf = [&](const Node& n) -> FieldArray {
    if (n.kind() == NodeKind::Input) return *given.at(&n);
    const Tensor& t = *n.value();
    FieldArray a;
    a.dims = t.dims();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = t.f64_at(i);
      require(v == std::floor(v) && std::fabs(v) < 9.0e15,
              "constant '" + n.name() + "' is not integer-valued; it has no field value");
      a.data.push_back(Fp::from_signed(checked_float_to_int<int64_t>(v, "constant '" + n.name() + "'")));
    }
    return a;
  };
  auto apply = [](const Node& n, const std::vector<FieldArray>& args) {
    require(n.kind() == NodeKind::Op && n.op()->eval_field != nullptr,
            "operator " + n.op_type() + " has no finite-field semantics");
    return n.op()->eval_field(n.attrs(), args);
  };
  return walk<FieldArray>(g, leaf, apply);
}

std::vector<SymArray> evaluate_sym(const Graph& g, const std::vector<SymArray>& inputs) {
  require(inputs.size() == g.inputs().size(), "graph has " + std::to_string(g.inputs().size()) + " inputs, " +
                                                  std::to_string(inputs.size()) + " given");
  std::unordered_map<const Node*, const SymArray*> given;
  for (size_t i = 0; i < inputs.size(); ++i) given[g.inputs()[i].get()] = &inputs[i];
  auto leaf = [&](const Node& n) -> SymArray {
    if (n.kind() == NodeKind::Input) return *given.at(&n);
    const Tensor& t = *n.value();
    SymArray a;
    a.dims = t.dims();
    const bool exact_int = is_integer(t.dtype());  // int64 sentinels do not fit a double
    for (int64_t i = 0; i < t.numel(); ++i)
      a.data.push_back(exact_int ? Sym::rational(t.i64_at(i)) : Sym(t.f64_at(i)));
    return a;
  };
  auto apply = [](const Node& n, const std::vector<SymArray>& args) {
    require(n.kind() == NodeKind::Op && n.op()->eval_sym != nullptr,
            "operator " + n.op_type() + " has no symbolic semantics");
    return n.op()->eval_sym(n.attrs(), args);
  };
  return walk<SymArray>(g, leaf, apply);
}

namespace {

// A dim name read as an integer expression: sum := term (('+'|'-') term)*,
// term := factor (('*'|'//') factor)*, factor := '-' factor | '(' sum ')' | integer | name.
// nullopt when the text is not one (or divides by zero).
class DimExpression {
 public:
  DimExpression(const std::string& text, const std::map<std::string, int64_t>& bindings, int64_t unbound)
      : s_(text), bindings_(bindings), unbound_(unbound) {}

  std::optional<int64_t> value() {
    std::optional<int64_t> v = sum();
    skip_spaces();
    if (!v || at_ < s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip_spaces() {
    while (at_ < s_.size() && s_[at_] == ' ') ++at_;
  }
  bool eat(const char* token) {
    skip_spaces();
    const size_t n = std::char_traits<char>::length(token);
    if (s_.compare(at_, n, token) != 0) return false;
    at_ += n;
    return true;
  }
  std::optional<int64_t> sum() {
    std::optional<int64_t> v = term();
    while (v) {
      if (eat("+")) {
        std::optional<int64_t> r = term();
        v = r ? std::optional<int64_t>(*v + *r) : std::nullopt;
      } else if (eat("-")) {
        std::optional<int64_t> r = term();
        v = r ? std::optional<int64_t>(*v - *r) : std::nullopt;
      } else {
        break;
      }
    }
    return v;
  }
  std::optional<int64_t> term() {
    std::optional<int64_t> v = factor();
    while (v) {
      if (eat("//")) {
        std::optional<int64_t> r = factor();
        if (!r || *r == 0) return std::nullopt;
        int64_t q = *v / *r;
        if ((*v % *r != 0) && ((*v < 0) != (*r < 0))) --q;  // floor division
        v = q;
      } else if (eat("*")) {
        std::optional<int64_t> r = factor();
        v = r ? std::optional<int64_t>(*v * *r) : std::nullopt;
      } else {
        break;
      }
    }
    return v;
  }
  std::optional<int64_t> factor() {
    if (eat("-")) {
      std::optional<int64_t> v = factor();
      return v ? std::optional<int64_t>(-*v) : std::nullopt;
    }
    if (eat("(")) {
      std::optional<int64_t> v = sum();
      return v && eat(")") ? v : std::nullopt;
    }
    skip_spaces();
    const size_t start = at_;
    if (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_]))) {
      int64_t v = 0;
      while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_])) && v < (int64_t{1} << 40))
        v = v * 10 + (s_[at_++] - '0');
      return v;
    }
    while (at_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '_')) ++at_;
    if (at_ == start) return std::nullopt;
    auto it = bindings_.find(s_.substr(start, at_ - start));
    return it != bindings_.end() ? it->second : unbound_;
  }

  const std::string& s_;
  const std::map<std::string, int64_t>& bindings_;
  int64_t unbound_;
  size_t at_ = 0;
};

}  // namespace

int64_t symbolic_extent(const std::string& symbol, const std::map<std::string, int64_t>& bindings, int64_t unbound) {
  auto it = bindings.find(symbol);
  if (it != bindings.end()) return it->second;
  return DimExpression(symbol, bindings, unbound).value().value_or(unbound);
}

std::vector<std::vector<int64_t>> concrete_input_dims(const Graph& g, const std::map<std::string, int64_t>& bindings) {
  // The extent of unbound names: 1 unless an expression dim ("s0 - 1") would be below 1.
  auto dims_at = [&](int64_t unbound, bool* all_positive) {
    std::vector<std::vector<int64_t>> out;
    for (const NodePtr& in : g.inputs()) {
      std::vector<int64_t> dims;
      for (const Dim& d : in->output_types()[0].shape) {
        dims.push_back(d.is_static() ? d.value : symbolic_extent(d.symbol, bindings, unbound));
        if (!d.is_static() && dims.back() < 1) *all_positive = false;
      }
      out.push_back(std::move(dims));
    }
    return out;
  };
  for (int64_t unbound = 1; unbound <= 16; ++unbound) {
    bool all_positive = true;
    std::vector<std::vector<int64_t>> out = dims_at(unbound, &all_positive);
    if (all_positive) return out;
  }
  bool ignored = true;
  return dims_at(1, &ignored);
}

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings) {
  for (const NodePtr& in : g.inputs())
    require(!in->onnx_type(), untyped_input_reason(*in) + ": no random data can be made for it");
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> dims = concrete_input_dims(g, bindings);
  std::vector<Tensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    DType t = g.inputs()[i]->output_types()[0].dtype;
    int64_t n = num_elements(dims[i]);
    if (is_float(t)) {
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      std::vector<double> v(n);
      for (double& x : v) x = u(rng);
      out.push_back(Tensor::from_f64(t, dims[i], v));
    } else if (is_integer(t)) {
      std::uniform_int_distribution<int64_t> u(0, t == DType::Bool ? 1 : 3);
      std::vector<int64_t> v(n);
      for (int64_t& x : v) x = u(rng);
      out.push_back(Tensor::from_i64(t, dims[i], v));
    } else {
      throw Error("input '" + g.inputs()[i]->name() + "' has type " + std::string(dtype_name(t)) +
                  " for which isomer cannot make random data");
    }
  }
  return out;
}

}  // namespace isomer
