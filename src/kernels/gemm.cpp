#include "kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/error.h"
#include "kernels/parallel.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

#ifdef ISOMER_HAVE_ISA_TARGETS
#include <immintrin.h>
#endif

namespace isomer::kernels {

namespace {

using v8 = vm8::v8;
using v16 = vm16::v16;

// The largest batched product (elements) whose epilogue runs after it, in one pass.
constexpr int64_t kWholeProduct = 64 * 1024;

// The deepest K done in one pass: a panel's slice is K x kPanel floats (32 KiB at 512).
constexpr int64_t kMaxDepth = 512;

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

// One tile: rows [0, MR) of C (MR <= the tile's rows), the 2 x lanes columns of one
// B panel (kPanel for 8 lanes, kWidePanel for 16), over all of K: acc = A[0:MR, :]
// panel. The accumulators live in registers (12 for 8 lanes and MR = 6, 16 for 16
// lanes and MR = 8: two vectors per row); each k broadcasts MR elements of A and
// reads one row of the packed panel.
// The accumulators start from `init` when given: a partial sum over earlier K
// blocks (`out` itself, rows of the panel's width) or a bias row (every row).
// A's element (i, k) is at a[i * lda + k], or at a[k * lda + i] when KMajor (a
// transposed A: Gemm's transA, MLP-Mixer's token mixing).
// x in every lane of 16 as one vbroadcastss. (The lane loop and an initializer
// of the 16 lanes became 16 masked broadcasts inside the AVX-512 entry point, a
// shuffle of a 4-lane vector a spill to the stack per row; the intrinsic carries
// the AVX-512 target, and that entry point is `flatten` to inline it, as
// rows_vec.h's Part.)
#ifdef ISOMER_HAVE_ISA_TARGETS
ISOMER_TARGET_AVX512 inline v16 broadcast16(float x) { return reinterpret_cast<v16>(_mm512_set1_ps(x)); }
#else
inline __attribute__((always_inline)) v16 broadcast16(float x) { return vmv::splat<v16>(x); }
#endif

// The tile is stored to `out` with rows out_row apart (its own NR by default: a
// buffer), each row times row_scale[i] when given. Half: the panel's first L
// columns only (a product's last columns, when no more than L are left: 197 keys
// took a whole 32-column tile for their last 5).
template <class V, int MR, bool KMajor, bool Half = false>
inline __attribute__((always_inline)) void tile(const float* a, int64_t lda, const float* panel, int64_t K, float* out,
                                                const float* init, int64_t init_row, int64_t out_row,
                                                const float* row_scale) {
  constexpr int L = vmv::kLanes<V>, NR = 2 * L;
  V c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    c0[i] = init ? vmv::load<V>(init + i * init_row) : V{};
    c1[i] = init && !Half ? vmv::load<V>(init + i * init_row + L) : V{};
  }
  for (int64_t k = 0; k < K; ++k) {
    __builtin_prefetch(panel + (k + 256 / NR) * NR);  // the panel streams from L2
    const V b0 = vmv::load<V>(panel + k * NR), b1 = Half ? V{} : vmv::load<V>(panel + k * NR + L);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const float x = KMajor ? a[k * lda + i] : a[i * lda + k];
      V ai;
      // One broadcast load: for 8 lanes the initializer written out here (v8{} + x
      // would add 0.0 first; the same initializer in a helper, or vmv::splat's lane
      // loop, became 8 inserts in the clones).
      if constexpr (L == 8) ai = v8{x, x, x, x, x, x, x, x};
      else ai = broadcast16(x);
      c0[i] += ai * b0;
      if constexpr (!Half) c1[i] += ai * b1;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    if (row_scale) {
      const V f = vmv::splat<V>(row_scale[i]);
      c0[i] *= f;
      c1[i] *= f;
    }
    vmv::store(out + i * out_row, c0[i]);
    if constexpr (!Half) vmv::store(out + i * out_row + L, c1[i]);
  }
}

// How far ahead the matrix-vector product asks for its weights: 8 KB (4 and 16 KB
// measured slower on a LLaMA decode step).
constexpr int64_t kPrefetchFloats = 2048;

// One row of A (element k at a[k * step]) times one panel over all of K, into
// `out` (kPanel values), from `init` (a bias row) when given: a matrix-vector
// product, bound by streaming the packed weights. Four k in flight, each with its
// own accumulators: one pair of accumulators waits on the FMA latency every k and
// read B at a third of what the caches deliver (AlexNet's 4096 x 1000 layer, in L3:
// 48 GB/s against ONNX Runtime's 69).
inline __attribute__((always_inline)) void row_times_panel(const float* a, int64_t step, const float* panel, int64_t K,
                                                           float* out, const float* init) {
  v8 s0 = init ? load8(init) : v8{}, s1 = init ? load8(init + 8) : v8{};
  v8 s2{}, s3{}, s4{}, s5{}, s6{}, s7{};
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const float* p = panel + k * kPanel;
    // The weights stream from L3 (a decode step's): ask for them kPrefetchFloats ahead.
    __builtin_prefetch(p + kPrefetchFloats);
    __builtin_prefetch(p + kPrefetchFloats + 16);
    __builtin_prefetch(p + kPrefetchFloats + 32);
    __builtin_prefetch(p + kPrefetchFloats + 48);
    const float x0 = a[k * step], x1 = a[(k + 1) * step], x2 = a[(k + 2) * step], x3 = a[(k + 3) * step];
    const v8 a0 = {x0, x0, x0, x0, x0, x0, x0, x0}, a1 = {x1, x1, x1, x1, x1, x1, x1, x1};
    const v8 a2 = {x2, x2, x2, x2, x2, x2, x2, x2}, a3 = {x3, x3, x3, x3, x3, x3, x3, x3};
    s0 += a0 * load8(p);
    s1 += a0 * load8(p + 8);
    s2 += a1 * load8(p + 16);
    s3 += a1 * load8(p + 24);
    s4 += a2 * load8(p + 32);
    s5 += a2 * load8(p + 40);
    s6 += a3 * load8(p + 48);
    s7 += a3 * load8(p + 56);
  }
  for (; k < K; ++k) {
    const float x = a[k * step];
    const v8 ax = {x, x, x, x, x, x, x, x};
    s0 += ax * load8(panel + k * kPanel);
    s1 += ax * load8(panel + k * kPanel + 8);
  }
  store8(out, (s0 + s2) + (s4 + s6));
  store8(out + 8, (s1 + s3) + (s5 + s7));
}

