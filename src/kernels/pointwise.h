#pragma once
// The pointwise engine: one pass over an iteration space that computes a small
// program of elementwise operations on any number of strided operands (views:
// transposes, slices, broadcasts with stride 0, blocked layouts seen as extra
// dimensions) and writes any number of strided results. A chain or DAG of
// elementwise operators runs as one such program, so its intermediates live in a
// block of registers in L1 and never go to memory.
//
// The program runs a block of up to kBlock elements at a time, one instruction
// after the other over the whole block (a tight loop per instruction, which the
// compiler vectorizes; the math comes from vmath.h), so interpretation costs one
// dispatch per instruction and block, not per element.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace isomer::kernels {

// Elements per block: 16 registers of them fit in L1 beside the operands' lines.
constexpr int64_t kBlock = 256;

enum class PwOp : uint8_t {
  // unary: dst = f(a)
  Copy, Neg, Abs, Relu, LeakyRelu /*alpha*/, Sigmoid, Tanh, Exp, Log, Sqrt, Rsqrt, Reciprocal, Erf, GeluErf,
  GeluTanh, Clip /*[alpha, beta]*/, HardSigmoid /*alpha x + beta, clipped to [0, 1]*/, HardSwish, Softplus,
  Square, Floor, Ceil, Round, Sign, Not, Affine /*alpha a + beta*/, PowConst /*a^alpha*/, IsNaN, Sin, Cos, Elu,
  Selu /*alpha, beta=gamma*/, Mish, Silu, Trunc /*toward zero: float->int casts*/, Celu /*alpha*/,
  ThresholdedRelu /*a > alpha ? a : 0*/, IsInf /*alpha != 0: +inf counts, beta != 0: -inf counts*/,
  Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Softsign /*a / (1 + |a|)*/,
  PowHalf /*pow(a, 0.5): +0 at -0, +inf at -inf*/, PowMinusHalf /*pow(a, -0.5): +inf at -0, +0 at -inf*/,
  // integers only: a value of a narrower integer type, and a float -> int32 conversion's range
  WrapInt /*a modulo 2^alpha, signed if beta != 0*/, ToInt32 /*a outside int32 -> INT32_MIN*/,
  // binary: dst = f(a, b)
  Add, Sub, Mul, Div, Max, Min, Pow, Mod /*fmod for floats, sign of divisor for ints*/, FMod, Equal, Less,
  LessEqual, Greater, GreaterEqual, And, Or, Xor, PRelu /*a < 0 ? a b : a*/,
  // ternary: dst = a ? b : c
  Where,
};

// How many operands an instruction of `op` reads.
int pw_arity(PwOp op);
const char* pw_name(PwOp op);
// True if the operation is defined on integers (the int64 path).
bool pw_integer_ok(PwOp op);
// True if the int64 loop reads its operands as signed (order, quotient, remainder, sign),
// where a uint64 operand held as its bits past INT64_MAX gets another answer; a wrapping
// Add, Sub or Mul, Equal, Where and the logic read bits alike for both.
bool pw_reads_sign(PwOp op);

struct PwInstr {
  PwOp op = PwOp::Copy;
  uint8_t dst = 0, a = 0, b = 0, c = 0;  // registers; the first num_inputs hold the operands
  float alpha = 0, beta = 0;
};

// Registers 0 .. num_inputs-1 hold the operands (converted to the compute type);
// each instruction writes a new register (no register is written twice).
struct PwProgram {
  enum class Compute { Float32, Int64 };
  Compute compute = Compute::Float32;
  int num_inputs = 0;
  int num_regs = 0;
  std::vector<PwInstr> code;
  std::vector<int> results;  // the registers written to the outputs, in order

  // Appends an instruction writing a fresh register; returns that register.
  int emit(PwOp op, int a, int b = 0, int c = 0, float alpha = 0, float beta = 0);
  std::string text() const;  // "r2 = Mul r0 r1; r3 = Exp r2 -> r3": for signatures
};

// A float32 program specialized to what is known when it is built:
//  - an operand that is a known scalar becomes an immediate (Add, Sub, Mul and Div
//    by it become Affine; Div multiplies by the reciprocal, within an ulp);
//  - chains of Affine merge, and an identity Affine disappears;
//  - the exact GELU, x * (1 + erf(x / sqrt 2)) * 0.5 as exporters decompose it
//    (either order of the halving), becomes one GeluErf, and GPT-2's tanh form
//    x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) * 0.5 one GeluTanh, and
//    x * sigmoid(x) one Silu;
//  - what no result needs is dropped, operands included.
// `known[i]` is operand i's value where it is a known scalar. An Int64 program,
// or one whose result would become a constant, comes back unchanged.
struct SpecializedProgram {
  PwProgram program;
  std::vector<int> operands;  // for each input of `program`, the operand of the original it reads
};
SpecializedProgram specialize(const PwProgram& p, std::span<const std::optional<float>> known);

// Maximum registers a program may use.
constexpr int kMaxRegs = 48;
constexpr int kMaxRank = 12;

// An operand or result: element (i0, i1, ...) of the iteration space is at
// data + offset + sum(i_k * strides[k]) elements. A stride of 0 broadcasts.
struct StridedRef {
  const void* data = nullptr;
  DType dtype = DType::Float32;
  std::vector<int64_t> strides;  // one per iteration dimension
  int64_t offset = 0;
};

// Runs `p` over the iteration space `dims`. Operand dtypes: float32/16, bfloat16,
// float64, the integer types and bool (converted to the compute type on load);
// results are converted from it on store (bool: != 0; integers from floats:
// truncated toward zero, saturated). Parallel over `threads` threads (0: OpenMP's
// current team size) once the work is large enough to pay for it.
void run_pointwise(const PwProgram& p, std::span<const StridedRef> inputs, std::span<const StridedRef> outputs,
                   std::span<const int64_t> dims, int threads = 0);

// Runs a float32 program `p` on rows [r0, r0 + rows) and columns [c0, c0 + cols)
// (cols <= kBlock) of a 2-D index space: register 0 reads `first` (row stride
// ld_first, starting at the tile's first element), registers 1.. read `rest`
// through their {row, column} strides from the origin of the space; the first
// result goes to `out` (row stride ld_out, the tile's first element). The
// epilogue of a fused kernel, on a tile still in cache.
// `shift`, if given, adds one more element offset per operand (a batch's start).
void run_pointwise_tile(const PwProgram& p, const float* first, int64_t ld_first, std::span<const StridedRef> rest,
                        int64_t r0, int64_t rows, int64_t c0, int64_t cols, float* out, int64_t ld_out,
                        const int64_t* shift = nullptr);

// Row-major strides of `dims`.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims);

}  // namespace isomer::kernels
