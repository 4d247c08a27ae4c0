#include "onnx/subgraph_check.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "onnx/libonnx_inference.h"
#include "onnx/model_checks.h"
#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"
#include "onnx/schema_check.h"

namespace isomer::onnx_detail {
namespace {

// The names one graph defines and the types it declares for them; a name is looked up
// from the innermost graph out, and the graph that defines it is the one whose type counts.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_set<std::string> names;
  std::unordered_map<std::string, onnx::TypeProto> types;

  bool has(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent)
      if (s->names.count(name)) return true;
    return false;
  }
  const onnx::TypeProto* type(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (!s->names.count(name)) continue;
      auto it = s->types.find(name);
      return it == s->types.end() ? nullptr : &it->second;
    }
    return nullptr;
  }
  void declare(const onnx::ValueInfoProto& v) {
    if (v.has_type() && !types.count(v.name())) types[v.name()] = v.type();
  }
  void declare(const onnx::TensorProto& t) {
    auto* tt = types[t.name()].mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
};

// The element type a TypeProto declares for a tensor; 0 where it declares none.
int32_t elem_type(const onnx::TypeProto* t) {
  return t && t->has_tensor_type() ? t->tensor_type().elem_type() : 0;
}

// The dims a TypeProto declares for a tensor where every one is a number.
std::optional<std::vector<int64_t>> static_dims(const onnx::TypeProto* t) {
  if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : t->tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

class SubgraphChecker {
 public:
  SubgraphChecker(const onnx::ModelProto& model, int64_t opset) : model_(model), opset_(opset) {}

  void run() {
    const onnx::GraphProto& g = model_.graph();
    Scope main;
    for (const auto& in : g.input()) main.names.insert(in.name()), main.declare(in);
    for (const auto& t : g.initializer()) main.names.insert(t.name()), main.declare(t);
    for (const auto& node : g.node())
      for (const auto& o : node.output())
        if (!o.empty()) main.names.insert(o);
    for (const auto& v : g.value_info()) main.declare(v);
    for (const auto& v : g.output()) main.declare(v);
    for (const auto& node : g.node()) check_node_subgraphs(node, main, describe_proto(node));
  }

 private:
  void check_node_subgraphs(const onnx::NodeProto& node, const Scope& scope, const std::string& where) {
    for (const auto& a : node.attribute()) {
      if (a.has_g()) check_graph(a.name(), a.g(), scope, where + " " + a.name());
      for (int i = 0; i < a.graphs_size(); ++i)
        check_graph(a.name(), a.graphs(i), scope, where + " " + a.name() + "[" + std::to_string(i) + "]");
    }
    if (is_default_domain(node.domain())) {
      check_contract(node, where);
      check_control_operands(node, scope, where);
      check_body_operand_types(node, scope, where);
    }
  }

  void check_graph(const std::string& attr, const onnx::GraphProto& g,
                   const Scope& outer, const std::string& where) {
    Scope s{&outer, {}, {}};
    for (const auto& in : g.input()) {
      require(s.names.insert(in.name()).second, where + ": input '" + in.name() + "' is declared twice");
      s.declare(in);
    }
    for (const auto& t : g.initializer()) {
      if (s.names.insert(t.name()).second) s.declare(t);
    }
    for (const auto& sp : g.sparse_initializer()) {
      if (!s.names.insert(sp.values().name()).second) continue;
      onnx::TensorProto dense;  // the type it declares: the values' element type, its dims
      dense.set_data_type(sp.values().data_type());
      *dense.mutable_dims() = sp.dims();
      dense.set_name(sp.values().name());
      s.declare(dense);
    }
    for (const auto& node : g.node()) {
      for (const auto& o : node.output()) {
        if (o.empty()) continue;
        require(!s.names.count(o), where + " " + describe_proto(node) + ": output '" + o +
                                       "' is already defined in the " + attr + " (ONNX allows one definition)");
        require(!outer.has(o), where + " " + describe_proto(node) + ": output '" + o +
                                   "' redefines a name of the enclosing graph (ONNX allows one definition)");
        s.names.insert(o);
      }
    }
    for (const auto& v : g.value_info()) s.declare(v);
    for (const auto& v : g.output()) s.declare(v);
    for (const auto& node : g.node())
      for (const auto& i : node.input())
        require(i.empty() || s.has(i), where + " " + describe_proto(node) + " reads '" + i + "', which nothing defines");
    for (const auto& out : g.output()) {
      require(s.has(out.name()), where + ": output '" + out.name() + "' is produced by no node");
      // ONNX's checker and ONNX Runtime hold a body to returning what it defines itself.
      require(s.names.count(out.name()), where + ": output '" + out.name() +
                                             "' is a value of the enclosing graph, which a body may read but not "
                                             "return as it is (an Identity inside the body can pass it on)");
    }
    for (const auto& node : g.node()) {
      const std::string path = where + " " + describe_proto(node);
      check_node(node, s, path);
      check_node_subgraphs(node, s, path);
    }
  }

  void check_node(const onnx::NodeProto& node, const Scope& s, const std::string& path) const {
    if (std::string why = missing_operator(node, model_); !why.empty()) throw Error(path + ": " + why);
    if (!is_default_domain(node.domain())) return;
    std::vector<std::optional<onnx::TypeProto>> types(static_cast<size_t>(node.input_size()));
    bool all_typed = true;
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i).empty()) continue;
      const onnx::TypeProto* t = s.type(node.input(i));
      if (elem_type(t) == 0) {
        all_typed = false;
        continue;
      }
      // Element types only: shapes in a body are often symbolic, and libonnx's
      // inference reads some unchecked (libonnx_inference.h).
      types[static_cast<size_t>(i)].emplace();
      types[static_cast<size_t>(i)]->mutable_tensor_type()->set_elem_type(elem_type(t));
    }
    if (std::string why = schema_violation(node, opset_, types); !why.empty())
      throw Error(path + ": not a valid " + node.op_type() + "-" +
                  std::to_string(op_version(node.domain(), node.op_type(), opset_)) + " node (" + why + ")");
    if (all_typed) check_declared_outputs(node, s, types, path);
  }

  // The element types ONNX infers for the node's outputs against those the body
  // declares (as value_info or outputs); nodes whose inference libonnx cannot be
  // shown safely, or that have subgraphs of their own, are left to ONNX Runtime.
  void check_declared_outputs(const onnx::NodeProto& node, const Scope& s,
                              const std::vector<std::optional<onnx::TypeProto>>& input_types,
                              const std::string& path) const {
    const onnx::OpSchema* schema = libonnx_schema(node.domain(), node.op_type(), opset_);
    if (!schema || schema->Deprecated() || !schema->has_type_and_shape_inference_function()) return;
    onnx::NodeProto copy = node;
    for (const auto& a : node.attribute())
      if (a.has_g() || a.graphs_size()) return;
    // Where every input's declared shape is static, the node is shown to ONNX's inference
    // with it, as ONNX Runtime shows it when it loads the model: an attribute that breaks
    // the operator at those ranks (a Transpose perm that repeats an axis) is refused here,
    // not kept opaque inside its If and written back by `optimize`.
    bool all_static = true;
    std::vector<onnx::TypeProto> storage(input_types.size());
    for (size_t i = 0; i < input_types.size(); ++i) {
      if (!input_types[i]) continue;
      const onnx::TypeProto* t = s.type(node.input(static_cast<int>(i)));
      all_static = all_static && static_dims(t).has_value();
      storage[i] = *input_types[i];
    }
    const auto dims_of = [&](const std::string& name) { return static_dims(s.type(name)); };
    const LibonnxSafety safety = make_safe_for_libonnx(&copy, dims_of);
    if (safety == LibonnxSafety::Invalid)
      throw Error(path + ": an attribute is out of range for its input's rank (or not positive)");
    if (safety != LibonnxSafety::Safe) return;
    std::unordered_map<std::string, onnx::TypeProto*> types;
    for (size_t i = 0; i < input_types.size(); ++i) {
      if (!input_types[i]) continue;
      if (all_static) storage[i] = *s.type(node.input(static_cast<int>(i)));
      types[node.input(static_cast<int>(i))] = &storage[i];
    }
    try {
      onnx::shape_inference::InferenceContextImpl ctx(copy, types, {}, {});
      schema->GetTypeAndShapeInferenceFunction()(ctx);
      for (int i = 0; i < node.output_size(); ++i) {
        if (node.output(i).empty()) continue;
        const int32_t inferred = elem_type(ctx.getOutputType(static_cast<size_t>(i)));
        const int32_t declared = elem_type(s.type(node.output(i)));
        if (inferred != 0 && declared != 0 && inferred != declared)
          throw Error(path + ": output '" + node.output(i) + "' is declared " + element_type_name(declared) +
                      ", but ONNX infers " + element_type_name(inferred));
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      // From element types alone libonnx's inference may not judge the node; from static
      // shapes its refusal is ONNX Runtime's at load.
      if (all_static) throw Error(path + ": ONNX's inference refuses it (" + first_line(e.what()) + ")");
    }
  }

  static const onnx::GraphProto* graph_attr(const onnx::NodeProto& node, const std::string& name) {
    for (const auto& a : node.attribute())
      if (a.name() == name && a.has_g()) return &a.g();
    return nullptr;
  }

  static void require_same_type(const onnx::ValueInfoProto& a, const onnx::ValueInfoProto& b, const std::string& what) {
    const int32_t x = elem_type(&a.type()), y = elem_type(&b.type());
    require(x == 0 || y == 0 || x == y, what + " ('" + a.name() + "' is " + element_type_name(x) + ", '" + b.name() +
                                            "' is " + element_type_name(y) + ")");
  }

  static void require_elem(const onnx::ValueInfoProto& v, int32_t want, const std::string& what) {
    const int32_t have = elem_type(&v.type());
    require(have == 0 || have == want, what + " '" + v.name() + "' must be " + element_type_name(want) + ", it is " +
                                           element_type_name(have));
  }

  // The body's inputs and outputs against the operator's contract (see the header).
  void check_contract(const onnx::NodeProto& node, const std::string& where) const {
    const std::string& op = node.op_type();
    const auto count = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    if (op == "If") {
      const onnx::GraphProto* branch[2] = {graph_attr(node, "then_branch"), graph_attr(node, "else_branch")};
      const char* names[2] = {"then_branch", "else_branch"};
      for (int b = 0; b < 2; ++b) {
        if (!branch[b]) continue;  // the schema check says so
        require(branch[b]->input_size() == 0, where + " " + names[b] + ": has " +
                                                  count(branch[b]->input_size(), "input") + ", an If branch takes none");
        require(branch[b]->output_size() == node.output_size(),
                where + " " + names[b] + ": has " + count(branch[b]->output_size(), "output") + ", but the If node has " +
                    std::to_string(node.output_size()));
      }
      if (branch[0] && branch[1])
        for (int i = 0; i < branch[0]->output_size(); ++i)
          require_same_type(branch[0]->output(i), branch[1]->output(i),
                            where + ": then_branch and else_branch disagree on the type of output " + std::to_string(i));
    } else if (op == "Loop") {
      const onnx::GraphProto* body = graph_attr(node, "body");
      if (!body || node.input_size() < 2) return;
      const int n = node.input_size() - 2;
      require(body->input_size() == 2 + n,
              where + " body: has " + count(body->input_size(), "input") + ", but a Loop of " +
                  count(n, "loop-carried value") + " takes " + std::to_string(2 + n) +
                  " (iteration number, condition, the values)");
      require(body->output_size() >= 1 + n, where + " body: has " + count(body->output_size(), "output") +
                                                ", but a Loop of " + count(n, "loop-carried value") + " yields at least " +
                                                std::to_string(1 + n) + " (condition, the values)");
      const int k = body->output_size() - 1 - n;
      require(node.output_size() == n + k, where + ": the Loop node has " + count(node.output_size(), "output") +
                                               ", but its body yields " + std::to_string(n) + " loop-carried and " +
                                               std::to_string(k) + " scan outputs");
      require_elem(body->input(0), onnx::TensorProto::INT64, where + " body: the iteration number");
      require_elem(body->input(1), onnx::TensorProto::BOOL, where + " body: the condition");
      require_elem(body->output(0), onnx::TensorProto::BOOL, where + " body: the condition output");
      for (int i = 0; i < n; ++i)
        require_same_type(body->input(2 + i), body->output(1 + i),
                          where + " body: loop-carried value " + std::to_string(i) + " changes type");
    } else if (op == "Scan") {
      const onnx::GraphProto* body = graph_attr(node, "body");
      int64_t m = -1;
      for (const auto& a : node.attribute())
        if (a.name() == "num_scan_inputs") m = a.i();
      if (!body || m < 1) return;  // the schema check says so
      const int first = op_version(node.domain(), op, opset_) < 9 ? 1 : 0;  // Scan-8: sequence_lens first
      const int64_t n = node.input_size() - first - m;
      require(n >= 0, where + ": num_scan_inputs is " + std::to_string(m) + ", but the node has " +
                          count(node.input_size() - first, "input"));
      require(body->input_size() == n + m, where + " body: has " + count(body->input_size(), "input") +
                                               ", but the Scan node passes " + std::to_string(n) + " state and " +
                                               std::to_string(m) + " scan values");
      require(body->output_size() >= n && body->output_size() == node.output_size(),
              where + " body: has " + count(body->output_size(), "output") + ", but the Scan node has " +
                  count(node.output_size(), "output") + ", " + std::to_string(n) + " of them state");
      for (int i = 0; i < n; ++i)
        require_same_type(body->input(i), body->output(i), where + " body: state value " + std::to_string(i) +
                                                                " changes type");
    }
  }

  // The values a Loop or a Scan hands its body (a Loop's carried values, a Scan's state
  // and scanned inputs) have the element types the body declares for them: a Scan over a
  // string state with a float body was kept opaque and written back by `optimize`.
  void check_body_operand_types(const onnx::NodeProto& node, const Scope& scope, const std::string& where) const {
    const std::string& op = node.op_type();
    const onnx::GraphProto* body = graph_attr(node, "body");
    if (!body || (op != "Loop" && op != "Scan")) return;
    // A Loop's operands 2.. are its body's inputs 2..; a Scan's (after Scan-8's
    // sequence_lens) are its body's inputs in order.
    const int outer_first = op == "Loop" ? 2 : (op_version(node.domain(), op, opset_) < 9 ? 1 : 0);
    const int inner_first = op == "Loop" ? 2 : 0;
    for (int i = 0; outer_first + i < node.input_size() && inner_first + i < body->input_size(); ++i) {
      const std::string& name = node.input(outer_first + i);
      if (name.empty()) continue;
      const int32_t have = elem_type(scope.type(name)), want = elem_type(&body->input(inner_first + i).type());
      require(have == 0 || want == 0 || have == want,
              where + ": '" + name + "' is " + element_type_name(have) + ", but the body takes it as '" +
                  body->input(inner_first + i).name() + "', " + element_type_name(want));
    }
  }

  // The operands and attributes of a Loop or Scan that are not its body: a Loop's
  // trip count and condition single int64 and bool values, a Scan's scan-input count,
  // axes and directions in range (ONNX's inference refuses the rest; isomer keeps
  // such nodes opaque and would write them back unchecked).
  void check_control_operands(const onnx::NodeProto& node, const Scope& scope, const std::string& where) const {
    const std::string& op = node.op_type();
    if (op == "Loop") {
      const char* roles[2] = {"trip count", "condition"};
      const int32_t wants[2] = {onnx::TensorProto::INT64, onnx::TensorProto::BOOL};
      for (int i = 0; i < 2 && i < node.input_size(); ++i) {
        if (node.input(i).empty()) continue;
        const onnx::TypeProto* t = scope.type(node.input(i));
        const int32_t have = elem_type(t);
        require(have == 0 || have == wants[i], where + ": the " + roles[i] + " '" + node.input(i) + "' is " +
                                                   element_type_name(have) + ", a Loop's is " +
                                                   element_type_name(wants[i]));
        if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) continue;
        for (const auto& d : t->tensor_type().shape().dim())
          require(!d.has_dim_value() || d.dim_value() == 1,
                  where + ": the " + roles[i] + " '" + node.input(i) + "' has a dim of " +
                      std::to_string(d.dim_value()) + ", a Loop's is a single value");
      }
    } else if (op == "Scan" && op_version(node.domain(), op, opset_) >= 9) {
      int64_t m = 0;
      std::unordered_map<std::string, std::vector<int64_t>> lists;
      for (const auto& a : node.attribute()) {
        if (a.name() == "num_scan_inputs") m = a.i();
        if (a.type() == onnx::AttributeProto::INTS) lists[a.name()].assign(a.ints().begin(), a.ints().end());
      }
      require(m >= 1 && m <= node.input_size(), where + ": num_scan_inputs is " + std::to_string(m) +
                                                    ", but the node has " + std::to_string(node.input_size()) +
                                                    " inputs (at least one of them scanned)");
      const int64_t n = node.input_size() - m, k = node.output_size() - n;
      for (const char* dirs : {"scan_input_directions", "scan_output_directions"})
        for (int64_t d : lists.count(dirs) ? lists.at(dirs) : std::vector<int64_t>{})
          require(d == 0 || d == 1, where + ": " + dirs + " holds " + std::to_string(d) + ", not 0 or 1");
      for (const auto& [name, count] : {std::pair<const char*, int64_t>{"scan_input_axes", m},
                                        {"scan_input_directions", m}, {"scan_output_axes", k},
                                        {"scan_output_directions", k}}) {
        const auto it = lists.find(name);
        if (it == lists.end()) continue;
        const bool inputs = std::string(name).find("input") != std::string::npos;
        require(static_cast<int64_t>(it->second.size()) == count,
                where + ": " + name + " has " + std::to_string(it->second.size()) + " entries, for " +
                    std::to_string(count) + (inputs ? " scan inputs" : " scan outputs"));
      }
      const std::vector<int64_t> axes = lists.count("scan_input_axes") ? lists.at("scan_input_axes") : std::vector<int64_t>{};
      int64_t length = -1;  // the scanned extent the static scan inputs agree on
      for (int64_t j = 0; j < m; ++j) {
        const std::string& name = node.input(static_cast<int>(n + j));
        const onnx::TypeProto* t = scope.type(name);
        if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) continue;
        const int64_t r = t->tensor_type().shape().dim_size(), a = j < static_cast<int64_t>(axes.size()) ? axes[j] : 0;
        require(a >= -r && a < r, where + ": scan_input_axes holds " + std::to_string(a) + " for scan input '" + name +
                                      "' of rank " + std::to_string(r));
        const auto& d = t->tensor_type().shape().dim(static_cast<int>(a < 0 ? a + r : a));
        if (!d.has_dim_value()) continue;
        require(length < 0 || d.dim_value() == length, where + ": scan input '" + name + "' has " +
                                                           std::to_string(d.dim_value()) +
                                                           " slices along its scan axis, another scan input " +
                                                           std::to_string(length));
        length = d.dim_value();
      }
    }
  }

  const onnx::ModelProto& model_;
  int64_t opset_;
};

}  // namespace

void check_subgraphs(const onnx::ModelProto& model, int64_t opset) { SubgraphChecker(model, opset).run(); }

}  // namespace isomer::onnx_detail
