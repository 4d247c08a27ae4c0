#pragma once
// How an operator can be split (FlexFlow's SOAP dimensions). Each parallel dimension
// of an operator is an axis of its iteration space that can be cut into equal
// blocks without changing what any block computes:
//   S  sample     the batch dimension;
//   A  attribute  spatial positions, sequence positions, rows, channels of
//                 operators without weights;
//   P  parameter  a dimension that cuts a weight (output features, output channels);
//   R  reduction  a summed dimension (MatMul's k, Conv's input channels): each block
//                 computes a partial sum of the output.
// A dimension names, per output and per input, the tensor dimension it cuts (or
// none: that input is read whole, in copies, along it; a reduction cuts no output).
// The operator table says what operators compute; this says how their iteration
// spaces map onto their tensors, which the semantics of the operators fix.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/node.h"

namespace isomer::parallel {

struct ParallelDim {
  char kind = 'A';          // 'S', 'A', 'P' or 'R'
  int64_t extent = 1;       // every degree used must divide it
  std::vector<int> out;     // per output: the dim it cuts, -1 none (R: all -1)
  std::vector<int> in;      // per input: the dim it cuts, -1 read whole along it
};

struct OpSpec {
  std::vector<ParallelDim> dims;  // empty: the operator runs whole on every device
  // An input added once into a reduction's output (Gemm's C, Conv's bias): under a
  // reduction split only the devices of the first partial sum add it.
  int add_once = -1;
  // Conv's `group` attribute counts channels of a depthwise convolution: it is
  // divided by the degree of dimension `group_dim` (-1: not depthwise).
  int group_dim = -1;
};

// The parallel dimensions of an operator node (static shapes required; anything
// else, opaque nodes included, gets an empty spec).
OpSpec op_spec(const Node& n);

// How Reshape-like operators map dims: pairs (input dim, output dim, extent) where a
// split of the input dim by any divisor of `extent` is the same split of the output dim.
struct DimPair {
  int in, out;
  int64_t extent;
};
std::vector<DimPair> reshape_dim_pairs(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

}  // namespace isomer::parallel
