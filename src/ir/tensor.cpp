#include "ir/tensor.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>

#include "ir/bfloat16_bits.h"
#include "ir/error.h"
#include "ir/float_to_int.h"

namespace isomer {
namespace {

template <class T>
T load(const Bytes& bytes, int64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(std::string& bytes, int64_t i, T v) {
  std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
}

// `v` clamped to the range of the integer type `dtype`, as an int64 (uint64's upper
// half wraps to negative values, which from_i64 stores back as the same bits).
int64_t saturate_to(DType dtype, double v, std::string_view what) {
  switch (dtype) {
    case DType::UInt8: return saturate_float_to_int<uint8_t>(v, what);
    case DType::Int8: return saturate_float_to_int<int8_t>(v, what);
    case DType::UInt16: return saturate_float_to_int<uint16_t>(v, what);
    case DType::Int16: return saturate_float_to_int<int16_t>(v, what);
    case DType::Int32: return saturate_float_to_int<int32_t>(v, what);
    case DType::UInt32: return saturate_float_to_int<uint32_t>(v, what);
    case DType::UInt64: return static_cast<int64_t>(saturate_float_to_int<uint64_t>(v, what));
    default: return saturate_float_to_int<int64_t>(v, what);
  }
}

// The element count of `dims`: non-negative dims whose product fits int64.
int64_t checked_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    require(d >= 0, "tensor has a negative dimension " + to_string(dims));
    require(!__builtin_mul_overflow(n, d, &n), "tensor " + to_string(dims) + " has more elements than fit in 64 bits");
  }
  return n;
}

size_t hash_bytes(DType dtype, const std::vector<int64_t>& dims, std::string_view bytes) {
  size_t h = std::hash<std::string_view>{}(bytes);
  h ^= static_cast<size_t>(dtype) * 0x9e3779b97f4a7c15ULL;
  for (int64_t d : dims) h = h * 1000003u ^ static_cast<size_t>(d);
  return h;
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, Bytes bytes)
    : dtype_(dtype), dims_(std::move(dims)) {
  numel_ = checked_numel(dims_);
  if (dtype_ != DType::String) {
    require(dtype_size(dtype_) > 0, "tensor has unsupported element type " + std::string(dtype_name(dtype_)));
    size_t expected = 0;
    require(!__builtin_mul_overflow(static_cast<size_t>(numel_), dtype_size(dtype_), &expected) &&
                bytes.size() == expected,
            "tensor data of " + std::to_string(bytes.size()) + " bytes does not match " +
                std::string(dtype_name(dtype_)) + to_string(dims_));
  }
  bytes_ = std::make_shared<const Bytes>(std::move(bytes));
}

size_t Tensor::hash() const {
  size_t h = hash_->load(std::memory_order_relaxed);
  if (h == 0) {  // two threads may both compute it: the same value
    h = hash_bytes(dtype_, dims_, bytes_ ? bytes_->view() : std::string_view()) | 1;
    hash_->store(h, std::memory_order_relaxed);
  }
  return h;
}

double Tensor::f64_at(int64_t i) const {
  const Bytes& b = *bytes_;
  switch (dtype_) {
    case DType::Float32: return load<float>(b, i);
    case DType::Float64: return load<double>(b, i);
    case DType::Float16: return half_to_float(load<uint16_t>(b, i));
    case DType::BFloat16: return bfloat16_to_float(load<uint16_t>(b, i));
    case DType::UInt64: return static_cast<double>(load<uint64_t>(b, i));  // i64_at holds its bits
    default: return static_cast<double>(i64_at(i));
  }
}

int64_t Tensor::i64_at(int64_t i) const {
  const Bytes& b = *bytes_;
  switch (dtype_) {
    case DType::Bool:
    case DType::UInt8: return load<uint8_t>(b, i);
    case DType::Int8: return load<int8_t>(b, i);
    case DType::UInt16: return load<uint16_t>(b, i);
    case DType::Int16: return load<int16_t>(b, i);
    case DType::Int32: return load<int32_t>(b, i);
    case DType::UInt32: return load<uint32_t>(b, i);
    case DType::Int64: return load<int64_t>(b, i);
    case DType::UInt64: return static_cast<int64_t>(load<uint64_t>(b, i));
    default: {
      const double v = f64_at(i);
      if (std::optional<int64_t> exact = float_to_int<int64_t>(v)) return *exact;
      return checked_float_to_int<int64_t>(v, std::string(dtype_name(dtype_)) + " element used as an integer");
    }
  }
}

std::vector<double> Tensor::to_f64() const {
  require(is_numeric(dtype_), "tensor of type " + std::string(dtype_name(dtype_)) + " is not numeric");
  std::vector<double> out(numel_);
  if (dtype_ == DType::Float32) {
    for (int64_t i = 0; i < numel_; ++i) out[i] = load<float>(*bytes_, i);
  } else {
    for (int64_t i = 0; i < numel_; ++i) out[i] = f64_at(i);
  }
  return out;
}

std::vector<int64_t> Tensor::to_i64() const {
  require(is_numeric(dtype_), "tensor of type " + std::string(dtype_name(dtype_)) + " is not numeric");
  std::vector<int64_t> out(numel_);
  for (int64_t i = 0; i < numel_; ++i) out[i] = i64_at(i);
  return out;
}

Tensor Tensor::from_f64(DType dtype, std::vector<int64_t> dims, std::span<const double> values, FloatToInt to_int) {
  std::string bytes(values.size() * dtype_size(dtype), '\0');
  const int64_t n = static_cast<int64_t>(values.size());
  switch (dtype) {
    case DType::Float32:
      for (int64_t i = 0; i < n; ++i) store<float>(bytes, i, static_cast<float>(values[i]));
      break;
    case DType::Float64:
      for (int64_t i = 0; i < n; ++i) store<double>(bytes, i, values[i]);
      break;
    case DType::Float16:
      for (int64_t i = 0; i < n; ++i) store<uint16_t>(bytes, i, float_to_half(static_cast<float>(values[i])));
      break;
    case DType::BFloat16:
      for (int64_t i = 0; i < n; ++i)
        store<uint16_t>(bytes, i, float_to_bfloat16(static_cast<float>(values[i])));
      break;
    default: {
      const std::string what = "converting a float to " + std::string(dtype_name(dtype));
      std::vector<int64_t> ints(n);
      for (int64_t i = 0; i < n; ++i) {
        const double v = values[i];
        if (dtype == DType::Bool) ints[i] = v != 0.0;  // ONNX: only +-0 is false (NaN is true)
        else if (to_int == FloatToInt::Wrap) ints[i] = checked_float_to_int<int64_t>(v, what);
        else ints[i] = saturate_to(dtype, v, what);
      }
      return from_i64(dtype, std::move(dims), ints);
    }
  }
  return Tensor(dtype, std::move(dims), std::move(bytes));
}

Tensor Tensor::from_i64(DType dtype, std::vector<int64_t> dims, std::span<const int64_t> values) {
  std::string bytes(values.size() * dtype_size(dtype), '\0');
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = values[i];
    switch (dtype) {
      case DType::Bool: store<uint8_t>(bytes, i, v != 0); break;
      case DType::UInt8: store<uint8_t>(bytes, i, static_cast<uint8_t>(v)); break;
      case DType::Int8: store<int8_t>(bytes, i, static_cast<int8_t>(v)); break;
      case DType::UInt16: store<uint16_t>(bytes, i, static_cast<uint16_t>(v)); break;
      case DType::Int16: store<int16_t>(bytes, i, static_cast<int16_t>(v)); break;
      case DType::Int32: store<int32_t>(bytes, i, static_cast<int32_t>(v)); break;
      case DType::UInt32: store<uint32_t>(bytes, i, static_cast<uint32_t>(v)); break;
      case DType::Int64: store<int64_t>(bytes, i, v); break;
      case DType::UInt64: store<uint64_t>(bytes, i, static_cast<uint64_t>(v)); break;
      default: {
        std::vector<double> d(values.begin(), values.end());
        return from_f64(dtype, std::move(dims), d);
      }
    }
  }
  return Tensor(dtype, std::move(dims), std::move(bytes));
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  require(checked_numel(dims) == numel_, "cannot reshape " + to_string(dims_) + " to " + to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  t.hash_ = std::make_shared<std::atomic<size_t>>(0);
  return t;
}

bool Tensor::same_as(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (bytes_ == o.bytes_) return true;
  return bytes_ && o.bytes_ && *bytes_ == *o.bytes_;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    float a = std::bit_cast<float>(absx);
    // a < 2^-14, so m <= 2^10; round-to-even.
    uint32_t m = checked_float_to_int<uint32_t>(std::nearbyint(a * 16777216.0f), "a half subnormal");
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float bfloat16_to_float(uint16_t b) { return bfloat16_bits_to_float(b); }

uint16_t float_to_bfloat16(float f) { return float_to_bfloat16_bits(f); }

}  // namespace isomer
