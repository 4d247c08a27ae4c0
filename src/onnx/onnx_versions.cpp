// ONNX's operator history (generated table) and the checks built on it.
#include "onnx/onnx_versions.h"

#include <algorithm>
#include <optional>
#include <string>

namespace isomer::onnx_detail {
namespace {

struct OnnxOpsetEntry {
  std::string_view domain;
  int64_t version;
};

struct OnnxOpVersions {
  std::string_view domain;
  std::string_view name;
  uint8_t since[16];  // ascending, zero-terminated
  uint16_t types_only;  // bit i: since[i] only widened since[i-1]'s type constraints
  std::string_view attribute_names;  // every version's, space-separated
  uint32_t attributes[16];           // bit j of attributes[i]: since[i] has the j-th name
};

#include "onnx/onnx_versions_table.inc"

std::string_view canonical_domain(std::string_view domain) { return domain == "ai.onnx" ? "" : domain; }

const OnnxOpVersions* find_op(std::string_view domain, std::string_view op) {
  domain = canonical_domain(domain);
  auto less = [](const OnnxOpVersions& e, std::pair<std::string_view, std::string_view> key) {
    return std::pair(e.domain, e.name) < key;
  };
  auto it = std::lower_bound(std::begin(kOnnxOpVersions), std::end(kOnnxOpVersions), std::pair(domain, op), less);
  if (it == std::end(kOnnxOpVersions) || it->domain != domain || it->name != op) return nullptr;
  return &*it;
}

}  // namespace

int64_t newest_ir_version() { return kOnnxTableIrVersion; }

int64_t newest_opset(std::string_view domain) {
  domain = canonical_domain(domain);
  for (const auto& e : kOnnxNewestOpsets)
    if (e.domain == domain) return e.version;
  return 0;
}

int op_version(std::string_view domain, std::string_view op, int64_t opset) {
  const OnnxOpVersions* e = find_op(domain, op);
  if (!e) return 0;
  int version = 0;
  for (uint8_t v : e->since)
    if (v != 0 && v <= opset) version = v;
  return version;
}

std::vector<int> op_versions(std::string_view domain, std::string_view op) {
  std::vector<int> out;
  if (const OnnxOpVersions* e = find_op(domain, op))
    for (uint8_t v : e->since)
      if (v != 0) out.push_back(v);
  return out;
}

std::optional<std::string> unknown_attribute(std::string_view domain, std::string_view op, int64_t opset,
                                             const std::vector<std::string_view>& names) {
  const OnnxOpVersions* e = find_op(domain, op);
  const int version = op_version(domain, op, opset);
  if (!e || version == 0) return std::nullopt;
  uint32_t allowed = 0;
  for (int i = 0; i < 16 && e->since[i] != 0; ++i)
    if (e->since[i] == version) allowed = e->attributes[i];
  for (std::string_view name : names) {
    bool known = false;
    std::string_view rest = e->attribute_names;
    for (int j = 0; !rest.empty() && !known; ++j) {
      const size_t end = std::min(rest.find(' '), rest.size());
      known = rest.substr(0, end) == name && (allowed >> j & 1);
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    if (!known) return std::string(name);
  }
  return std::nullopt;
}

const onnx::OpSchema* libonnx_schema(std::string_view domain, std::string_view op, int64_t opset) {
  const OnnxOpVersions* e = find_op(domain, op);
  const int version = op_version(domain, op, opset);
  if (!e || version == 0) return nullptr;
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(std::string(op), version, std::string(canonical_domain(domain)));
  if (!schema) return nullptr;
  // An older version serves if every version since only let more element types in:
  // its checks and shape inference are those of the version the model means.
  for (int i = 0; i < 16 && e->since[i] != 0; ++i)
    if (e->since[i] > schema->since_version() && e->since[i] <= version && !(e->types_only >> i & 1)) return nullptr;
  return schema;
}

}  // namespace isomer::onnx_detail
