#pragma once
// The operator table. One OpDef per operator holds everything isomer knows about
// it: arity, attributes, shape rule, float semantics, finite-field semantics,
// algebraic properties, the ONNX mapping, and the hooks the verifier and cost
// model use. Everything else (importer, evaluators, passes, generator) reads this
// table; adding an operator means adding one entry (see ops/op_list.h).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/field.h"
#include "ir/attributes.h"
#include "ir/node.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace isomer {

class GraphBuilder;

// What a shape rule sees: attributes, input types (dtype Undefined for an omitted
// optional input), the data of inputs that are constants (nullptr otherwise) and
// how many outputs the node was asked for (0 = the operator's default).
struct InferContext {
  const Attributes& attrs;
  std::span<const TensorType> inputs;
  std::span<const Tensor* const> constants;
  size_t num_outputs = 0;

  const TensorType& in(size_t i) const { return inputs[i]; }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].dtype != DType::Undefined; }
  const Tensor* constant(size_t i) const { return i < constants.size() ? constants[i] : nullptr; }
};

// What the float evaluator passes: attributes, input data (an omitted optional
// input is a default-constructed Tensor with dtype Undefined), output types the
// shape rule inferred (with dynamic dims where inputs were dynamic).
struct EvalContext {
  const Attributes& attrs;
  std::span<const Tensor> inputs;
  size_t num_outputs = 1;

  const Tensor& in(size_t i) const { return inputs[i]; }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].dtype() != DType::Undefined; }
};

// The ONNX form of a node: attributes and inputs as the ONNX operator at some opset
// has them. Import hooks turn it into isomer's canonical form (the latest opset's
// form); export hooks turn the canonical form back into the model's opset.
struct OnnxForm {
  Attributes attrs;
  std::vector<Value> inputs;
  size_t num_outputs = 1;
  // The ONNX name: on import the node's (Upsample, Scatter: an older name of the operator);
  // set by an export hook where the opset names the operator otherwise.
  std::string op_type;
};

using InferFn = std::vector<TensorType> (*)(const InferContext&);
using EvalFn = std::vector<Tensor> (*)(const EvalContext&);
using FieldEvalFn = std::vector<FieldArray> (*)(const Attributes&, std::span<const FieldArray>);
// Symbolic semantics over real numbers (eval/sym.h), for the Z3 verifier: the same
// templated kernel as eval/eval_field instantiated at T = Sym. Integer operands
// (shapes, axes) arrive as constant Syms. Operators that are not polynomial use
// select_gt/select_ge (Relu, Max, Clip, MaxPool, ...) or uninterpreted functions
// (Exp, Tanh, ...: sound for proofs, but a refutation that depends on one is no
// counterexample).
class Sym;
using SymEvalFn = std::vector<Array<Sym>> (*)(const Attributes&, std::span<const Array<Sym>>);
// The attributes in canonical form for the node's input types: every attribute the
// operator defaults written out, axes normalized to be non-negative, and attributes
// the inputs determine (Conv's kernel_shape) dropped, so that two nodes of the
// operator on the same inputs compute the same function iff their canonical
// attributes are equal. The rule matcher compares attributes this way. Returns the
// attributes unchanged where the input ranks are unknown.
using CanonicalAttrsFn = Attributes (*)(const Attributes&, std::span<const TensorType> inputs);
// Canonicalizes an ONNX node of `opset`; returns an empty string on success or the
// reason the node must stay opaque (e.g. "shape input is not constant").
using OnnxImportFn = std::string (*)(OnnxForm& form, int64_t opset, GraphBuilder& builder);
// Rewrites the canonical form for `opset` (e.g. constant inputs back to attributes).
// Throws Error if the canonical node cannot be expressed at that opset.
using OnnxExportFn = void (*)(OnnxForm& form, int64_t opset);

// Hooks filled in by later components (cost model); declared here so the entry is
// the one place an operator's facts live.
struct CostEstimate;

namespace kernels {
struct PwProgram;
}
// Pointwise operators: appends the instructions that compute one element of the
// output to a fused kernel's program (kernels/pointwise.h). `in` holds the
// registers of the node's inputs (-1 for an omitted optional input), `constants`
// the data of its constant inputs (nullptr otherwise). Returns the register of
// the result, or -1 when this instance is not pointwise (say, a bound that is not
// a constant). The runtime fuses chains of such operators into one pass over
// memory and maps single instructions to oneDNN post-ops: this hook is the
// operator's fusion class.
using EmitPointwiseFn = int (*)(kernels::PwProgram& p, const Attributes& attrs, std::span<const int> in,
                                std::span<const Tensor* const> constants);
