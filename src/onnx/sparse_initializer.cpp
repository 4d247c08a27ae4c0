#include "onnx/sparse_initializer.h"

#include <cstring>
#include <vector>

#include "ir/error.h"
#include "ir/human_bytes.h"
#include "ir/shape.h"
#include "onnx/onnx_io.h"

namespace isomer::onnx_detail {

namespace {

constexpr size_t kDenseBytesAlways = size_t{64} << 20;
constexpr size_t kDenseGrowth = 16;

onnx::TensorProto densify(const onnx::SparseTensorProto& sp, const std::string& base_dir) {
  const std::string name = sp.values().name();
  require(!name.empty(), "a sparse initializer has no name (its values tensor names it)");
  const std::string label = "sparse initializer '" + name + "'";
  const std::vector<int64_t> dims(sp.dims().begin(), sp.dims().end());
  for (int64_t d : dims) require(d >= 0, label + ": dims " + to_string(dims) + " hold a negative extent");
  Tensor values, indices;
  try {
    values = tensor_from_proto(sp.values(), base_dir);
    indices = tensor_from_proto(sp.indices(), base_dir);
  } catch (const Error& e) {
    throw Error(label + ": " + e.what());
  }
  require(values.dtype() != DType::String, label + ": string values are not supported");
  require(values.dims().size() == 1, label + ": values must be 1-D, they are " + to_string(values.dims()));
  const int64_t nnz = values.dims()[0];
  const int64_t rank = static_cast<int64_t>(dims.size());
  const bool linear = indices.dims() == std::vector<int64_t>{nnz};
  const bool coords = indices.dims() == std::vector<int64_t>{nnz, rank};
  require(indices.dtype() == DType::Int64 && (linear || coords),
          label + ": indices are " + std::string(dtype_name(indices.dtype())) + to_string(indices.dims()) + "; " +
              std::to_string(nnz) + " values of a rank-" + std::to_string(rank) + " tensor need int64[" +
              std::to_string(nnz) + "] or int64[" + std::to_string(nnz) + ", " + std::to_string(rank) + "]");
  const size_t esize = dtype_size(values.dtype());
  const int64_t numel = require_allocatable(dims, esize, label);
  const size_t dense_bytes = static_cast<size_t>(numel) * esize;
  const size_t sparse_bytes = values.byte_size() + indices.byte_size();
  require(dense_bytes <= kDenseBytesAlways || dense_bytes <= kDenseGrowth * sparse_bytes,
          label + ": its dense form takes " + human_bytes(dense_bytes) + " for " + human_bytes(sparse_bytes) +
              " stored; isomer holds weights dense and would write the model that much larger (refused)");
  std::vector<int64_t> ind(static_cast<size_t>(indices.numel()));
  std::memcpy(ind.data(), indices.bytes().data(), ind.size() * sizeof(int64_t));
  std::string dense(dense_bytes, '\0');
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t at = 0;
    if (linear) {
      at = ind[static_cast<size_t>(k)];
    } else {
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t c = ind[static_cast<size_t>(k * rank + d)];
        require(c >= 0 && c < dims[static_cast<size_t>(d)],
                label + ": value " + std::to_string(k) + "'s coordinate " + std::to_string(c) + " on axis " +
                    std::to_string(d) + " is out of range for extent " + std::to_string(dims[static_cast<size_t>(d)]));
        at = at * dims[static_cast<size_t>(d)] + c;
      }
    }
    require(at >= 0 && at < numel, label + ": index " + std::to_string(at) + " of value " + std::to_string(k) +
                                       " is out of range for " + std::to_string(numel) + " elements");
    std::memcpy(dense.data() + static_cast<size_t>(at) * esize, values.bytes().data() + static_cast<size_t>(k) * esize,
                esize);
  }
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(static_cast<int32_t>(values.dtype()));
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::move(dense));
  return t;
}

}  // namespace

void densify_sparse_initializers(onnx::GraphProto* g, const std::string& base_dir) {
  for (const onnx::SparseTensorProto& sp : g->sparse_initializer()) *g->add_initializer() = densify(sp, base_dir);
  g->clear_sparse_initializer();
}

}  // namespace isomer::onnx_detail
