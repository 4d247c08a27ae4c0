// The instruction set of the pointwise engine and programs of it: what the
// operator table's emit_pointwise hooks build. No kernels here (no OpenMP), so
// what only builds programs links without the engine.
#include <cmath>
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
    case PwOp::Tan: return {"Tan", 1, false};
    case PwOp::Asin: return {"Asin", 1, false};
    case PwOp::Acos: return {"Acos", 1, false};
    case PwOp::Atan: return {"Atan", 1, false};
    case PwOp::Sinh: return {"Sinh", 1, false};
    case PwOp::Cosh: return {"Cosh", 1, false};
    case PwOp::Asinh: return {"Asinh", 1, false};
    case PwOp::Acosh: return {"Acosh", 1, false};
    case PwOp::Atanh: return {"Atanh", 1, false};
    case PwOp::Softsign: return {"Softsign", 1, false};
    case PwOp::Elu: return {"Elu", 1, false};
    case PwOp::Selu: return {"Selu", 1, false};
    case PwOp::Mish: return {"Mish", 1, false};
    case PwOp::Silu: return {"Silu", 1, false};
    case PwOp::Trunc: return {"Trunc", 1, true};
    case PwOp::Celu: return {"Celu", 1, false};
    case PwOp::ThresholdedRelu: return {"ThresholdedRelu", 1, false};
    case PwOp::IsInf: return {"IsInf", 1, false};
    case PwOp::PowHalf: return {"PowHalf", 1, false};
    case PwOp::PowMinusHalf: return {"PowMinusHalf", 1, false};
    case PwOp::WrapInt: return {"WrapInt", 1, true};
    case PwOp::ToInt32: return {"ToInt32", 1, true};
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

bool pw_reads_sign(PwOp op) {
  switch (op) {
    case PwOp::Abs: case PwOp::Relu: case PwOp::Clip: case PwOp::Sign: case PwOp::Div: case PwOp::Max:
    case PwOp::Min: case PwOp::Mod: case PwOp::FMod: case PwOp::Less: case PwOp::LessEqual: case PwOp::Greater:
    case PwOp::GreaterEqual: case PwOp::ToInt32: return true;
    default: return false;
  }
}

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

namespace {

// The instruction defining register r in `code`, or nullptr (an input).
const PwInstr* def_of(const std::vector<PwInstr>& code, const std::vector<int>& where, int r) {
  return where[static_cast<size_t>(r)] < 0 ? nullptr : &code[static_cast<size_t>(where[static_cast<size_t>(r)])];
}

bool is_affine(const PwInstr* d, float alpha, float beta, float tol = 0) {
  return d && d->op == PwOp::Affine && std::fabs(d->alpha - alpha) <= tol && d->beta == beta;
}

}  // namespace