// rows [0, mr) of the tile at `a` times `panel` over depth K, into `out` (a tile
// of TileRows<V> rows of 2 x lanes). `init`, `init_row`, KMajor: as for tile().
template <class V>
inline constexpr int64_t kTileRows = vmv::kLanes<V> == 16 ? 8 : kRows;
template <class V = v8, bool KMajor = false, bool Half = false>
inline __attribute__((always_inline)) void tile_rows(int64_t mr, const float* a, int64_t lda, const float* panel,
                                                     int64_t K, float* out, const float* init = nullptr,
                                                     int64_t init_row = 0, int64_t out_row = 2 * vmv::kLanes<V>,
                                                     const float* row_scale = nullptr) {
  switch (mr) {
    case 8: if constexpr (kTileRows<V> >= 8) tile<V, 8, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 7: if constexpr (kTileRows<V> >= 7) tile<V, 7, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 6: tile<V, 6, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 5: tile<V, 5, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 4: tile<V, 4, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 3: tile<V, 3, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    case 2: tile<V, 2, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
    default: tile<V, 1, KMajor, Half>(a, lda, panel, K, out, init, init_row, out_row, row_scale); break;
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
template <bool KMajor>
inline __attribute__((always_inline)) void tiles(const float* a, int64_t lda, int64_t M, const PackedB& b,
                                                 const float* bias, float* c, int64_t ldc, const GemmEpilogue* epi,
                                                 int64_t t0, int64_t t1) {
  const int64_t row_step = KMajor ? 1 : lda, k_step = KMajor ? lda : 1;
  const int64_t row_blocks = (M + kRows - 1) / kRows;
  constexpr int64_t kTileFloats = kRows * kPanel;
  if (M == 1) {
    // A matrix-vector product: tile t is panel t, each over all of K (one row of
    // A stays in L1 however deep K is, and B streams once, in memory order).
    alignas(64) float row[kPanel];
    for (int64_t p = t0; p < t1; ++p) {
      row_times_panel(a, k_step, b.data.data() + p * b.K * kPanel, b.K, row, bias ? bias + p * kPanel : nullptr);
      finish_tile(row, 0, 1, p * kPanel, std::min<int64_t>(kPanel, b.N - p * kPanel), c, ldc, epi);
    }
    return;
  }
  // Chunks of at most kChunk tiles: a group of at most kGroupRows row blocks (its
  // slice of A stays in L2 across the chunk's panels) times a group of panels, panel
  // by panel (a panel's slice of B stays in L1 across the group's row blocks). A
  // tall A (TASO's BERT, M = 1024) no longer streams from L3 once per panel.
  constexpr int64_t kChunk = 256, kGroupRows = 32;
  const int64_t groups = (row_blocks + kGroupRows - 1) / kGroupRows;
  const int64_t g_rows = (row_blocks + groups - 1) / groups, g_panels = std::max<int64_t>(1, kChunk / g_rows);
  const int64_t p_first = t0 / row_blocks, p_last = (t1 - 1) / row_blocks;
  const bool one_pass = b.kc >= b.K;
  thread_local std::vector<float> partial;
  thread_local std::vector<int64_t> chunk;
  if (!one_pass) partial.resize(static_cast<size_t>(kChunk * kTileFloats));
  alignas(64) float acc[kTileFloats];
  for (int64_t pa = p_first; pa <= p_last; pa += g_panels)
    for (int64_t rg = 0; rg < row_blocks; rg += g_rows) {
      chunk.clear();
      for (int64_t p = pa; p < std::min(pa + g_panels, p_last + 1); ++p)
        for (int64_t rb = rg; rb < std::min(rg + g_rows, row_blocks); ++rb)
          if (const int64_t t = p * row_blocks + rb; t >= t0 && t < t1) chunk.push_back(t);
      if (one_pass) {
        for (const int64_t t : chunk) {
          const int64_t p = t / row_blocks, r0 = (t % row_blocks) * kRows;
          const int64_t mr = std::min<int64_t>(kRows, M - r0), c0 = p * kPanel;
          tile_rows<v8, KMajor>(mr, a + r0 * row_step, lda, b.data.data() + p * b.K * kPanel, b.K, acc,
                            bias ? bias + p * kPanel : nullptr, 0);
          finish_tile(acc, r0, mr, c0, std::min<int64_t>(kPanel, b.N - c0), c, ldc, epi);
        }
        continue;
      }
      for (int64_t k0 = 0; k0 < b.K; k0 += b.kc) {
        const int64_t kk = std::min(b.kc, b.K - k0);
        for (size_t i = 0; i < chunk.size(); ++i) {
          const int64_t t = chunk[i], p = t / row_blocks, r0 = (t % row_blocks) * kRows;
          float* part = partial.data() + static_cast<int64_t>(i) * kTileFloats;
          const float* init = k0 > 0 ? part : bias ? bias + p * kPanel : nullptr;
          tile_rows<v8, KMajor>(std::min<int64_t>(kRows, M - r0), a + r0 * row_step + k0 * k_step, lda,
                            b.data.data() + (p * b.K + k0) * kPanel, kk, part, init, k0 > 0 ? kPanel : 0);
        }
      }
      for (size_t i = 0; i < chunk.size(); ++i) {
        const int64_t t = chunk[i], p = t / row_blocks, r0 = (t % row_blocks) * kRows, c0 = p * kPanel;
        finish_tile(partial.data() + static_cast<int64_t>(i) * kTileFloats, r0, std::min<int64_t>(kRows, M - r0), c0,
                    std::min<int64_t>(kPanel, b.N - c0), c, ldc, epi);
      }
    }
}

ISOMER_CLONES void run_tiles(const float* a, int64_t lda, bool a_kmajor, int64_t M, const PackedB& b,
                             const float* bias, float* c, int64_t ldc, const GemmEpilogue* epi, int64_t t0, int64_t t1) {
  if (a_kmajor) tiles<true>(a, lda, M, b, bias, c, ldc, epi, t0, t1);
  else tiles<false>(a, lda, M, b, bias, c, ldc, epi, t0, t1);
}

// One product of a batch: B[b] packed into `panel_buf` (panels of 2 x lanes of V
// columns), then every tile.
// A's rows are copied together first when they lie far apart (one head's rows of a
// [tokens, heads x 64] tensor are 4 KiB apart): six rows of one tile at such a
// stride fall into one L1 set with C's rows and thrash it (TASO's BERT: 64x64x64
// products at 34 GFLOP/s).
template <class V>
inline __attribute__((always_inline)) void run_batch(const float* a, const float* bsrc, float* c, const BatchedGemm& g,
                                                     int64_t bi, const GemmEpilogue* epi, float* panel_buf,
                                                     float* a_buf) {
  constexpr int64_t L = vmv::kLanes<V>, NR = 2 * L, MR = kTileRows<V>;
  int64_t a_row = g.a_row;
  if (a_buf) {
    for (int64_t i = 0; i < g.M; ++i) std::memcpy(a_buf + i * g.K, a + i * g.a_row, static_cast<size_t>(g.K) * sizeof(float));
    a = a_buf;
    a_row = g.K;
  }
  const int64_t panels = (g.N + NR - 1) / NR;
  if (g.b_k == 1 && g.b_n != 1) {
    // B transposed (K^T read from K): column n of B is contiguous along k. Read it
    // that way, one column at a time; reading a panel's columns per k touched as
    // many lines 4 KiB apart (one L1 set) for every k and thrashed.
    for (int64_t q = 0; q < panels; ++q) {
      float* panel = panel_buf + q * g.K * NR;
      const int64_t w = std::min<int64_t>(NR, g.N - q * NR);
      for (int64_t j = 0; j < NR; ++j) {
        const float* col = bsrc + (q * NR + j) * g.b_n;
        if (j < w)
          for (int64_t k = 0; k < g.K; ++k) panel[k * NR + j] = col[k];
        else
          for (int64_t k = 0; k < g.K; ++k) panel[k * NR + j] = 0;
      }
    }
  } else {
    // Row k of B whole before row k + 1 (V's rows of one head are 256 bytes, 4 KiB
    // apart): the lines of a row are fetched together.
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t q = 0; q < panels; ++q) {
        float* dst = panel_buf + (q * g.K + k) * NR;
        const float* src = bsrc + k * g.b_k + q * NR * g.b_n;
        const int64_t w = std::min<int64_t>(NR, g.N - q * NR);
        if (g.b_n == 1 && w == NR) {  // inline: a libc call per 64 bytes cost a fifth of the product
          vmv::store(dst, vmv::load<V>(src));
          vmv::store(dst + L, vmv::load<V>(src + L));
          continue;
        }
        if (g.b_n == 1) {
          std::memcpy(dst, src, static_cast<size_t>(w) * sizeof(float));
        } else {
          for (int64_t j = 0; j < w; ++j) dst[j] = src[j * g.b_n];
        }
        for (int64_t j = w; j < NR; ++j) dst[j] = 0;
      }
  }
  const int64_t row_blocks = (g.M + MR - 1) / MR;
  const int64_t* shift = epi ? g.op_off.data() + bi * static_cast<int64_t>(epi->operands.size()) : nullptr;
  const int64_t ldc = g.c_row ? g.c_row : g.N;
  // A product that fits in L2 (attention's scores, one head) takes its epilogue in
  // one pass over rows of N afterwards, while still in cache: per 6x16 tile, the
  // gathers of a mask and of broadcast scalars cost half as much as the product.
  const bool whole = epi && g.M * g.N <= kWholeProduct;
  alignas(64) float acc[MR * NR];
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t rb = 0; rb < row_blocks; ++rb) {
      const int64_t r0 = rb * MR, mr = std::min<int64_t>(MR, g.M - r0), c0 = q * NR;
      const int64_t nc = std::min<int64_t>(NR, g.N - c0);
      const float* panel = panel_buf + q * g.K * NR;
      const float* ar = a + r0 * a_row;
      tile_rows<V>(mr, ar, a_row, panel, g.K, acc);
      float* out = c + r0 * ldc + c0;
      if (epi && !whole) {
        run_pointwise_tile(epi->program, acc, NR, epi->operands, r0, mr, c0, nc, out, ldc, shift);
      } else if (nc == NR) {
        for (int64_t i = 0; i < mr; ++i) {
          vmv::store(out + i * ldc, vmv::load<V>(acc + i * NR));
          vmv::store(out + i * ldc + L, vmv::load<V>(acc + i * NR + L));
        }
      } else {
        for (int64_t i = 0; i < mr; ++i) std::memcpy(out + i * ldc, acc + i * NR, static_cast<size_t>(nc) * sizeof(float));
      }
    }
  if (whole) {
    std::vector<StridedRef> in(epi->operands.size() + 1), out(1);
    in[0] = StridedRef{c, DType::Float32, {ldc, 1}, 0};
    for (size_t i = 0; i < epi->operands.size(); ++i) {
      in[i + 1] = epi->operands[i];
      in[i + 1].offset += shift[i];
    }
    out[0] = in[0];
    const int64_t dims[] = {g.M, g.N};
    run_pointwise(epi->program, in, out, dims, 1);
  }
}

