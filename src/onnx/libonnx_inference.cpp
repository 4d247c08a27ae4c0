#include "onnx/libonnx_inference.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <unordered_set>

#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"

namespace isomer::onnx_detail {

// Whether libonnx 1.12's shape inference can be shown `n` without reading out of
// bounds or dividing by zero, fixing the node up where that is enough. Its
// convolution and pooling inference (convPoolShapeInference,
// convTransposeShapeInference), found crashing by the fuzzer:
//  - takes the kernel's dims from the weight when kernel_shape is absent and indexes
//    the input's per-axis attributes with them, and reads the weight's dim 1
//    unchecked: a weight of another rank than the input, or of rank under 2, reads
//    past the end. With kernel_shape written out from the weight's dims, libonnx
//    checks it against the input's rank; without known dims the node is refused.
//  - divides by strides and multiplies by dilations it never checks: non-positive
//    ones are refused (ONNX requires them positive).
//
// Found by the mutation campaign (scripts/hostile_campaign.py), for every operator:
//  - tensor attributes (Constant's value, ConstantOfShape's value, ...) whose data
//    disagrees with their dims are copied without a size check: refused;
//  - an axis (or axes) attribute outside the input's rank is used as an index unchecked
//    (LayerNormalization's, for one): one beyond [-rank, rank] where the rank is known,
//    or beyond [-kMaxRank, kMaxRank] where it is not, hides the node from libonnx
//    (isomer's own shape rule then judges it).
LibonnxSafety make_safe_for_libonnx(onnx::NodeProto* n, const DimsLookup& dims_of) {
  using enum LibonnxSafety;
  if (!is_default_domain(n->domain())) return Safe;
  for (const auto& a : n->attribute()) {
    if (a.has_t() && !inline_data_mismatch(a.t()).empty()) return Invalid;
    for (const auto& t : a.tensors())
      if (!inline_data_mismatch(t).empty()) return Invalid;
    if (a.name() != "axis" && a.name() != "axes") continue;
    constexpr int64_t kMaxRank = 32;
    int64_t rank = kMaxRank;
    if (n->input_size() > 0)
      if (std::optional<std::vector<int64_t>> dims = dims_of(n->input(0))) rank = static_cast<int64_t>(dims->size());
    rank += a.ints_size();  // Unsqueeze's axes index its output, of rank + len(axes)
    if (a.i() < -rank - 1 || a.i() > rank) return Invalid;
    for (int64_t v : a.ints())
      if (v < -rank - 1 || v > rank) return Invalid;
  }
  const std::string& op = n->op_type();
  // DepthToSpace's inference divides the channels by blocksize * blocksize, which wraps
  // to 0 for a blocksize of 2^32 or more (found by tests/python/test_hostile_op_attributes.py).
  if (op == "DepthToSpace" || op == "SpaceToDepth")
    for (const auto& a : n->attribute())
      if (a.name() == "blocksize" && (a.i() <= 0 || a.i() > (int64_t{1} << 31))) return Invalid;
  const bool pool = op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "MaxUnpool";
  const int weight = op == "Conv" || op == "ConvInteger" || op == "ConvTranspose" ? 1 : op == "QLinearConv" ? 3 : -1;
  if (weight < 0 && !pool) return Safe;
  bool has_kernel_shape = false;
  for (const auto& a : n->attribute()) {
    if (a.name() != "strides" && a.name() != "dilations" && a.name() != "kernel_shape") continue;
    has_kernel_shape = has_kernel_shape || a.name() == "kernel_shape";
    for (int64_t v : a.ints())
      if (v <= 0) return Invalid;
  }
  if (weight < 0 || has_kernel_shape) return Safe;
  if (n->input_size() <= weight) return Safe;  // too few inputs: libonnx's own check says so
  std::optional<std::vector<int64_t>> dims = dims_of(n->input(weight));
  if (!dims) return Unknown;
  if (dims->size() < 2) return Invalid;
  onnx::AttributeProto* k = n->add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  for (size_t i = 2; i < dims->size(); ++i) {
    if ((*dims)[i] <= 0) return Invalid;
    k->add_ints((*dims)[i]);
  }
  return Safe;
}

namespace {

// The version of `domain` a model (or function) with these imports uses; 0 if none.
int64_t opset_of(const std::string& domain,
                 const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports) {
  for (const auto& o : imports)
    if (o.domain() == domain || (is_default_domain(o.domain()) && is_default_domain(domain))) return o.version();
  return 0;
}

// A domain libonnx has no schemas for: nodes moved into it are skipped by inference.
constexpr const char* kHiddenDomain = "isomer.hidden";

// Prepares `g` (subgraphs included) for libonnx's shape inference: nodes of an ONNX
// domain whose operator version libonnx does not have move into kHiddenDomain, so that
// it does not apply an older version's rules to them (their outputs keep only their
// declared types); so do nodes its inference would crash on (make_safe_for_libonnx).
void prepare_for_inference(onnx::GraphProto* g, const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports,
                           const DimsLookup& dims_of, bool main_graph, InferencePlan* plan) {
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      // Inside a subgraph, only its own initializers are looked at.
      auto prepare_subgraph = [&](onnx::GraphProto* sub) {
        std::unordered_map<std::string, std::vector<int64_t>> local;
        for (const auto& t : sub->initializer()) local[t.name()] = {t.dims().begin(), t.dims().end()};
        prepare_for_inference(
            sub, imports,
            [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
              auto it = local.find(name);
              if (it == local.end()) return std::nullopt;
              return it->second;
            },
            false, plan);
      };
      if (a.has_g()) prepare_subgraph(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) prepare_subgraph(&sub);
    }
    if (newest_opset(n.domain()) == 0) {  // a vendor domain or a model-local function
      plan->all_known = plan->all_known && !main_graph;
      continue;
    }
    const bool current = libonnx_schema(n.domain(), n.op_type(), opset_of(n.domain(), imports)) != nullptr;
    const bool safe = current && make_safe_for_libonnx(&n, dims_of) == LibonnxSafety::Safe;
    if (safe) continue;
    n.set_domain(kHiddenDomain);
    ++plan->hidden;
    plan->want_weight += current;
    plan->all_known = false;
  }
}

}  // namespace

