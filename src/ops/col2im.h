#pragma once
// Col2Im's geometry and its kernel (ops/col2im.cpp states the rule), over any
// element type with + (float, field, symbolic) and over raw buffers.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/attributes.h"

namespace isomer::ops {

struct Col2ImGeometry {
  std::vector<int64_t> image, block, dilations, strides, pads, positions;  // positions: L per axis
  int64_t block_size = 1, count = 1, pixels = 1;                           // prod(block), L, prod(image)
};

// The geometry of image_shape `image` and block_shape `block` under the node's
// dilations, pads and strides; throws InvalidNode where they do not fit.
Col2ImGeometry col2im_geometry(const Attributes& attrs, std::vector<int64_t> image, std::vector<int64_t> block);

// y[i, p] += x[i, b, l] for each of `images` (N x C) images, p where block offset b
// of position l lands (ops/col2im.cpp states the rule); y is zero where nothing lands.
// The positions are walked in order, the last axis innermost, without a division
// per element.
template <class T>
void col2im_add(const T* x, T* y, int64_t images, const Col2ImGeometry& g) {
  const auto k = static_cast<int64_t>(g.image.size());
  const int64_t last = k - 1, row = g.positions[last], width = g.image[last];
  std::vector<int64_t> b(static_cast<size_t>(k)), l(static_cast<size_t>(k));
  for (int64_t i = 0; i < images; ++i)
    for (int64_t bi = 0; bi < g.block_size; ++bi) {
      for (int64_t d = k - 1, r = bi; d >= 0; --d) b[d] = r % g.block[d], r /= g.block[d];
      const T* col = x + (i * g.block_size + bi) * g.count;
      T* img = y + i * g.pixels;
      const int64_t first = b[last] * g.dilations[last] - g.pads[last];  // the column of position 0
      std::fill(l.begin(), l.end(), 0);
      for (int64_t li = 0; li < g.count; li += row, col += row) {
        int64_t at = 0;  // the image row the outer positions land in
        bool inside = true;
        for (int64_t d = 0; d < last && inside; ++d) {
          const int64_t p = l[d] * g.strides[d] - g.pads[d] + b[d] * g.dilations[d];
          inside = p >= 0 && p < g.image[d];
          at = at * g.image[d] + p;
        }
        if (inside) {
          T* out = img + at * width;
          for (int64_t j = 0; j < row; ++j) {
            const int64_t p = first + j * g.strides[last];
            if (p >= 0 && p < width) out[p] = out[p] + col[j];
          }
        }
        for (int64_t d = last - 1; d >= 0; --d) {  // the next outer position
          if (++l[d] < g.positions[d]) break;
          l[d] = 0;
        }
      }
    }
}

}  // namespace isomer::ops
