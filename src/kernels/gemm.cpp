#include "kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/error.h"
#include "kernels/parallel.h"

namespace isomer::kernels {

namespace {

using v8 = float __attribute__((vector_size(32)));

// The deepest K done in one pass: a panel's slice is K x kPanel floats (32 KiB at 512).
constexpr int64_t kMaxDepth = 512;

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

// One tile: rows [0, MR) of C (MR <= kRows), the kPanel columns of one B panel, over
// all of K: acc = A[0:MR, :] panel. The accumulators live in registers (12 for
// MR = 6: two 8-wide halves per row); each k broadcasts MR elements of A and reads
// 16 of the packed panel.
// The accumulators start from `init` when given: a partial sum over earlier K
// blocks (`out` itself, kRows x kPanel) or a bias row (kPanel values, every row).
template <int MR>
inline __attribute__((always_inline)) void tile(const float* a, int64_t lda, const float* panel, int64_t K, float* out,
                                                const float* init, int64_t init_row) {
  v8 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    c0[i] = init ? load8(init + i * init_row) : v8{};
    c1[i] = init ? load8(init + i * init_row + 8) : v8{};
  }
  for (int64_t k = 0; k < K; ++k) {
    __builtin_prefetch(panel + (k + 16) * kPanel);  // the panel streams from L2
    const v8 b0 = load8(panel + k * kPanel), b1 = load8(panel + k * kPanel + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const float x = a[i * lda + k];
      const v8 ai = {x, x, x, x, x, x, x, x};  // one broadcast load (v8{} + x would add 0.0 first)
      c0[i] += ai * b0;
      c1[i] += ai * b1;
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    store8(out + i * kPanel, c0[i]);
    store8(out + i * kPanel + 8, c1[i]);
  }
}

// rows [0, mr) of the tile at `a` times `panel` over depth K, into `out` (kRows x kPanel).
// `init`, `init_row`: as for tile().
inline __attribute__((always_inline)) void tile_rows(int64_t mr, const float* a, int64_t lda, const float* panel,
                                                     int64_t K, float* out, const float* init = nullptr,
                                                     int64_t init_row = 0) {
  switch (mr) {
    case 6: tile<6>(a, lda, panel, K, out, init, init_row); break;
    case 5: tile<5>(a, lda, panel, K, out, init, init_row); break;
    case 4: tile<4>(a, lda, panel, K, out, init, init_row); break;
    case 3: tile<3>(a, lda, panel, K, out, init, init_row); break;
    case 2: tile<2>(a, lda, panel, K, out, init, init_row); break;
    default: tile<1>(a, lda, panel, K, out, init, init_row); break;
  }
}

// A finished tile (`acc`, kRows x kPanel) into C, through the epilogue if any.
inline void finish_tile(const float* acc, int64_t r0, int64_t mr, int64_t c0, int64_t nc, float* c, int64_t ldc,
                        const GemmEpilogue* epi) {
  float* out = c + r0 * ldc + c0;
  if (epi) {
    run_pointwise_tile(epi->program, acc, kPanel, epi->operands, r0, mr, c0, nc, out, ldc);
  } else {
    for (int64_t i = 0; i < mr; ++i) std::memcpy(out + i * ldc, acc + i * kPanel, static_cast<size_t>(nc) * sizeof(float));
  }
}

// Tiles [t0, t1) of the (panel, row block) grid, panel-major, into C. When K is
// deeper than one cache block (b.kc), the tiles go in chunks, and each chunk
// makes one pass per K block: the block's slice of a B panel (kc x kPanel) stays
// in L1 while every row block of the chunk uses it, and the chunk's slice of A
// stays in L2 across its panels. Partial sums wait in a per-thread buffer, not
// in C, which an epilogue operand may share.
ISOMER_CLONES void run_tiles(const float* a, int64_t lda, int64_t M, const PackedB& b, const float* bias, float* c,
                             int64_t ldc, const GemmEpilogue* epi, int64_t t0, int64_t t1) {
  const int64_t row_blocks = (M + kRows - 1) / kRows;
  constexpr int64_t kTileFloats = kRows * kPanel;
  if (b.kc >= b.K) {
    alignas(64) float acc[kTileFloats];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / row_blocks, r0 = (t % row_blocks) * kRows;
      const int64_t mr = std::min<int64_t>(kRows, M - r0), c0 = p * kPanel;
      tile_rows(mr, a + r0 * lda, lda, b.data.data() + p * b.K * kPanel, b.K, acc,
                bias ? bias + p * kPanel : nullptr, 0);
      finish_tile(acc, r0, mr, c0, std::min<int64_t>(kPanel, b.N - c0), c, ldc, epi);
    }
    return;
  }
  constexpr int64_t kChunk = 256;  // tiles per chunk: 96 KiB of partial sums
  thread_local std::vector<float> partial;
  partial.resize(static_cast<size_t>(kChunk * kTileFloats));
  for (int64_t s = t0; s < t1; s += kChunk) {
    const int64_t e = std::min(t1, s + kChunk);
    for (int64_t k0 = 0; k0 < b.K; k0 += b.kc) {
      const int64_t kk = std::min(b.kc, b.K - k0);
      for (int64_t t = s; t < e; ++t) {
        const int64_t p = t / row_blocks, r0 = (t % row_blocks) * kRows;
        float* part = partial.data() + (t - s) * kTileFloats;
        const float* init = k0 > 0 ? part : bias ? bias + p * kPanel : nullptr;
        tile_rows(std::min<int64_t>(kRows, M - r0), a + r0 * lda + k0, lda, b.data.data() + (p * b.K + k0) * kPanel, kk,
                  part, init, k0 > 0 ? kPanel : 0);
      }
    }
    for (int64_t t = s; t < e; ++t) {
      const int64_t p = t / row_blocks, r0 = (t % row_blocks) * kRows, c0 = p * kPanel;
      finish_tile(partial.data() + (t - s) * kTileFloats, r0, std::min<int64_t>(kRows, M - r0), c0,
                  std::min<int64_t>(kPanel, b.N - c0), c, ldc, epi);
    }
  }
}

// One product of a batch: B[b] packed into `panel_buf`, then every tile.
ISOMER_CLONES void run_batch(const float* a, const float* bsrc, float* c, const BatchedGemm& g, int64_t bi,
                             const GemmEpilogue* epi, float* panel_buf) {
  const int64_t panels = (g.N + kPanel - 1) / kPanel;
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t k = 0; k < g.K; ++k) {
      float* dst = panel_buf + (q * g.K + k) * kPanel;
      const float* src = bsrc + k * g.b_k + q * kPanel * g.b_n;
      const int64_t w = std::min<int64_t>(kPanel, g.N - q * kPanel);
      if (g.b_n == 1) {
        std::memcpy(dst, src, static_cast<size_t>(w) * sizeof(float));
      } else {
        for (int64_t j = 0; j < w; ++j) dst[j] = src[j * g.b_n];
      }
      for (int64_t j = w; j < kPanel; ++j) dst[j] = 0;
    }
  const int64_t row_blocks = (g.M + kRows - 1) / kRows;
  const int64_t* shift = epi ? g.op_off.data() + bi * static_cast<int64_t>(epi->operands.size()) : nullptr;
  alignas(64) float acc[kRows * kPanel];
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t rb = 0; rb < row_blocks; ++rb) {
      const int64_t r0 = rb * kRows, mr = std::min<int64_t>(kRows, g.M - r0), c0 = q * kPanel;
      const int64_t nc = std::min<int64_t>(kPanel, g.N - c0);
      const float* panel = panel_buf + q * g.K * kPanel;
      const float* ar = a + r0 * g.a_row;
      tile_rows(mr, ar, g.a_row, panel, g.K, acc);
      const int64_t ldc = g.c_row ? g.c_row : g.N;
      float* out = c + r0 * ldc + c0;
      if (epi) {
        run_pointwise_tile(epi->program, acc, kPanel, epi->operands, r0, mr, c0, nc, out, ldc, shift);
      } else {
        for (int64_t i = 0; i < mr; ++i) std::memcpy(out + i * ldc, acc + i * kPanel, static_cast<size_t>(nc) * sizeof(float));
      }
    }
}

}  // namespace

