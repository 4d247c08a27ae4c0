// Collecting and re-attaching what the IR does not model (see extras.h).
#include "onnx/extras.h"

#include <algorithm>

#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer::onnx_detail {
namespace {

// Copies `from`'s unknown fields and doc string; true if there was anything.
template <class Proto>
bool copy_extra_fields(const Proto& from, Proto* to) {
  if (!from.doc_string().empty()) to->set_doc_string(from.doc_string());
  to->mutable_unknown_fields()->MergeFrom(from.unknown_fields());
  return !from.doc_string().empty() || !from.unknown_fields().empty();
}

// Adds what `extra` keeps to `to`: its unknown fields, and its doc string where `to`
// has none.
template <class Proto>
void merge_extra_fields(const Proto& extra, Proto* to) {
  if (to->doc_string().empty() && !extra.doc_string().empty()) to->set_doc_string(extra.doc_string());
  to->mutable_unknown_fields()->MergeFrom(extra.unknown_fields());
}

void collect_values(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& from,
                    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* to) {
  for (const auto& v : from) {
    onnx::ValueInfoProto e;
    if (!copy_extra_fields(v, &e)) continue;
    e.set_name(v.name());
    *to->Add() = std::move(e);
  }
}

// Whether `v` declares a tensor shape with a dim it gives a value or a name.
bool declares_a_dim(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return false;
  const auto& dims = v.type().tensor_type().shape().dim();
  return std::any_of(dims.begin(), dims.end(), [](const auto& d) { return d.has_dim_param() || d.has_dim_value(); });
}

// Dims of `to` that say nothing (no value, no name) take what `declared` says of them.
void declare_unknown_dims(const onnx::TypeProto& declared, onnx::TypeProto* to) {
  if (!declared.has_tensor_type() || !declared.tensor_type().has_shape() || !to->has_tensor_type() ||
      !to->tensor_type().has_shape())
    return;
  const auto& want = declared.tensor_type().shape();
  auto* got = to->mutable_tensor_type()->mutable_shape();
  if (want.dim_size() != got->dim_size()) return;
  for (int i = 0; i < got->dim_size(); ++i) {
    auto* d = got->mutable_dim(i);
    if (d->has_dim_value() || d->has_dim_param()) continue;
    if (want.dim(i).has_dim_value()) d->set_dim_value(want.dim(i).dim_value());
    else if (want.dim(i).has_dim_param()) d->set_dim_param(want.dim(i).dim_param());
  }
}

}  // namespace

std::string collect_extras(const onnx::ModelProto& model) {
  onnx::ModelProto shell;
  bool any = false;
  if (!model.unknown_fields().empty()) {
    shell.mutable_unknown_fields()->MergeFrom(model.unknown_fields());
    any = true;
  }
  const onnx::GraphProto& g = model.graph();
  onnx::GraphProto* sg = shell.mutable_graph();
  if (!g.unknown_fields().empty() || g.quantization_annotation_size() > 0) {
    sg->mutable_unknown_fields()->MergeFrom(g.unknown_fields());
    *sg->mutable_quantization_annotation() = g.quantization_annotation();
    any = true;
  }
  for (const auto& n : g.node()) {
    onnx::NodeProto e;
    if (!copy_extra_fields(n, &e)) continue;
    e.set_name(n.name());
    e.set_op_type(n.op_type());
    e.set_domain(n.domain());
    if (n.output_size() > 0) e.add_output(n.output(0));
    *sg->add_node() = std::move(e);
    any = true;
  }
  collect_values(g.input(), sg->mutable_input());
  collect_values(g.output(), sg->mutable_output());
  // A graph output keeps the dims it declares where isomer cannot tell what they are
  // (the rows of a Reshape to a computed shape): export would write them unknown.
  for (const auto& v : g.output()) {
    if (!declares_a_dim(v)) continue;
    auto* outs = sg->mutable_output();
    auto e = std::find_if(outs->begin(), outs->end(), [&](const auto& o) { return o.name() == v.name(); });
    onnx::ValueInfoProto* entry = e != outs->end() ? &*e : outs->Add();
    entry->set_name(v.name());
    *entry->mutable_type() = v.type();
  }
  collect_values(g.value_info(), sg->mutable_value_info());
  for (const auto& t : g.initializer()) {
    onnx::TensorProto e;
    if (!copy_extra_fields(t, &e)) continue;
    e.set_name(t.name());
    *sg->add_initializer() = std::move(e);
  }
  any = any || sg->input_size() > 0 || sg->output_size() > 0 || sg->value_info_size() > 0 ||
        sg->initializer_size() > 0;
  return any ? shell.SerializeAsString() : std::string();
}

