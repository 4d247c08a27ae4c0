// ONNX ModelProto -> Graph.
//
// The model is taken as written: nodes are visited in ONNX order (stably sorted if
// the file is not), each becomes one IR node through a non-deduplicating builder.
// A node isomer cannot represent natively becomes an opaque node that keeps its
// NodeProto; the reason is recorded in ImportStats. Types of opaque outputs come
// from ONNX shape inference run on a copy of the model (import_types.h).
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "eval/static_value.h"
#include "ir/error.h"
#include "ir/invalid_node.h"
#include "ir/shape_overflow.h"
#include "mugraph/onnx_function.h"
#include "mugraph/region.h"
#include "onnx/declared_shapes.h"
#include "onnx/extras.h"
#include "onnx/function_check.h"
#include "onnx/function_inline.h"
#include "onnx/sequence_split.h"
#include "onnx/libonnx_inference.h"
#include "onnx/model_checks.h"
#include "onnx/sparse_initializer.h"
#include "onnx/onnx_io.h"
#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"
#include "onnx/import_types.h"
#include "onnx/schema_check.h"
#include "onnx/subgraph_check.h"
#include "ops/op.h"

namespace isomer {
namespace {

using namespace onnx_detail;

std::atomic<uint64_t> g_next_opaque_uid{1};


std::string attr_type_name(onnx::AttributeProto::AttributeType t) {
  return onnx::AttributeProto::AttributeType_Name(t);
}

// Converts ONNX attributes; returns the reason when one has a kind the IR cannot hold.
std::string convert_attributes(const onnx::NodeProto& node, const std::string& base_dir, Attributes* out) {
  using A = onnx::AttributeProto;
  for (const auto& a : node.attribute()) {
    switch (attribute_type(a)) {
      case A::INT: out->set(a.name(), static_cast<int64_t>(a.i())); break;
      case A::FLOAT: out->set(a.name(), static_cast<double>(a.f())); break;
      case A::STRING: out->set(a.name(), a.s()); break;
      case A::INTS: out->set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end())); break;
      case A::FLOATS: out->set(a.name(), std::vector<double>(a.floats().begin(), a.floats().end())); break;
      case A::STRINGS: out->set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end())); break;
      case A::TENSOR:
        if (!known_element_type(a.t().data_type()))
          return "attribute '" + a.name() + "' has element type " + std::to_string(a.t().data_type()) +
                 ", which isomer does not compute with";
        out->set(a.name(), tensor_from_proto(a.t(), base_dir));
        break;
      default: return "attribute '" + a.name() + "' has type " + attr_type_name(attribute_type(a));
    }
  }
  return "";
}

class Importer {
 public:
  // Takes the initializers' data out of `model` (no copy of the weights).
  Importer(onnx::ModelProto& model, std::string base_dir, const ImportOptions& opts, ImportStats* stats)
      : model_(model), graph_(*model.mutable_graph()), base_dir_(std::move(base_dir)), opts_(opts), stats_(stats) {}

  Graph run() {
    ModelInfo info = model_info();
    // A graph without outputs computes nothing: ONNX Runtime refuses it, and an
    // "optimized" copy of it would be an empty model.
    require(graph_.output_size() > 0, "the graph has no outputs");
    check_graph_names(graph_);
    check_model_functions(model_);
    read_function_external_data();
    inlined_ = inline_model_functions(&model_);
    add_imports_and_functions(&info);
    opset_ = info.opset() > 0 ? info.opset() : 1;
    slice_split_sequences(&model_, opset_);
    if (stats_) {
      stats_->inlined_calls = inlined_.calls;
      stats_->onnx_nodes = static_cast<size_t>(graph_.node_size());
      for (const auto& n : graph_.node()) ++stats_->onnx_histogram[n.op_type()];
    }
    check_subgraphs(model_, opset_);
    types_ = value_types(model_, opts_);
    add_initializers(&info);
    add_inputs();
    for (int index : node_order()) add_node(index);
    require_value_info_types(graph_, values_);
    std::vector<Value> outputs;
    std::vector<std::string> names;
    for (const auto& out : graph_.output()) {
      auto it = values_.find(out.name());
      require(it != values_.end(), "graph output '" + out.name() + "' is produced by no node");
      require_output_type(out, it->second);
      outputs.push_back(it->second);
      names.push_back(out.name());
    }
    return builder_.finish(std::move(outputs), std::move(names), std::move(info));
  }

