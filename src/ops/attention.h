#pragma once
// ONNX's Attention (opset 23; 24 added nonpad_kv_seqlen, 25 the sliding window):
// the geometry of one node, shared by its shape rule and reference semantics
// (ops/attention.cpp) and the runtime's lowering (runtime/lower_attention.cpp).
#include <cstdint>
#include <string>

#include "ir/attributes.h"

namespace isomer {

// Input positions.
enum AttentionInput : size_t { kAttnQ, kAttnK, kAttnV, kAttnMask, kAttnPastKey, kAttnPastValue, kAttnNonpad };

// The attributes, checked: what every instance needs beyond its input shapes.
struct AttentionAttrs {
  bool causal = false;
  int64_t q_heads = 0, kv_heads = 0;  // 0: not given (4-D inputs carry the heads)
  int64_t qk_mode = 0;                // qk_matmul_output_mode, 0..3
  bool has_scale = false;
  double scale = 0;
  double softcap = 0;                           // 0: none
  int64_t left_window = -1, right_window = -1;  // -1: unbounded
};

// Reads and checks the attributes; throws Error naming the attribute.
AttentionAttrs attention_attrs(const Attributes& attrs);

// The extents of one node with static shapes: 4-D geometry whatever the form.
struct AttentionDims {
  bool rank3 = false;  // Q, K, V as [B, S, heads * D]
  int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int64_t q_len = 0, kv_len = 0, past = 0, total = 0;  // total = past + kv_len
  int64_t head = 0, v_head = 0;                        // D of Q and K, of V
  int64_t group() const { return q_heads / kv_heads; }
};

}  // namespace isomer
