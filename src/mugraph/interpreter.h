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

// A constant's value at or below -1e38 (Hugging Face's finfo.min fill, -3.4028e38)
// added to a score masks it as -inf does wherever its softmax row also has a key
// the fill leaves alone: the row's maximum then comes from that key, the filled
// key's exponential is 0 in float, and skipping its block changes nothing. A row
// whose every key carries the fill weighs them evenly (no -inf mask does that), so
// skip_table treats such a fill as -inf only in a constant whose every row along
// the loop atom has a key above it, and the field verifier reads it as -inf
// (field_constant); the float check keeps the fill's value.
bool fills_like_neg_inf(double v);
FieldVal field_constant(double v);

// A constant input's data as skip_table and the verifiers take it: float32 as it
// is, bool as 0 and 1 (a mask kept by Where(keep, S, -inf): GPT-2's causal mask);
// empty for other types.
std::vector<float> constant_values(const Tensor& t);

}  // namespace isomer::mugraph
