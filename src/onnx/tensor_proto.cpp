// TensorProto <-> Tensor and TypeProto <-> TensorType.
#include "onnx/proto_util.h"

#include <cstring>
#include <filesystem>
#include <fstream>

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
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: return pack<uint16_t>(t.int32_data());  // bit patterns
    case DType::UInt8: return pack<uint8_t>(t.int32_data());
    case DType::Bool: {
      std::string bytes = pack<uint8_t>(t.int32_data());
      for (char& c : bytes) c = c != 0 ? 1 : 0;
      return bytes;
    }
    default: return "";
  }
}

bool escapes_directory(const std::filesystem::path& location) {
  if (location.is_absolute() || location.has_root_name() || location.has_root_directory()) return true;
  for (const auto& part : location)
    if (part == "..") return true;
  return false;
}

}  // namespace

std::string read_external_data(const onnx::TensorProto& t, const std::string& base_dir, size_t expected_size) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : t.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      else if (entry.key() == "offset") offset = std::stoll(entry.value());
      else if (entry.key() == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      throw Error(tensor_label(t) + ": bad external data " + entry.key() + " '" + entry.value() + "'");
    }
  }
  require(!location.empty(), tensor_label(t) + " has external data without a location");
  require(!escapes_directory(location), tensor_label(t) + ": external data location '" + location +
                                            "' is outside the model's directory (refused)");
  require(offset >= 0, tensor_label(t) + ": negative external data offset");
  std::filesystem::path file = std::filesystem::path(base_dir.empty() ? "." : base_dir) / location;
  std::ifstream in(file, std::ios::binary);
  require(in.good() && !std::filesystem::is_directory(file),
          tensor_label(t) + ": external data file '" + file.string() + "' cannot be opened");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (length < 0) length = static_cast<int64_t>(expected_size);
  require(offset <= size && length >= 0 && offset + length <= size,
          tensor_label(t) + ": external data file '" + file.string() + "' has " + std::to_string(size) +
              " bytes, tensor needs bytes " + std::to_string(offset) + ".." + std::to_string(offset + length));
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  require(in.good() || length == 0, tensor_label(t) + ": reading external data file '" + file.string() + "' failed");
  return bytes;
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
  require(type_code > 0 && type_code <= static_cast<int>(DType::BFloat16),
          tensor_label(t) + " has unsupported element type " + std::to_string(type_code));
  const DType dtype = static_cast<DType>(type_code);
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims) require(d >= 0, tensor_label(t) + " has a negative dimension " + to_string(dims));
  const int64_t numel = num_elements(dims);
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

  const size_t expected = static_cast<size_t>(numel) * dtype_size(dtype);
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
    require(canon.ParseFromString(t.bytes()), "string tensor data is not a TensorProto");
    *out->mutable_string_data() = canon.string_data();
  } else {
    out->set_raw_data(t.bytes());
  }
  out->set_data_type(static_cast<int32_t>(t.dtype()));
  out->clear_dims();
  for (int64_t d : t.dims()) out->add_dims(d);
}

}  // namespace isomer