std::string add_input_defaults(const std::string& shell, std::vector<onnx::TensorProto> defaults) {
  onnx::ModelProto m;
  require(m.ParseFromString(shell), "the model's kept ONNX fields do not parse");
  auto* inits = m.mutable_graph()->mutable_initializer();
  for (auto& t : defaults) {
    auto same = std::find_if(inits->begin(), inits->end(), [&](const auto& e) { return e.name() == t.name(); });
    if (same != inits->end()) *same = std::move(t);
    else *inits->Add() = std::move(t);
  }
  return m.SerializeAsString();
}

ModelExtras::ModelExtras(const std::string& serialized) {
  if (serialized.empty()) return;
  require(shell_.ParseFromString(serialized), "the model's kept ONNX fields do not parse");
  const onnx::GraphProto& g = shell_.graph();
  std::unordered_map<std::string, int> name_count;
  for (const auto& n : g.node())
    if (!n.name().empty()) ++name_count[n.name()];
  for (const auto& n : g.node()) {
    // Node names need not be unique in ONNX; an ambiguous one is matched by output.
    if (!n.name().empty() && name_count[n.name()] == 1) nodes_by_name_.emplace(n.name(), &n);
    if (n.output_size() > 0 && !n.output(0).empty()) nodes_by_output_.emplace(n.output(0), &n);
  }
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& v : *list) values_.emplace(v.name(), &v);
  for (const auto& t : g.initializer()) initializers_.emplace(t.name(), &t);
}

void ModelExtras::add_to_model(onnx::ModelProto* m) const {
  m->mutable_unknown_fields()->MergeFrom(shell_.unknown_fields());
}

void ModelExtras::add_graph_fields(onnx::GraphProto* g) const {
  g->mutable_unknown_fields()->MergeFrom(shell_.graph().unknown_fields());
}

void ModelExtras::add_to_node(onnx::NodeProto* n) const {
  auto default_domain = [](const std::string& d) { return d.empty() || d == "ai.onnx"; };
  auto same_op = [&](const onnx::NodeProto* e) {
    return e->op_type() == n->op_type() &&
           (e->domain() == n->domain() || (default_domain(e->domain()) && default_domain(n->domain())));
  };
  const onnx::NodeProto* found = nullptr;
  if (auto it = nodes_by_name_.find(n->name()); it != nodes_by_name_.end() && same_op(it->second)) {
    found = it->second;
  } else if (n->output_size() > 0) {
    auto by_output = nodes_by_output_.find(n->output(0));
    if (by_output != nodes_by_output_.end() && same_op(by_output->second)) found = by_output->second;
  }
  if (found) merge_extra_fields(*found, n);
}

void ModelExtras::add_to_value(onnx::ValueInfoProto* v) const {
  auto it = values_.find(v->name());
  if (it == values_.end()) return;
  merge_extra_fields(*it->second, v);
  if (it->second->has_type()) declare_unknown_dims(it->second->type(), v->mutable_type());
}

void ModelExtras::add_to_initializer(onnx::TensorProto* t) const {
  auto it = initializers_.find(t->name());
  if (it != initializers_.end()) merge_extra_fields(*it->second, t);
}

// Initializers of the shell that only keep extras have no element type; defaults do.
const onnx::TensorProto* ModelExtras::input_default(const std::string& name) const {
  auto it = initializers_.find(name);
  return it != initializers_.end() && it->second->data_type() != 0 ? it->second : nullptr;
}

}  // namespace isomer::onnx_detail

namespace isomer {

std::vector<std::pair<std::string, Tensor>> input_defaults(const Graph& g) {
  std::vector<std::pair<std::string, Tensor>> out;
  if (!g.info().onnx_extras) return out;
  const onnx_detail::ModelExtras extras(*g.info().onnx_extras);
  for (const NodePtr& in : g.inputs())
    if (const onnx::TensorProto* t = extras.input_default(in->name())) out.emplace_back(in->name(), tensor_from_proto(*t, ""));
  return out;
}

}  // namespace isomer
