#include "onnx/import_types.h"

#include <algorithm>
#include <climits>
#include <set>
#include <vector>

#include "ir/error.h"
#include "mugraph/region.h"
#include "onnx/declared_shapes.h"
#include "onnx/libonnx_inference.h"
#include "onnx/model_checks.h"
#include "onnx/proto_util.h"
#include "onnx/vendor_shapes.h"
#include "onnx/vendor_types.h"

namespace isomer {

using namespace onnx_detail;

namespace {

using TypeMap = std::unordered_map<std::string, onnx::TypeProto>;

bool has_shape(const onnx::TypeProto& t) { return t.has_tensor_type() && t.tensor_type().has_shape(); }

// The model as shape inference sees it: graph inputs fixed as requested,
// initializers over kInferenceDataLimit without their data, the values in `typed`
// declared with their types (outputs of vendor operators, which ONNX's inference has
// no schema for).
onnx::ModelProto inference_copy(const onnx::ModelProto& model, const ImportOptions& opts, const TypeMap& typed = {}) {
  const onnx::GraphProto& graph = model.graph();
  onnx::ModelProto copy;
  copy.set_ir_version(model.ir_version());
  *copy.mutable_opset_import() = model.opset_import();
  *copy.mutable_functions() = model.functions();
  onnx::GraphProto* g = copy.mutable_graph();
  *g->mutable_node() = graph.node();
  *g->mutable_input() = graph.input();
  *g->mutable_output() = graph.output();
  *g->mutable_value_info() = graph.value_info();
  for (const auto& entry : typed) {
    const auto& [name, type] = entry;
    // Compared through `entry`: clang before 16 cannot capture a structured binding.
    auto out = std::find_if(g->mutable_output()->begin(), g->mutable_output()->end(),
                            [&](const onnx::ValueInfoProto& o) { return o.name() == entry.first; });
    onnx::ValueInfoProto* v = out != g->mutable_output()->end() ? &*out : g->add_value_info();
    if (has_shape(v->type())) continue;
    v->set_name(name);
    *v->mutable_type() = type;
  }
  for (const auto& t : graph.initializer()) {
    onnx::TensorProto* c = g->add_initializer();
    if (t.ByteSizeLong() <= kInferenceDataLimit) {
      // libonnx's inference copies an initializer's data without checking its size.
      if (std::string why = inline_data_mismatch(t); !why.empty()) throw Error(why);
      *c = t;
      continue;
    }
    c->set_name(t.name());
    c->set_data_type(t.data_type());
    *c->mutable_dims() = t.dims();
  }
  check_inline_tensors(*g, /*initializers=*/false);  // checked above, and the large ones stripped
  for (auto& in : *g->mutable_input()) {
    auto it = opts.input_shapes.find(in.name());
    if (it == opts.input_shapes.end() || !in.type().has_tensor_type()) continue;
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
  }
  return copy;
}

// libonnx's shape inference on `copy` (in place); false if it failed as a whole, in
// which case `copy` keeps the declared types only.
bool run_inference(onnx::ModelProto& copy, bool data_propagation) {
  onnx::ModelProto attempt = copy;
  if (!run_libonnx_inference(&attempt, data_propagation)) return false;
  copy = std::move(attempt);
  return true;
}

DimsMap initializer_dims(const onnx::ModelProto& model) {
  DimsMap known;
  for (const auto& t : model.graph().initializer()) known[t.name()] = {t.dims().begin(), t.dims().end()};
  return known;
}

// ONNX's inference, in passes while convolutions wait for their weights' dims, with
// the values in `typed` declared.
TypeMap inferred_types(const onnx::ModelProto& model, const ImportOptions& opts, const TypeMap& typed) {
  TypeMap types;
  DimsMap known = initializer_dims(model);
  int waiting = INT_MAX;
  for (int pass = 0; pass < 4; ++pass) {
    onnx::ModelProto copy = inference_copy(model, opts, typed);
    add_static_dims(copy.graph().input(), &known);
    add_static_dims(copy.graph().value_info(), &known);
    const InferencePlan plan = prepare_for_inference(&copy, known);
    // libonnx crashes propagating data through operators it has no schema for
    // (vendor domains, versions newer than it, hidden nodes), so data propagation
    // runs only when it has every node's own version.
    if (!(plan.all_known && run_inference(copy, /*data_propagation=*/true))) run_inference(copy, false);
    types.clear();
    for (const auto& v : copy.graph().value_info()) types[v.name()] = v.type();
    for (const auto& v : copy.graph().output()) types[v.name()] = v.type();
    for (const auto& v : copy.graph().input()) types[v.name()] = v.type();
    if (plan.want_weight == 0 || plan.want_weight >= waiting) break;
    waiting = plan.want_weight;
    add_static_dims(copy.graph().value_info(), &known);
  }
  for (const auto& [name, type] : typed)
    if (auto it = types.find(name); it == types.end() || !has_shape(it->second)) types[name] = type;
  return types;
}

// Types the vendor operators' hooks (vendor_shapes.h) give, each added to `typed`;
// false if none was new. A hook's output is seen by the vendor nodes after it.
bool type_vendor_outputs(const onnx::ModelProto& model, TypeMap& types, TypeMap& typed) {
  TypeMap initializers;
  for (const auto& t : model.graph().initializer()) {
    onnx::TypeProto& type = initializers[t.name()];
    type.mutable_tensor_type()->set_elem_type(t.data_type());
    auto* shape = type.mutable_tensor_type()->mutable_shape();
    for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
  }
  const TypeLookup type_of = [&](const std::string& name) -> const onnx::TypeProto* {
    if (auto it = types.find(name); it != types.end() && has_shape(it->second)) return &it->second;
    auto it = initializers.find(name);
    return it == initializers.end() ? nullptr : &it->second;
  };
  bool added = false;
  for (const auto& n : model.graph().node()) {
    if (!has_vendor_shape_hook(n)) continue;
    const std::vector<std::optional<onnx::TypeProto>> outs = vendor_output_types(n, type_of);
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = n.output(static_cast<int>(i));
      if (!outs[i] || name.empty() || typed.count(name)) continue;
      if (auto it = types.find(name); it != types.end() && has_shape(it->second)) continue;
      typed[name] = types[name] = *outs[i];
      added = true;
    }
  }
  return added;
}

}  // namespace

