#pragma once
// NumPy .npz archives (a zip of .npy files, one per array), the format of
// `isomer run --inputs/--outputs`: np.savez and np.savez_compressed files are
// read; files are written uncompressed, as np.savez writes them. .npy has no
// bfloat16: bf16 arrays are written as float32 (exactly), and a float32 array is
// taken for a bf16 model input (see given_inputs).
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace isomer::runtime {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Arrays in archive order, keyed by name (without ".npy"). Throws Error naming
// the file and the problem on anything it cannot read.
NamedTensors read_npz(const std::string& path);
void write_npz(const std::string& path, const NamedTensors& arrays);

// One .npy document.
std::string encode_npy(const Tensor& t);
Tensor decode_npy(const std::string& bytes, const std::string& what);

}  // namespace isomer::runtime
