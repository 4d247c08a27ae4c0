// TensorProto <-> Tensor and TypeProto <-> TensorType.
#include "onnx/proto_util.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer {
namespace onnx_detail {
namespace {

std::string tensor_label(const onnx::TensorProto& t) {
  return t.name().empty() ? std::string("tensor") : "tensor '" + t.name() + "'";
}

// Narrows each value of a typed field to `Stored` and appends its little-endian bytes.
template <class Stored, class Field>
std::string pack(const Field& values) {
  std::string bytes(static_cast<size_t>(values.size()) * sizeof(Stored), '\0');
  for (int i = 0; i < values.size(); ++i) {
    Stored v = static_cast<Stored>(values.Get(i));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(Stored), &v, sizeof(Stored));
  }
  return bytes;
}

// The data of a tensor stored in the typed *_data fields instead of raw_data.
std::string typed_field_bytes(const onnx::TensorProto& t, DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Complex64: return pack<float>(t.float_data());
    case DType::Float64:
    case DType::Complex128: return pack<double>(t.double_data());
    case DType::Int64: return pack<int64_t>(t.int64_data());
    case DType::UInt32: return pack<uint32_t>(t.uint64_data());
    case DType::UInt64: return pack<uint64_t>(t.uint64_data());
    case DType::Int32: return pack<int32_t>(t.int32_data());
    case DType::Int16: return pack<int16_t>(t.int32_data());
    case DType::Int8: return pack<int8_t>(t.int32_data());
    case DType::UInt16: return pack<uint16_t>(t.int32_data());
    case DType::Float16:
    case DType::BFloat16: {
      // Bit patterns of 16 bits: a value past them is no float of this type (ONNX Runtime
      // refuses it as a data overflow), and narrowing it would make up a number.
      for (int i = 0; i < t.int32_data_size(); ++i) {
        const int32_t v = t.int32_data(i);
        require(v >= -32768 && v <= 65535, tensor_label(t) + ": int32_data element " + std::to_string(i) + " (" +
                                               std::to_string(v) + ") is not a 16-bit pattern of " +
                                               (dtype == DType::Float16 ? "float16" : "bfloat16"));
      }
      return pack<uint16_t>(t.int32_data());
    }
    case DType::UInt8: return pack<uint8_t>(t.int32_data());
    case DType::Bool: {
      std::string bytes = pack<uint8_t>(t.int32_data());
      for (char& c : bytes) c = c != 0 ? 1 : 0;
      return bytes;
    }
    default: return "";
  }
}

// The element count of `dims`, which must be non-negative and not overflow.
int64_t checked_num_elements(const onnx::TensorProto& t) {
  // UNDEFINED is no type (onnx.checker and ONNX Runtime refuse it); a later type this
  // build does not know is kept as written instead.
  require(t.data_type() != onnx::TensorProto::UNDEFINED, tensor_label(t) + " has no element type (data_type 0, UNDEFINED)");
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    require(d >= 0, tensor_label(t) + " has a negative dimension " + std::to_string(d));
    require(!__builtin_mul_overflow(numel, d, &numel), tensor_label(t) + " has more elements than fit in 64 bits");
  }
  return numel;
}

// Bytes that `numel` elements of ONNX element type `code` take in raw_data (sub-byte
// types packed, as onnx.proto specifies); nullopt for a type this build does not know
// or a size beyond 64 bits.
std::optional<uint64_t> raw_byte_size(int32_t code, int64_t numel) {
  uint64_t bits = 0;
  if (known_element_type(code) && code != static_cast<int32_t>(DType::String)) {
    bits = 8 * dtype_size(static_cast<DType>(code));
  } else {
    switch (code) {
      case 17: case 18: case 19: case 20: case 24: bits = 8; break;  // float8 variants
      case 21: case 22: case 23: bits = 4; break;                    // uint4, int4, float4e2m1
      case 25: case 26: bits = 2; break;                             // uint2, int2
      case 27: case 28: bits = 6; break;                             // float6e2m3, float6e3m2
      default: return std::nullopt;
    }
  }
  uint64_t total = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), bits, &total)) return std::nullopt;
  return (total + 7) / 8;
}

bool escapes_directory(const std::filesystem::path& location) {
  if (location.is_absolute() || location.has_root_name() || location.has_root_directory()) return true;
  for (const auto& part : location)
    if (part == "..") return true;
  return false;
}

}  // namespace

std::string inline_data_mismatch(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return "";
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return tensor_label(t) + " has a negative dimension " + std::to_string(d);
    if (__builtin_mul_overflow(numel, d, &numel)) return tensor_label(t) + " has more elements than fit in 64 bits";
  }
  const int32_t code = t.data_type();
  if (code == static_cast<int32_t>(DType::String)) {
    if (t.string_data_size() != numel)
      return tensor_label(t) + " has " + std::to_string(t.string_data_size()) + " strings, expected " +
             std::to_string(numel);
    return "";
  }
  const std::optional<uint64_t> expected = raw_byte_size(code, numel);
  if (!expected) return known_element_type(code) ? tensor_label(t) + " has more bytes than fit in 64 bits" : "";
  uint64_t have = 0;
  if (t.has_raw_data()) have = t.raw_data().size();
  else if (known_element_type(code)) have = typed_field_bytes(t, static_cast<DType>(code)).size();
  else return "";
  if (have != *expected)
    return tensor_label(t) + " has " + std::to_string(have) + " bytes of data, its element type " +
           std::to_string(code) + " and dims need " + std::to_string(*expected);
  return "";
}

