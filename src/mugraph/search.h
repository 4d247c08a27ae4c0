#pragma once
// The μGraph search (Mirage's generator on the CPU).
//
// For each choice of for-loop (none, or one atom the target sums over), block
// graphs are enumerated op by op from the region's inputs: elementwise operators
// the target uses, contractions (matmul) over one shared atom, reductions, and
// accumulators, breadth first (fewest ops first), each state once (states are sets
// of (abstract expression, phase), so the order ops were added in is irrelevant:
// canonical). With pruning, a new tile is kept only if its abstract expression is
// in the target's saturated e-graph (a lookup); without, any well-formed tile is.
// A state whose tiles include every output's expression, final, is a candidate.
//
// Grid and tile sizes are not searched op by op: a block graph found without a
// grid is valid for every grid over output atoms it never reduces, so grids, tile
// and chunk sizes are enumerated afterwards and ranked by the cost model.
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/block_graph.h"
#include "mugraph/egraph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

// The search is bounded by counts, so the same region gives the same block graphs
// on any machine under any load: max_states per loop choice, and the saturation's
// nodes and iterations. The time limits are only a safety net; a search stopped by
// one says "time limit", and its result may differ between runs.
struct SearchOptions {
  bool prune = true;
  // Per loop choice. On the 2-core build machine a loop choice of vit_s16's, gpt2's
  // and llama's regions expands 3,800 states a second at load average 2.5 and
  // 1,000 at load 4-5 (two builds beside it), so 5,000 is reached in 1.5-5 s,
  // well inside optimize's 30 s safety net. Every loop choice those regions ran
  // past 5,000 states (to 19,000-38,000 in 10 s) had found no candidate, and the
  // ones that find candidates exhaust in under 2,000 states: the cap loses nothing.
  size_t max_states = 5000;
  double max_seconds = 120;      // per loop choice: a safety net
  int extra_ops = 3;             // ops beyond the target's own count
  int max_dangling = 3;          // tiles computed but not yet used
  size_t max_candidates = 24;    // per loop choice
  SaturationLimits saturation;
};

struct LoopSearchStats {
  std::string loop;  // "none" or the atom
  size_t states = 0;     // states explored (expanded)
  size_t generated = 0;  // successor tiles tried
  size_t candidates = 0;
  double seconds = 0;
  std::string stop;      // "exhausted", "state limit", "time limit", "candidate limit"
};

struct SearchStats {
  SaturationReport saturation;
  std::vector<LoopSearchStats> loops;
  size_t states() const {
    size_t n = 0;
    for (const auto& l : loops) n += l.states;
    return n;
  }
  // "saturated; none exhausted, k state limit": what stopped the saturation and
  // each loop choice.
  std::string stop_text() const;
  bool timed_out() const;  // a time limit stopped some part: the result may differ between runs
};

// The target's abstract expressions, saturated once.
struct Target {
  EGraph egraph;
  std::vector<int> stmt_class;  // per program statement
  std::vector<int> output_class;
  std::vector<Op> ops;          // elementwise operators the target uses
  std::vector<double> constants;
  explicit Target(const Program& p, const SaturationLimits& limits, SaturationReport* report);
};

// The abstract expression class of op `i` of `g` in the target e-graph (-1: not a
// subexpression). `classes` holds the classes of ops before i.
int op_class(const Target& t, const Program& p, const BlockGraph& g, size_t i, const std::vector<int>& classes);

// The target itself as a block graph (no loop; every statement one op, a product
// that only feeds a sum one matmul): always a candidate, the search adds others.
BlockGraph direct_translation(const Program& p);

// Block graphs without grid (structure only: ops, loop atom; chunk 0), fewest ops first.
std::vector<BlockGraph> search_structures(const Program& p, const SearchOptions& opts, SearchStats* stats);

}  // namespace isomer::mugraph
