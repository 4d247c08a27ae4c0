// The trigonometric and hyperbolic functions beyond Sin and Cos, their inverses,
// and Softsign: elementwise functions of one tensor that exporters write for
// torch.tan, torch.asin, ..., torch.atanh and nn.Softsign. Each is its float
// semantics in one line, an uninterpreted function for the verifier, and one
// instruction of the fused pointwise kernels.
#include <cmath>

#include "ops/elementwise.h"
#include "ops/emit.h"

namespace isomer {
using namespace ops;

namespace {

struct TanFn { static double apply(double x, const Attributes&) { return std::tan(x); } };
struct AsinFn { static double apply(double x, const Attributes&) { return std::asin(x); } };
struct AcosFn { static double apply(double x, const Attributes&) { return std::acos(x); } };
struct AtanFn { static double apply(double x, const Attributes&) { return std::atan(x); } };
struct SinhFn { static double apply(double x, const Attributes&) { return std::sinh(x); } };
struct CoshFn { static double apply(double x, const Attributes&) { return std::cosh(x); } };
struct AsinhFn { static double apply(double x, const Attributes&) { return std::asinh(x); } };
struct AcoshFn { static double apply(double x, const Attributes&) { return std::acosh(x); } };
struct AtanhFn { static double apply(double x, const Attributes&) { return std::atanh(x); } };
struct SoftsignFn { static double apply(double x, const Attributes&) { return x / (1 + std::fabs(x)); } };

template <class F, FunctionName fn, PwOp op>
OpDef function_op(std::string_view name, int min_opset) {
  OpDef d = transcendental<F, fn>(name);
  d.min_opset = min_opset;
  d.emit_pointwise = emit_unary<op>;
  d.lower = Lowering::Pointwise;
  return d;
}

}  // namespace

OpDef def_Tan() { return function_op<TanFn, "Tan", PwOp::Tan>("Tan", 7); }
OpDef def_Asin() { return function_op<AsinFn, "Asin", PwOp::Asin>("Asin", 7); }
OpDef def_Acos() { return function_op<AcosFn, "Acos", PwOp::Acos>("Acos", 7); }
OpDef def_Atan() { return function_op<AtanFn, "Atan", PwOp::Atan>("Atan", 7); }
OpDef def_Sinh() { return function_op<SinhFn, "Sinh", PwOp::Sinh>("Sinh", 9); }
OpDef def_Cosh() { return function_op<CoshFn, "Cosh", PwOp::Cosh>("Cosh", 9); }
OpDef def_Asinh() { return function_op<AsinhFn, "Asinh", PwOp::Asinh>("Asinh", 9); }
OpDef def_Acosh() { return function_op<AcoshFn, "Acosh", PwOp::Acosh>("Acosh", 9); }
OpDef def_Atanh() { return function_op<AtanhFn, "Atanh", PwOp::Atanh>("Atanh", 9); }
OpDef def_Softsign() { return function_op<SoftsignFn, "Softsign", PwOp::Softsign>("Softsign", 1); }

}  // namespace isomer