// One entry point per vector width (vector_isa.h): oneDNN's AVX-512 kernels run
// 16 lanes, and on a CPU with full-width AVX-512 units (Zen 5) the 8-lane tile got
// half their rate (an ONNX Attention of 16/4 heads over 128 tokens: 0.57 ms, its
// decomposed form on oneDNN 0.40).
ISOMER_TARGET_AVX512 ISOMER_FLATTEN void run_batch_avx512(const float* a, const float* bsrc, float* c, const BatchedGemm& g,
                                           int64_t bi, const GemmEpilogue* epi, float* panel_buf, float* a_buf) {
  run_batch<v16>(a, bsrc, c, g, bi, epi, panel_buf, a_buf);
}
ISOMER_CLONES void run_batch_narrow(const float* a, const float* bsrc, float* c, const BatchedGemm& g, int64_t bi,
                                    const GemmEpilogue* epi, float* panel_buf, float* a_buf) {
  run_batch<v8>(a, bsrc, c, g, bi, epi, panel_buf, a_buf);
}

// Rows [0, g.M) of A times the panels (see gemm_panels), V's tiles.
template <class V>
inline __attribute__((always_inline)) void panel_product(const float* a, const float* panels, float* c,
                                                         const PanelGemm& g) {
  constexpr int64_t L = vmv::kLanes<V>, NR = 2 * L, MR = kTileRows<V>;
  const int64_t n_panels = (g.N + NR - 1) / NR;
  alignas(64) float acc[MR * NR];
  for (int64_t r0 = 0; r0 < g.M; r0 += MR) {
    const int64_t mr = std::min<int64_t>(MR, g.M - r0);
    // Keys the tile's last row reaches: its columns (Q K^T) or its depth (P V).
    const int64_t reach = g.frontier < 0 ? -1 : r0 + mr + g.frontier;
    const int64_t K = g.frontier_on_k && reach >= 0 ? std::min(g.K, reach) : g.K;
    const int64_t last = !g.frontier_on_k && reach >= 0 ? std::min(n_panels, (reach + NR - 1) / NR) : n_panels;
    const float* ar = a + r0 * g.a_row;
    const float* rs = g.row_scale ? g.row_scale + r0 : nullptr;
    for (int64_t q = 0; q < last; ++q) {
      const int64_t c0 = q * NR, nc = std::min<int64_t>(NR, g.N - c0);
      const float* panel = panels + q * g.packed_k * NR;
      const float* init = g.bias ? g.bias + c0 : nullptr;
      float* out = c + r0 * g.c_row + c0;
      // A whole panel's columns straight from the registers into C.
      if (nc == NR) {
        tile_rows<V>(mr, ar, g.a_row, panel, K, out, init, 0, g.c_row, rs);
        continue;
      }
      if (nc <= L) tile_rows<V, false, true>(mr, ar, g.a_row, panel, K, acc, init, 0, NR, rs);
      else tile_rows<V>(mr, ar, g.a_row, panel, K, acc, init, 0, NR, rs);
      for (int64_t i = 0; i < mr; ++i) std::memcpy(out + i * g.c_row, acc + i * NR, static_cast<size_t>(nc) * sizeof(float));
    }
  }
}

