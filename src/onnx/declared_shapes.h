#pragma once
// Shapes a model declares (value_info, graph outputs) against the shapes ONNX infers.
//
// A declared shape is a hint, not a promise: ONNX Runtime merges it with the shape its
// inference computes and, where they contradict, warns and computes with the inferred
// one. isomer does the same. Where isomer computes a value itself (its native operators)
// it never read the declaration; where it takes a type from ONNX's inference (a node it
// keeps opaque), libonnx's inference keeps a declared shape it could not merge, so a
// declaration that lies ([3,2] for a [2,3] value, or another rank) would reach the nodes
// that read the value and make isomer compute with the wrong shape. The declarations
// that ONNX's own inference contradicts are overruled here, before anything reads them.
// (Element types are not hints: a value_info that lies about one is refused,
// model_checks.h.)
#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>

#include "onnx/libonnx_inference.h"

namespace isomer::onnx_detail {

// `copy`: the model as shape inference sees it (onnx_detail's inference copy); `known`:
// static dims of weights. Runs ONNX's inference on it without the declared shapes and
// returns, by name, the inferred type of every value whose declared shape (in `copy`'s
// value_info and outputs) the inference contradicts: another rank, or another number in
// a dim both state. Sets `type_lie` to the first declared element type ONNX infers
// otherwise ("graph output 'z' is declared string, but ONNX infers float"), which the
// importer refuses: a value isomer keeps opaque took the declared one.
std::unordered_map<std::string, onnx::TypeProto> inferred_over_declared(onnx::ModelProto copy, const DimsMap& known,
                                                                        std::string* type_lie);

}  // namespace isomer::onnx_detail