std::string read_external_data(const onnx::TensorProto& t, const std::string& base_dir, size_t expected_size) {
  namespace fs = std::filesystem;
  std::string location;
  std::optional<int64_t> offset, length;
  for (const auto& entry : t.external_data()) {
    if (entry.key() != "location" && entry.key() != "offset" && entry.key() != "length") continue;  // checksum, ...
    if (entry.key() == "location") {
      location = entry.value();
      continue;
    }
    // A decimal count of bytes, as onnx and PyTorch write it; nothing else.
    int64_t v = 0;
    bool ok = !entry.value().empty();
    for (char c : entry.value())
      ok = ok && c >= '0' && c <= '9' && !__builtin_mul_overflow(v, 10, &v) && !__builtin_add_overflow(v, c - '0', &v);
    require(ok, tensor_label(t) + ": external data " + entry.key() + " '" + entry.value() +
                    "' is not a byte count");
    (entry.key() == "offset" ? offset : length) = v;
  }
  require(!location.empty(), tensor_label(t) + " has external data without a location");
  require(!base_dir.empty(), tensor_label(t) + " has its data in the external file '" + location +
                                 "', but the model came without its directory (give the model's path instead)");
  require(!escapes_directory(location), tensor_label(t) + ": external data location '" + location +
                                            "' is outside the model's directory (refused)");
  const fs::path file = fs::path(base_dir) / location;
  // A symbolic link may lead elsewhere: the file it names must be inside the directory too.
  std::error_code ec;
  const fs::path dir_real = fs::weakly_canonical(fs::path(base_dir), ec);
  const fs::path file_real = ec ? fs::path() : fs::weakly_canonical(file, ec);
  if (!ec) {
    auto rel = file_real.lexically_relative(dir_real);
    require(!rel.empty() && !escapes_directory(rel), tensor_label(t) + ": external data location '" + location +
                                                         "' leads outside the model's directory (refused)");
  }
  // Only a regular file (a link to one in the directory): a FIFO would block the open
  // forever, and a device has no size to check the offset and length against.
  const auto type = fs::status(file, ec).type();
  require(type != fs::file_type::not_found,
          tensor_label(t) + ": external data file '" + file.string() + "' cannot be opened (no such file)");
  require(!ec && type == fs::file_type::regular,
          tensor_label(t) + ": external data file '" + file.string() + "' is not a regular file (refused)");
  std::ifstream in(file, std::ios::binary);
  require(in.good(), tensor_label(t) + ": external data file '" + file.string() + "' cannot be opened");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  const int64_t begin = offset.value_or(0);
  const int64_t count = length.value_or(static_cast<int64_t>(expected_size));
  require(begin <= size && count <= size - begin,
          tensor_label(t) + ": external data file '" + file.string() + "' has " + std::to_string(size) +
              " bytes; the tensor's data would be " + std::to_string(count) + " bytes at offset " +
              std::to_string(begin) + ", past its end");
  std::string bytes(static_cast<size_t>(count), '\0');
  in.seekg(begin);
  in.read(bytes.data(), count);
  require(in.good() || count == 0, tensor_label(t) + ": reading external data file '" + file.string() + "' failed");
  return bytes;
}

bool known_element_type(int32_t code) { return code > 0 && code <= static_cast<int32_t>(DType::BFloat16); }

onnx::TensorProto inline_tensor_proto(const onnx::TensorProto& t, const std::string& base_dir) {
  onnx::TensorProto out = t;
  const int64_t numel = checked_num_elements(t);
  if (t.data_location() != onnx::TensorProto::EXTERNAL) return out;
  const std::optional<uint64_t> size = raw_byte_size(t.data_type(), numel);
  bool has_length = false;
  for (const auto& e : t.external_data()) has_length = has_length || e.key() == "length";
  require(size || has_length, tensor_label(t) + " of element type " + std::to_string(t.data_type()) +
                                  " in external data states no length, and this build cannot compute it");
  out.set_raw_data(read_external_data(t, base_dir, size ? *size : 0));
  out.clear_external_data();
  out.clear_data_location();
  return out;
}

namespace {
void inline_sparse(onnx::SparseTensorProto* sp, const std::string& base_dir) {
  *sp->mutable_values() = inline_tensor_proto(sp->values(), base_dir);
  *sp->mutable_indices() = inline_tensor_proto(sp->indices(), base_dir);
}

void inline_graph_external_data(onnx::GraphProto* g, const std::string& base_dir) {
  for (auto& t : *g->mutable_initializer()) t = inline_tensor_proto(t, base_dir);
  for (auto& sp : *g->mutable_sparse_initializer()) inline_sparse(&sp, base_dir);
  for (auto& n : *g->mutable_node()) inline_external_data(&n, base_dir);
}
}  // namespace

