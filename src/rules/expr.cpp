// Rule expressions: parser and evaluators (see rules/expr.h).
#include "rules/expr.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "eval/field.h"
#include "eval/sym.h"
#include "ir/error.h"
#include "rules/fold.h"

namespace isomer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

// Builtins read an operand's type (or an attribute set), not its value.
constexpr std::string_view kBuiltins[] = {"rank",     "dim",     "shape",    "numel", "dtype", "is_static",
                                          "is_const", "same_type", "attr",   "has_attr", "len"};

bool is_builtin(std::string_view name) {
  for (std::string_view b : kBuiltins)
    if (b == name) return true;
  return false;
}

class Parser {
 public:
  Parser(std::string_view s, const RefResolver& resolve) : s_(s), resolve_(resolve) {}

  Expr parse_full() {
    Expr e = parse_or();
    skip();
    if (pos_ != s_.size()) fail("unexpected '" + std::string(s_.substr(pos_)) + "'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("in expression '" + std::string(s_) + "': " + why);
  }
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool accept(std::string_view tok) {
    skip();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  void expect(std::string_view tok) {
    if (!accept(tok)) fail("expected '" + std::string(tok) + "'");
  }
  static Expr binary(std::string op, Expr a, Expr b) {
    Expr e;
    e.kind = Expr::Kind::Binary;
    e.text = std::move(op);
    e.args = {std::move(a), std::move(b)};
    return e;
  }

  Expr parse_or() {
    Expr e = parse_and();
    while (accept("||")) e = binary("||", std::move(e), parse_and());
    return e;
  }
  Expr parse_and() {
    Expr e = parse_cmp();
    while (accept("&&")) e = binary("&&", std::move(e), parse_cmp());
    return e;
  }
  Expr parse_cmp() {
    Expr e = parse_sum();
    for (std::string_view op : {"==", "!=", "<=", ">=", "<", ">"})
      if (accept(op)) return binary(std::string(op), std::move(e), parse_sum());
    return e;
  }
  Expr parse_sum() {
    Expr e = parse_term();
    for (;;) {
      skip();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
        std::string op(1, s_[pos_++]);
        e = binary(op, std::move(e), parse_term());
      } else {
        return e;
      }
    }
  }
  Expr parse_term() {
    Expr e = parse_unary();
    for (;;) {
      skip();
      if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/' || s_[pos_] == '%') &&
          !(s_[pos_] == '%' && pos_ + 1 < s_.size() && is_name_char(s_[pos_ + 1]))) {
        std::string op(1, s_[pos_++]);
        e = binary(op, std::move(e), parse_unary());
      } else {
        return e;
      }
    }
  }
  Expr parse_unary() {
    skip();
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '!') && !(s_[pos_] == '!' && s_.substr(pos_, 2) == "!=")) {
      bool neg = s_[pos_] == '-';
      // A negative number literal stays a literal.
      if (neg && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') return parse_atom();
      ++pos_;
      Expr e;
      e.kind = Expr::Kind::Unary;
      e.text = neg ? "-" : "!";
      e.args = {parse_unary()};
      return e;
    }
    return parse_atom();
  }
  Expr parse_atom() {
    skip();
    Expr e;
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      e = parse_or();
      expect(")");
      return e;
    }
    if (c == '[') {
      ++pos_;
      e.kind = Expr::Kind::List;
      if (!accept("]")) {
        do e.args.push_back(parse_or());
        while (accept(","));
        expect("]");
      }
      return e;
    }
    if (c == '"') {
      size_t end = s_.find('"', pos_ + 1);
      if (end == std::string_view::npos) fail("unterminated string");
      e.kind = Expr::Kind::String;
      e.text = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
      pos_ = end + 1;
      return e;
    }
    if (c == '%') {
      ++pos_;
      size_t start = pos_;
      while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
      if (pos_ == start) fail("expected a variable name after %");
      e.kind = Expr::Kind::Ref;
      try {
        e.ref = resolve_(std::string(s_.substr(start, pos_ - start)));
      } catch (const Error& err) {
        fail(err.what());
      }
      return e;
    }
    if ((c >= '0' && c <= '9') || c == '-' || c == '.') {
      size_t start = pos_;
      if (c == '-') ++pos_;
      while (pos_ < s_.size() && (is_name_char(s_[pos_]) ||
                                  ((s_[pos_] == '-' || s_[pos_] == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
        ++pos_;
      std::string_view num = s_.substr(start, pos_ - start);
      bool is_float = num.find_first_of(".eE") != std::string_view::npos;
      if (!is_float) {
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), e.i);
        if (ec != std::errc() || p != num.data() + num.size()) fail("bad integer '" + std::string(num) + "'");
        return e;
      }
      e.kind = Expr::Kind::Float;
      bool f32 = num.back() == 'f';
      std::string text(f32 ? num.substr(0, num.size() - 1) : num);
      char* end = nullptr;
      e.f = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size()) fail("bad number '" + std::string(num) + "'");
      if (f32) e.f = static_cast<float>(e.f);
      return e;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    std::string name(s_.substr(start, pos_ - start));
    if (name.empty()) fail(std::string("unexpected '") + c + "'");
    if (name == "true" || name == "false") {
      e.i = name == "true";
      return e;
    }
    e.kind = Expr::Kind::Call;
    e.text = name;
    if (!is_builtin(name)) {
      e.fold = find_fold(name);
      if (!e.fold) fail("unknown function '" + name + "'");
    }
    expect("(");
    if (!accept(")")) {
      do e.args.push_back(parse_or());
      while (accept(","));
      expect(")");
    }
    int n = static_cast<int>(e.args.size());
    if (e.fold && (n < e.fold->min_args || n > e.fold->max_args))
      fail(name + " takes " + std::to_string(e.fold->min_args) +
           (e.fold->max_args != e.fold->min_args ? " to " + std::to_string(e.fold->max_args) : "") + " arguments");
    return e;
  }

  std::string_view s_;
  const RefResolver& resolve_;
  size_t pos_ = 0;
};

