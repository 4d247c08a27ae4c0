#pragma once
// The graph text format: a readable, line-oriented form that prints and parses
// every graph exactly (tests, golden files, and later the rule DSL use it).
//
//   ir_version 7                              # ModelInfo fields, only those that differ
//   opset 13                                  #   from ModelInfo{} ("opset none": no imports)
//   opset com.microsoft 1
//   onnx_extras b64"..."                      # ONNX fields kept for export (ModelInfo)
//   graph main(%x: f32[N,3,?], %"in.1": i64[2]) {
//     %w = const f32[3] {1, 2.5, -0}           # <= 16 elements inline, exact
//     %big = const f32[64,3] hex"0000803f..."  # otherwise raw little-endian bytes
//     %0 = Add(%x, %w) : f32[N,3,?] @add1      # `: types` checked against inference; @ = node name
//     %1, %2 = Dropout(%0) : f32[N,3,?], bool[N,3,?]
//     %3 = Clip(%1, _, %w) {attr=1}            # `_` = omitted optional input
//     %4 as "w" = Relu(%3)                     # `as`: a value name that cannot be its id
//     %5 = opaque "com.example"::Foo(%4) uid=7 proto=b64"CgF4" onnx_types=[_] : f32[?]
//     return %5 as "out", %x
//   }
//
// Values: `%name` is a value with that name (Input name, Constant name, output name);
// `%"any text"` quotes a name that is not [A-Za-z0-9_.]+ or is all digits; an unquoted
// all-digit id (`%7`) is an anonymous value. Attributes: 1 (int), 1.0 / 0.1f / inf
// (float; a trailing f means the float32 nearest, widened), "s", [1, 2], [1.5], ["a"],
// ints[] / floats[] / strings[] for empty lists, tensor f32[2] {1, 2}. `#` starts a
// comment. Parsing builds through GraphBuilder(dedupe=false), so shapes are inferred and
// validated by the operator table; errors read "line L, column C: what is wrong".
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace isomer {

// Deterministic: depends only on the graph's structure, names and input order.
// Throws Error only for a graph no text can state (an Input node that is used but is
// not one of the graph's inputs).
std::string print_graph(const Graph& g);
// Throws Error("line L, column C: ...") on bad text.
Graph parse_graph(std::string_view text);

// "f32[1,3,N,?]"; symbols that are not plain identifiers are quoted.
std::string print_type(const TensorType& t);
// Inverse of print_type.
TensorType parse_type(std::string_view text);

}  // namespace isomer
