// Getting a model ready for libonnx 1.12's shape inference, which isomer runs on a
// copy of every imported model for the types of the nodes it keeps opaque: nodes
// whose operator version libonnx does not know, or whose inference would read out
// of bounds or divide by zero (found by the fuzzer), are hidden from it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace isomer::onnx_detail {

inline bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// Static dims of a value by name, where known (nullopt otherwise).
using DimsLookup = std::function<std::optional<std::vector<int64_t>>(const std::string&)>;
using DimsMap = std::unordered_map<std::string, std::vector<int64_t>>;

// Whether libonnx's inference can be shown a node (see libonnx_inference.cpp).
// Invalid: the node breaks ONNX's rules; Unknown: whether it does is not known yet.
enum class LibonnxSafety { Safe, Invalid, Unknown };
LibonnxSafety make_safe_for_libonnx(onnx::NodeProto* n, const DimsLookup& dims_of);

// What prepare_for_inference did.
struct InferencePlan {
  int hidden = 0;          // nodes hidden from libonnx (any graph)
  int want_weight = 0;     // of those, current versions refused (a weight's dims may be known later)
  bool all_known = true;   // every node of the main graph has libonnx's schema of its version
};

// Hides from libonnx (in a domain it has no schemas for) every node of `m`, its
// subgraphs and functions that its inference must not see; `known` gives static
// dims of weights.
InferencePlan prepare_for_inference(onnx::ModelProto* m, const DimsMap& known);

// libonnx's shape inference (error_mode 0: a node whose inference fails leaves its
// outputs untyped) on `m` in place; false if it failed as a whole. With
// `data_propagation`, every value a Shape node reads that the graph declares no type
// for gets an empty tensor type for the run (removed after it where inference left it
// empty): libonnx 1.12's Shape propagation reads its input's type unchecked, and a
// producer whose inference failed (a MatMul of mismatched dims) left none.
bool run_libonnx_inference(onnx::ModelProto* m, bool data_propagation);

// Adds the static dims of every tensor value `values` types to `known`.
void add_static_dims(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, DimsMap* known);

}  // namespace isomer::onnx_detail