std::unordered_map<std::string, onnx::TypeProto> value_types(const onnx::ModelProto& model,
                                                             const ImportOptions& opts) {
  TypeMap types = inferred_types(model, opts, {});

  // Declared shapes the inference contradicts.
  {
    DimsMap dims = initializer_dims(model);
    onnx::ModelProto copy = inference_copy(model, opts);
    add_static_dims(copy.graph().input(), &dims);
    std::string type_lie;
    for (auto& [name, type] : inferred_over_declared(std::move(copy), dims, &type_lie)) types[name] = std::move(type);
    require(type_lie.empty(), type_lie);
  }

  // Values left open after vendor operators.
  const auto& nodes = model.graph().node();
  const bool vendor = std::any_of(nodes.begin(), nodes.end(), [](const onnx::NodeProto& n) {
    return !is_default_domain(n.domain()) && n.domain() != mugraph::kDomain;
  });
  if (!vendor) return types;
  // isomer's hooks for the vendor operators it knows and ONNX's inference for the
  // nodes after them, in turn, while that types more.
  TypeMap typed;
  for (int64_t round = 0; round <= nodes.size() && type_vendor_outputs(model, types, typed); ++round) {
    TypeMap again = inferred_types(model, opts, typed);
    for (auto& [name, type] : again)
      if (auto it = types.find(name); it == types.end() || !has_shape(it->second)) types[name] = std::move(type);
  }
  std::set<std::string> declared;
  for (const auto& o : model.graph().output()) declared.insert(o.name());
  std::vector<std::string> untyped;
  for (const auto& n : nodes)
    for (const auto& o : n.output()) {
      auto it = types.find(o);
      if (!o.empty() && !declared.count(o) && (it == types.end() || !it->second.tensor_type().has_shape()))
        untyped.push_back(o);
    }
  for (auto& [name, type] : onnxruntime_types(inference_copy(model, opts), untyped)) types[name] = std::move(type);
  return types;
}

}  // namespace isomer