SpecializedProgram specialize(const PwProgram& p, std::span<const std::optional<float>> known) {
  SpecializedProgram same{p, {}};
  for (int i = 0; i < p.num_inputs; ++i) same.operands.push_back(i);
  if (p.compute != PwProgram::Compute::Float32) return same;
  const size_t regs = static_cast<size_t>(p.num_regs);
  std::vector<int> alias(regs), where(regs, -1);
  for (size_t r = 0; r < regs; ++r) alias[r] = static_cast<int>(r);
  std::vector<std::optional<float>> value(regs);
  for (size_t i = 0; i < known.size() && i < static_cast<size_t>(p.num_inputs); ++i) value[i] = known[i];
  std::vector<PwInstr> code;
  // Register r as x * x * x: (x * x) * x in either order, or x^3.
  auto cube_of = [&](int r) {
    const PwInstr* m = def_of(code, where, r);
    if (m && m->op == PwOp::PowConst && m->alpha == 3.0f) return int(m->a);
    if (!m || m->op != PwOp::Mul) return -1;
    for (auto [sq, x] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
      const PwInstr* s = def_of(code, where, sq);
      if (s && ((s->op == PwOp::Square && s->a == x) || (s->op == PwOp::Mul && s->a == x && s->b == x))) return int(x);
    }
    return -1;
  };
  // Register r as 1 + 0.044715 x^2, as (0.044715 x) x + 1 or 0.044715 (x x) + 1:
  // x, or -1.
  auto cubic_factor_of = [&](int r) {
    const PwInstr* e = def_of(code, where, r);
    if (is_affine(e, 0.044715f, 1.0f, 1e-7f))
      if (const PwInstr* sq = def_of(code, where, e->a);
          sq && ((sq->op == PwOp::Square) || (sq->op == PwOp::Mul && sq->a == sq->b)))
        return int(sq->a);
    if (const PwInstr* m = is_affine(e, 1.0f, 1.0f) ? def_of(code, where, e->a) : nullptr; m && m->op == PwOp::Mul)
      for (auto [c, x] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}})
        if (const PwInstr* k = def_of(code, where, c); is_affine(k, 0.044715f, 0.0f, 1e-7f) && k->a == x) return int(x);
    return -1;
  };
  // (x, op) where register r holds 1 + erf(x / sqrt 2) (op GeluErf) or
  // 1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)) (op GeluTanh), the tanh's argument also
  // as sqrt(2 / pi) x (1 + 0.044715 x^2) (BLOOM's); x = -1 otherwise.
  auto gelu_of = [&](int r) -> std::pair<int, PwOp> {
    const PwInstr* plus = def_of(code, where, r);
    const PwInstr* f = is_affine(plus, 1.0f, 1.0f) ? def_of(code, where, plus->a) : nullptr;
    if (f && f->op == PwOp::Erf) {
      const PwInstr* scaled = def_of(code, where, f->a);
      if (is_affine(scaled, 0.70710678f, 0.0f, 1e-6f)) return {scaled->a, PwOp::GeluErf};
    }
    if (f && f->op == PwOp::Tanh) {
      const PwInstr* scaled = def_of(code, where, f->a);
      const PwInstr* sum = is_affine(scaled, 0.79788456f, 0.0f, 1e-6f) ? def_of(code, where, scaled->a) : nullptr;
      if (sum && sum->op == PwOp::Add)
        for (auto [x, t] : {std::pair{sum->a, sum->b}, std::pair{sum->b, sum->a}}) {
          const PwInstr* term = def_of(code, where, t);
          if (is_affine(term, 0.044715f, 0.0f, 1e-7f) && cube_of(term->a) == x) return {x, PwOp::GeluTanh};
        }
      if (scaled && scaled->op == PwOp::Mul)
        for (auto [k, q] : {std::pair{scaled->a, scaled->b}, std::pair{scaled->b, scaled->a}})
          if (const PwInstr* kx = def_of(code, where, k); is_affine(kx, 0.79788456f, 0.0f, 1e-6f) &&
                                                          cubic_factor_of(q) == kx->a)
            return {kx->a, PwOp::GeluTanh};
    }
    return {-1, PwOp::Copy};
  };
  for (PwInstr in : p.code) {
    const int arity = pw_arity(in.op);
    in.a = static_cast<uint8_t>(alias[in.a]);
    if (arity > 1) in.b = static_cast<uint8_t>(alias[in.b]);
    if (arity > 2) in.c = static_cast<uint8_t>(alias[in.c]);
    // A known scalar operand becomes an immediate.
    const std::optional<float> va = value[in.a], vb = arity > 1 ? value[in.b] : std::nullopt;
    if (arity == 2 && (va.has_value() != vb.has_value())) {
      const float k = va ? *va : *vb;
      const uint8_t x = va ? in.b : in.a;
      auto affine = [&](float alpha, float beta) { in = PwInstr{PwOp::Affine, in.dst, x, 0, 0, alpha, beta}; };
      switch (in.op) {
        case PwOp::Add: affine(1.0f, k); break;
        case PwOp::Sub: va ? affine(-1.0f, k) : affine(1.0f, -k); break;
        case PwOp::Mul: affine(k, 0.0f); break;
        case PwOp::Div:
          if (vb && k != 0) affine(1.0f / k, 0.0f);
          break;
        default: break;
      }
    }
    if (in.op == PwOp::Copy) {
      alias[in.dst] = in.a;
      continue;
    }
    if (in.op == PwOp::Affine) {
      if (const PwInstr* inner = def_of(code, where, in.a); inner && inner->op == PwOp::Affine) {
        in.beta = in.alpha * inner->beta + in.beta;
        in.alpha = in.alpha * inner->alpha;
        in.a = inner->a;
      }
      if (in.alpha == 1.0f && in.beta == 0.0f) {
        alias[in.dst] = in.a;
        continue;
      }
    }
    // x * (1 + erf(x / sqrt 2)) * 0.5 and its tanh form, halved last or first.
    if (in.op == PwOp::Affine && in.alpha == 0.5f && in.beta == 0.0f)
      if (const PwInstr* m = def_of(code, where, in.a); m && m->op == PwOp::Mul)
        for (auto [x, q] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}})
          if (auto [g, op] = gelu_of(q); g == x) {
            in = PwInstr{op, in.dst, x, 0, 0, 0.0f, 0.0f};
            break;
          }
    if (in.op == PwOp::Mul)
      for (auto [h, q] : {std::pair{in.a, in.b}, std::pair{in.b, in.a}}) {
        const PwInstr* half = def_of(code, where, h);
        if (auto [g, op] = gelu_of(q); is_affine(half, 0.5f, 0.0f) && g == half->a) {
          in = PwInstr{op, in.dst, half->a, 0, 0, 0.0f, 0.0f};
          break;
        }
      }
    // x * sigmoid(x): SiLU (SwiGLU's gate).
    if (in.op == PwOp::Mul)
      for (auto [x, sg] : {std::pair{in.a, in.b}, std::pair{in.b, in.a}})
        if (const PwInstr* d = def_of(code, where, sg); d && d->op == PwOp::Sigmoid && d->a == x) {
          in = PwInstr{PwOp::Silu, in.dst, x, 0, 0, 0.0f, 0.0f};
          break;
        }
    where[in.dst] = static_cast<int>(code.size());
    code.push_back(in);
  }
  std::vector<int> results;
  for (int r : p.results) {
    results.push_back(alias[static_cast<size_t>(r)]);
    if (value[static_cast<size_t>(results.back())]) return same;  // a constant result: left as it was
  }
  // Live registers, from the results back.
  std::vector<bool> live(regs, false);
  for (int r : results) live[static_cast<size_t>(r)] = true;
  for (size_t k = code.size(); k-- > 0;) {
    const PwInstr& in = code[k];
    if (!live[in.dst]) continue;
    const int arity = pw_arity(in.op);
    live[in.a] = true;
    if (arity > 1) live[in.b] = true;
    if (arity > 2) live[in.c] = true;
  }
  SpecializedProgram out;
  std::vector<int> renum(regs, -1);
  for (int i = 0; i < p.num_inputs; ++i)
    if (live[static_cast<size_t>(i)]) {
      renum[static_cast<size_t>(i)] = static_cast<int>(out.operands.size());
      out.operands.push_back(i);
    }
  out.program.compute = p.compute;
  out.program.num_inputs = out.program.num_regs = static_cast<int>(out.operands.size());
  for (const PwInstr& in : code) {
    if (!live[in.dst]) continue;
    const int arity = pw_arity(in.op);
    const int a = renum[in.a], b = arity > 1 ? renum[in.b] : 0, c = arity > 2 ? renum[in.c] : 0;
    renum[in.dst] = out.program.emit(in.op, a, b, c, in.alpha, in.beta);
  }
  for (int r : results) {
    int nr = renum[static_cast<size_t>(r)];
    if (r < p.num_inputs) nr = out.program.emit(PwOp::Copy, nr);  // results are computed registers
    out.program.results.push_back(nr);
  }
  return out;
}

}  // namespace isomer::kernels