void gemm_batched(const float* a, const float* b, float* c, const BatchedGemm& g, const GemmEpilogue* epilogue,
                  int threads) {
  if (g.batch == 0 || g.M == 0 || g.N == 0) return;
  int team = threads > 0 ? threads : omp_get_max_threads();
  const double flops = 2.0 * static_cast<double>(g.batch * g.M) * static_cast<double>(g.N * g.K);
  team = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(flops / 4e6), 1, std::min<int64_t>(team, g.batch)));
  const size_t panel_floats = static_cast<size_t>(((g.N + kPanel - 1) / kPanel) * g.K * kPanel);
  parallel_teams(team, [&](int t, int nt) {
    std::vector<float> buf(panel_floats);
    for (int64_t bi = g.batch * t / nt; bi < g.batch * (t + 1) / nt; ++bi)
      run_batch(a + g.a_off[static_cast<size_t>(bi)], b + g.b_off[static_cast<size_t>(bi)],
                c + (g.c_off.empty() ? bi * g.M * g.N : g.c_off[static_cast<size_t>(bi)]), g, bi, epilogue, buf.data());
  });
}

PackedB pack_b(const float* b, int64_t K, int64_t N, int64_t ldb, bool transposed) {
  PackedB p;
  p.K = K;
  p.N = N;
  // One pass over K when a panel's K x kPanel slice fits in L1 beside its slice of
  // A; otherwise blocks of about 256 (16 KiB of panel), of equal depth.
  const int64_t blocks = K <= kMaxDepth ? 1 : (K + 255) / 256;
  p.kc = (K + blocks - 1) / blocks;
  const int64_t panels = (N + kPanel - 1) / kPanel;
  p.data.assign(static_cast<size_t>(panels * K * kPanel), 0.0f);
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < kPanel && q * kPanel + j < N; ++j) {
        const int64_t n = q * kPanel + j;
        p.data[static_cast<size_t>((q * K + k) * kPanel + j)] = transposed ? b[n * ldb + k] : b[k * ldb + n];
      }
  return p;
}

