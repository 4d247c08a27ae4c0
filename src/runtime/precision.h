#pragma once
// Half-precision models (float16 or bfloat16 weights and activations, as exported
// with model.half()) run in float32 inside the runtime: this CPU has no half-
// precision arithmetic that oneDNN 2.6 uses, and without this every such operator
// ran on the double-precision reference kernels (a 256-wide encoder layer 20x
// slower than ONNX Runtime). ONNX Runtime's CPU provider does the same (casts
// around kernels that have no half-precision form).
//
// The graph's interface stays as written: half inputs are cast to float32 where
// they enter, half outputs cast back where they leave. Half constants become
// float32 constants (exactly: every half value is a float32 value). A Cast to a
// half type inside the graph keeps its rounding: it becomes a cast to the half
// type and back, so values the model rounds are rounded as written. Everything
// else computes in float32, which rounds less than the model would in half: the
// results agree to half precision, not bit for bit.
#include <memory>
#include <vector>

#include "ir/graph.h"

namespace isomer::runtime {

// True if any value of `g` is float16 or bfloat16.
bool has_half_values(const Graph& g);

// `g` computing in float32 as described above; `g` itself when it has no half
// values or holds an opaque node (ONNX Runtime runs those on their written types).
// The float32 form of a half constant is made once and shared while anything holds
// it (runtime/shared_derived.h): `keep` receives what the returned graph's
// constants need kept alive to stay shared (a compiled graph holds it).
Graph promote_half_to_float(const Graph& g, std::vector<std::shared_ptr<const void>>* keep = nullptr);

}  // namespace isomer::runtime