// How isomer's CPU runtime runs the operator: which of its lowerings
// (runtime/lowering.h, which maps each to its function) adds the node's steps.
// Named here, so the entry is the one place an operator's facts live, without the
// table depending on the runtime; a lowering returns false for an instance it has
// no fast path for (the reference kernel then runs it, and `isomer run
// --print-steps` says so). A test fails if an entry has none.
enum class Lowering : uint8_t {
  None,
  ReferenceOnly,  // deliberately none: the reference semantics run it (plans replace such operators)
  Pointwise,  // fused elementwise kernels, from emit_pointwise
  Conv,
  MatMul,
  Gemm,
  Pool,
  Pad,
  BatchNorm,
  LayerNorm,
  Softmax,
  Reduce,
  Concat,
  Identity,
  Reshape,
  Transpose,
  Slice,
  Split,
  Expand,
  Gather,
  ShapeOf,
  ConstantOfShape,
  ArgExtreme,  // ArgMax, ArgMin
  CumSum,
  GroupNorm,  // GroupNormalization, InstanceNormalization
  Range,
  Tile,
  Trilu,
  GatherElements,
  GatherND,
  ScatterND,
  Einsum,
  MuGraph,  // a fused region's generated kernel (src/mugraph)
  Recurrent,  // LSTM, GRU, RNN
  ConvTranspose,
  Resize,
  SpaceDepth,  // DepthToSpace, SpaceToDepth
  Attention,   // ONNX Attention: batched GEMMs around a masked row softmax
  Rotary,      // ONNX RotaryEmbedding: one row kernel (kernels/rotary.h)
  Lrn,         // LRN: each element over its channel neighbours' sum of squares
  TopK,
  ScatterElements,
  OneHot,
  GridSample,
  Dft,         // DFT along one axis (kernels/dft.h)
  Stft,        // STFT: windowed frames as rows of one product (kernels/gemm.h)
  Col2Im,      // columns summed back into an image (ops/col2im.h)
  Quant,       // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the integer contractions
};

struct OpProperties {
  bool elementwise = false;          // output[i] depends only on input[i] (after broadcasting)
  bool commutative = false;          // f(a, b) == f(b, a)
  bool associative = false;          // f(f(a, b), c) == f(a, f(b, c))
  std::vector<int> linear_in;        // f is linear in each of these inputs
  bool shape_only = false;           // moves or views data; computes nothing (Reshape, Transpose, ...)
  bool deterministic = true;         // false for ops that must never be merged or folded
  bool idempotent = false;           // f(f(x)) == f(x)
  // Folding it over constant inputs would store a wider copy of them: DequantizeLinear
  // of int8 weights would turn a quantized model into a float one (4x the bytes, and
  // float kernels where ONNX Runtime and isomer's runtime run integer ones). The
  // optimizer's constant folding leaves such nodes; the runtime still folds them.
  bool widens_constants = false;
};

struct AttrSpec {
  std::string_view name;
  std::string_view kind;  // "int", "float", "string", "ints", "floats", "tensor"
};

struct OpDef {
  std::string_view name;           // isomer's name, also the ONNX op_type
  std::string_view onnx_domain;    // "" = ai.onnx
  int min_inputs = 1;
  int max_inputs = 1;              // -1 = variadic
  int min_opset = 1;               // first ONNX opset whose semantics the canonical form follows
  std::vector<AttrSpec> attributes;
  OpProperties props;

  InferFn infer = nullptr;          // required
  EvalFn eval = nullptr;            // required: float reference semantics
  // Constant folding's evaluation where it may differ from `eval` by rounding: a
  // float32 product summed in float with the runtime's kernel, as any runtime sums it
  // (eval sums in double, which folding TASO's BERT's weight products spent a third of
  // its search on). nullptr = eval.
  EvalFn fold = nullptr;
  FieldEvalFn eval_field = nullptr; // polynomial operators only; nullptr = no field semantics
  OnnxImportFn onnx_import = nullptr;  // nullptr = ONNX attributes and inputs taken as they are
  OnnxExportFn onnx_export = nullptr;  // nullptr = written as it is
  SymEvalFn eval_sym = nullptr;     // symbolic real semantics (Z3 verifier); nullptr = none
  CanonicalAttrsFn canonical_attrs = nullptr;  // nullptr: attributes as written are canonical
  const CostEstimate* cost = nullptr;  // set by the cost component
  EmitPointwiseFn emit_pointwise = nullptr;  // elementwise operators: their fused form
  Lowering lower = Lowering::None;            // the runtime's lowering (required)
};

// The table. find_op returns nullptr for an unknown name.
const OpDef* find_op(std::string_view name);
const OpDef& get_op(std::string_view name);  // throws Error if unknown
std::span<const OpDef* const> all_ops();

// A node's attributes in canonical form (OpDef::canonical_attrs), for comparing nodes
// up to defaulted attributes; other nodes' attributes as they are.
Attributes canonical_attributes(const Node& n);

}  // namespace isomer
