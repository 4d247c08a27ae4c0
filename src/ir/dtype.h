#pragma once
// Element types. The numbering is ONNX's TensorProto.DataType so that import and
// export need no table.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace isomer {

enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

// Short names used by the text format: f32, f16, bf16, f64, i8..i64, u8..u64, bool.
std::string_view dtype_name(DType t);
// Inverse of dtype_name; returns Undefined for an unknown name.
DType dtype_from_name(std::string_view name);
// Size of one element in bytes; 0 for String/Undefined.
size_t dtype_size(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // signed or unsigned integers and bool
// True for the types the reference evaluator computes with (floats, ints, bool).
bool is_numeric(DType t);

}  // namespace isomer
