#pragma once
// The μGraph interpreter: runs a block graph exactly as the generated code does
// (grid tiles, loop chunks, accumulators, the online-softmax rule, skipped
// iterations), over doubles (the float check, and the fallback when no compiler is
// available) or over the verification field. It also evaluates a region program
// directly (the target) over either.
#include <cstdint>
#include <vector>

#include "ir/tensor.h"
#include "mugraph/block_graph.h"
#include "mugraph/field.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

// Row-major buffers, one per program input / output (IoTensor dims).
template <class T>
using Buffers = std::vector<std::vector<T>>;

// Evaluates the target program on `inputs`.
template <class T>
Buffers<T> evaluate_program(const Program& p, const Buffers<T>& inputs);

// Runs the block graph. `tiles`: the grid tiles to run (row-major tile index over
// the grid dims); empty runs all of them (in parallel for float). Outputs not
// written by the chosen tiles keep their contents. `skip`: a skip_table() (or empty).
template <class T>
void interpret(const Program& p, const BlockGraph& g, const Buffers<T>& inputs, Buffers<T>& outputs,
               const std::vector<int64_t>& tiles = {}, const std::vector<uint8_t>& skip = {});

// Which loop iterations of which tiles do nothing (skip table), from the data of
// constant inputs: an iteration whose every accumulator update is provably zero
// and that cannot move the stabilizer's maximum (say, a block of an additive
// causal mask that is all -inf) is skipped. Entry [tile * chunks + chunk] is 1 to
// skip. `constant_inputs[k]` is the data of program input k if it is a constant
// (row-major, float), else empty. Empty result: nothing to skip.
std::vector<uint8_t> skip_table(const Program& p, const BlockGraph& g,
                                const std::vector<std::vector<float>>& constant_inputs);

// A constant input's data as skip_table and the verifiers take it: float32 as it
// is, bool as 0 and 1 (a mask kept by Where(keep, S, -inf): GPT-2's causal mask);
// empty for other types.
std::vector<float> constant_values(const Tensor& t);

}  // namespace isomer::mugraph