#ifdef ISOMER_HAVE_ISA_TARGETS
// Rows 16 x 16 of `src` (row stride ld) transposed into `dst` (row stride ldd),
// times s: three rounds of shuffles, pairs of rows, of 2-lane and of 4-lane groups
// (a scalar transpose of K into K^T's panels cost a tenth of BERT's attention step).
ISOMER_TARGET_AVX512 inline void transpose16(const float* src, int64_t ld, float* dst, int64_t ldd, float s) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  const __m512 sv = _mm512_set1_ps(s);
  for (int i = 0; i < 8; ++i) {
    _mm512_storeu_ps(dst + i * ldd, _mm512_mul_ps(_mm512_shuffle_f32x4(t[i], t[i + 8], 0x88), sv));
    _mm512_storeu_ps(dst + (i + 8) * ldd, _mm512_mul_ps(_mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd), sv));
  }
}
#endif

template <class V>
inline __attribute__((always_inline)) void pack_panels_of(const float* b, int64_t b_k, int64_t b_n, int64_t K,
                                                          int64_t N, float scale, float* out) {
  constexpr int64_t L = vmv::kLanes<V>, NR = 2 * L;
  const int64_t panels = (N + NR - 1) / NR;
  if (b_k == 1 && b_n != 1) {
    // Column n of B is contiguous along k (K^T read from K's rows): one column at a
    // time, as run_batch packs it.
    for (int64_t q = 0; q < panels; ++q) {
      float* panel = out + q * K * NR;
      const int64_t w = std::min<int64_t>(NR, N - q * NR);
      int64_t j = 0;
#ifdef ISOMER_HAVE_ISA_TARGETS
      // Whole blocks of 16 columns and 16 k on AVX-512 (the 16-lane panels).
      if constexpr (L == 16) {
        for (; j + 16 <= w; j += 16) {
          int64_t k = 0;
          for (; k + 16 <= K; k += 16) transpose16(b + (q * NR + j) * b_n + k, b_n, panel + k * NR + j, NR, scale);
          for (; k < K; ++k)
            for (int64_t jj = j; jj < j + 16; ++jj) panel[k * NR + jj] = b[(q * NR + jj) * b_n + k] * scale;
        }
      }
#endif
      for (; j < NR; ++j) {
        const float* col = b + (q * NR + j) * b_n;
        if (j < w)
          for (int64_t k = 0; k < K; ++k) panel[k * NR + j] = col[k] * scale;
        else
          for (int64_t k = 0; k < K; ++k) panel[k * NR + j] = 0;
      }
    }
    return;
  }
  const V s = vmv::splat<V>(scale);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t q = 0; q < panels; ++q) {
      float* dst = out + (q * K + k) * NR;
      const float* src = b + k * b_k + q * NR * b_n;
      const int64_t w = std::min<int64_t>(NR, N - q * NR);
      if (b_n == 1 && (w == NR || w == L)) {  // (w == L: heads of 16 on 16-lane panels)
        vmv::store(dst, vmv::load<V>(src) * s);
        vmv::store(dst + L, w == NR ? vmv::load<V>(src + L) * s : V{});
        continue;
      }
      for (int64_t j = 0; j < w; ++j) dst[j] = src[j * b_n] * scale;
      for (int64_t j = w; j < NR; ++j) dst[j] = 0;
    }
}

