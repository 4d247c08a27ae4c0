#pragma once
// Expressions in rules: guards (`where`), computed attributes and constant elements
// (`$(...)`) and fold steps (`%k = fold f(...)`). One small language, parsed once:
//
//   expr  := or ;  or := and ('||' and)* ;  and := cmp ('&&' cmp)*
//   cmp   := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
//   sum   := term (('+'|'-') term)* ;  term := unary (('*'|'/'|'%') unary)*
//   unary := '-' unary | '!' unary | atom
//   atom  := INT | FLOAT | "STRING" | '(' expr ')' | '[' expr, ... ']' | %name | NAME '(' expr, ... ')'
//
// A value is an AttrValue (int, float, string, lists, tensor); booleans are ints 0/1.
// `%name` is resolved when the rule is loaded to a variable or a source value; what it
// evaluates to depends on its kind: an attribute variable gives its value, an operand
// (a tensor) gives its data when it is a constant (a fold over a non-constant is
// "not applicable", never a guess). `rank`, `dim`, `shape`, `numel`, `dtype`,
// `is_static`, `is_const` and `same_type` read an operand's type instead; every other
// function is a fold function (rules/fold.h). Evaluation that cannot decide (a symbolic
// dim, an operand that is not constant) throws NotApplicable; guards treat it as false.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/array.h"
#include "ir/attributes.h"
#include "ir/shape.h"

namespace isomer {

struct FoldDef;

// What `%name` in an expression stands for (resolved against the rule's variables and
// the source's named values when the rule is loaded).
struct ExprRef {
  enum class Kind { Operand, Attr, Attrs, SourceValue, TargetValue } kind = Kind::Operand;
  int index = 0;        // Operand/Attr/Attrs: variable index; Source/TargetValue: pattern node
  uint32_t output = 0;  // Source/TargetValue: which output of that node
  std::string name;     // without %, for messages
};

struct Expr {
  enum class Kind { Int, Float, String, List, Ref, Call, Unary, Binary } kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string text;         // String: the value; Call: the function; Unary/Binary: the operator
  ExprRef ref;              // Ref
  std::vector<Expr> args;   // List items, Call arguments, operands
  const FoldDef* fold = nullptr;  // Call of a fold function (nullptr: a builtin)

  // Appends the refs this expression names.
  void collect_refs(std::vector<const ExprRef*>& out) const;
  // Appends the refs whose data it reads (not those only builtins like rank() or
  // shape() look at: they read the type).
  void collect_data_refs(std::vector<const ExprRef*>& out) const;
};

// Thrown when an expression cannot be evaluated at this binding (guards: false).
class NotApplicable : public std::runtime_error {
 public:
  explicit NotApplicable(const std::string& why) : std::runtime_error(why) {}
};

// What a binding offers an expression. Implemented by the matcher (graph values),
// the e-graph (e-class analyses) and rule instantiation (verify-shapes).
class ExprEnv {
 public:
  virtual ~ExprEnv() = default;
  // The type of an operand or source/target value; nullptr if unknown.
  virtual const TensorType* type_of(const ExprRef& r) const = 0;
  // The data of an operand that is a constant; nullptr if it is not one.
  virtual const Tensor* constant_of(const ExprRef& r) const = 0;
  // An attribute variable's value; nullptr if unbound.
  virtual const AttrValue* attr_of(const ExprRef& r) const = 0;
  // An attribute-set variable (`...%a`); nullptr if unbound.
  virtual const Attributes* attrs_of(const ExprRef& r) const = 0;
};

// Resolves `%name` while parsing; throws Error("unbound variable %name ...") if it
// names nothing.
using RefResolver = std::function<ExprRef(const std::string& name)>;

// Parses `text` (all of it). Errors read "in expression 'text': why".
Expr parse_expr(std::string_view text, const RefResolver& resolve);

AttrValue eval_expr(const Expr& e, const ExprEnv& env);
// A guard: true, false, or false where it cannot be decided.
bool eval_guard(const Expr& e, const ExprEnv& env);
// Integer helpers used by callers that need one kind of value.
int64_t expr_int(const AttrValue& v, const std::string& what);
std::vector<int64_t> expr_ints(const AttrValue& v, const std::string& what);
// "[1, 2]", "0.5", "\"s\"" for messages.
std::string expr_value_text(const AttrValue& v);

// A tensor fold call (`e.fold->tensor_fold()`) at element type T (double, Fp, Sym): its
// tensor arguments come from `leaf` where they are operands (`%w`), from nested tensor
// folds, or from concrete values; other arguments are evaluated concretely in `env`.
// The intermediate results stay at type T (no rounding to the tensor's element type
// between nested folds). `dtype` receives the element type of the first tensor operand.
template <class T>
using TensorLeafFn = std::function<Array<T>(const ExprRef& ref, DType* dtype)>;
template <class T>
Array<T> eval_tensor_fold(const Expr& e, const ExprEnv& env, const TensorLeafFn<T>& leaf, DType* dtype);

}  // namespace isomer