std::vector<float> panel_bias(const float* bias, int64_t N) {
  std::vector<float> out(static_cast<size_t>((N + kPanel - 1) / kPanel * kPanel), 0.0f);
  std::copy(bias, bias + N, out.begin());
  return out;
}

void gemm_packed(const float* a, int64_t lda, int64_t M, const PackedB& b, float* c, int64_t ldc,
                 const GemmEpilogue* epilogue, int threads, const float* bias) {
  if (M == 0 || b.N == 0) return;
  require(!epilogue || (epilogue->program.compute == PwProgram::Compute::Float32 &&
                        epilogue->program.num_inputs == static_cast<int>(epilogue->operands.size()) + 1),
          "gemm: the epilogue's operands do not match its program");
  const int64_t tiles = ((b.N + kPanel - 1) / kPanel) * ((M + kRows - 1) / kRows);
  int team = threads > 0 ? threads : omp_get_max_threads();
  // Enough work per thread to pay for waking it: ~50 us of arithmetic, or of
  // streaming the packed weights (a matrix-vector product is bound by reading B,
  // and two cores read it about twice as fast as one).
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(b.N) * static_cast<double>(b.K);
  const double bytes = static_cast<double>(b.data.size()) * sizeof(float);
  const double work = std::max(flops / 4e6, bytes / (512.0 * 1024));
  team = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(work), 1, std::min<int64_t>(team, tiles)));
  parallel_teams(team, [&](int t, int nt) {
    run_tiles(a, lda, M, b, bias, c, ldc, epilogue, tiles * t / nt, tiles * (t + 1) / nt);
  });
}

bool prefer_packed_gemm() {
  if (const char* v = std::getenv("ISOMER_GEMM")) {
    std::string s = v;
    if (s == "native") return true;
    if (s == "onednn") return false;
  }
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !__builtin_cpu_supports("avx512f");
}

}  // namespace isomer::kernels