// ---- evaluation -----------------------------------------------------------------------

bool is_operand(const ExprRef& r) {
  return r.kind == ExprRef::Kind::Operand || r.kind == ExprRef::Kind::SourceValue ||
         r.kind == ExprRef::Kind::TargetValue;
}

const TensorType& type_arg(const Expr& e, const ExprEnv& env, const std::string& fn) {
  if (e.kind != Expr::Kind::Ref || !is_operand(e.ref)) throw Error(fn + "() takes an operand like %x");
  const TensorType* t = env.type_of(e.ref);
  if (!t) throw NotApplicable("the type of %" + e.ref.name + " is not known");
  return *t;
}

std::optional<double> as_number(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

AttrValue eval_builtin(const Expr& e, const ExprEnv& env) {
  const std::string& fn = e.text;
  auto argc = [&](size_t n) {
    if (e.args.size() != n) throw Error(fn + "() takes " + std::to_string(n) + " arguments");
  };
  if (fn == "len") {
    argc(1);
    AttrValue v = eval_expr(e.args[0], env);
    return static_cast<int64_t>(expr_ints(v, "len()").size());
  }
  if (fn == "attr" || fn == "has_attr") {
    if (e.args.size() < 2 || e.args[0].kind != Expr::Kind::Ref || e.args[0].ref.kind != ExprRef::Kind::Attrs)
      throw Error(fn + "() takes an attribute set variable and a name");
    const Attributes* a = env.attrs_of(e.args[0].ref);
    if (!a) throw NotApplicable("%" + e.args[0].ref.name + " is not bound");
    AttrValue name = eval_expr(e.args[1], env);
    const auto* s = std::get_if<std::string>(&name);
    if (!s) throw Error(fn + "(): the attribute name must be a string");
    if (fn == "has_attr") return int64_t{a->has(*s)};
    if (const AttrValue* v = a->find(*s)) return *v;
    if (e.args.size() < 3) throw NotApplicable("attribute '" + *s + "' is not set");
    return eval_expr(e.args[2], env);
  }
  if (fn == "is_const") {
    argc(1);
    if (e.args[0].kind != Expr::Kind::Ref || !is_operand(e.args[0].ref)) throw Error("is_const() takes an operand");
    return int64_t{env.constant_of(e.args[0].ref) != nullptr};
  }
  if (fn == "same_type") {
    argc(2);
    return int64_t{type_arg(e.args[0], env, fn) == type_arg(e.args[1], env, fn)};
  }
  const TensorType& t = type_arg(e.args.at(0), env, fn);
  if (fn == "rank") return t.rank();
  if (fn == "dtype") return static_cast<int64_t>(t.dtype);
  if (fn == "is_static") return int64_t{is_static(t.shape) && t.dtype != DType::Undefined};
  if (fn == "shape") {
    std::vector<int64_t> dims;
    for (const Dim& d : t.shape) dims.push_back(d.is_static() ? d.value : -1);
    return dims;
  }
  if (fn == "numel") {
    std::optional<int64_t> n = num_elements(t.shape);
    if (!n) throw NotApplicable("%" + e.args[0].ref.name + " has symbolic dims");
    return *n;
  }
  // dim(%v, i): i < 0 counts from the end.
  argc(2);
  int64_t axis = expr_int(eval_expr(e.args[1], env), "dim()'s axis");
  if (axis < 0) axis += t.rank();
  if (axis < 0 || axis >= t.rank()) throw NotApplicable("dim(): axis out of range for %" + e.args[0].ref.name);
  const Dim& d = t.shape[static_cast<size_t>(axis)];
  if (!d.is_static()) throw NotApplicable("dim(): %" + e.args[0].ref.name + " has a symbolic dim there");
  return d.value;
}

AttrValue eval_binary(const std::string& op, const AttrValue& a, const AttrValue& b) {
  if (op == "==" || op == "!=") {
    bool eq;
    auto na = as_number(a), nb = as_number(b);
    if (na && nb) eq = *na == *nb;
    else eq = attr_equal(a, b);
    return int64_t{(op == "==") == eq};
  }
  const auto* ia = std::get_if<int64_t>(&a);
  const auto* ib = std::get_if<int64_t>(&b);
  if (ia && ib) {
    int64_t x = *ia, y = *ib;
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/" || op == "%") {
      if (y == 0) throw NotApplicable("division by zero");
      return op == "/" ? x / y : x % y;
    }
    if (op == "<") return int64_t{x < y};
    if (op == "<=") return int64_t{x <= y};
    if (op == ">") return int64_t{x > y};
    if (op == ">=") return int64_t{x >= y};
  }
  auto na = as_number(a), nb = as_number(b);
  if (!na || !nb) throw Error("operator " + op + " needs numbers, got " + expr_value_text(a) + " and " + expr_value_text(b));
  double x = *na, y = *nb;
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "/") return x / y;
  if (op == "<") return int64_t{x < y};
  if (op == "<=") return int64_t{x <= y};
  if (op == ">") return int64_t{x > y};
  if (op == ">=") return int64_t{x >= y};
  throw Error("operator " + op + " needs integers");
}

