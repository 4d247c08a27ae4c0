#pragma once
// Post-op fusion: what follows a primitive (activations, scalar affine maps, the
// erf form of GELU, one residual Add) is applied inside it as oneDNN post-ops
// instead of as separate passes over memory.
#include <optional>
#include <string>
#include <vector>

#include "runtime/compiler.h"

namespace isomer::runtime {

struct PostOp {
  std::optional<EltwiseSpec> eltwise;
  Value addend;  // present: dst += addend (same dims), accumulated in place (sum post-op)
  // dst = dst (binary) other, `other` broadcast to dst's dims: a graph value, or
  // a constant the lowering made (a Gemm's full C).
  std::optional<dnnl::algorithm> binary;
  Value other;
  std::optional<Tensor> other_const;
  std::vector<const Node*> nodes;  // the nodes this post-op stands for
  Value out;                       // the isomer value after it
};

struct Fusion {
  std::vector<PostOp> ops;
  std::vector<const Node*> nodes;  // the nodes the post-ops stand for (and any folded before them)
  Value first;                     // the isomer value before the post-ops
  Value last;                      // the isomer value the fused primitive's dst holds
  bool has_add() const {
    for (const PostOp& p : ops)
      if (p.addend.present()) return true;
    return false;
  }
  bool has_binary() const {
    for (const PostOp& p : ops)
      if (p.binary) return true;
    return false;
  }
  // Drops the binary post-ops and everything after the first of them (for a
  // primitive that would otherwise run on oneDNN's reference implementation);
  // false if there were none.
  bool drop_binary();
  // Drops the post-ops from the first eltwise one whose algorithm an earlier one
  // has with other parameters: oneDNN 2.6's jit kernels (matmul's brgemm, the
  // convolutions) apply the first one's alpha and beta to both (Gemma-2's logit
  // soft-cap, x / 30, tanh, x 30, came out 900 times too small). False if none.
  bool drop_repeated_eltwise();
  // Drops the first binary post-op whose operand is a run-time value of `numel`
  // elements (the product's full shape), the activations just before it that
  // stand for nodes, and everything after; false if there is none.
  bool drop_full_binary(int64_t numel, Compiler& c);

 private:
  // Drops ops[k] and every post-op after it, with the nodes they stand for.
  void drop_from(size_t k);
};

// The elementwise function node `n` applies to `x` (its only non-constant
// input, of rank x_rank), if oneDNN has it as an eltwise algorithm; n's output
// then has x's dims.
std::optional<EltwiseSpec> eltwise_of(Compiler& c, const Node& n, const Value& x, size_t x_rank);

// An activation that exporters write as several nodes reading x more than once,
// which oneDNN has as one eltwise algorithm, rooted at x: the algorithm, the nodes
// and the value it computes.
//  - the erf GELU torch exports, x * 0.5 * (1 + erf(x / sqrt 2)), in any of its
//    association orders;
//  - swish, x * sigmoid(a * x): SiLU (a = 1, torch's nn.SiLU before opset 22:
//    EfficientNet, LLaMA's MLP gate) and QuickGELU (a = 1.702, CLIP).
struct ActivationMatch {
  EltwiseSpec spec;
  std::vector<const Node*> nodes;
  Value out;
};
std::optional<ActivationMatch> match_activation(Compiler& c, const Value& x);

// Follows `v` through sole consumers that can be post-ops of a primitive whose
// output has dims `dims`: activations, one residual Add (allow_add), and binary
// operations with an operand that broadcasts to dims (allow_add as well; an
// operand of the full dims only with full_binary: a convolution would give up its
// blocked layout for it). Does not lower anything but those operands.
Fusion plan_fusion(Compiler& c, const Value& v, const std::vector<int64_t>& dims, bool allow_add,
                   bool full_binary = true);
// True when `pd` runs on oneDNN's reference implementation (far slower than its jit kernels).
inline bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}
// Attributes with every post-op, made without lowering or adding anything (to
// query a primitive's preferred layout and implementation).
// prim_rank: the primitive's own rank when it is lower (see fusion_attr);
// with_sum false leaves a residual add out (its layout must follow dst's).
dnnl::primitive_attr probe_attr(Compiler& c, const Fusion& f, size_t rank, size_t prim_rank = 0, bool with_sum = true);
// Full attributes; `sig` gets a description of the post-ops. A residual add is a
// sum post-op: the primitive accumulates into a buffer that already holds the
// addend (in `dst` layout), whose value id is returned in `accumulate` (-1: none);
// the primitive's destination must then be a view of it. The addend's own
// buffer is used when nothing reads it later, else a copy.
// Binary post-ops read their operands as extra arguments, appended to `args`.
// `prim_dims`: the primitive's own view of dst when it has fewer dims (a matmul's
// 2-D form): operands are seen with their leading dims merged to match.
dnnl::primitive_attr fusion_attr(Compiler& c, const Fusion& f, const md_t& dst, int& accumulate, std::string& sig,
                                 std::vector<std::pair<int, int>>& args, const std::vector<int64_t>& prim_dims = {});
// Binds the fused value to `dst` and marks the fused nodes done.
void finish_fusion(Compiler& c, const Fusion& f, int dst);
std::vector<std::string> fusion_ops(const std::string& head, const std::vector<const Node*>& extra, const Fusion& f);
// StepInfo::nodes of a primitive for `head` with the fused nodes.
std::vector<std::string> fusion_nodes(const Node& head, const Fusion& f);

}  // namespace isomer::runtime
