#pragma once
// From a strategy to the program each device runs (the per-rank graphs of a plan).
//
// Rank r's graph computes r's block of every operator: the same operators on the
// blocks' shapes (weights sliced here; shape operands of Reshape and Expand set to
// the block's shape; a depthwise Conv's group divided; a bias added only by the
// devices of the first partial sum). Between operators the redistribution steps of
// layout.h become local Slice nodes and collective nodes of the domain "isomer.mpi"
// (AllReduce, AllGather, ReduceScatter), which `isomer run-plan` executes with MPI
// and which carry what they need: the ranks of the group in block order, the tensor
// axis, and a sequence number (every rank meets the collectives in the same order).
// Graph inputs arrive whole on every rank and are sliced; outputs are gathered
// whole on every rank.
#include <string>
#include <vector>

#include "ir/graph.h"
#include "parallel/strategy.h"

namespace isomer::parallel {

inline constexpr const char* kMpiDomain = "isomer.mpi";

// Op i of `pg` as device `device` runs it under `c`, built through `b` on `inputs`
// (the device's blocks, in the op's input order). Returns its outputs.
std::vector<Value> build_local_op(GraphBuilder& b, const ParallelGraph& pg, int i, const OpConfig& c,
                                  std::vector<Value> inputs, int device);

// The block of `t` (a constant of global dims) that `device` holds under layout `l`.
Tensor slice_block(const Tensor& t, const Layout& l, const Mesh& mesh, int device);

// The graph rank `device` runs for strategy `s`.
Graph lower_rank(const ParallelGraph& pg, const Strategy& s, int device);

// A collective node of a rank graph: its kind ("AllReduce", ...), group (world ranks
// in block order), tensor axis (-1 for all-reduce) and sequence number.
struct CollectiveInfo {
  std::string kind;
  std::vector<int> ranks;
  int axis = -1;
  int seq = 0;
};
bool is_collective(const Node& n);
CollectiveInfo collective_info(const Node& n);

}  // namespace isomer::parallel