bool truthy(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i != 0;
  throw Error("a condition must be a comparison or a predicate, got " + expr_value_text(v));
}

template <class T>
Array<T> tensor_to(const Tensor& t) {
  std::vector<double> v = t.to_f64();
  Array<T> a;
  a.dims = t.dims();
  for (double x : v) {
    if constexpr (std::is_same_v<T, Fp>) {
      if (x != std::floor(x)) throw NotApplicable("a non-integer constant has no field value");
      a.data.push_back(Fp::from_signed(static_cast<int64_t>(x)));
    } else {
      a.data.push_back(T(x));
    }
  }
  return a;
}

}  // namespace

void Expr::collect_refs(std::vector<const ExprRef*>& out) const {
  if (kind == Kind::Ref) out.push_back(&ref);
  for (const Expr& a : args) a.collect_refs(out);
}

void Expr::collect_data_refs(std::vector<const ExprRef*>& out) const {
  if (kind == Kind::Ref) out.push_back(&ref);
  if (kind == Kind::Call && !fold) return;  // builtins read types and attribute sets
  for (const Expr& a : args) a.collect_data_refs(out);
}

Expr parse_expr(std::string_view text, const RefResolver& resolve) { return Parser(text, resolve).parse_full(); }

int64_t expr_int(const AttrValue& v, const std::string& what) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* t = std::get_if<Tensor>(&v); t && t->numel() == 1 && is_integer(t->dtype())) return t->i64_at(0);
  throw Error(what + " must be an integer, got " + expr_value_text(v));
}