ISOMER_TARGET_AVX512 ISOMER_FLATTEN void panel_product_avx512(const float* a, const float* panels, float* c,
                                                               const PanelGemm& g) {
  panel_product<v16>(a, panels, c, g);
}
ISOMER_CLONES void panel_product_narrow(const float* a, const float* panels, float* c, const PanelGemm& g) {
  panel_product<v8>(a, panels, c, g);
}
ISOMER_TARGET_AVX512 ISOMER_FLATTEN void pack_panels_avx512(const float* b, int64_t b_k, int64_t b_n, int64_t K,
                                                             int64_t N, float scale, float* out) {
  pack_panels_of<v16>(b, b_k, b_n, K, N, scale, out);
}
ISOMER_CLONES void pack_panels_narrow(const float* b, int64_t b_k, int64_t b_n, int64_t K, int64_t N, float scale,
                                      float* out) {
  pack_panels_of<v8>(b, b_k, b_n, K, N, scale, out);
}

// The 16-lane tiles wherever the CPU has them: a product of at most 16 columns
// (heads of 16, rows of 16 keys) runs on their one-vector tile, 16 lanes wide,
// where 8-lane panels ran at half the rate.
bool wide_panels(VectorIsa isa, int64_t) { return isa == VectorIsa::Avx512; }

}  // namespace

