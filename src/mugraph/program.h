#pragma once
// A fused region in index notation: the target a μGraph must compute.
//
// Every loop index of the region is an atom (an iteration variable with an
// extent). A value is indexed by a set of atoms; an elementwise operator's result
// is indexed by the union of its operands' atoms (broadcasting is "does not depend
// on that atom"), a sum removes atoms. A tensor dim is a product of atoms in
// row-major order, so views (Transpose, Reshape, Unsqueeze, Expand, GQA's
// Unsqueeze/Expand/Reshape of K and V) are absorbed into how each input and output
// maps its dims to atoms and never appear as operators. MatMul is Sum(k, Mul(a, b)),
// Softmax is Div(Exp(x), Sum(r, Exp(x))) (the max it subtracts cancels; the μGraph's
// numerically stable form is a rule of the thread level, see block_graph.h),
// LayerNormalization and the decomposed RMSNorm/GELU forms are written out.
//
// Region programs are built from a region's body graph (an isomer Graph whose
// inputs are the region's inputs; only scalar constants inside) by from_body().
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer::mugraph {

// The scalar operators of region programs and block graphs.
enum class Op : uint8_t {
  Input,
  Const,
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Where,  // Where(cond, a, b): cond a bool input
  Neg,
  Exp,
  Sqrt,
  Erf,
  Tanh,
  Sigmoid,
  Relu,
  Log,
  Sum,  // a reduction over `reduce` atoms
};
const char* op_name(Op op);
bool parse_op(std::string_view s, Op* op);
int op_arity(Op op);  // elementwise operators only
bool is_elementwise(Op op);

struct Atom {
  std::string name;
  int64_t extent = 1;
};

struct Stmt {
  Op op = Op::Input;
  std::vector<int> args;    // statement ids
  std::vector<int> axes;    // atoms it is indexed by, sorted
  std::vector<int> reduce;  // Sum: the atoms summed over, sorted
  double value = 0;         // Const
  int input = -1;           // Input: index into Program::inputs
};

// How a tensor at the region's boundary maps its dims to atoms.
struct IoTensor {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> dims;
  std::vector<std::vector<int>> dim_atoms;  // per dim: its atoms, major to minor
  int stmt = -1;                            // Input stmt / the stmt an output takes

  // Element stride of `atom` in this tensor (row-major dims); 0 if it does not use it.
  int64_t stride(const std::vector<Atom>& atoms, int atom) const;
};

struct Program {
  std::vector<Atom> atoms;
  std::vector<Stmt> stmts;
  std::vector<IoTensor> inputs;
  std::vector<IoTensor> outputs;

  int64_t extent(int atom) const { return atoms[atom].extent; }
  // Atoms the program sums over somewhere (where a for-loop may iterate).
  std::vector<int> reduced_atoms() const;
  std::string to_string() const;
};

// Builds the program of a region body. Throws Error("...") naming the node and the
// reason for anything outside what region programs express.
Program from_body(const Graph& body);

}  // namespace isomer::mugraph
