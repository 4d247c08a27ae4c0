#pragma once
// Enumeration of every graph of up to N operators over a family (generate/palette.h),
// with incremental fingerprints.
//
// A graph is a sequence of operator instances in topological order; values are
// numbered: the family's variables first, then each operator's outputs. The DFS adds
// one operator at a time and evaluates only that operator on its input arrays (kept on
// a stack), under the shape rule (`infer`) of every shape set: a graph is valid only if
// every set accepts it. Its outputs are the values no operator of the graph consumes
// (a 0-operator graph returns one variable).
//
// Fingerprints. Graphs whose operators all have field semantics are evaluated over
// F_p (p = 2^61-1, OpDef::eval_field) on random field inputs from a fixed seed in shape
// set 0. Graphs with an operator that has none (Relu, MaxPool) are evaluated with the
// float semantics (OpDef::eval, in double) on small random INTEGER inputs; a value
// whose magnitude exceeds 2^40 is no longer trusted to be exact and the graph gets no
// fingerprint (it is dropped). Fingerprints of the two kinds never meet (they are
// tagged), so an identity between a polynomial graph and a non-polynomial one (e.g.
// relu(x) - relu(-x) = x) is not found: a known limitation. Integer inputs are drawn
// from [-9, -2] and [2, 9] so that a scalar rarely acts as 0 or 1 by chance.
// Fingerprints only propose candidates: every pair is re-compared exactly on fresh
// inputs under every shape set (recheck_pair), and pairs with a non-polynomial side
// are never accepted on evaluations at all: the verifier decides (Z3 or unknown).
//
// Canonical order. To avoid enumerating the same DAG in every topological order, an
// operator that does not consume an output of the previous one must have a larger key
// (variant, inputs) than it; commutative operators take their inputs in index order
// except in a 1-operator graph (so that commutativity itself is found). Two equal
// operators on equal inputs are never both added. Graphs equal up to renaming of
// same-shaped variables are dropped here (only the canonical representative stays);
// the remaining duplicates are removed when buckets are formed (canonical_text).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "eval/field.h"
#include "generate/palette.h"
#include "generate/shards.h"
#include "ir/tensor.h"

namespace isomer::gen {

constexpr int kMaxOps = 4;
constexpr int kMaxOutputs = 2 * kMaxOps;
constexpr uint8_t kNone = 0xFF;

struct OpInst {
  uint8_t variant = 0;
  std::array<uint8_t, 2> in{kNone, kNone};
  LetterSum part = 0;  // Split: the letter sum of the first output's extent
};

// A compact graph: what the enumeration keeps per graph.
struct GraphCode {
  uint8_t family = 0;
  uint8_t num_ops = 0;
  uint8_t num_outputs = 0;
  bool poly = true;  // every operator has field semantics
  std::array<OpInst, kMaxOps> ops{};
  std::array<uint8_t, kMaxOutputs> outputs{};  // value indices, in fingerprint order
};

struct GraphRecord {
  GraphCode code;
  uint64_t key = 0;  // hash of (family, sorted output fingerprints, output shapes over the sets)
};

struct EnumerateStats {
  uint64_t enumerated = 0;       // valid graphs the DFS reached (1+ ops) plus the 0-op graphs
  uint64_t no_fingerprint = 0;   // dropped: inexact float evaluation or duplicate outputs
  uint64_t renamed = 0;          // dropped: a renaming of same-shaped variables of a kept graph
};

// Enumerates all graphs of `families` with up to max_ops operators using `jobs`
// threads (and, with `shards`, several processes: each takes its share of the
// prefixes). Deterministic: the records come back in the same order for any `jobs`
// and any number of shards.
std::vector<GraphRecord> enumerate_graphs(const std::vector<Family>& families, int max_ops, int jobs,
                                          uint64_t seed, EnumerateStats& stats, const Shards& shards = {});

// Number of values of a code (variables + operator outputs).
size_t num_values(const Family& f, const GraphCode& code);
// Value index -> (op index, output) or the variable (op index -1, output = variable).
std::pair<int, int> value_origin(const Family& f, const GraphCode& code, size_t value);

// A canonical text of the graph: its output expressions, sorted. With
// sort_commutative, operands of commutative operators are sorted too. `rename` maps
// variable indices to the names used (empty: palette names).
std::string canonical_text(const Family& f, const GraphCode& code, bool sort_commutative,
                           const std::vector<size_t>& rename = {});
// The text used to remove duplicates: commutative operands sorted, except in a
// 1-operator graph (where Add(p, q) and Add(q, p) must stay apart).
std::string dedupe_text(const Family& f, const GraphCode& code);
// The text modulo associativity and commutativity of Add and Mul (nested chains
// flattened into sorted operand lists), with Sub and Neg folded into signed sums in
// which opposite terms cancel.
std::string ac_normal_text(const Family& f, const GraphCode& code);
// Expression text of every operator (palette variable names, operands in their order).
std::vector<std::string> op_texts(const Family& f, const GraphCode& code);

// Evaluates the outputs of `code` (in code.outputs order) in shape set `set` on `vars`.
std::vector<FieldArray> eval_field_outputs(const Family& f, const GraphCode& code, size_t set,
                                           const std::vector<FieldArray>& vars);
// Float evaluation in double; `exact` becomes false if a magnitude exceeded 2^40.
std::vector<Tensor> eval_real_outputs(const Family& f, const GraphCode& code, size_t set,
                                      const std::vector<Tensor>& vars, bool& exact);
// Random variable values for shape set `set`.
std::vector<FieldArray> random_field_vars(const Family& f, size_t set, uint64_t seed);
std::vector<Tensor> random_integer_vars(const Family& f, size_t set, uint64_t seed);

// Exact re-comparison of two graphs on fresh inputs under every shape set (F_p when
// both are polynomial; exact integer-valued doubles otherwise).
bool recheck_pair(const Family& f, const GraphCode& a, const GraphCode& b, uint64_t seed);

// recheck_pair in parts, for comparing one graph with many: the fresh inputs, made
// once per family, and what a graph computes on them under every shape set.
struct RecheckInputs {
  std::vector<std::vector<FieldArray>> field;            // set -> variables
  std::vector<std::vector<std::vector<Tensor>>> integer;  // set -> trial -> variables
};
RecheckInputs recheck_inputs(const Family& f, uint64_t seed);
struct RecheckValues {
  bool valid = false;  // false: did not evaluate (exactly); equal to nothing
  std::vector<FieldArray> field;                              // per set and output, polynomial graphs
  std::vector<std::pair<std::vector<int64_t>, std::vector<double>>> real;  // per set, trial and output, others
};
RecheckValues recheck_values(const Family& f, const GraphCode& code, const RecheckInputs& in);
bool same_recheck_values(const RecheckValues& a, const RecheckValues& b);

// Concrete dims of every value (value index -> dims) in shape set `set`.
std::vector<std::vector<int64_t>> value_dims(const Family& f, const GraphCode& code, size_t set);

}  // namespace isomer::gen
