#pragma once
// The code generator's emitter (internal to codegen.cpp): it spells a KernelPlan
// (codegen_plan.h) as C++. codegen.cpp holds the function frame, tile coordinates
// and row loops, loop nests, pointwise loops, phases and outputs;
// codegen_reductions.cpp the contractions, row sums and the online-softmax rule's
// maxima, rescales and exponentials. Values are written by ExprWriter.
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/codegen_expr.h"
#include "mugraph/codegen_plan.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

class Emitter {
 public:
  Emitter(const Program& p, const BlockGraph& g, const std::vector<uint8_t>& skip)
      : p_(p), g_(g), skip_(skip), k_(plan_kernel(p, g)), x_(k_) {}

  std::string run();

 private:
  const Program& p_;
  const BlockGraph& g_;
  const std::vector<uint8_t>& skip_;
  const KernelPlan k_;
  ExprWriter x_;
  std::ostringstream o_;
  int ind_ = 0;

  void line(const std::string& s) { o_ << std::string(static_cast<size_t>(ind_), ' ') << s << "\n"; }

  // The tile's extent of `atom` (a name where it varies) and its origin in the tensor.
  std::string ext(int atom, Phase ph) const;
  std::string origin(int atom, Phase ph) const;
  std::string elem(int i) const { return k_.acc[i].base + "[" + x_.offset(k_.acc[i], g_.ops[i].axes) + "]"; }

  // Nested loops over `atoms` (in order); body at the innermost. simd on the inner loop.
  // `before_inner`: emitted just outside the innermost loop (loop-invariant loads).
  void loops(const std::vector<int>& atoms, Phase ph, bool simd, const std::function<void()>& inner,
             const std::function<void()>& before_inner = {});
  // The same with `pragma` (empty: none) on the innermost loop, e.g. a reduction clause.
  void pragma_loops(const std::vector<int>& atoms, Phase ph, const std::string& pragma,
                    const std::function<void()>& inner, const std::function<void()>& before_inner = {});

  // Zeroes op i's tile (an accumulator or a sum before it is added into).
  void zero(int i);
  // A one-chunk loop that no skip list can leave unrun: straight-line code, each
  // accumulator stored once and the online-softmax shift never moved.
  bool straight() const { return k_.one_chunk && skip_.empty(); }
  // Accumulator i needs no zeroing: the loop is straight and its only store
  // overwrites it (a micro-kernel call, or the accumulation written as a copy).
  bool stored_once(int i) const;

  // A pointwise loop nest whose body is `stmt()`; the vector form stores 8 lanes of
  // the plan's root at `dst`, the plan's number of vectors per iteration (their
  // long exp/erf dependency chains interleaved by GCC's scheduler), then single
  // vectors, the tail scalar; the plan's row sums of the value accumulated on the way.
  void pointwise(const PointwisePlan& w, const std::function<void()>& stmt, const Access* dst,
                 const std::vector<int>* dst_axes);

  // The phase's input tiles: a pointer into the input, or a packed copy in scratch.
  void view_bases(Phase ph);

  // --- codegen_reductions.cpp ---
  // A contraction: a micro-kernel call per looped tile (mg_gemm, mg_dot), rows
  // merged into one call where the plan says, else a dot product per element.
  void emit_matmul(int i);

  // dest += the sum of `value` over `red` (innermost loop vectorized, a register
  // accumulator). `vec`: each of `terms` (the ops whose product `value` is) reads
  // as 8 lanes along the one reduced atom: four vector accumulators.
  void sum_into(const std::vector<int>& red, Phase ph, const std::string& value, const std::string& dest,
                const std::vector<int>& terms, bool vec);

  // A Reduce: a row sum per element of its tile.
  void emit_reduce(int i);

  // The stabilizer's per-shift values (shift m, rescale, chunk maximum) in scratch.
  std::string stab(size_t off) const;

  // The tile's maximum along the shift's atoms: a register reduction per shift.
  void stab_max(int x, Phase ph);

  // The stabilized Exp: maxima, the rescale of accumulators where the loop moves
  // the shift, then the exponentials (and their sum where the plan takes it).
  void emit_stab_exp(int i);

  // --- codegen.cpp ---
  // Op i's code in its phase (nothing for inputs, constants, inlined ops and sums
  // another loop computes).
  void emit_op(int i);

  // Grid coordinates of the tile, then one loop per row atom.
  void tile_frame();

  // The for-loop over the loop atom's chunks: accumulators zeroed, the Loop ops,
  // the accumulations, then the Post ops.
  void for_loop();

  // Outputs: unscaled where the online-softmax rule left a power of exp(-m).
  void write_output(const OutputPlan& out);
  // The contractions that store a program output themselves (a row divisor in their
  // store), after every other op of the output's phase.
  void stores_into_outputs(Phase ph);
  // Program output k's base at the tile's origin, for op i's atoms.
  std::string output_base(int k, int i) const;

  // One tile's code: coordinates, rows, phases, outputs.
  void body();
};

}  // namespace isomer::mugraph
