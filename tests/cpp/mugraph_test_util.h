#pragma once
// Region bodies the μGraph tests share (graph text in the isomer format).
#include <string>

#include "ir/text.h"

namespace isomer::mugraph::testing {

// Causal GQA attention: q [1,H,S,D], k/v [1,KV,S,D] expanded to H heads, the scale
// split over q and k^T, an additive mask, Softmax, MatMul (as the corpus writes it).
inline std::string gqa_attention_body(int heads, int kv, int seq, int d, int batch = 1) {
  int rep = heads / kv;
  auto dims = [](std::initializer_list<int> v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  std::string t;
  t += "graph attn(%q: f32[" + dims({batch, heads, seq, d}) + "], %k: f32[" + dims({batch, kv, seq, d}) + "], %v: f32[" +
       dims({batch, kv, seq, d}) + "], %mask: f32[" + dims({1, 1, seq, seq}) + "]) {\n";
  t += "  %c = const f32[] {0.35355339059327379}\n";
  t += "  %ax2 = const i64[1] {2}\n";
  t += "  %ek = const i64[5] {" + dims({batch, kv, rep, seq, d}) + "}\n";
  t += "  %rk = const i64[4] {" + dims({batch, heads, seq, d}) + "}\n";
  t += "  %k1 = Unsqueeze(%k, %ax2)\n  %k2 = Expand(%k1, %ek)\n  %k3 = Reshape(%k2, %rk)\n";
  t += "  %v1 = Unsqueeze(%v, %ax2)\n  %v2 = Expand(%v1, %ek)\n  %v3 = Reshape(%v2, %rk)\n";
  t += "  %qs = Mul(%q, %c)\n  %kt = Transpose(%k3) {perm=[0, 1, 3, 2]}\n  %ks = Mul(%kt, %c)\n";
  t += "  %s = MatMul(%qs, %ks)\n  %sm = Add(%s, %mask)\n  %p = Softmax(%sm) {axis=-1}\n";
  t += "  %o = MatMul(%p, %v3)\n  return %o\n}\n";
  return t;
}

// LLaMA's RMSNorm as the exporter writes it, then a projection.
inline std::string rmsnorm_matmul_body(int m, int k, int n) {
  std::string t = "graph rms(%x: f32[1," + std::to_string(m) + "," + std::to_string(k) + "], %g: f32[" +
                  std::to_string(k) + "], %w: f32[" + std::to_string(k) + "," + std::to_string(n) + "]) {\n";
  t += "  %two = const f32[] {2}\n  %eps = const f32[] {9.9999999747524271e-07}\n";
  t += "  %p = Pow(%x, %two)\n  %mean = ReduceMean(%p) {axes=[-1], keepdims=1}\n  %a = Add(%mean, %eps)\n";
  t += "  %s = Sqrt(%a)\n  %r = Reciprocal(%s)\n  %xn = Mul(%x, %r)\n  %y = Mul(%g, %xn)\n";
  t += "  %z = MatMul(%y, %w)\n  return %z\n}\n";
  return t;
}

// SwiGLU: silu(x Wg) * (x Wu).
inline std::string swiglu_body(int m, int k, int n) {
  std::string t = "graph swiglu(%x: f32[1," + std::to_string(m) + "," + std::to_string(k) + "], %wg: f32[" +
                  std::to_string(k) + "," + std::to_string(n) + "], %wu: f32[" + std::to_string(k) + "," +
                  std::to_string(n) + "]) {\n";
  t += "  %g = MatMul(%x, %wg)\n  %sg = Sigmoid(%g)\n  %silu = Mul(%g, %sg)\n  %u = MatMul(%x, %wu)\n";
  t += "  %h = Mul(%silu, %u)\n  return %h\n}\n";
  return t;
}

// LayerNormalization then the erf GELU, decomposed.
inline std::string layernorm_gelu_body(int m, int n) {
  std::string t = "graph lngelu(%x: f32[1," + std::to_string(m) + "," + std::to_string(n) + "], %s: f32[" +
                  std::to_string(n) + "], %b: f32[" + std::to_string(n) + "]) {\n";
  t += "  %rt2 = const f32[] {1.4142135623730951}\n  %one = const f32[] {1}\n  %half = const f32[] {0.5}\n";
  t += "  %y = LayerNormalization(%x, %s, %b) {axis=-1, epsilon=1e-05}\n";
  t += "  %d = Div(%y, %rt2)\n  %e = Erf(%d)\n  %a = Add(%e, %one)\n  %m = Mul(%y, %a)\n  %g = Mul(%m, %half)\n";
  t += "  return %g\n}\n";
  return t;
}

inline std::string softmax_body(int rows, int n) {
  return "graph sm(%x: f32[" + std::to_string(rows) + "," + std::to_string(n) +
         "]) {\n  %y = Softmax(%x) {axis=-1}\n  return %y\n}\n";
}

}  // namespace isomer::mugraph::testing
