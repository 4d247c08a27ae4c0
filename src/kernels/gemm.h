#pragma once
// Matrix multiplication with constant weights packed once: C = A B for a
// row-major A [M, K] and B [K, N] known when the graph is compiled (a Linear
// layer's weights). B is packed into panels of kPanel columns, k-major, so the
// micro-kernel streams it with unit stride; A is read in place. An epilogue (a
// pointwise program: bias, activation, residual, gating) runs on each tile of C
// while it is in cache.
//
// oneDNN 2.6 has no jit matmul with pre-packed weights for AVX2 machines: its
// sgemm packs B again on every call, which costs a fifth of a transformer
// layer's projections. On AVX-512 machines its brgemm kernels pack once, and the
// runtime keeps using them there.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/pointwise.h"
#include "kernels/vector_isa.h"

namespace isomer::kernels {

constexpr int64_t kPanel = 16;  // columns of C per micro-kernel tile
constexpr int64_t kRows = 6;    // rows of C per micro-kernel tile

struct PackedB {
  int64_t K = 0, N = 0, kc = 0;  // kc: the depth of one pass over K (cache blocking)
  std::vector<float> data;       // [panel][k][kPanel], zero-padded past N
};

// Packs B [K, N] (element (k, n) at b[k * ldb + n], or at b[n * ldb + k] when
// `transposed`, as a Linear layer's [N, K] weight stores it).
PackedB pack_b(const float* b, int64_t K, int64_t N, int64_t ldb, bool transposed = false);
// A bias per column (N values, a Linear layer's) zero-padded to whole panels, as
// gemm_packed takes it.
std::vector<float> panel_bias(const float* bias, int64_t N);

// What runs on each finished tile: `program` with register 0 the product (A B)
// and registers 1.. the operands, read through [row, column] strides in C's index
// space (0 broadcasts: a bias has row stride 0); its first result replaces C.
struct GemmEpilogue {
  PwProgram program;
  std::vector<StridedRef> operands;  // program.num_inputs - 1 of them, strides {row, col}
};

// C [M, N] (row stride ldc) = A [M, K] (row stride lda) B (+ bias), then the
// epilogue. A `bias` (from panel_bias) starts the micro-kernel's accumulators, so
// adding it costs nothing. With `a_transposed`, A's element (m, k) is at
// a[k * lda + m] (Gemm's transA; A stored [K, M]).
void gemm_packed(const float* a, int64_t lda, int64_t M, const PackedB& b, float* c, int64_t ldc,
                 const GemmEpilogue* epilogue = nullptr, int threads = 0, const float* bias = nullptr,
                 bool a_transposed = false);

// A batch of products with operands known only at run time (attention's Q K^T
// and P V): C[b] = A[b] B[b] for b in [0, batch), each B[b] packed into a
// thread's buffer first. Element (b, m, k) of A is at a + b_off_a[b] + m * a_row + k
// (unit stride along K), element (b, k, n) of B at b + b_off_b[b] + k * b_k + n * b_n,
// element (b, m, n) of C at c + c_off[b] + m * c_row + n (dense [M, N] per batch
// when c_off is empty: c_off[b] = b M N, c_row = N). The epilogue's operands have
// strides {row, column} within a batch and add op_off[b * n_ops + i] for batch b.
struct BatchedGemm {
  int64_t batch = 1, M = 0, K = 0, N = 0;
  int64_t a_row = 0, b_k = 0, b_n = 0, c_row = 0;
  std::vector<int64_t> a_off, b_off, c_off, op_off;  // per batch (op_off: per batch and operand)
};
// Its tiles are 16 lanes wide where the CPU has AVX-512 (best_vector_isa) and the
// product has more than kPanel columns, else 8.
void gemm_batched(const float* a, const float* b, float* c, const BatchedGemm& shape,
                  const GemmEpilogue* epilogue = nullptr, int threads = 0);
// The same on `isa`'s tiles (AVX-512: 16 lanes past kPanel columns; otherwise 8), for tests of each;
// `isa` must be available (vector_isa_available).
void gemm_batched_on(VectorIsa isa, const float* a, const float* b, float* c, const BatchedGemm& shape,
                     const GemmEpilogue* epilogue = nullptr, int threads = 0);

// B [K, N] packed once for many products at run time (attention's K^T and V,
// packed per key head and read by every query head of its group and every band
// of queries): panels of panel_columns(isa, N) columns, k-major, zero-padded past
// N, each element times `scale`. Element (k, n) of B is at b[k * b_k + n * b_n].
int64_t panel_columns(VectorIsa isa, int64_t N);
int64_t panels_size(VectorIsa isa, int64_t K, int64_t N);  // floats
void pack_panels(VectorIsa isa, const float* b, int64_t b_k, int64_t b_n, int64_t K, int64_t N, float scale,
                 float* out);

// The most rows of A one tile takes, on any instruction set.
constexpr int64_t kMaxTileRows = 8;

// C [M, N] (row stride c_row) = A [M, K] (row stride a_row, unit stride along K)
// times B packed by pack_panels (K rows, N columns), on one thread. A causal
// `frontier` f >= 0 says row m needs only keys [0, m + f + 1): along N (Q K^T: tiles
// whose columns all lie past their rows' frontier are not computed, and the
// columns a tile computes past a row's frontier hold scores nobody reads) or along
// K (P V: a tile's rows are multiplied only up to the frontier of its last row, so
// row m of A must be zero from its frontier to kMaxTileRows past it). Row m of C
// is multiplied by row_scale[m] when given. The panels may hold more keys than the
// product reads: packed_k and packed_n are the K and N pack_panels was given. A
// `bias` row (panels_size(isa, 1, packed_n) floats: N values, zero-padded) is added
// to every row of the product before row_scale: the tiles' accumulators start from
// it (a key mask that every query of a head shares, such as a padding mask, costs
// no pass of its own).
struct PanelGemm {
  int64_t M = 0, K = 0, N = 0, a_row = 0, c_row = 0;
  int64_t packed_k = 0, packed_n = 0;
  int64_t frontier = -1;
  bool frontier_on_k = false;
  const float* row_scale = nullptr;
  const float* bias = nullptr;
};
void gemm_panels(VectorIsa isa, const float* a, const float* panels, float* c, const PanelGemm& g);

// True if this CPU is one where gemm_packed is the better choice for a product of
// `rows` rows of A (-1: not known): AVX2 with FMA and no AVX-512, or AVX-512 and a
// single row. $ISOMER_GEMM=native or =onednn overrides.
bool prefer_packed_gemm(int64_t rows = -1);

}  // namespace isomer::kernels
