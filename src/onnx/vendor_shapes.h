#pragma once
// Output types of the com.microsoft operators isomer's runtime runs itself
// (runtime/lower_vendor.cpp: the QOperator format's QLinearAdd, QLinearMul,
// QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool,
// QLinearConcat and QGemm; the transformer optimizer's Gelu family and
// SkipLayerNormalization; MatMulIntegerToFloat, DynamicQuantizeMatMul and
// quantize_dynamic's DynamicQuantizeLSTM), computed
// from their inputs' types and their attributes as ONNX Runtime's schemas define them.
//
// ONNX's inference has no schemas for vendor domains, so every value after such a
// node stayed untyped unless the model declared it; ONNX Runtime's own inference
// (vendor_types.h) then filled the gaps, which a run with --no-onnxruntime, or a
// machine without ONNX Runtime, does not have: a QOperator MobileNet whose
// intermediates were made outputs without shapes was refused ("unknown type or
// shape"). The importer applies these hooks and ONNX's inference in turn until
// nothing more is typed (import_types.cpp).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace isomer {

// The type of a value by name (a typed value, an initializer), or nullptr.
using TypeLookup = std::function<const onnx::TypeProto*(const std::string&)>;

// True if `n` is an operator the hooks type.
bool has_vendor_shape_hook(const onnx::NodeProto& n);

// Each output's type (nullopt for one the hook leaves open), or an empty vector when
// an input it needs is untyped or the node is not one the hooks know.
std::vector<std::optional<onnx::TypeProto>> vendor_output_types(const onnx::NodeProto& n, const TypeLookup& type_of);

}  // namespace isomer
