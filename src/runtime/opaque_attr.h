#pragma once
// An attribute of a node the optimizer keeps opaque, read from the NodeProto it
// keeps (the runtime's own lowerings of such nodes: lower_random.cpp, lower_vendor.cpp).
#include <string>

#include <onnx/onnx_pb.h>

namespace isomer::runtime {

// The NodeProto's attribute `name`, or nullptr.
inline const onnx::AttributeProto* proto_attr(const onnx::NodeProto& p, const std::string& name) {
  for (const onnx::AttributeProto& a : p.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

}  // namespace isomer::runtime
