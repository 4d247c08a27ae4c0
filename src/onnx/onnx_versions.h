#pragma once
// Which ONNX this build reads, and which operator version a node means.
//
// Models come in at any IR version and opset the current onnx release writes (the
// table generated from it: onnx_versions_table.inc). Debian's libonnx, whose protobuf
// classes and shape inference isomer uses, is older: its schemas stop at an earlier
// opset. Reading newer models through its classes is sound because protobuf keeps
// the fields an older schema does not know (IR 10's metadata_props and overload,
// IR 11's device configurations, ...) as unknown fields, which re-serialize
// verbatim; what changed in IR 9 to 14 besides those fields is new element types
// (float8, int4, float4e2m1, float8e8m0, int2, float6), which isomer keeps inside
// opaque nodes. libonnx's schemas are only used where they are the version the model
// means (libonnx_schema).
#include <onnx/defs/schema.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace isomer::onnx_detail {

// The newest IR version this build reads.
int64_t newest_ir_version();

// The ai.onnx opset through which isomer's native operators were checked against every
// version ONNX defines of them (tests/cpp/onnx_versions_test.cpp pins those versions):
// a later version of one of them may mean something else, so the importer keeps such a
// node opaque until someone checks it and moves this on.
inline constexpr int64_t kReviewedOpset = 28;
// The newest opset of `domain` the table knows; 0 for a domain it does not know
// (vendor domains such as com.microsoft). "ai.onnx" and "" are the same domain.
int64_t newest_opset(std::string_view domain);
// The version of operator `op` that a model importing `opset` of `domain` means: the
// operator's newest since_version at or below `opset`. 0 if the table does not know
// the operator, or it does not exist yet at `opset`.
int op_version(std::string_view domain, std::string_view op, int64_t opset);
// Every since_version of the operator, ascending (empty if the table does not know it).
std::vector<int> op_versions(std::string_view domain, std::string_view op);
// The first of `names` that the operator's version at `opset` does not define as an
// attribute, or nullopt when it defines them all (or the table does not know the
// operator). It judges the versions newer than libonnx's schemas, which cannot.
std::optional<std::string> unknown_attribute(std::string_view domain, std::string_view op, int64_t opset,
                                             const std::vector<std::string_view>& names);
// libonnx's schema for such a node if it is that version, or an older one from which
// ONNX only widened the type constraints; nullptr where libonnx has none or an older
// version with other rules (it would check or infer the node wrongly).
const onnx::OpSchema* libonnx_schema(std::string_view domain, std::string_view op, int64_t opset);

}  // namespace isomer::onnx_detail
