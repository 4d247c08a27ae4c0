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
  Value addend;  // present: dst += addend (same dims)
};

struct Fusion {
  std::vector<PostOp> ops;
  std::vector<const Node*> nodes;  // the nodes the post-ops stand for
  Value last;                      // the isomer value the fused primitive's dst holds
  bool has_add() const {
    for (const PostOp& p : ops)
      if (p.addend.present()) return true;
    return false;
  }
};

// The elementwise function node `n` applies to `x` (its only non-constant
// input, of rank x_rank), if oneDNN has it as an eltwise algorithm; n's output
// then has x's dims.
std::optional<EltwiseSpec> eltwise_of(Compiler& c, const Node& n, const Value& x, size_t x_rank);

// The erf GELU subgraph torch exports, x * 0.5 * (1 + erf(x / sqrt 2)) in any of
// its association orders, rooted at x: the nodes and the value it computes.
struct GeluMatch {
  std::vector<const Node*> nodes;
  Value out;
};
std::optional<GeluMatch> match_gelu(Compiler& c, const Value& x);

// Follows `v` through sole consumers that can be post-ops of a primitive whose
// output has dims `dims`. Does not lower anything but addends.
Fusion plan_fusion(Compiler& c, const Value& v, const std::vector<int64_t>& dims, bool allow_add);
// Attributes with only the eltwise post-ops (to query a primitive's preferred layout).
dnnl::primitive_attr eltwise_attr(const Fusion& f);
// Full attributes; `sig` gets a description of the post-ops. A residual add is a
// sum post-op: the primitive accumulates into a buffer that already holds the
// addend (in `dst` layout), whose value id is returned in `accumulate` (-1: none);
// the primitive's destination must then be a view of it. The addend's own
// buffer is used when nothing reads it later, else a copy.
dnnl::primitive_attr fusion_attr(Compiler& c, const Fusion& f, const md_t& dst, int& accumulate, std::string& sig);
// Binds the fused value to `dst` and marks the fused nodes done.
void finish_fusion(Compiler& c, const Fusion& f, int dst);
std::vector<std::string> fusion_ops(const std::string& head, const std::vector<const Node*>& extra, const Fusion& f);
// StepInfo::nodes of a primitive for `head` with the fused nodes.
std::vector<std::string> fusion_nodes(const Node& head, const Fusion& f);

}  // namespace isomer::runtime
