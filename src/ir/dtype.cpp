#include "ir/dtype.h"

#include <array>
#include <utility>

namespace isomer {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 17> kNames{{
    {DType::Undefined, "undef"}, {DType::Float32, "f32"},   {DType::UInt8, "u8"},
    {DType::Int8, "i8"},         {DType::UInt16, "u16"},    {DType::Int16, "i16"},
    {DType::Int32, "i32"},       {DType::Int64, "i64"},     {DType::String, "str"},
    {DType::Bool, "bool"},       {DType::Float16, "f16"},   {DType::Float64, "f64"},
    {DType::UInt32, "u32"},      {DType::UInt64, "u64"},    {DType::Complex64, "c64"},
    {DType::Complex128, "c128"}, {DType::BFloat16, "bf16"},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (auto& [d, n] : kNames)
    if (d == t) return n;
  return "undef";
}

DType dtype_from_name(std::string_view name) {
  for (auto& [d, n] : kNames)
    if (n == name) return d;
  return DType::Undefined;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::UInt16:
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::UInt64:
    case DType::Float64:
    case DType::Complex64: return 8;
    case DType::Complex128: return 16;
    default: return 0;
  }
}

bool is_float(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 || t == DType::BFloat16;
}

bool is_integer(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::UInt16:
    case DType::Int16:
    case DType::Int32:
    case DType::UInt32:
    case DType::Int64:
    case DType::UInt64: return true;
    default: return false;
  }
}

bool is_numeric(DType t) { return is_float(t) || is_integer(t); }

}  // namespace isomer
