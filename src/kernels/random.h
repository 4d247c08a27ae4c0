#pragma once
// Random draws for the operators that make them (Dropout in training mode). Each
// element's draw is a hash of a key and its index (a counter-based generator), so a
// run's draws do not depend on how the elements are split between threads, and a
// key fixes them all: the runtime gives every run of a step a new key, from the
// node's seed attribute where it has one.
#include <cstdint>

namespace isomer::kernels {

// A 64-bit key for the `run`-th run of a generator seeded with `seed`.
uint64_t random_key(uint64_t seed, uint64_t run);

// Dropout: each of the n elements is kept with probability 1 - ratio (0 <= ratio
// < 1), y = x / (1 - ratio) where kept and 0 elsewhere; mask (may be nullptr) is 1
// where kept, 0 elsewhere. The draw is 24 bits a element, so a ratio is honoured
// to 2^-24. y may be x.
void dropout(const float* x, float* y, bool* mask, int64_t n, double ratio, uint64_t key, int threads = 0);

}  // namespace isomer::kernels
