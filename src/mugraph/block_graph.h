#pragma once
// A μGraph on the CPU.
//
// Kernel graph: after fusion, the model's graph is the kernel graph: its nodes are
// the runtime's primitives (oneDNN, native kernels) and fused MuGraph nodes, each
// one generated kernel; its edges are tensors in memory.
//
// Block graph (one generated kernel): a grid of independent output tiles run as
// parallel tasks over the cores; inside a tile, an optional for-loop over one atom
// the target sums over, in chunks, with accumulators. Mirage's maps are implied by
// atoms: an input tile takes the grid tile's slice of every grid atom it has
// (imap: split) and is shared by the tiles along grid atoms it lacks (replicated);
// a tile with the loop atom takes the current chunk (fmap); Accum sums a loop tile
// over the iterations (the accumulator); an output takes the grid tile's slice of
// its atoms (omap). Every other atom is whole inside a tile.
//
// Ops run in three phases: Pre (before the loop, loop-invariant), Loop (every
// iteration) and Post (after the loop). Tiles are dense arrays over their atoms.
//
// Split loop (flash-decoding; the GPU's tilings only): the chunks are cut into
// `splits` consecutive runs, each run by its own task from the same Pre tiles with
// its own accumulators and running maximum; a combine step then takes the largest
// of the maxima, rescales each run's accumulators by exp(m_run - m)^scale (the
// online-softmax rescale the loop applies between chunks) and adds them, and Post
// runs on the sums. The interpreter runs it the same way, so the field verifier
// checks the combine like the rest.
//
// Thread graph: built by rule, not searched. Elementwise chains become fused
// loops; contractions become register micro-kernels (codegen.cpp). One rule
// changes values: an Exp whose result is later summed over atoms of its argument
// (softmax, attention) is evaluated as exp(x - m) with m the running maximum of x
// over those atoms (online softmax); every tile records the power of exp(-m) it
// carries (`scale`), accumulators are rescaled by exp(m_old - m_new) when m grows,
// and outputs are unscaled. The field verifier checks the rule's result like any
// other (with m an arbitrary value: the result must not depend on it).
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/program.h"

namespace isomer::mugraph {

enum class Phase : uint8_t { Pre, Loop, Post };
enum class BKind : uint8_t { Input, Const, Elementwise, Matmul, Reduce, Accum };

struct BOp {
  BKind kind = BKind::Input;
  Op op = Op::Add;          // Elementwise
  std::vector<int> args;    // op ids
  std::vector<int> axes;    // the tile's atoms, sorted
  std::vector<int> reduce;  // Matmul: contracted atoms; Reduce: summed atoms
  Phase phase = Phase::Pre;
  int stmt = -1;            // Input: the program's Input statement
  double value = 0;         // Const
  int scale = 0;            // the power of the stabilizer's exp(-m) the tile carries
  // A loop tile that sums the loop atom over the current chunk only (a partial sum):
  // it means something only through its accumulator, so ops on it must be linear in
  // it (see infer_op); set by infer_op.
  bool partial = false;
};

struct GridDim {
  int atom = -1;
  int64_t tile = 1;
};

struct BlockGraph {
  std::vector<GridDim> grid;
  int loop_atom = -1;
  int64_t chunk = 0;
  int64_t splits = 1;  // runs of chunks computed apart and combined (see above)
  std::vector<BOp> ops;
  std::vector<std::pair<int, int>> outputs;  // (op, program output)
  int stab_exp = -1;                         // the stabilized Exp op, -1 none
  std::vector<int> stab_axes;                // atoms the shift m varies along

  const GridDim* grid_dim(int atom) const;
  // Largest extent of `atom` in a tile of this phase.
  int64_t tile_extent(const Program& p, int atom, Phase phase) const;
  int64_t num_tiles(const Program& p) const;
  int64_t num_chunks(const Program& p) const;
  // Chunks a split runs (the last may run fewer).
  int64_t chunks_per_split(const Program& p) const;
  std::string to_text(const Program& p) const;
  // A short description: grid, loop, ops (for reports).
  std::string summary(const Program& p) const;
};

// The atoms and phase of an op from its arguments (what the search and the check use).
// Returns false (with `why`) if the op is malformed. That includes a partial sum
// (BOp::partial) used other than linearly: accumulating f(partial) over the chunks
// is f(full sum) only for f linear in it, so a partial tile may be negated, added to
// or subtracted from another partial tile, multiplied or divided by (or contracted
// with) a tile computed before the loop, reduced, and accumulated; nothing else (a
// sigmoid or square root of a chunk's partial matmul is not a subexpression of the
// target even where its abstract expression looks like one).
bool infer_op(const Program& p, const BlockGraph& g, BOp& op, std::string* why);
// Checks a whole block graph against its program: well-formed ops, phases, grid
// atoms never reduced and present in every output, outputs complete. Throws Error.
void check_block_graph(const Program& p, const BlockGraph& g);
BlockGraph parse_block_graph(const Program& p, const std::string& text);

// Row atoms: output atoms no op reduces and no contraction reuses an operand along
// (every operand of a matmul over the atom has it), other than the loop atom and
// the unit-stride atoms of the region's tensors. Generated code runs a tile one
// index of these at a time (each intermediate is then one row, in L1); the cost
// model counts them the same way.
std::vector<int> row_atoms(const Program& p, const BlockGraph& g);

// The online-softmax rule (see above): sets stab_exp, stab_axes and every op's
// scale. Leaves the graph without stabilization where the rule does not apply.
void stabilize(const Program& p, BlockGraph& g);

}  // namespace isomer::mugraph
