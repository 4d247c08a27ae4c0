#pragma once
// Elements of any dtype read as, and written from, the pointwise kernels' working
// types (float for floating programs, int64_t for integer ones): one element at a
// time, or a strided run in one loop per type. Integers made from floats are made as Cast
// makes them (ir/float_to_int.h), never undefined on hostile data. Used by kernels/pointwise.cpp.
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "ir/dtype.h"
#include "ir/float_to_int.h"
#include "ir/tensor.h"
#include "kernels/half.h"

namespace isomer::kernels::pointwise_elements {

// A float that becomes an integer of [lo, hi]: truncated toward zero, saturated,
// NaN -> 0 (never undefined behaviour on hostile data), as the evaluator's Cast.
template <class I>
I saturate(double v) {
  return cast_float_to_int<I>(v);  // ir/float_to_int.h
}

template <class T>
T element_as(const char* p, DType t) {
  switch (t) {
    case DType::Float32: { float v; std::memcpy(&v, p, 4); if constexpr (std::is_same_v<T, float>) return v; else return cast_float_to_int64(v); }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); if constexpr (std::is_same_v<T, float>) return static_cast<float>(v); else return cast_float_to_int64(v); }
    case DType::Float16: { uint16_t h; std::memcpy(&h, p, 2); float v = half_to_float(h); if constexpr (std::is_same_v<T, float>) return v; else return cast_float_to_int64(v); }
    case DType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); float v = bfloat16_to_float(h); if constexpr (std::is_same_v<T, float>) return v; else return cast_float_to_int64(v); }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<T>(v); }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return static_cast<T>(v); }
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return static_cast<T>(v); }
    case DType::Int8: return static_cast<T>(*reinterpret_cast<const int8_t*>(p));
    case DType::UInt8: return static_cast<T>(*reinterpret_cast<const uint8_t*>(p));
    case DType::Bool: return static_cast<T>(*p != 0 ? 1 : 0);
    case DType::UInt16: { uint16_t v; std::memcpy(&v, p, 2); return static_cast<T>(v); }
    case DType::UInt32: { uint32_t v; std::memcpy(&v, p, 4); return static_cast<T>(v); }
    case DType::UInt64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<T>(v); }
    default: return T(0);
  }
}

template <class T>
void store_element(char* p, DType t, T v) {
  switch (t) {
    case DType::Float32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case DType::Float64: { double f = static_cast<double>(v); std::memcpy(p, &f, 8); break; }
    case DType::Float16: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DType::BFloat16: { uint16_t h = float_to_bfloat16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DType::Bool: *p = v != T(0) ? 1 : 0; break;
#define STORE_INT(D, I)                                                                   \
  case DType::D: {                                                                        \
    I x;                                                                                  \
    if constexpr (std::is_same_v<T, float>) x = cast_float_to<I>(v);                       \
    else x = static_cast<I>(v);                                                           \
    std::memcpy(p, &x, sizeof x);                                                         \
    break;                                                                                \
  }
      STORE_INT(Int64, int64_t)
      STORE_INT(Int32, int32_t)
      STORE_INT(Int16, int16_t)
      STORE_INT(Int8, int8_t)
      STORE_INT(UInt8, uint8_t)
      STORE_INT(UInt16, uint16_t)
      STORE_INT(UInt32, uint32_t)
      STORE_INT(UInt64, uint64_t)
#undef STORE_INT
    default: break;
  }
}

// A dense float run stored as float16 / bfloat16 (kernels/half.h); false where
// the run is not one (the caller stores element by element).
template <class T>
bool store_half(char* dst, int64_t st, DType t, const T* v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (st != 1 || (t != DType::Float16 && t != DType::BFloat16)) return false;
    auto* h = reinterpret_cast<uint16_t*>(dst);
    if (t == DType::Float16) float32_to_float16(v, h, n);
    else float32_to_bfloat16(v, h, n);
    return true;
  } else {
    return false;
  }
}

// n elements of a run starting at `src` (stride st elements of type t) as T: one
// loop per type, not a switch per element.
template <class T>
void convert(const char* src, int64_t st, DType t, int64_t n, T* dst) {
  switch (t) {
    case DType::Float32:
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t j = 0; j < n; ++j) dst[j] = reinterpret_cast<const float*>(src)[j * st];
      } else {  // to integers as Cast converts (ir/float_to_int.h), never undefined
        for (int64_t j = 0; j < n; ++j)
          dst[j] = static_cast<T>(cast_float_to_int64(reinterpret_cast<const float*>(src)[j * st]));
      }
      break;
    case DType::Bool:
    case DType::UInt8:
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(reinterpret_cast<const uint8_t*>(src)[j * st]);
      break;
    case DType::Int64:
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(reinterpret_cast<const int64_t*>(src)[j * st]);
      break;
    case DType::Int32:
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(reinterpret_cast<const int32_t*>(src)[j * st]);
      break;
    case DType::Float16:
    case DType::BFloat16:
      if constexpr (std::is_same_v<T, float>) {
        if (st == 1) {  // kernels/half.h: vectorized
          const auto* h = reinterpret_cast<const uint16_t*>(src);
          if (t == DType::Float16) float16_to_float32(h, dst, n);
          else bfloat16_to_float32(h, dst, n);
          break;
        }
      }
      [[fallthrough]];
    default: {
      const int64_t es = static_cast<int64_t>(dtype_size(t));
      for (int64_t j = 0; j < n; ++j) dst[j] = element_as<T>(src + j * st * es, t);
    }
  }
}

}  // namespace isomer::kernels::pointwise_elements
