#pragma once
// The value of a tensor that constants and static shapes alone decide, found while
// a model is imported: TorchScript writes a TopK's k as Gather(Shape(x), 0) of an
// input whose shape is fixed (pack_padded_sequence sorting its lengths), and an
// import hook that needs the number as an attribute would otherwise keep the node
// opaque, for ONNX Runtime to run by itself.
#include <optional>

#include "ir/node.h"
#include "ir/tensor.h"

namespace isomer {

// `v`'s tensor when it is a constant, the Shape or Size of a value of static shape,
// or a deterministic operator of such values whose every result is small (at most
// kStaticValueElements elements); nullopt otherwise.
constexpr int64_t kStaticValueElements = 4096;
std::optional<Tensor> static_value(const Value& v);

}  // namespace isomer