InferencePlan prepare_for_inference(onnx::ModelProto* m, const DimsMap& known) {
  InferencePlan plan;
  prepare_for_inference(
      m->mutable_graph(), m->opset_import(),
      [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
        auto it = known.find(name);
        if (it == known.end()) return std::nullopt;
        return it->second;
      },
      true, &plan);
  for (auto& f : *m->mutable_functions()) {
    onnx::GraphProto body;  // the same walk over the function's nodes, with its own imports
    *body.mutable_node() = f.node();
    prepare_for_inference(
        &body, f.opset_import().empty() ? m->opset_import() : f.opset_import(),
        [](const std::string&) { return std::optional<std::vector<int64_t>>(); }, false, &plan);
    *f.mutable_node() = body.node();
  }
  auto* hidden = m->add_opset_import();
  hidden->set_domain(kHiddenDomain);
  hidden->set_version(1);
  return plan;
}

namespace {

// Marks the types add_shape_input_placeholders adds (inference keeps a denotation).
constexpr const char* kPlaceholder = "isomer.placeholder";

// Adds an empty tensor type to `g`'s value_info (and its subgraphs') for every value a
// Shape node of `g` reads that a node of `g` produces and nothing declares a type for;
// returns how many it added (at the end of each value_info list).
int add_shape_input_placeholders(onnx::GraphProto* g) {
  std::unordered_set<std::string> typed, produced;
  for (const auto& v : g->value_info()) typed.insert(v.name());
  for (const auto& n : g->node()) produced.insert(n.output().begin(), n.output().end());
  int added = 0;
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) added += add_shape_input_placeholders(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) added += add_shape_input_placeholders(&sub);
    }
    if (n.op_type() != "Shape" || !is_default_domain(n.domain()) || n.input_size() == 0) continue;
    const std::string& in = n.input(0);
    if (in.empty() || !produced.count(in) || !typed.insert(in).second) continue;
    onnx::ValueInfoProto* v = g->add_value_info();
    v->set_name(in);
    v->mutable_type()->mutable_tensor_type();
    v->mutable_type()->set_denotation(kPlaceholder);
    ++added;
  }
  return added;
}

// Removes the placeholders add_shape_input_placeholders added that inference left
// empty, and the mark from those it typed.
void drop_empty_placeholders(onnx::GraphProto* g) {
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) drop_empty_placeholders(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) drop_empty_placeholders(&sub);
    }
  auto* values = g->mutable_value_info();
  for (int i = values->size() - 1; i >= 0; --i) {
    onnx::TypeProto* t = values->Mutable(i)->mutable_type();
    if (t->denotation() != kPlaceholder) continue;
    t->clear_denotation();
    if (t->has_tensor_type() && t->tensor_type().elem_type() == 0 && !t->tensor_type().has_shape())
      values->DeleteSubrange(i, 1);
  }
}

}  // namespace

bool run_libonnx_inference(onnx::ModelProto* m, bool data_propagation) {
  const bool placeholders = data_propagation && add_shape_input_placeholders(m->mutable_graph()) > 0;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0, data_propagation);
    onnx::shape_inference::InferShapes(*m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return false;
  }
  if (placeholders) drop_empty_placeholders(m->mutable_graph());
  return true;
}

void add_static_dims(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, DimsMap* known) {
  for (const auto& v : values) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
    std::vector<int64_t> dims;
    bool all = true;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      all = all && d.has_dim_value();
      dims.push_back(d.dim_value());
    }
    if (all) (*known)[v.name()] = std::move(dims);
  }
}

}  // namespace isomer::onnx_detail