 private:
  ModelInfo model_info() const {
    const int64_t ir = model_.ir_version();
    // IR versions 9 to 14 add element types (float8, int4, float4e2m1, float8e8m0, int2,
    // float6), which isomer keeps inside opaque nodes, and fields this libonnx parses as
    // unknown fields, which onnx_extras keeps (onnx_versions.h).
    require(ir >= 1 && ir <= newest_ir_version(), "unsupported IR version " + std::to_string(ir) +
                                                      " (this build reads 1 to " +
                                                      std::to_string(newest_ir_version()) + ")");
    // Opset imports came with IR 3: a model of an older IR version that has them says
    // two things of itself (onnx.checker refuses it; ONNX Runtime runs it, and computes
    // other outputs than it does at the model's true IR version).
    require(ir >= 3 || model_.opset_import_size() == 0,
            "IR version " + std::to_string(ir) + " predates opset imports (IR 3), yet the model imports " +
                std::to_string(model_.opset_import_size()) + " opset(s): its IR version is wrong");
    require(model_.training_info_size() == 0, "models with training_info are not supported");
    ModelInfo info;
    info.ir_version = ir;
    std::map<std::string, int64_t> imported;
    for (const auto& o : model_.opset_import()) {
      const std::string key = is_default_domain(o.domain()) ? "ai.onnx" : o.domain();
      // The same import twice says one thing (onnx.checker and ONNX Runtime accept it);
      // two versions of one domain leave which one the model means unsaid.
      auto [it, fresh] = imported.emplace(key, o.version());
      require(fresh || it->second == o.version(), "the model imports domain '" + key + "' twice, at opsets " +
                                                      std::to_string(it->second) + " and " +
                                                      std::to_string(o.version()));
      const int64_t newest = newest_opset(o.domain());
      const std::string domain = o.domain().empty() ? "ai.onnx" : o.domain();
      if (is_default_domain(o.domain()))
        require(o.version() >= 1, "unsupported opset " + std::to_string(o.version()) + " of ai.onnx");
      // A newer opset may change any operator; which ones, this build cannot know.
      require(newest == 0 || o.version() <= newest, "unsupported opset " + std::to_string(o.version()) + " of " +
                                                        domain + " (this build reads up to " +
                                                        std::to_string(newest) + ")");
    }
    require_default_domain_import(model_, imported.count("ai.onnx") > 0);
    info.producer_name = model_.producer_name();
    info.producer_version = model_.producer_version();
    info.domain = model_.domain();
    info.model_version = model_.model_version();
    info.doc_string = model_.doc_string();
    info.graph_name = graph_.name();
    info.graph_doc_string = graph_.doc_string();
    for (const auto& p : model_.metadata_props()) info.metadata_props.emplace_back(p.key(), p.value());
    if (std::string extras = collect_extras(model_); !extras.empty())
      info.onnx_extras = std::make_shared<const std::string>(std::move(extras));
    return info;
  }

  // Tensors inside functions take their data with them, into the graph where a call is
  // inlined and wherever a function still called is written (as opaque nodes do).
  void read_function_external_data() {
    for (auto& f : *model_.mutable_functions()) {
      for (auto& n : *f.mutable_node()) {
        try {
          inline_external_data(&n, base_dir_);
        } catch (const Error& e) {
          throw Error("model-local function '" + f.domain() + ":" + f.name() + "' " + describe_proto(n) + ": " +
                      e.what());
        }
      }
    }
  }

  // What inlining (inline_model_functions) left of the model's imports and functions.
  void add_imports_and_functions(ModelInfo* info) const {
    info->opset_imports.clear();
    for (const auto& o : model_.opset_import()) info->opset_imports.emplace_back(o.domain(), o.version());
    for (const auto& f : model_.functions()) info->functions.push_back(f.SerializeAsString());
  }

  void define(const std::string& name, Value v) { values_[name] = std::move(v); }

