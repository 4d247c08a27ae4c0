#pragma once
// Attention for a few query rows against many keys (decode: one new token, or a
// few, against a KV cache), reading K and V rows where they lie. The panel step
// (runtime/lower_attention.cpp) packs K^T and V for its tiles, which costs as much
// as the products themselves when only one row reads them; here each score is a
// dot product along D of a query row and a key row, the softmax and P V run one
// block of keys at a time with an online rescale (the running max, sum and
// accumulator of each row), and a range of keys gives partial results that
// decode_attention_merge combines (flash-decoding: a head's keys split across
// threads).
#include <cstdint>

#include "kernels/vector_isa.h"

namespace isomer::kernels {

// `rows` query rows that read the same keys and values (the query heads of one
// key head, times a few queries): row r's query at q + r * q_row (D floats, the
// scale already applied), key j at k + j * k_row and value j at v + j * v_row
// (unit stride along D and Dv). Row r reads keys [lo[r], hi[r]); a `mask` row
// (nullptr: none; element j at mask[r] + j * mask_step, float added after the
// softcap or bool kept where true) and a `softcap` (> 0: cap tanh(s / cap)) apply
// to the scores first.
struct DecodeHead {
  int64_t rows = 0, D = 0, Dv = 0;
  const float* q = nullptr;
  int64_t q_row = 0;
  const float* k = nullptr;
  int64_t k_row = 0;
  const float* v = nullptr;
  int64_t v_row = 0;
  const int64_t* lo = nullptr;
  const int64_t* hi = nullptr;
  const char* const* mask = nullptr;
  int64_t mask_step = 1;
  bool bool_mask = false;
  float softcap = 0;
};

// The floats of scratch decode_attention_keys needs for `rows` rows.
int64_t decode_scratch_size(int64_t rows);

// Adds keys [j0, j1) to each row's running max m[r] (start: -inf), sum l[r]
// (start: 0) and unnormalized accumulator acc[r * Dv ...] (start: 0). A row whose
// keys so far are all masked keeps m = -inf, l = 0; a NaN or +inf score makes the
// row NaN, as softmax does.
void decode_attention_keys(VectorIsa isa, const DecodeHead& h, int64_t j0, int64_t j1, float* m, float* l, float* acc,
                           float* scratch);

// Row r of y (Dv floats) from `parts` partial results of it (max m[p], sum l[p],
// accumulator acc + p * acc_step): sum_p e^(m[p] - M) acc_p / sum_p e^(m[p] - M) l[p]
// with M the largest m[p]; `empty` where every key was masked (all m[p] -inf).
void decode_attention_merge(const float* m, const float* l, const float* acc, int64_t acc_step, int64_t parts,
                            int64_t Dv, float empty, float* y);

}  // namespace isomer::kernels