int64_t panel_columns(VectorIsa isa, int64_t N) { return wide_panels(isa, N) ? 2 * vmv::kLanes<v16> : kPanel; }

int64_t panels_size(VectorIsa isa, int64_t K, int64_t N) {
  const int64_t nr = panel_columns(isa, N);
  return (N + nr - 1) / nr * nr * K;
}

void pack_panels(VectorIsa isa, const float* b, int64_t b_k, int64_t b_n, int64_t K, int64_t N, float scale,
                 float* out) {
  (wide_panels(isa, N) ? pack_panels_avx512 : pack_panels_narrow)(b, b_k, b_n, K, N, scale, out);
}

void gemm_panels(VectorIsa isa, const float* a, const float* panels, float* c, const PanelGemm& g) {
  if (g.M == 0 || g.N == 0) return;
  if (g.packed_k < g.K || g.packed_n < g.N) throw Error("gemm_panels: the product reads past its panels");
  (wide_panels(isa, g.packed_n) ? panel_product_avx512 : panel_product_narrow)(a, panels, c, g);
}

void gemm_batched(const float* a, const float* b, float* c, const BatchedGemm& g, const GemmEpilogue* epilogue,
                  int threads) {
  gemm_batched_on(best_vector_isa(), a, b, c, g, epilogue, threads);
}