std::vector<int64_t> expr_ints(const AttrValue& v, const std::string& what) {
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
  if (const auto* t = std::get_if<Tensor>(&v); t && is_integer(t->dtype())) return t->to_i64();
  if (const auto* d = std::get_if<std::vector<double>>(&v); d && d->empty()) return {};
  throw Error(what + " must be a list of integers, got " + expr_value_text(v));
}

std::string expr_value_text(const AttrValue& v) {
  auto list = [](const auto& xs, auto fmt) {
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + fmt(xs[i]);
    return s + "]";
  };
  auto num = [](double d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    return std::string(buf);
  };
  return std::visit(
      [&](const auto& x) -> std::string {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<X, double>) return num(x);
        else if constexpr (std::is_same_v<X, std::string>) return "\"" + x + "\"";
        else if constexpr (std::is_same_v<X, std::vector<int64_t>>)
          return list(x, [](int64_t i) { return std::to_string(i); });
        else if constexpr (std::is_same_v<X, std::vector<double>>) return list(x, num);
        else if constexpr (std::is_same_v<X, std::vector<std::string>>)
          return list(x, [](const std::string& s) { return "\"" + s + "\""; });
        else return "tensor " + std::string(dtype_name(x.dtype())) + to_string(x.dims());
      },
      v);
}

AttrValue eval_expr(const Expr& e, const ExprEnv& env) {
  switch (e.kind) {
    case Expr::Kind::Int: return e.i;
    case Expr::Kind::Float: return e.f;
    case Expr::Kind::String: return e.text;
    case Expr::Kind::List: {
      std::vector<int64_t> ints;
      std::vector<double> floats;
      bool any_float = false;
      for (const Expr& a : e.args) {
        AttrValue v = eval_expr(a, env);
        if (const auto* i = std::get_if<int64_t>(&v)) {
          ints.push_back(*i);
          floats.push_back(static_cast<double>(*i));
        } else if (const auto* d = std::get_if<double>(&v)) {
          any_float = true;
          floats.push_back(*d);
        } else {
          throw Error("list elements must be numbers, got " + expr_value_text(v));
        }
      }
      if (any_float) return floats;
      return ints;
    }
    case Expr::Kind::Ref: {
      const ExprRef& r = e.ref;
      if (r.kind == ExprRef::Kind::Attr) {
        const AttrValue* v = env.attr_of(r);
        if (!v) throw NotApplicable("%" + r.name + " is not bound");
        return *v;
      }
      if (r.kind == ExprRef::Kind::Attrs) throw Error("%" + r.name + " is an attribute set; read it with attr()");
      const Tensor* t = env.constant_of(r);
      if (!t) throw NotApplicable("%" + r.name + " is not a constant");
      return *t;
    }
    case Expr::Kind::Call: {
      if (!e.fold) return eval_builtin(e, env);
      if (e.fold->tensor_fold()) {
        DType dtype = DType::Undefined;
        TensorLeafFn<double> leaf = [&](const ExprRef& r, DType* dt) {
          const Tensor* t = env.constant_of(r);
          if (!t) throw NotApplicable("%" + r.name + " is not a constant");
          if (!is_numeric(t->dtype())) throw NotApplicable("%" + r.name + " is not numeric");
          if (dt) *dt = t->dtype();
          return tensor_to<double>(*t);
        };
        Array<double> a = eval_tensor_fold<double>(e, env, leaf, &dtype);
        return Tensor::from_f64(dtype, a.dims, a.data);
      }
      std::vector<AttrValue> args;
      for (const Expr& a : e.args) args.push_back(eval_expr(a, env));
      return e.fold->eval(args);
    }
    case Expr::Kind::Unary: {
      AttrValue v = eval_expr(e.args[0], env);
      if (e.text == "!") return int64_t{!truthy(v)};
      if (const auto* i = std::get_if<int64_t>(&v)) return -*i;
      if (const auto* d = std::get_if<double>(&v)) return -*d;
      throw Error("cannot negate " + expr_value_text(v));
    }
    case Expr::Kind::Binary: {
      if (e.text == "&&") return int64_t{truthy(eval_expr(e.args[0], env)) && truthy(eval_expr(e.args[1], env))};
      if (e.text == "||") return int64_t{truthy(eval_expr(e.args[0], env)) || truthy(eval_expr(e.args[1], env))};
      return eval_binary(e.text, eval_expr(e.args[0], env), eval_expr(e.args[1], env));
    }
  }
  throw Error("bad expression");
}

