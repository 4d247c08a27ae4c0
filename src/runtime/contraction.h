// The contraction lower_matmul and lower_gemm build (dst = A x B, a bias and
// fused nodes after it) and the two forms on isomer's own GEMMs
// (lower_gemm_native.cpp) that it tries before oneDNN's matmul (lower_matmul.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/compiler.h"

namespace isomer::runtime {

// MatMul and Gemm share this: dst = A x B (+ bias) with post-ops. A and B are
// value ids whose mds are unblocked views; B may be a constant (weights).
struct Contraction {
  const Node* node = nullptr;
  int a = -1;                      // value id of A (runtime or constant)
  md_t a_md;                       // A's view, rank-equalized
  std::optional<Tensor> b_const;   // B when known (plain [.., K, N])
  int b = -1;                      // B's value id when not known
  md_t b_md;                       // B's view when runtime
  std::optional<Tensor> bias;      // one per output column, or [M, N]
  std::vector<int64_t> out;        // dst dims
  // The product's own dims where they differ from out's in grouping only (the same
  // dense element order: a batch dim split in two, a broadcast batch dim taken as
  // rows); A's and B's views have its rank. Empty: out.
  std::vector<int64_t> prim_out;
  Value from;                      // the isomer value dst stands for before fusion
  float scale = 1;                 // a factor on the product (scalar Muls on the operands, taken in)
  std::vector<const Node*> scaled; // those Muls: computed by this step
  double flops = 0;
  std::string kind;
};

// The contraction on isomer's packed-weights GEMM (constant B) or its batched GEMM
// (two run-time operands); false, having done nothing, where the form does not apply.
bool emit_packed_gemm(Compiler& c, const Contraction& k);
bool emit_batched_gemm(Compiler& c, Contraction& k);

}  // namespace isomer::runtime
