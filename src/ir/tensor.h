#pragma once
// Constant tensor data (initializers, Constant nodes, evaluator values).
// Data is kept in its native little-endian layout (ONNX raw_data), immutable and
// shared, so weights round-trip bit-exactly and copies of a Tensor are cheap.
// String tensors keep their serialized ONNX TensorProto in `bytes`.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/bytes.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace isomer {

// How from_f64 stores a float in an integer element type (after truncating toward
// zero; NaN is always an Error):
//   Wrap:     results of integer arithmetic done in double. The value must fit int64
//             (an infinity or a larger value is an Error); narrower types then wrap
//             modulo 2^bits, as two's-complement arithmetic does.
//   Saturate: values that are numbers (bounds, fill values, Cast): clamped to the
//             type's range, infinities included (see saturate_float_to_int).
enum class FloatToInt { Wrap, Saturate };

class Tensor {
 public:
  Tensor() = default;
  // `bytes` must hold exactly numel * dtype_size(dtype) bytes (String: a TensorProto).
  Tensor(DType dtype, std::vector<int64_t> dims, Bytes bytes);

  static Tensor from_f64(DType dtype, std::vector<int64_t> dims, std::span<const double> values,
                         FloatToInt to_int = FloatToInt::Wrap);
  static Tensor from_i64(DType dtype, std::vector<int64_t> dims, std::span<const int64_t> values);
  static Tensor scalar_f32(float v) { return from_f64(DType::Float32, {}, std::vector<double>{v}); }
  static Tensor vector_i64(const std::vector<int64_t>& v) {
    return from_i64(DType::Int64, {static_cast<int64_t>(v.size())}, v);
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t numel() const { return numel_; }
  TensorType type() const { return {dtype_, make_shape(dims_)}; }
  const Bytes& bytes() const { return *bytes_; }
  size_t byte_size() const { return bytes_ ? bytes_->size() : 0; }

  // Element values widened to double / int64 (bool and ints exactly; floats exactly;
  // a float element as int64 is truncated and must fit: NaN, an infinity or a value
  // beyond int64 is an Error).
  std::vector<double> to_f64() const;
  std::vector<int64_t> to_i64() const;
  double f64_at(int64_t i) const;
  int64_t i64_at(int64_t i) const;

  // Same data, new dims (numel must match).
  Tensor reshaped(std::vector<int64_t> dims) const;

  // Hash of dtype, dims and every byte; computed on first use and shared by copies
  // (a runtime's outputs are Tensors that are never hashed: hashing 4 MB took
  // longer than the model that made them).
  size_t hash() const;
  bool same_as(const Tensor& o) const;  // bitwise equal (dtype, dims, bytes)

 private:
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::shared_ptr<const Bytes> bytes_;
  std::shared_ptr<std::atomic<size_t>> hash_ = std::make_shared<std::atomic<size_t>>(0);  // 0: not yet computed
};

// IEEE half / bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace isomer
