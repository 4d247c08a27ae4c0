#pragma once
// The runtime's one attention step (lower_attention.cpp), shared by ONNX's
// Attention operator and by attention as exporters decompose it (MatMul, scale,
// mask, Softmax, MatMul; lower_attention_chain.cpp).
#include <cstdint>

#include "ops/attention.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

// A value read through element strides, seen as [B, heads, S, D].
struct HeadsView {
  int id = -1;
  int64_t s[4] = {0, 0, 0, 0};  // strides of batch, head, sequence, feature
};

// What the step computes: Y = softmax(scale Q K^T + mask) V per (batch, query
// head), query head h reading key/value head h / d.group().
struct AttentionStep {
  AttentionDims d;  // d.rank3: Q, K and V were read as [B, S, heads * D] (views give the strides)
  AttentionAttrs a;  // causal, softcap, windows (the scale is `scale`)
  float scale = 1;
  HeadsView q, keys, values;  // keys and values: d.total rows each
  int mask = -1, nonpad = -1;  // value ids, or -1
  // Y written as [B, Sq, Hq * Dv] (the 3-D form, or a Transpose to [B, Sq, Hq, Dv]
  // after the product), else [B, Hq, Sq, Dv].
  bool seq_major_y = false;
  // A row whose every key is masked: NaN (a decomposed Softmax's result for a row
  // of -inf), else 0 (ONNX Attention's).
  bool empty_row_nan = false;
  // A causal mask computed at run time that gives the keys past the frontier a
  // finite fill (Hugging Face's finfo.min) instead of -inf: those keys then weigh
  // exactly 0 only where the row has a key the fill does not hide and its scores
  // are bounded far below the fill (|scale| |q| max |k| < 1e37); any other row (a
  // padded query whose every key carries the fill) is computed over every key, as
  // the decomposed Softmax weighs them.
  bool finite_fill = false;
};

// Adds the step to `c`; `info` gives its kind, label, operators and nodes (the
// signature and flops are set here). Returns Y's value id (dense, in the order
// seq_major_y says).
int add_attention_step(Compiler& c, const AttentionStep& s, StepInfo info);

// Whether `s` runs on the decode kernels (a few query rows per key head against
// enough keys, K and V rows at unit stride: lower_attention_decode.cpp), where it
// costs less than the panel step and than the separate steps; add_attention_step
// then takes them.
// (The chain's lowering asks before it reads Q: `s.q` need not be set.)
bool decode_attention_applies(const AttentionStep& s);
// The most query rows per key head the decode kernels take.
constexpr int64_t kMaxDecodeRows = 4;
int add_decode_attention_step(Compiler& c, const AttentionStep& s, StepInfo info);

// Sets `mask`, a value broadcastable to [B, Hq, Sq, T] (float added, bool kept
// where true), as `s`'s mask (made readable by strides first).
void set_attention_mask(Compiler& c, AttentionStep& s, int mask);

}  // namespace isomer::runtime
