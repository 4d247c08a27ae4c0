#pragma once
// Reference evaluators. All walk the graph in topological order and call the
// operator table's hooks: `eval` for float semantics (double precision inside each
// operator, results rounded to each value's type), `eval_field` for semantics over
// F_p, `eval_sym` for symbolic semantics over the reals (eval/sym.h). None has
// operator-specific code: semantics live in the table.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eval/field.h"
#include "eval/sym.h"
#include "ir/graph.h"

namespace isomer {

// Evaluates `g` on `inputs` (one per graph input, in order). Throws Error if the
// graph contains an opaque node (it is not evaluable here) or an input does not
// match its declared type.
std::vector<Tensor> evaluate(const Graph& g, const std::vector<Tensor>& inputs);

// True if every node can be evaluated by `evaluate`; otherwise `why` names the
// first node that cannot.
bool is_evaluable(const Graph& g, std::string* why = nullptr);

// Evaluates `g` over F_p. Every operator needs field semantics; constants must be
// integer-valued. Throws Error naming the first node that has none.
std::vector<FieldArray> evaluate_field(const Graph& g, const std::vector<FieldArray>& inputs);

// Evaluates `g` symbolically: each output element becomes an expression over the
// input elements (the caller makes them, typically Sym::var). Constants become exact
// rationals. Throws Error naming the first node without symbolic semantics. The
// Syms live in the calling thread's arena.
std::vector<SymArray> evaluate_sym(const Graph& g, const std::vector<SymArray>& inputs);

// The extent of dynamic dim `symbol`: its binding if it has one; else, when it is an
// integer expression over other symbols (torch's dynamo exporter names a KV cache's
// mask "past + 1" and a doubled axis "2*s0"; + - * // and parentheses), its value with
// each name's binding, or `unbound` for a name without one; else `unbound`.
int64_t symbolic_extent(const std::string& symbol, const std::map<std::string, int64_t>& bindings,
                        int64_t unbound = 1);

// Concrete shapes for the graph inputs: static dims as declared, dynamic dims from
// `bindings` (symbol -> extent) through symbolic_extent, a name without a binding at 1,
// or at the smallest extent (up to 16) at which every input's expression dim is at
// least 1 ("s0 - 1"), so that dims related by their names are related in the shapes.
std::vector<std::vector<int64_t>> concrete_input_dims(const Graph& g,
                                                      const std::map<std::string, int64_t>& bindings = {});

// Random inputs for `g` from `seed`: floats uniform in [-1, 1), integers in [0, 4),
// bools fair. Deterministic for a given seed.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& bindings = {});

}  // namespace isomer
