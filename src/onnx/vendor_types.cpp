#include "onnx/vendor_types.h"

#include <algorithm>

#ifndef ISOMER_WITHOUT_BRIDGE
#include "bridge/bridge.h"
#endif

namespace isomer {

#ifndef ISOMER_WITHOUT_BRIDGE
namespace {

bool has_payload(const onnx::TensorProto& t) {
  return !t.raw_data().empty() || t.float_data_size() || t.int32_data_size() || t.string_data_size() ||
         t.int64_data_size() || t.double_data_size() || t.uint64_data_size();
}

}  // namespace
#endif

std::unordered_map<std::string, onnx::TypeProto> onnxruntime_types(onnx::ModelProto model,
                                                                   const std::vector<std::string>& names) {
  std::unordered_map<std::string, onnx::TypeProto> found;
#ifdef ISOMER_WITHOUT_BRIDGE  // the fuzzing harnesses: no ONNX Runtime
  (void)model;
  (void)names;
  return found;
#else
  if (names.empty()) return found;
  onnx::GraphProto* g = model.mutable_graph();
  // Weights inference left without data, or kept outside the file: inputs of their
  // type (ONNX Runtime's inference reads only their types and small constants).
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (const auto& t : g->initializer()) {
    if (has_payload(t) && t.data_location() != onnx::TensorProto::EXTERNAL) {
      *kept.Add() = t;
      continue;
    }
    onnx::ValueInfoProto* in = g->add_input();
    in->set_name(t.name());
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  g->mutable_initializer()->Swap(&kept);
  for (const std::string& n : names) g->add_output()->set_name(n);
  try {
    std::shared_ptr<bridge::OrtBridge> ort = bridge::OrtBridge::shared();
    bridge::Session s = ort->load_bytes(model.SerializeAsString(), {.threads = 1, .optimization = "none"});
    for (size_t i = 0; i < s.output_names.size() && i < s.output_types.size(); ++i) {
      const bridge::Session::StatedType& st = s.output_types[i];
      if (st.elem_type <= 0 || !st.ranked) continue;
      onnx::TypeProto t;
      auto* tt = t.mutable_tensor_type();
      tt->set_elem_type(st.elem_type);
      auto* shape = tt->mutable_shape();
      for (size_t d = 0; d < st.dims.size(); ++d) {
        auto* dim = shape->add_dim();
        if (st.dims[d] >= 0) dim->set_dim_value(st.dims[d]);
        else if (!st.symbols[d].empty()) dim->set_dim_param(st.symbols[d]);
      }
      found[s.output_names[i]] = std::move(t);
    }
    ort->free(s.id);
  } catch (const Error&) {
    return {};  // no ONNX Runtime, or it refuses the model: the values stay untyped
  }
  return found;
#endif
}

std::optional<std::map<std::string, int>> onnxruntime_operators(const std::string& domain) {
#ifdef ISOMER_WITHOUT_BRIDGE
  (void)domain;
  return std::nullopt;
#else
  try {
    std::map<std::string, int> ops;
    for (const auto& [name, since] : bridge::OrtBridge::shared()->operators(domain)) {
      auto [it, added] = ops.emplace(name, since);
      if (!added) it->second = std::min(it->second, since);
    }
    return ops;
  } catch (const Error&) {
    return std::nullopt;
  }
#endif
}

}  // namespace isomer
