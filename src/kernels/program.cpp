// The instruction set of the pointwise engine and programs of it: what the
// operator table's emit_pointwise hooks build. No kernels here (no OpenMP), so
// what only builds programs links without the engine.
#include <sstream>

#include "ir/error.h"
#include "kernels/pointwise.h"

namespace isomer::kernels {

namespace {

struct OpInfo {
  const char* name;
  int arity;
  bool integer;
};

OpInfo info(PwOp op) {
  switch (op) {
    case PwOp::Copy: return {"Copy", 1, true};
    case PwOp::Neg: return {"Neg", 1, true};
    case PwOp::Abs: return {"Abs", 1, true};
    case PwOp::Relu: return {"Relu", 1, true};
    case PwOp::LeakyRelu: return {"LeakyRelu", 1, false};
    case PwOp::Sigmoid: return {"Sigmoid", 1, false};
    case PwOp::Tanh: return {"Tanh", 1, false};
    case PwOp::Exp: return {"Exp", 1, false};
    case PwOp::Log: return {"Log", 1, false};
    case PwOp::Sqrt: return {"Sqrt", 1, false};
    case PwOp::Rsqrt: return {"Rsqrt", 1, false};
    case PwOp::Reciprocal: return {"Reciprocal", 1, false};
    case PwOp::Erf: return {"Erf", 1, false};
    case PwOp::GeluErf: return {"GeluErf", 1, false};
    case PwOp::GeluTanh: return {"GeluTanh", 1, false};
    case PwOp::Clip: return {"Clip", 1, true};
    case PwOp::HardSigmoid: return {"HardSigmoid", 1, false};
    case PwOp::HardSwish: return {"HardSwish", 1, false};
    case PwOp::Softplus: return {"Softplus", 1, false};
    case PwOp::Square: return {"Square", 1, true};
    case PwOp::Floor: return {"Floor", 1, false};
    case PwOp::Ceil: return {"Ceil", 1, false};
    case PwOp::Round: return {"Round", 1, false};
    case PwOp::Sign: return {"Sign", 1, true};
    case PwOp::Not: return {"Not", 1, true};
    case PwOp::Affine: return {"Affine", 1, false};
    case PwOp::PowConst: return {"PowConst", 1, false};
    case PwOp::IsNaN: return {"IsNaN", 1, false};
    case PwOp::Sin: return {"Sin", 1, false};
    case PwOp::Cos: return {"Cos", 1, false};
    case PwOp::Elu: return {"Elu", 1, false};
    case PwOp::Selu: return {"Selu", 1, false};
    case PwOp::Mish: return {"Mish", 1, false};
    case PwOp::Silu: return {"Silu", 1, false};
    case PwOp::Trunc: return {"Trunc", 1, true};
    case PwOp::Add: return {"Add", 2, true};
    case PwOp::Sub: return {"Sub", 2, true};
    case PwOp::Mul: return {"Mul", 2, true};
    case PwOp::Div: return {"Div", 2, true};
    case PwOp::Max: return {"Max", 2, true};
    case PwOp::Min: return {"Min", 2, true};
    case PwOp::Pow: return {"Pow", 2, false};
    case PwOp::Mod: return {"Mod", 2, true};
    case PwOp::FMod: return {"FMod", 2, true};
    case PwOp::Equal: return {"Equal", 2, true};
    case PwOp::Less: return {"Less", 2, true};
    case PwOp::LessEqual: return {"LessEqual", 2, true};
    case PwOp::Greater: return {"Greater", 2, true};
    case PwOp::GreaterEqual: return {"GreaterEqual", 2, true};
    case PwOp::And: return {"And", 2, true};
    case PwOp::Or: return {"Or", 2, true};
    case PwOp::Xor: return {"Xor", 2, true};
    case PwOp::PRelu: return {"PRelu", 2, false};
    case PwOp::Where: return {"Where", 3, true};
  }
  return {"?", 1, false};
}

}  // namespace

int pw_arity(PwOp op) { return info(op).arity; }
const char* pw_name(PwOp op) { return info(op).name; }
bool pw_integer_ok(PwOp op) { return info(op).integer; }

int PwProgram::emit(PwOp op, int a, int b, int c, float alpha, float beta) {
  require(num_regs < kMaxRegs, "pointwise program too long");
  PwInstr in;
  in.op = op;
  in.dst = static_cast<uint8_t>(num_regs);
  in.a = static_cast<uint8_t>(a);
  in.b = static_cast<uint8_t>(b);
  in.c = static_cast<uint8_t>(c);
  in.alpha = alpha;
  in.beta = beta;
  code.push_back(in);
  return num_regs++;
}

std::string PwProgram::text() const {
  std::ostringstream s;
  s << (compute == Compute::Float32 ? "f32" : "i64") << " in" << num_inputs << ":";
  for (const PwInstr& in : code) {
    s << " r" << int(in.dst) << "=" << pw_name(in.op) << "(r" << int(in.a);
    int ar = pw_arity(in.op);
    if (ar > 1) s << ",r" << int(in.b);
    if (ar > 2) s << ",r" << int(in.c);
    s << ")";
    if (in.alpha != 0 || in.beta != 0) s << "[" << in.alpha << "," << in.beta << "]";
  }
  s << " ->";
  for (int r : results) s << " r" << r;
  return s.str();
}

}  // namespace isomer::kernels