  // `info`: takes the default values of overridable inputs (onnx_io.h).
  void add_initializers(ModelInfo* info) {
    std::unordered_set<std::string> listed;
    if (model_.ir_version() >= 4)
      for (const auto& in : graph_.input()) listed.insert(in.name());
    std::unordered_set<std::string> seen;
    std::vector<onnx::TensorProto> defaults;
    for (auto& t : *graph_.mutable_initializer()) {
      require(!t.name().empty(), "an initializer has no name");
      require(!values_.count(t.name()) && seen.insert(t.name()).second, "duplicate initializer '" + t.name() + "'");
      if (listed.count(t.name()) && known_element_type(t.data_type())) {
        if (opts_.freeze_overridable_inputs) {
          if (stats_) stats_->frozen_inputs.push_back(t.name());
        } else {
          // An input the user may feed: add_inputs makes it one, with its declared type.
          try {
            defaults.push_back(inline_tensor_proto(t, base_dir_));
          } catch (const Error& e) {
            throw Error("initializer '" + t.name() + "': " + e.what());
          }
          continue;
        }
      }
      if (!known_element_type(t.data_type())) {
        add_kept_constant(t);
        continue;
      }
      Tensor value;
      try {
        value = take_tensor_from_proto(&t, base_dir_);
      } catch (const Error& e) {
        throw Error("initializer '" + t.name() + "': " + e.what());
      }
      define(t.name(), builder_.constant(std::move(value), t.name()));
    }
    if (!defaults.empty()) {
      info->onnx_extras = std::make_shared<const std::string>(
          add_input_defaults(info->onnx_extras ? *info->onnx_extras : std::string(), std::move(defaults)));
    }
  }

  // An initializer of an element type isomer does not compute with (float8, int4, ...
  // and any later one) is kept verbatim, data inline: an opaque Constant node holding
  // it, which export writes back as an initializer.
  void add_kept_constant(const onnx::TensorProto& t) {
    onnx::NodeProto node;
    node.set_op_type("Constant");
    node.add_output(t.name());
    onnx::AttributeProto* value = node.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    try {
      *value->mutable_t() = inline_tensor_proto(t, base_dir_);
    } catch (const Error& e) {
      throw Error("initializer '" + t.name() + "': " + e.what());
    }
    add_opaque(node, {}, {}, "initializer '" + t.name() + "' is " + element_type_name(t.data_type()) +
                                 ", which isomer keeps as written and does not compute with", /*count=*/false);
  }

  void add_inputs() {
    std::unordered_set<std::string> input_names;
    for (const auto& in : graph_.input()) input_names.insert(in.name());
    for (const auto& [name, dims] : opts_.input_shapes) {
      require(input_names.count(name) && !values_.count(name),
              "input shape given for '" + name + "', which is not a graph input");
    }
    for (const auto& in : graph_.input()) {
      if (values_.count(in.name())) continue;  // an initializer taken for a constant (IR < 4, or frozen)
      require(!in.name().empty(), "a graph input has no name");
      TensorType type;
      auto fixed = opts_.input_shapes.find(in.name());
      if (fixed != opts_.input_shapes.end()) {
        const auto& tt = in.type().tensor_type();
        require(in.type().has_tensor_type() && tt.elem_type() > 0,
                "graph input '" + in.name() + "' is " + type_kind(in.type()) + "; its shape cannot be fixed");
        require(!tt.has_shape() || tt.shape().dim_size() == static_cast<int>(fixed->second.size()),
                "input shape for '" + in.name() + "' has rank " + std::to_string(fixed->second.size()) +
                    ", the model declares rank " + std::to_string(tt.shape().dim_size()));
        for (int64_t d : fixed->second) require(d >= 0, "input shape for '" + in.name() + "' has a negative dim");
        type.dtype = static_cast<DType>(tt.elem_type());
        type.shape = make_shape(fixed->second);
      } else if (!tensor_type_from_proto(in.type(), &type)) {
        // A type a TensorType cannot state is kept verbatim; its readers stay opaque.
        type = TensorType{};
        const auto& tt = in.type().tensor_type();
        if (in.type().has_tensor_type() && tt.elem_type() > 0 && tt.elem_type() <= static_cast<int>(DType::BFloat16))
          type.dtype = static_cast<DType>(tt.elem_type());
        NodePtr node = builder_.intern(Node::make_input(in.name(), std::move(type), in.type().SerializeAsString()));
        define(in.name(), node->output(0));
        continue;
      }
      define(in.name(), builder_.input(in.name(), std::move(type)));
    }
  }

