#pragma once
// What a generated kernel does, decided before any text is written (codegen.cpp
// writes it): where every tile lives (a view of an input, a packed copy, scratch,
// inlined into its one user, an accumulator's storage), the atom order of loop
// nests, the row atoms run one index at a time, which micro-kernel a contraction
// calls, which pointwise loops are 8-lane vector code and which operands they load
// once above the innermost loop, which row sums and maxima run in four vector
// registers, and how the online-softmax rule's exponentials and their sum are laid
// out. Plain data plus a few read-only queries; no C++ text.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

// How generated code reaches an op's tile.
struct Access {
  enum class Where { None, Scratch, View, Output, Inline, Const } where = Where::None;
  std::string base;               // pointer expression (Scratch, View, Output)
  std::vector<int> order;         // atoms, outer to inner (Scratch layout)
  std::map<int, int64_t> stride;  // per atom of the tile
  size_t offset = 0;              // Scratch: floats into the thread's scratch
  bool is_bool = false;           // a bool input (uint8)

  bool materialized() const { return where == Where::Scratch || where == Where::View || where == Where::Output; }
  // Unit stride along `atom` (and float): readable as 8 lanes there.
  bool unit_along(int atom) const;
};

// A pointwise loop nest storing op `root`'s value (`own`: its expression, for an op
// computed into its tile; else a read of it, for an output written from it).
struct PointwisePlan {
  std::vector<int> atoms;    // loop order, outer to inner
  Phase phase = Phase::Pre;
  int root = -1;
  bool own = false;
  std::vector<int> hoisted;  // operands invariant in the innermost loop, loaded above it
  std::vector<int> recips;   // hoisted divisors: one reciprocal, then multiplications
  bool vector = false;       // innermost loop as 8-lane vector code (a transcendental chain)
  // Vectors per iteration of the vector loop: four where 32 vector registers hold
  // their exp/erf chains (two left the FMA pipes idle: LayerNorm+GELU's erf loop
  // 5% slower on Zen 4) or where row sums want four accumulators; else two (four
  // spill with 16 registers: 8% slower there).
  int unroll = 2;
  // Row sums of the value over the innermost atom (a Reduce of it, a contraction of
  // it with itself: LayerNorm's variance), accumulated in this loop rather than in
  // a second pass over the tile: (sum op, power of the value summed).
  std::vector<std::pair<int, int>> sums;
};

// The matmul's operand roles: (A, B, m atom or -1, n atom, k atom), n innermost in C.
struct Roles {
  int a = -1, b = -1, m = -1, n = -1, k = -1;
};

struct MatmulPlan {
  enum class Kernel { Gemm, Dot, Generic } kernel = Kernel::Generic;
  Roles roles;
  std::vector<int> order;   // C's layout
  std::vector<int> outer;   // C's atoms looped around a micro-kernel call
  // Outer atoms B lacks that continue m's strides in A and C, innermost first: more
  // rows of one call while m's tile is whole (GQA's query heads sharing a K/V head).
  std::vector<int> merged;
  bool sum_vector = false;  // Generic: each dot product in four vector registers
  // The micro-kernel's store (mg_epi): scalar factors of operands moved to the
  // output (alpha, 1 none), and a per-row divisor op the output is divided by (-1
  // none), which also makes the contraction write the program output `output`
  // directly (its Div and output loop emit nothing).
  float alpha = 1.0f;
  int divisor = -1;
  int output = -1;
  // Dot whose B (Kᵀ in Q·Kᵀ) lacks some outer atoms (the query heads of a
  // GQA group, the query rows run one at a time): Bᵀ packed once into scratch at
  // `pack` floats, above the loops over those atoms, and every call runs mg_gemm on
  // the shared panel (-1: none; mg_dot packs per call where it pays). `shared`: the
  // outer atoms B has, looped around the pack.
  int64_t pack = -1;
  std::vector<int> shared;
};

// The stabilized Exp (online softmax): maxima, rescales, exponentials, and a sum of
// them computed in the same loop where one exists.
struct StabPlan {
  std::vector<int> shift;  // atoms the shift m varies along (ordered)
  std::vector<int> rest;   // the argument's other atoms (its layout order)
  bool vector_max = false; // the row maximum in four vector registers
  bool max_helper = false;  // vector_max on unit-stride stored rows: mg_row_max (masked tail)
  std::vector<int> layout; // the exponentials' layout
  bool hoist = false;      // the shift is invariant in the innermost loop
  int sum = -1;            // a Reduce accumulated in the exponentials' loop (-1 none)
  std::vector<int> inner;  // the exponentials' atoms not in `shift` (layout order)
  bool shift_sum_helper = false;  // unit-stride rows: mg_exp_shift_sum
};

struct OutputPlan {
  int op = -1, k = -1;  // block graph op, program output
  Access dst;           // strides into the output (base: the emitter's)
  PointwisePlan loop;
  int by_matmul = -1;  // written by that contraction's store (MatmulPlan::output): no loop
};

struct KernelPlan {
  const Program* p = nullptr;
  const BlockGraph* g = nullptr;
  std::vector<int> order;  // global atom order: outputs' dims first
  // Row atoms: independent output atoms no contraction reuses an operand along, run
  // one index at a time inside a tile, so every intermediate is one row (in L1)
  // while the grid keeps tiles coarse enough for the scheduler.
  std::vector<int> rows;
  // The loop runs one chunk: each accumulation is the accumulator's only store (a
  // contraction fused into one overwrites it, its scale moved into that store).
  bool one_chunk = false;
  std::vector<Access> acc;
  std::vector<std::vector<int>> users;
  std::vector<int> output_of;   // op -> program output it is written to (-1)
  std::vector<int> fused_into;  // Matmul/Reduce op -> the Accum it accumulates into (-1)
  size_t scratch = 0;           // floats per thread
  size_t m_off = 0, fac_off = 0, cm_off = 0;  // the stabilizer's shift, rescale, chunk max
  std::map<int, PointwisePlan> pointwise;     // computed elementwise ops
  std::map<int, MatmulPlan> matmuls;
  std::map<int, bool> reduce_vector;          // Reduce op -> sum in four vector registers
  std::map<int, int> summed_in;               // row sum -> the pointwise op whose loop computes it
  std::map<int, int> folded;                  // scaled operand (Mul by a constant) -> the op it reads
  StabPlan stab;
  std::vector<OutputPlan> outputs;

  bool is_row(int atom) const;
  int64_t max_extent(int atom, Phase ph) const;
  // Whether the tile's extent of `atom` varies (a partial grid tile or loop chunk).
  bool variable_extent(int atom, Phase ph) const;
  std::vector<int> ordered(const std::vector<int>& atoms) const;
  // Loop order over op i's tile: its scratch order, else by decreasing stride.
  std::vector<int> layout(int i) const;
  // Stride of op i's tile along `atom` (0 if absent or not an atom of it).
  int64_t stride(int i, int atom) const;
};

KernelPlan plan_kernel(const Program& p, const BlockGraph& g);

}  // namespace isomer::mugraph
