#pragma once
// A fused region as the IR carries it: the operator-table entry MuGraph (domain
// ai.isomer.mugraph) with two string attributes,
//   body:   the original subgraph in isomer's graph text (its inputs are the node's
//           inputs, in order; only scalar constants inside) - what the node means;
//   kernel: the μGraph (block graph text, mugraph/block_graph.h) that computes it.
// The float, field and symbolic semantics of the node are its body's; the runtime
// runs the kernel (runtime/lower_mugraph.cpp) after checking it against the body.
// Exported to ONNX as a call of a model-local function whose body is the subgraph
// (mugraph/onnx_function.h), so every other runtime inlines it.
#include <memory>
#include <mutex>
#include <string>

#include "ir/graph.h"
#include "mugraph/block_graph.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

inline constexpr const char* kDomain = "ai.isomer.mugraph";

struct FusedRegion {
  std::string body_text, kernel_text;
  Graph body;
  // The program and block graph; `error` says why they are missing (the body is
  // still the node's meaning, the runtime then uses the direct translation).
  std::shared_ptr<const Program> program;
  std::shared_ptr<const BlockGraph> kernel;
  std::string error;
  // "MuGraph_" + a hash of the body: the ONNX function's name.
  std::string function_name() const;
};

// Parsed once per distinct (body, kernel) pair in a process. Throws Error if the
// body does not parse (a kernel that does not parse only sets `error`).
std::shared_ptr<const FusedRegion> fused_region(const std::string& body, const std::string& kernel);
std::shared_ptr<const FusedRegion> fused_region(const Attributes& attrs);

// A MuGraph node computing `body` with `kernel` on `inputs` (validated).
std::vector<Value> make_fused_node(GraphBuilder& b, const Graph& body, const std::string& kernel,
                                   const std::vector<Value>& inputs, const std::string& name);

}  // namespace isomer::mugraph