  // Node indices in a topological order that keeps the file's order where it is one.
  // Rejects duplicate output names, dangling inputs and cycles.
  std::vector<int> node_order() {
    const int n = graph_.node_size();
    std::unordered_map<std::string, int> producer;
    implicit_.assign(n, {});
    for (int i = 0; i < n; ++i) {
      const auto& node = graph_.node(i);
      for (const auto& o : node.output()) {
        if (o.empty()) continue;
        require(!values_.count(o), describe_proto(node) + ": output '" + o + "' has the name of a graph " +
                                       "input or initializer");
        auto [it, fresh] = producer.emplace(o, i);
        require(fresh, describe_proto(node) + ": output '" + o + "' is also produced by " +
                           describe_proto(graph_.node(it->second)));
      }
      implicit_[i] = outer_scope_names(node);
    }
    std::vector<std::vector<int>> users(n);
    std::vector<int> pending(n, 0);
    for (int i = 0; i < n; ++i) {
      const auto& node = graph_.node(i);
      std::vector<std::string> reads(node.input().begin(), node.input().end());
      reads.insert(reads.end(), implicit_[i].begin(), implicit_[i].end());
      for (const auto& name : reads) {
        if (name.empty() || values_.count(name)) continue;
        auto it = producer.find(name);
        require(it != producer.end(), describe_proto(node) + ": input '" + name +
                                          "' is not a graph input, an initializer or any node's output");
        users[it->second].push_back(i);
        ++pending[i];
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push(i);
    std::vector<int> order;
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int u : users[i])
        if (--pending[u] == 0) ready.push(u);
    }
    if (static_cast<int>(order.size()) < n) {
      for (int i = 0; i < n; ++i)
        if (pending[i] > 0) throw Error("the graph has a cycle through " + describe_proto(graph_.node(i)));
    }
    return order;
  }

  void add_node(int index) {
    const onnx::NodeProto& node = graph_.node(index);
    std::vector<Value> inputs;
    for (const auto& name : node.input()) inputs.push_back(name.empty() ? Value{} : values_.at(name));
    std::vector<Value> implicit;
    for (const auto& name : implicit_[index]) implicit.push_back(values_.at(name));
    require_schema(node, inputs);

    if (node.op_type() == "Constant" && is_default_domain(node.domain()) && node.output_size() == 1) {
      std::string reason;
      std::optional<Tensor> value = constant_node_value(node, base_dir_, &reason);
      if (value) define(node.output(0), builder_.constant(std::move(*value), node.output(0)));
      else add_opaque(node, inputs, implicit, reason);
      return;
    }
    std::string reason;
    if (is_control_flow(node)) {
      // The runtime runs If, Loop and Scan itself where it can plan them
      // (runtime/lower_control.h); the optimizer leaves them as written.
      reason = "control flow: the optimizer keeps its subgraphs as written";
    } else if (implicit.empty()) {
      NodePtr native = make_native(node, inputs, &reason);
      if (native) {
        for (uint32_t i = 0; i < native->num_outputs() && i < static_cast<uint32_t>(node.output_size()); ++i)
          if (!node.output(i).empty()) define(node.output(i), native->output(i));
        return;
      }
    } else {
      reason = "it has a subgraph";
    }
    require_onnx_accepts_opaque(node, inputs);
    add_opaque(node, inputs, implicit, reason);
  }

  // True if `v` is an opaque output or graph input whose type a TensorType cannot state.
  static bool unknown_type(const Value& v) { return type_unknown(v); }