void inline_external_data(onnx::NodeProto* node, const std::string& base_dir) {
  for (auto& a : *node->mutable_attribute()) {
    if (a.has_t()) *a.mutable_t() = inline_tensor_proto(a.t(), base_dir);
    for (auto& t : *a.mutable_tensors()) t = inline_tensor_proto(t, base_dir);
    if (a.has_sparse_tensor()) inline_sparse(a.mutable_sparse_tensor(), base_dir);
    for (auto& sp : *a.mutable_sparse_tensors()) inline_sparse(&sp, base_dir);
    if (a.has_g()) inline_graph_external_data(a.mutable_g(), base_dir);
    for (auto& g : *a.mutable_graphs()) inline_graph_external_data(&g, base_dir);
  }
}

bool tensor_type_from_proto(const onnx::TypeProto& type, TensorType* out) {
  if (!type.has_tensor_type()) return false;
  const auto& tt = type.tensor_type();
  if (tt.elem_type() <= 0 || tt.elem_type() > static_cast<int>(DType::BFloat16) || !tt.has_shape()) return false;
  TensorType t;
  t.dtype = static_cast<DType>(tt.elem_type());
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) t.shape.push_back(Dim(d.dim_value()));
    else if (d.has_dim_param() && !d.dim_param().empty()) t.shape.push_back(Dim::sym(d.dim_param()));
    else t.shape.push_back(Dim::unknown());
  }
  *out = std::move(t);
  return true;
}

void tensor_type_to_proto(const TensorType& t, onnx::TypeProto* out) {
  auto* tt = out->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  auto* shape = tt->mutable_shape();
  for (const Dim& d : t.shape) {
    auto* dim = shape->add_dim();
    if (d.is_static()) dim->set_dim_value(d.value);
    else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
  }
}

}  // namespace onnx_detail

namespace {

// Builds the tensor `t` describes; `raw` (if not null) is t's raw_data, to be moved
// from. Both public entry points go through here.
Tensor convert_tensor(const onnx::TensorProto& t, std::string* raw, const std::string& base_dir) {
  using namespace onnx_detail;
  const int type_code = t.data_type();
  require(known_element_type(type_code), tensor_label(t) + " has unsupported element type " + std::to_string(type_code));
  const DType dtype = static_cast<DType>(type_code);
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  const int64_t numel = checked_num_elements(t);
  const bool external = t.data_location() == onnx::TensorProto::EXTERNAL;

  if (dtype == DType::String) {
    require(!external, tensor_label(t) + ": string tensors in external data are not supported");
    require(t.string_data_size() == numel, tensor_label(t) + " has " + std::to_string(t.string_data_size()) +
                                               " strings, expected " + std::to_string(numel));
    // A string tensor keeps a canonical TensorProto (no name, no other fields), so
    // equal strings give equal bytes.
    onnx::TensorProto canon;
    canon.set_data_type(type_code);
    for (int64_t d : dims) canon.add_dims(d);
    *canon.mutable_string_data() = t.string_data();
    std::string bytes;
    canon.SerializeToString(&bytes);
    return Tensor(dtype, std::move(dims), std::move(bytes));
  }

  const std::optional<uint64_t> raw_size = raw_byte_size(type_code, numel);
  require(raw_size.has_value(), tensor_label(t) + " has more bytes than fit in 64 bits");
  const size_t expected = *raw_size;
  std::string bytes;
  if (external) bytes = read_external_data(t, base_dir, expected);
  else if (raw) bytes = std::move(*raw);
  else if (t.has_raw_data()) bytes = t.raw_data();
  else bytes = typed_field_bytes(t, dtype);
  require(bytes.size() == expected, tensor_label(t) + " has " + std::to_string(bytes.size()) + " bytes of data, " +
                                        std::string(dtype_name(dtype)) + to_string(dims) + " needs " +
                                        std::to_string(expected));
  return Tensor(dtype, std::move(dims), std::move(bytes));
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir) {
  return convert_tensor(t, nullptr, base_dir);
}

Tensor onnx_detail::take_tensor_from_proto(onnx::TensorProto* t, const std::string& base_dir) {
  const bool inline_raw = t->has_raw_data() && t->data_location() != onnx::TensorProto::EXTERNAL;
  std::string raw = inline_raw ? std::move(*t->mutable_raw_data()) : std::string();
  if (inline_raw) t->clear_raw_data();
  return convert_tensor(*t, inline_raw ? &raw : nullptr, base_dir);
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto* out) {
  if (t.dtype() == DType::String) {
    onnx::TensorProto canon;
    require(canon.ParseFromArray(t.bytes().data(), static_cast<int>(t.byte_size())), "string tensor data is not a TensorProto");
    *out->mutable_string_data() = canon.string_data();
  } else {
    out->set_raw_data(t.bytes().data(), t.byte_size());
  }
  out->set_data_type(static_cast<int32_t>(t.dtype()));
  out->clear_dims();
  for (int64_t d : t.dims()) out->add_dims(d);
}

}  // namespace isomer
