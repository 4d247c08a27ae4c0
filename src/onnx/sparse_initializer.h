#pragma once
// A graph's sparse initializers (SparseTensorProto: values, indices, dims), which ONNX
// allows and ONNX Runtime densifies when it loads the model. isomer holds every weight
// dense, so import densifies them too, before anything else reads the graph.
#include <onnx/onnx_pb.h>

#include <string>

namespace isomer::onnx_detail {

// Moves each of `g`'s sparse initializers into its initializers, dense. Refused with
// the tensor's name: values that are not 1-D, indices that are not int64 [NNZ] (linear)
// or [NNZ, rank] (coordinates), an index out of range, and a dense form past 64 MiB
// that is also over 16 times the sparse form (the model written would be that much
// larger than the model read).
void densify_sparse_initializers(onnx::GraphProto* g, const std::string& base_dir);

}  // namespace isomer::onnx_detail