void gemm_batched_on(VectorIsa isa, const float* a, const float* b, float* c, const BatchedGemm& g,
                     const GemmEpilogue* epilogue, int threads) {
  if (g.batch == 0 || g.M == 0 || g.N == 0) return;
  int team = threads > 0 ? threads : omp_get_max_threads();
  const double flops = 2.0 * static_cast<double>(g.batch * g.M) * static_cast<double>(g.N * g.K);
  team = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(flops / 4e6), 1, std::min<int64_t>(team, g.batch)));
  // (Not require(): its message, a std::string made on every call, cost a tenth of
  // a small decoder's attention step, which calls this once per head.)
  if (isa == VectorIsa::Avx512 && !vector_isa_available(isa)) throw Error("gemm: AVX-512 tiles on a CPU without AVX-512");
  // 16 columns or fewer (a short sequence's scores, heads of 16): one 8-lane panel,
  // where a 32-column one is half padding (tiny decoders' attention ran 4% slower).
  const bool wide = isa == VectorIsa::Avx512 && g.N > kPanel;
  const int64_t nr = wide ? 2 * vmv::kLanes<v16> : kPanel;
  const size_t panel_floats = static_cast<size_t>(((g.N + nr - 1) / nr) * g.K * nr);
  // A far-apart A (rows at least 512 floats apart) is copied when it is small
  // enough to stay in L1/L2 beside the panels.
  const bool copy_a = g.a_row > g.K && g.a_row >= 512 && g.M * g.K <= 64 * 1024;
  parallel_teams(team, [&](int t, int nt) {
    std::vector<float> buf(panel_floats), a_buf(copy_a ? static_cast<size_t>(g.M * g.K) : 0);
    for (int64_t bi = g.batch * t / nt; bi < g.batch * (t + 1) / nt; ++bi)
      (wide ? run_batch_avx512 : run_batch_narrow)(
          a + g.a_off[static_cast<size_t>(bi)], b + g.b_off[static_cast<size_t>(bi)],
          c + (g.c_off.empty() ? bi * g.M * g.N : g.c_off[static_cast<size_t>(bi)]), g, bi, epilogue, buf.data(),
          copy_a ? a_buf.data() : nullptr);
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
                 const GemmEpilogue* epilogue, int threads, const float* bias, bool a_transposed) {
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
  // Threads that sleep between regions wake on busy cores only when the
  // scheduler gets to them: an LSTMCell loop's cached 1 MB matrix-vector product
  // per step (hidden 256) ran its 32 steps in 1.18 ms on a team of two and 0.79
  // on one thread at load 8 (team_for_work asks 4x the work then).
  const double work = std::max(flops / 4e6, bytes / (512.0 * 1024));
  team = static_cast<int>(std::min<int64_t>(team_for_work(team, work), tiles));
  parallel_teams(team, [&](int t, int nt) {
    run_tiles(a, lda, a_transposed, M, b, bias, c, ldc, epilogue, tiles * t / nt, tiles * (t + 1) / nt);
  });
}

bool prefer_packed_gemm(int64_t rows) {
  if (const char* v = std::getenv("ISOMER_GEMM")) {
    std::string s = v;
    if (s == "native") return true;
    if (s == "onednn") return false;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  if (!__builtin_cpu_supports("avx512f")) return true;
  // With AVX-512, oneDNN's own kernels are the faster products (LLaMA's, BERT's and
  // ViT's blocks ran 12-15% slower on these), except one row against constant
  // weights: an RNN step's matrix-vector products, which stream weights that no
  // longer fit the caches, ran 2.9x faster here (TASO's NasRNN at batch 1: 4.5 ->
  // 1.6 ms at 1 thread on a Zen 4, against ONNX Runtime's 1.9).
  return rows == 1;
}

}  // namespace isomer::kernels
