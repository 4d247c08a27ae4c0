#include "onnx/declared_shapes.h"

#include <optional>
#include <vector>

#include "onnx/model_checks.h"

namespace isomer::onnx_detail {
namespace {

// The dims of a tensor type of known rank, -1 where a dim is not a number; nullopt
// where the rank is not known.
std::optional<std::vector<int64_t>> dims_of(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : t.tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

// Whether two shapes cannot describe the same value: other ranks, or a dim both state
// as numbers that differs.
bool contradict(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return true;
  return false;
}


}  // namespace

std::unordered_map<std::string, onnx::TypeProto> inferred_over_declared(onnx::ModelProto copy, const DimsMap& known,
                                                                        std::string* type_lie) {
  std::unordered_map<std::string, std::vector<int64_t>> declared;
  std::unordered_map<std::string, int32_t> declared_elem;
  auto strip = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* values) {
    for (auto& v : *values) {
      if (std::optional<std::vector<int64_t>> dims = dims_of(v.type())) declared[v.name()] = std::move(*dims);
      if (!v.type().has_tensor_type()) continue;
      if (v.type().tensor_type().elem_type() != 0) declared_elem[v.name()] = v.type().tensor_type().elem_type();
      v.mutable_type()->mutable_tensor_type()->clear_shape();
      v.mutable_type()->mutable_tensor_type()->set_elem_type(0);
    }
  };
  strip(copy.mutable_graph()->mutable_value_info());
  strip(copy.mutable_graph()->mutable_output());
  if (declared.empty() && declared_elem.empty()) return {};
  const InferencePlan plan = prepare_for_inference(&copy, known);
  // As the importer runs it: data propagation only where libonnx has every node's schema.
  onnx::ModelProto attempt = copy;
  if (!(plan.all_known && run_libonnx_inference(&attempt, /*data_propagation=*/true))) {
    attempt = copy;
    if (!run_libonnx_inference(&attempt, false)) return {};
  }
  std::unordered_map<std::string, onnx::TypeProto> out;
  auto overrule = [&](const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, const char* what) {
    for (const auto& v : values) {
      auto elem = declared_elem.find(v.name());
      const int32_t inferred_elem = v.type().has_tensor_type() ? v.type().tensor_type().elem_type() : 0;
      // (libonnx infers whatever a bad attribute says, element type -1 for one: such a
      // node is judged by its schema and shape rule instead.)
      if (type_lie->empty() && elem != declared_elem.end() && onnx::TensorProto_DataType_IsValid(inferred_elem) &&
          inferred_elem != 0 && inferred_elem != elem->second)
        *type_lie = std::string(what) + " '" + v.name() + "' is declared " + element_type_name(elem->second) +
                    ", but ONNX infers " + element_type_name(inferred_elem);
      auto it = declared.find(v.name());
      if (it == declared.end()) continue;
      // A declaration caught lying in one dim is not trusted in any: the inferred type
      // stands, unknown dims and all.
      std::optional<std::vector<int64_t>> inferred = dims_of(v.type());
      if (inferred && contradict(*inferred, it->second)) out[v.name()] = v.type();
    }
  };
  overrule(attempt.graph().value_info(), "value_info");
  overrule(attempt.graph().output(), "graph output");
  return out;
}

}  // namespace isomer::onnx_detail
