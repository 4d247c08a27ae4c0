#pragma once
// torch.split and torch.chunk, exported by torch.onnx.export(dynamo=True, optimize=False),
// write SplitToSequence and read the pieces with SequenceAt at constant positions. isomer
// holds no sequence values, so before import each such SequenceAt becomes the Slice (and,
// for keepdims 0, the Squeeze) that computes its piece, and a SplitToSequence nothing
// reads any more is dropped. Other sequence uses stay as written (opaque).
#include <onnx/onnx_pb.h>

namespace isomer::onnx_detail {

// Rewrites `model`'s main graph in place; returns how many SequenceAt were replaced.
size_t slice_split_sequences(onnx::ModelProto* model, int64_t opset);

}  // namespace isomer::onnx_detail
