#pragma once
// Copying a box of elements between two row-major arrays of raw bytes: slicing a
// weight's block, placing gathered blocks, cutting blocks before a reduce-scatter.
#include <cstdint>
#include <cstring>
#include <vector>

namespace isomer::parallel {

// Copies the box of extents `box` starting at `src_off` in `src` (dims `src_dims`) to
// `dst_off` in `dst` (dims `dst_dims`); `elem` bytes per element. Innermost runs go
// by memcpy.
inline void copy_box(const char* src, const std::vector<int64_t>& src_dims, const std::vector<int64_t>& src_off,
                     char* dst, const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_off,
                     const std::vector<int64_t>& box, size_t elem) {
  const size_t rank = box.size();
  for (int64_t b : box)
    if (b == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  std::vector<int64_t> ss(rank, 1), ds(rank, 1);
  for (size_t k = rank - 1; k > 0; --k) {
    ss[k - 1] = ss[k] * src_dims[k];
    ds[k - 1] = ds[k] * dst_dims[k];
  }
  const size_t run = static_cast<size_t>(box[rank - 1]) * elem;
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    int64_t so = 0, d = 0;
    for (size_t k = 0; k < rank; ++k) {
      so += (src_off[k] + idx[k]) * ss[k];
      d += (dst_off[k] + idx[k]) * ds[k];
    }
    std::memcpy(dst + d * static_cast<int64_t>(elem), src + so * static_cast<int64_t>(elem), run);
    if (rank == 1) return;
    size_t k = rank - 1;
    while (k > 0) {
      --k;
      if (++idx[k] < box[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
  }
}

}  // namespace isomer::parallel