bool eval_guard(const Expr& e, const ExprEnv& env) {
  try {
    return truthy(eval_expr(e, env));
  } catch (const NotApplicable&) {
    return false;
  }
}

template <class T>
Array<T> eval_tensor_fold(const Expr& e, const ExprEnv& env, const TensorLeafFn<T>& leaf, DType* dtype) {
  const FoldDef& f = *e.fold;
  std::vector<FoldArg<T>> args(e.args.size());
  for (size_t i = 0; i < e.args.size(); ++i) {
    const Expr& a = e.args[i];
    bool tensor = std::find(f.tensor_args.begin(), f.tensor_args.end(), static_cast<int>(i)) != f.tensor_args.end();
    if (!tensor) {
      args[i].value = eval_expr(a, env);
      continue;
    }
    args[i].is_tensor = true;
    DType dt = DType::Undefined;
    if (a.kind == Expr::Kind::Ref && is_operand(a.ref)) {
      args[i].array = leaf(a.ref, &dt);
    } else if (a.kind == Expr::Kind::Call && a.fold && a.fold->tensor_fold()) {
      args[i].array = eval_tensor_fold<T>(a, env, leaf, &dt);
    } else {
      AttrValue v = eval_expr(a, env);
      const auto* t = std::get_if<Tensor>(&v);
      if (!t) throw Error(std::string(f.name) + " argument " + std::to_string(i + 1) + " must be a tensor");
      dt = t->dtype();
      args[i].array = tensor_to<T>(*t);
    }
    if (dtype && *dtype == DType::Undefined) *dtype = dt;
  }
  if constexpr (std::is_same_v<T, Fp>) {
    if (!f.eval_field) throw NotApplicable(std::string(f.name) + " has no field semantics");
    return f.eval_field(args);
  } else if constexpr (std::is_same_v<T, Sym>) {
    if (!f.eval_sym) throw NotApplicable(std::string(f.name) + " has no symbolic semantics");
    return f.eval_sym(args);
  } else {
    return f.eval_f64(args);
  }
}

template Array<double> eval_tensor_fold<double>(const Expr&, const ExprEnv&, const TensorLeafFn<double>&, DType*);
template Array<Fp> eval_tensor_fold<Fp>(const Expr&, const ExprEnv&, const TensorLeafFn<Fp>&, DType*);
template Array<Sym> eval_tensor_fold<Sym>(const Expr&, const ExprEnv&, const TensorLeafFn<Sym>&, DType*);

}  // namespace isomer