  // Why ONNX's own checks (schema verification and, with `infer`, the operator's
  // shape inference) refuse `node` with isomer's input types, or "" when they accept
  // it or cannot judge it: where they refuse, a failing shape rule is a bad model
  // rather than isomer's limitation.
  // With `declared`, also an output type ONNX infers other than the one the model
  // declares for it (as an output or in value_info), which an opaque node would take.
  std::string onnx_refusal(const onnx::NodeProto& node, const std::vector<Value>& inputs, bool infer,
                           bool declared = false) const {
    // Without libonnx's schema of this very version, ONNX cannot be asked.
    const onnx::OpSchema* schema = libonnx_schema(node.domain(), node.op_type(), opset_);
    if (!schema) return "";
    onnx::NodeProto copy = node;
    auto dims_of = [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].present() || node.input(static_cast<int>(i)) != name) continue;
        if (unknown_type(inputs[i]) || !is_static(inputs[i].type().shape)) return std::nullopt;
        std::vector<int64_t> dims;
        for (const Dim& d : inputs[i].type().shape) dims.push_back(d.value);
        return dims;
      }
      return std::nullopt;
    };
    switch (make_safe_for_libonnx(&copy, dims_of)) {
      case LibonnxSafety::Invalid: return "an attribute is out of range for its input's rank (or not positive)";
      case LibonnxSafety::Unknown: return "";
      case LibonnxSafety::Safe: break;
    }
    if (!infer) return "";
    std::vector<onnx::TypeProto> type_storage(inputs.size());
    std::vector<onnx::TensorProto> data_storage(inputs.size());
    std::unordered_map<std::string, onnx::TypeProto*> types;
    std::unordered_map<std::string, const onnx::TensorProto*> data;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].present()) continue;
      const std::string& name = node.input(static_cast<int>(i));
      tensor_type_to_proto(inputs[i].type(), &type_storage[i]);
      types[name] = &type_storage[i];
      const Tensor* c = inputs[i].constant();
      if (c && c->byte_size() <= kInferenceDataLimit) {
        tensor_to_proto(*c, &data_storage[i]);
        data[name] = &data_storage[i];
      }
    }
    try {
      schema->Verify(copy);
      if (!schema->has_type_and_shape_inference_function()) return "";
      onnx::shape_inference::InferenceContextImpl ctx(copy, types, data, {});
      schema->GetTypeAndShapeInferenceFunction()(ctx);
      for (int i = 0; declared && i < node.output_size(); ++i) {
        auto it = types_.find(node.output(i));
        const onnx::TypeProto* inferred = ctx.getOutputType(static_cast<size_t>(i));
        if (node.output(i).empty() || it == types_.end() || !inferred) continue;
        if (inferred->value_case() != onnx::TypeProto::VALUE_NOT_SET &&
            it->second.value_case() != onnx::TypeProto::VALUE_NOT_SET && inferred->value_case() != it->second.value_case())
          return "output '" + node.output(i) + "' is declared " + value_kind(it->second) + ", but ONNX infers " +
                 value_kind(*inferred);
        if (!inferred->has_tensor_type() || !it->second.has_tensor_type()) continue;
        const int32_t want = inferred->tensor_type().elem_type(), have = it->second.tensor_type().elem_type();
        if (want != 0 && have != 0 && want != have)
          return "output '" + node.output(i) + "' is declared " + element_type_name(have) + ", but ONNX infers " +
                 element_type_name(want);
      }
    } catch (const std::exception& e) {
      return one_line(e.what());
    }
    return "";
  }

  // A node kept opaque passes through `optimize` unchecked, to fail wherever the model
  // runs: ONNX's own checks judge it here where they can (inputs of known types, and
  // for shape inference of static shapes; not a node with a subgraph, whose inference
  // needs the enclosing graph's).
  void require_onnx_accepts_opaque(const onnx::NodeProto& node, const std::vector<Value>& inputs) const {
    if (!is_default_domain(node.domain())) return;
    bool infer = true;
    for (const Value& v : inputs) {
      if (v.present() && unknown_type(v)) return;
      infer = infer && (!v.present() || is_static(v.type().shape));
    }
    for (const auto& a : node.attribute()) infer = infer && !a.has_g() && a.graphs_size() == 0;
    if (std::string why = onnx_refusal(node, inputs, infer, /*declared=*/true); !why.empty())
      throw Error(describe_proto(node) + ": ONNX refuses it (" + why + ")");
  }

  // ONNX's rules for the node's operator (schema_check.h), for every node of the
  // default domain, native or opaque.
  void require_schema(const onnx::NodeProto& node, const std::vector<Value>& inputs) const {
    if (std::string why = missing_operator(node, model_); !why.empty()) throw Error(describe_proto(node) + ": " + why);
    if (!is_default_domain(node.domain())) return;
    std::vector<std::optional<onnx::TypeProto>> types(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].present()) continue;
      if (unknown_type(inputs[i]) || inputs[i].type().dtype == DType::Undefined) {
        types[i] = onnx_only_element_type(node.input(static_cast<int>(i)));
        continue;
      }
      types[i].emplace();
      tensor_type_to_proto(inputs[i].type(), &*types[i]);
    }
    if (std::string why = schema_violation(node, opset_, types); !why.empty())
      throw Error(describe_proto(node) + ": not a valid " + node.op_type() + "-" +
                  std::to_string(op_version(node.domain(), node.op_type(), opset_)) + " node (" + why + ")");
  }

  // The element type ONNX gives a value isomer has no type for (a float8 or int4
  // initializer kept verbatim, the output of a node kept opaque), so that the schema
  // check still sees it: a float8 tensor added to a float one is no valid Add.
  std::optional<onnx::TypeProto> onnx_only_element_type(const std::string& name) const {
    const auto it = types_.find(name);
    if (it == types_.end() || !it->second.has_tensor_type() || it->second.tensor_type().elem_type() == 0)
      return std::nullopt;
    onnx::TypeProto t;
    t.mutable_tensor_type()->set_elem_type(it->second.tensor_type().elem_type());
    return t;
  }

  // Builds the node as a native operator; returns nullptr with `reason` set when it
  // must stay opaque. Throws Error for a node that is wrong on fully known inputs.
  NodePtr make_native(const onnx::NodeProto& node, const std::vector<Value>& inputs, std::string* reason) {
    // A fused μGraph region isomer wrote: a call of a model-local function.
    if (node.domain() == mugraph::kDomain) {
      NodePtr n = mugraph::import_fused_call(node, inputs, model_, reason);
      return n ? builder_.intern(n) : nullptr;
    }
    if (inlined_.kept.count({node.domain(), node.op_type()})) {
      *reason = inlined_.kept_reason;
      return nullptr;
    }
    if (!is_default_domain(node.domain())) {
      *reason = "operator of domain '" + node.domain() + "'";
      return nullptr;
    }
    const OpDef* op = find_native(node, opset_);
    if (!op) {
      *reason = kNotImplemented;
      return nullptr;
    }
    // Flags ONNX states as 0 or 1: any other value is read as true by some engines and
    // as false by others (ONNX Runtime keeps dims only for keepdims == 1), so the model
    // has no one meaning.
    for (const auto& a : node.attribute()) {
      static const std::set<std::string> kFlags = {"keepdims", "noop_with_empty_axes", "select_last_index",
                                                   "ceil_mode", "count_include_pad", "transA", "transB",
                                                   "exclusive", "reverse", "largest", "sorted", "upper",
                                                   "fmod", "allowzero", "storage_order", "onesided", "inverse"};
      if (a.type() == onnx::AttributeProto::INT && kFlags.count(a.name()))
        require(a.i() == 0 || a.i() == 1, describe_proto(node) + ": attribute '" + a.name() + "' must be 0 or 1, got " +
                                              std::to_string(a.i()));
    }
    OnnxForm form;
    form.op_type = node.op_type();
    try {
      *reason = convert_attributes(node, base_dir_, &form.attrs);
    } catch (const Error& e) {
      throw Error(describe_proto(node) + ": " + e.what());
    }
    if (!reason->empty()) return nullptr;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (unknown_type(inputs[i])) {
        *reason = "input '" + node.input(static_cast<int>(i)) + "' has an unknown type or shape";
        return nullptr;
      }
    }
    // isomer's form follows the operator's ONNX versions up to kReviewedOpset; a newer
    // one may mean something else.
    const int version = op_version(node.domain(), node.op_type(), opset_);
    const int reviewed = op_version(node.domain(), node.op_type(), kReviewedOpset);
    if (version > reviewed) {
      *reason = node.op_type() + "-" + std::to_string(version) + " is newer than the versions isomer's " +
                node.op_type() + " follows (up to " + std::to_string(reviewed) + ")";
      return nullptr;
    }
    if (opset_ < op->min_opset && !op->onnx_import) {
      *reason = "opset " + std::to_string(opset_) + " is older than the form isomer implements (opset " +
                std::to_string(op->min_opset) + ")";
      return nullptr;
    }
    std::vector<std::string> output_names(node.output().begin(), node.output().end());
    while (!output_names.empty() && output_names.back().empty()) output_names.pop_back();
    form.num_outputs = std::max<size_t>(output_names.size(), 1);
    bool inputs_static = true;
    for (const Value& v : inputs) inputs_static = inputs_static && (!v.present() || is_static(v.type().shape));
    const OnnxForm written = form;
    auto build = [&](std::vector<Value> args) -> NodePtr {
      form = written;
      form.inputs = std::move(args);
      if (op->onnx_import) {
        *reason = op->onnx_import(form, opset_, builder_);
        if (!reason->empty()) return nullptr;
      }
      return Node::make_op(*op, form.inputs, form.attrs, form.num_outputs, node.name(), output_names);
    };
    std::vector<Value> tried = inputs;  // the inputs of the last build, for the refusal below
    try {
      NodePtr n;
      try {
        n = build(inputs);
      } catch (const Error&) {
        if (!has_static_value(inputs)) throw;
      }
      // A shape rule reads only constant inputs: one that constants and static shapes
      // decide (TorchScript's ConstantOfShape(Shape(s)) of a static-shaped s) is
      // passed as its constant where the written form leaves an output type unknown.
      if ((!n || !all_outputs_static(*n)) && has_static_value(inputs)) {
        const std::string first_reason = *reason;
        tried = with_static_values(inputs);
        if (NodePtr m = build(tried)) n = m;
        else if (n) *reason = first_reason;
      } else if (n && has_static_value(inputs)) {
        // Outputs static without the values (Expand keeps an input's static extents): the
        // values still decide whether the node breaks its operator's definition (a shape
        // from Shape arithmetic gone negative), which a build on them says.
        const std::string first_reason = *reason;
        try {
          build(with_static_values(inputs));
        } catch (const InvalidNode&) {
          throw;
        } catch (const ShapeOverflow&) {
          throw;
        } catch (const Error&) {
        }
        *reason = first_reason;
      }
      return n ? builder_.intern(n) : nullptr;
    } catch (const Error& e) {
      // Node::make_op names the node itself; the message here names it once.
      std::string why = e.what();
      const std::string who = node.name().empty() ? node.op_type() : "'" + node.name() + "' (" + node.op_type() + ")";
      // (what() holds the name as Error printed it, control characters escaped.)
      const std::string prefix = printable_message("node " + who + ": ");
      if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
      // On fully known inputs, a shape rule that fails where ONNX's own inference also
      // fails is a bad model; anything else is a form isomer does not handle yet.
      // A check of what ONNX defines (InvalidNode) and a shape past 64 bits refuse it outright.
      if (dynamic_cast<const InvalidNode*>(&e) || dynamic_cast<const ShapeOverflow*>(&e) ||
          (inputs_static && !onnx_refusal(node, tried, true).empty()))
        throw Error(describe_proto(node) + ": " + why);
      *reason = why;
      return nullptr;
    }
  }

  static constexpr const char* kNotImplemented = "operator not implemented in isomer";

  static bool all_outputs_static(const Node& n) {
    for (const TensorType& t : n.output_types())
      if (!is_static(t.shape)) return false;
    return true;
  }

  // An integer input computed by operators whose value static_value decides.
  static bool decided_integer(const Value& v) {
    return v.present() && !v.constant() && is_integer(v.type().dtype) && static_value(v).has_value();
  }

  static bool has_static_value(const std::vector<Value>& inputs) {
    return std::any_of(inputs.begin(), inputs.end(), decided_integer);
  }

  std::vector<Value> with_static_values(std::vector<Value> inputs) {
    for (Value& v : inputs)
      if (decided_integer(v)) v = builder_.constant(*static_value(v));
    return inputs;
  }

  // The table's entry for an ai.onnx node: by its name, or where ONNX once named the
  // operator otherwise, by that: Upsample (opsets 7 to 9; deprecated at 10, which the
  // schema check refuses) is Resize-10, whose hook adapts both forms and whose export
  // writes Upsample back before opset 10; Scatter (9, deprecated at 11) is ScatterElements
  // without a reduction, written back as Scatter before opset 11; CastLike is a Cast to
  // its second input's type (Cast's hook).
  static const OpDef* find_native(const onnx::NodeProto& node, int64_t opset) {
    if (node.op_type() == "Upsample" && opset >= 7 && opset <= 10) return find_op("Resize");
    if (node.op_type() == "Scatter" && opset >= 9) return find_op("ScatterElements");
    if (node.op_type() == "CastLike") return find_op("Cast");
    return find_op(node.op_type());
  }

  static bool is_control_flow(const onnx::NodeProto& node) {
    return is_default_domain(node.domain()) &&
           (node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan");
  }

  // True if `node` is an operator isomer implements (so a node of it kept opaque
  // was refused for its attributes, types or shapes, not for what it is), control
  // flow included.
  static bool isomer_knows(const onnx::NodeProto& node) {
    if (node.domain() == mugraph::kDomain || is_control_flow(node)) return true;
    return is_default_domain(node.domain()) &&
           (node.op_type() == "Constant" || node.op_type() == "Upsample" || node.op_type() == "Scatter" ||
            node.op_type() == "CastLike" || find_op(node.op_type()));
  }

  // `count`: an ONNX node (stats count it), not an initializer kept as one.
  void add_opaque(const onnx::NodeProto& node, std::vector<Value> inputs, const std::vector<Value>& implicit,
                  const std::string& reason, bool count = true) {
    if (stats_ && count) {
      ++stats_->opaque_nodes;
      stats_->opaque_reasons.push_back(describe_proto(node) + ": " + reason);
    }
    OpaqueInfo info;
    info.domain = node.domain();
    info.op_type = node.op_type();
    info.known_op = isomer_knows(node);
    // "isomer does not understand" says all "not implemented" would.
    if (info.known_op || reason != kNotImplemented) info.reason = reason;
    // Tensors inside the node keep their data with them, wherever the model is written.
    onnx::NodeProto kept = node;
    try {
      inline_external_data(&kept, base_dir_);
    } catch (const Error& e) {
      throw Error(describe_proto(node) + ": " + e.what());
    }
    info.node_proto = kept.SerializeAsString();
    info.uid = g_next_opaque_uid++;
    // A constant's type is its tensor's, inferred or not.
    if (kept.op_type() == "Constant" && kept.output_size() == 1 && kept.attribute_size() == 1 &&
        kept.attribute(0).has_t() && !types_.count(kept.output(0))) {
      auto* tt = types_[kept.output(0)].mutable_tensor_type();
      tt->set_elem_type(kept.attribute(0).t().data_type());
      for (int64_t d : kept.attribute(0).t().dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    std::vector<TensorType> types;
    for (const auto& o : node.output()) {
      TensorType t;
      auto it = o.empty() ? types_.end() : types_.find(o);
      if (it != types_.end() && tensor_type_from_proto(it->second, &t)) {
        info.onnx_output_types.push_back(std::nullopt);
      } else {
        info.onnx_output_types.push_back(it != types_.end() ? it->second.SerializeAsString() : std::string());
        if (it != types_.end() && it->second.has_tensor_type() && it->second.tensor_type().elem_type() > 0 &&
            it->second.tensor_type().elem_type() <= static_cast<int>(DType::BFloat16))
          t.dtype = static_cast<DType>(it->second.tensor_type().elem_type());
      }
      types.push_back(std::move(t));
    }
    inputs.insert(inputs.end(), implicit.begin(), implicit.end());
    std::vector<std::string> output_names(node.output().begin(), node.output().end());
    std::vector<Value> outs = builder_.opaque(std::move(info), std::move(inputs), std::move(types), node.name(),
                                              output_names);
    for (size_t i = 0; i < outs.size(); ++i)
      if (!output_names[i].empty()) define(output_names[i], outs[i]);
  }

  onnx::ModelProto& model_;
  onnx::GraphProto& graph_;
  std::string base_dir_;
  const ImportOptions& opts_;
  ImportStats* stats_;
  int64_t opset_ = 1;
  InlinedFunctions inlined_;
  GraphBuilder builder_{/*dedupe=*/false};
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, onnx::TypeProto> types_;
  std::vector<std::vector<std::string>> implicit_;  // per node: outer-scope names its subgraphs read
};

}  // namespace

namespace {

onnx::ModelProto parse_model(const std::string& bytes) {
  require(!bytes.empty(), "empty file, not an ONNX model");
  require(bytes.size() <= static_cast<size_t>(INT_MAX),
          "model file over 2 GB: protobuf cannot read it (weights belong in external data)");
  onnx::ModelProto model;
  require(model.ParseFromString(bytes), "not an ONNX model: the protobuf does not parse (truncated or corrupt?)");
  require(model.has_graph(), "the model has no graph");
  return model;
}

Graph import_model(onnx::ModelProto& model, const std::string& base_dir, const ImportOptions& opts,
                   ImportStats* stats) {
  if (stats) *stats = ImportStats{};
  onnx_detail::densify_sparse_initializers(model.mutable_graph(), base_dir);
  return Importer(model, base_dir, opts, stats).run();
}

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts,
                        ImportStats* stats) {
  onnx::ModelProto model = parse_model(bytes);
  return import_model(model, base_dir, opts, stats);
}

Graph import_onnx_file(const std::string& path, const ImportOptions& opts, ImportStats* stats) {
  // Why the file cannot be read, said as the system says it, before anything parses it.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  require(status.type() != std::filesystem::file_type::not_found, path + ": cannot open file (no such file)");
  require(status.type() != std::filesystem::file_type::directory, path + ": cannot open file (a directory, not an ONNX file)");
  // A device or pipe has no size to read up front (/dev/zero would never end).
  require(status.type() == std::filesystem::file_type::regular || ec, path + ": cannot open file (not a regular file)");
  std::ifstream in(path, std::ios::binary);
  require(in.good(), path + ": cannot open file (" + std::string(std::strerror(errno)) + ")");
  in.seekg(0, std::ios::end);
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  require(!in.fail(), path + ": reading the file failed");
  // External data locations are relative to the model's directory ("." for a bare name).
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  try {
    onnx::ModelProto model = parse_model(bytes);
    std::string().swap(bytes);  // the weights live in `model` now; keep one copy at a time
    return import_model(model, base_dir, opts, stats);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace isomer
