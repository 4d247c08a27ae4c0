#pragma once
// Einsum's equation, parsed once for the operator entry (ops/einsum.cpp) and the
// runtime's lowering (runtime/lower_einsum.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace isomer::ops {

// Every dimension of every operand named by a label id: the equation's letters,
// and the dims an ellipsis stands for (one label per such dim, shared by all
// operands right-aligned, as numpy broadcasts them).
struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // per operand, the label of each of its dims
  std::vector<int> output;               // the label of each output dim
  int num_labels = 0;
  std::vector<bool> ellipsis;            // per label: an ellipsis dim (may broadcast from 1)
};

// Parses `equation` for operands of the given ranks (explicit "->" or implicit
// output); throws Error naming what is wrong.
EinsumSpec parse_einsum(const std::string& equation, const std::vector<int64_t>& ranks);

// The extent of every label for operands of `dims`: equal where a label repeats,
// ellipsis labels broadcast from 1. Throws Error on a mismatch.
std::vector<int64_t> einsum_extents(const EinsumSpec& spec, const std::vector<std::vector<int64_t>>& dims);

}  // namespace isomer::ops
