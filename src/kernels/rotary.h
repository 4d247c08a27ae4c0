#pragma once
// ONNX's RotaryEmbedding (opset 23; torch.onnx.ops.rotary_embedding, what dynamo
// exports at opset 23 write): each row of head_size values (one batch, position
// and head) rotates its first `rot` values in pairs by the angle its position
// selects, and keeps the rest:
//   c, s = cos_cache[p], sin_cache[p]   (p = position_ids[b, t], or the row's own
//                                        [b, t] entry of a [B, S, rot/2] cache;
//                                        an extent 1 of either broadcasts)
//   pair i: (x1, x2) = (x[i], x[i + rot/2]), or (x[2i], x[2i + 1]) interleaved
//   y1 = c[i] x1 - s[i] x2,  y2 = s[i] x1 + c[i] x2   written where x1, x2 were
// X is [B, H, S, head] (heads first) or [B, S, H * head]. The row rotation is a
// template, stated once for the reference evaluator (double) and the runtime's
// kernel (float).
#include <cstdint>

namespace isomer::kernels {

struct RotaryShape {
  int64_t batch = 0, seq = 0, heads = 0, head = 0, rot = 0;
  bool heads_first = false;  // X is [B, H, S, head]; else [B, S, H * head]
  bool interleaved = false;
  bool positions = false;    // caches are [max_position, rot/2] read at position_ids; else [B, S, rot/2]
  int64_t cache_rows = 0;    // the caches' first extent (max_position with positions)
  // Extents of the [B, S] grid that position_ids (or, without them, the caches)
  // give: each is B (S) or 1, broadcast over the batch (sequence) as numpy would;
  // torch's exporter writes [1, S, rot/2] caches for a batch of prompts.
  int64_t grid_batch = 0, grid_seq = 0;
  int64_t rows() const { return batch * seq * heads; }
  // The index in the [grid_batch, grid_seq] grid of row r in X's layout (rows are
  // contiguous runs of head values).
  int64_t token_of_row(int64_t r) const {
    const int64_t b = heads_first ? r / (heads * seq) : r / heads / seq;
    const int64_t t = heads_first ? r % seq : (r / heads) % seq;
    return (grid_batch == 1 ? 0 : b) * grid_seq + (grid_seq == 1 ? 0 : t);
  }
};

// Rotates one row; the position's cache rows c and s hold rot/2 values.
template <class T>
void rotate_row(const RotaryShape& g, const T* x, const T* c, const T* s, T* y) {
  const int64_t half = g.rot / 2;
  if (g.interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const T x1 = x[2 * i], x2 = x[2 * i + 1];
      y[2 * i] = c[i] * x1 - s[i] * x2;
      y[2 * i + 1] = s[i] * x1 + c[i] * x2;
    }
  } else {
    for (int64_t i = 0; i < half; ++i) y[i] = c[i] * x[i] - s[i] * x[i + half];
    for (int64_t i = 0; i < half; ++i) y[i + half] = s[i] * x[i] + c[i] * x[i + half];
  }
  for (int64_t i = g.rot; i < g.head; ++i) y[i] = x[i];
}

// The cache row of row r, or -1 where its position is outside the caches.
inline int64_t cache_row(const RotaryShape& g, const int64_t* position_ids, int64_t r) {
  const int64_t token = g.token_of_row(r);
  const int64_t p = g.positions ? position_ids[token] : token;
  return p >= 0 && p < g.cache_rows ? p : -1;
}

// Rows [r0, r1) of Y; returns the first out-of-range position met (rows before it
// written), or -1.
template <class T>
int64_t rotary_rows(const RotaryShape& g, const T* x, const T* cos, const T* sin, const int64_t* position_ids, T* y,
                    int64_t r0, int64_t r1) {
  const int64_t half = g.rot / 2;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t p = cache_row(g, position_ids, r);
    if (p < 0) return g.positions ? position_ids[g.token_of_row(r)] : r;
    rotate_row(g, x + r * g.head, cos + p * half, sin + p * half, y + r * g.head);
  }
  return -1;
}

// The runtime's kernel: every row, split over the threads when there is enough
// work. Returns as rotary_rows does.
int64_t rotary_embedding(const RotaryShape& g, const float* x, const float* cos, const float* sin,
                         const int64_t* position_ids, float* y, int threads = 0);

}  // namespace isomer::kernels
