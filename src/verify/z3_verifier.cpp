#include "verify/z3_verifier.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "eval/evaluator.h"
#include "eval/sym.h"
#include "ir/error.h"
#include "ir/float_to_int.h"

namespace isomer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRandomPoints = 4;  // tried before the solver at each instantiation
// Bounds the sum-of-monomials normalization of one element difference (expanding
// deep products of sums can grow exponentially; the simplifier has no timeout).
constexpr unsigned kSimplifySteps = 1000000;

// Translates Sym expressions to Z3 real terms, memoized by handle (the DAG is
// shared, so a term used by many elements is translated once).
class Z3Translator {
 public:
  Z3Translator(z3::context& ctx, std::vector<std::string> var_names) : ctx_(ctx), var_names_(std::move(var_names)) {}

  z3::expr operator()(Sym s) {
    auto it = memo_.find(s.id());
    if (it != memo_.end()) return it->second;
    z3::expr e = translate(sym_node(s));
    memo_.emplace(s.id(), e);
    return e;
  }

  z3::expr var(uint32_t index) {
    auto it = vars_.find(index);
    if (it != vars_.end()) return it->second;
    z3::expr v = ctx_.real_const(var_names_.at(index).c_str());
    vars_.emplace(index, v);
    return v;
  }

  const std::set<std::string>& functions() const { return functions_; }

 private:
  z3::expr translate(const SymNode& n) {
    switch (n.kind) {
      case SymKind::Const: {
        std::string text = n.text.empty() ? std::to_string(n.num) + "/" + std::to_string(n.den) : n.text;
        return ctx_.real_val(text.c_str());
      }
      case SymKind::Var: return var(n.var);
      case SymKind::Add: {
        z3::expr_vector terms(ctx_);
        for (Sym a : n.args) terms.push_back((*this)(a));
        return z3::sum(terms);
      }
      case SymKind::Mul: return (*this)(n.args[0]) * (*this)(n.args[1]);
      case SymKind::Neg: return -(*this)(n.args[0]);
      case SymKind::Div:
        // Z3's x/0 is an unspecified value: a model may rely on it like on an
        // uninterpreted function (the constructor folded constant divisors away).
        functions_.insert("division (x/0)");
        return (*this)(n.args[0]) / (*this)(n.args[1]);
      case SymKind::IteGt:
      case SymKind::IteGe: {
        z3::expr a = (*this)(n.args[0]), b = (*this)(n.args[1]);
        return z3::ite(n.kind == SymKind::IteGt ? a > b : a >= b, (*this)(n.args[2]), (*this)(n.args[3]));
      }
      case SymKind::Max:
      case SymKind::Min: {
        z3::expr m = (*this)(n.args[0]);
        for (size_t i = 1; i < n.args.size(); ++i) {
          z3::expr x = (*this)(n.args[i]);
          m = z3::ite(n.kind == SymKind::Max ? x > m : x < m, x, m);
        }
        return m;
      }
      case SymKind::Apply: {
        functions_.insert(n.text);
        z3::sort_vector domain(ctx_);
        z3::expr_vector args(ctx_);
        for (Sym a : n.args) {
          domain.push_back(ctx_.real_sort());
          args.push_back((*this)(a));
        }
        z3::func_decl f = ctx_.function(n.text.c_str(), domain, ctx_.real_sort());
        return f(args);
      }
    }
    throw Error("unknown symbolic node");
  }

  z3::context& ctx_;
  std::vector<std::string> var_names_;
  std::unordered_map<uint32_t, z3::expr> memo_, vars_;
  std::set<std::string> functions_;
};

// A model value as a short decimal ("0.5", "-3", "1.41421?" for an algebraic number).
std::string model_text(const z3::expr& v) {
  if (v.is_numeral()) {
    std::string s = v.get_decimal_string(6);
    return s;
  }
  if (v.is_algebraic()) return v.get_decimal_string(6);
  return v.to_string();
}

double model_double(const z3::expr& v) {
  std::string s = model_text(v);
  if (!s.empty() && s.back() == '?') s.pop_back();
  try {
    return std::stod(s);
  } catch (...) {
    return 0;
  }
}

std::string element_list(const std::vector<std::string>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size() && i < 8; ++i) s += (i ? "," : "") + values[i];
  if (values.size() > 8) s += ",...";
  return s + "]";
}

// Float evaluation of both sides at the model point: the first output element that
// differs beyond float rounding, or "" if none does (or the sides do not evaluate).
std::string float_difference(const Graph& src, const Graph& tgt, const std::vector<TensorType>& types,
                             const std::vector<std::vector<double>>& values) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < types.size(); ++i)
    inputs.push_back(Tensor::from_f64(types[i].dtype, static_dims(types[i].shape, "verify shape"), values[i]));
  std::vector<Tensor> a, b;
  try {
    a = evaluate(src, inputs);
    b = evaluate(tgt, inputs);
  } catch (const Error&) {
    return "";
  }
  for (size_t o = 0; o < a.size() && o < b.size(); ++o) {
    std::vector<double> x = a[o].to_f64(), y = b[o].to_f64();
    for (size_t e = 0; e < x.size() && e < y.size(); ++e) {
      // Beyond rounding: NaN on one side only, different infinities, or a relative gap.
      const bool nan_differs = std::isnan(x[e]) != std::isnan(y[e]);
      const bool both_numbers = !std::isnan(x[e]) && !std::isnan(y[e]);
      const bool inf_differs = (std::isinf(x[e]) || std::isinf(y[e])) && x[e] != y[e];
      const bool gap = std::fabs(x[e] - y[e]) > 1e-3 * (1 + std::fabs(x[e]) + std::fabs(y[e]));
      if (nan_differs || (both_numbers && (inf_differs || gap)))
        return "output " + std::to_string(o) + " element " + std::to_string(e) + ": " + std::to_string(x[e]) +
               " vs " + std::to_string(y[e]);
    }
  }
  return "";
}

// Serializes `s` as a tree with variables numbered by first occurrence; false once
// `out` exceeds kMaxKeyChars (large shared DAGs are not worth comparing this way).
constexpr size_t kMaxKeyChars = 4096;
bool serialize(Sym s, std::unordered_map<uint32_t, uint32_t>& rename, std::string& out) {
  if (out.size() > kMaxKeyChars) return false;
  const SymNode& n = sym_node(s);
  out += static_cast<char>('A' + static_cast<int>(n.kind));
  if (n.kind == SymKind::Const) {
    out += n.text.empty() ? std::to_string(n.num) + "/" + std::to_string(n.den) : n.text;
  } else if (n.kind == SymKind::Var) {
    auto it = rename.emplace(n.var, static_cast<uint32_t>(rename.size())).first;
    out += std::to_string(it->second);
  } else if (n.kind == SymKind::Apply) {
    out += n.text;
  }
  out += '(';
  for (Sym arg : n.args)
    if (!serialize(arg, rename, out)) return false;
  out += ')';
  return true;
}

// The class of an element pair up to variable renaming, or "" if too large.
std::string shape_key(Sym source, Sym target) {
  std::unordered_map<uint32_t, uint32_t> rename;
  std::string key;
  if (!serialize(source, rename, key) || !(key += '|', serialize(target, rename, key))) return "";
  return key;
}

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

Z3VerifyResult z3_verify(const Rule& rule, const Z3VerifyOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(options.timeout_s, 0.0)));
  Z3VerifyResult result;
  auto finish = [&](Verdict::Kind kind, std::string reason) {
    Verdict v;
    v.kind = kind;
    v.reason = std::move(reason);
    v.time_s = std::round(std::chrono::duration<double>(Clock::now() - start).count() * 1e4) / 1e4;
    result.verdict = std::move(v);
    return result;
  };
  for (size_t k = 0; k < rule.verify_shapes.size(); ++k) {
    const std::vector<TensorType>& types = rule.verify_shapes[k];
    const std::string at = "at verify-shapes " + std::to_string(k + 1) + ": ";
    Graph src, tgt;
    try {
      src = rule.build_source(types);
      tgt = rule.build_target(types);
    } catch (const Error& e) {
      return finish(Verdict::Kind::Unknown, std::string("sides do not build: ") + e.what());
    }
    SymArenaScope arena;
    // One real variable per input element, named %var[i] in models.
    std::vector<SymArray> inputs;
    std::vector<std::string> var_names;
    std::vector<std::pair<size_t, size_t>> var_of;  // Sym var index -> (rule var, element)
    for (size_t i = 0; i < types.size(); ++i) {
      SymArray a(static_dims(types[i].shape, "verify shape"));
      for (size_t e = 0; e < a.data.size(); ++e) {
        a.data[e] = Sym::var(static_cast<uint32_t>(var_names.size()));
        var_names.push_back("%" + rule.vars[i].name + "[" + std::to_string(e) + "]");
        var_of.emplace_back(i, e);
      }
      inputs.push_back(std::move(a));
    }
    std::vector<SymArray> a, b;
    try {
      a = evaluate_sym(src, inputs);
      b = evaluate_sym(tgt, inputs);
    } catch (const Error& e) {
      return finish(Verdict::Kind::Unknown, std::string("no symbolic semantics: ") + e.what());
    }
    // Elements whose expressions are not identical: (output, element).
    std::vector<std::pair<size_t, size_t>> open;
    for (size_t o = 0; o < a.size(); ++o) {
      if (a[o].dims != b[o].dims)
        return finish(Verdict::Kind::Refuted, at + "output " + std::to_string(o) + " has dims " +
                                                   to_string(a[o].dims) + " vs " + to_string(b[o].dims));
      for (size_t e = 0; e < a[o].data.size(); ++e)
        if (!a[o].data[e].identical(b[o].data[e])) open.emplace_back(o, e);
    }
    // Elements whose (source, target) pair is the same up to renaming the input
    // variables are equal everywhere iff one of them is: keep one per class. This
    // turns an elementwise rule over n elements into one small problem.
    std::set<std::string> classes;
    std::erase_if(open, [&](const std::pair<size_t, size_t>& oe) {
      std::string key = shape_key(a[oe.first].data[oe.second], b[oe.first].data[oe.second]);
      return !key.empty() && !classes.insert(std::move(key)).second;
    });
    if (open.empty()) continue;

    z3::context ctx;
    Z3Translator z3_of(ctx, var_names);
    z3::params som(ctx);
    som.set("som", true);  // sums of monomials: polynomial identities simplify to 0
    z3::expr_vector differs(ctx);
    std::vector<std::pair<size_t, size_t>> still_open;
    std::vector<z3::expr> diffs;
    som.set("max_steps", kSimplifySteps);
    for (auto [o, e] : open) {
      if (Clock::now() >= deadline)
        return finish(Verdict::Kind::Unknown, at + "z3 timed out (" + std::to_string(options.timeout_s) + " s)");
      z3::expr d = z3_of(a[o].data[e]) - z3_of(b[o].data[e]);
      try {
        d = d.simplify(som);
      } catch (const z3::exception&) {
        // Too large to normalize within the step bound: the solver gets it as it is.
      }
      if (d.is_numeral() && d.get_decimal_string(0) == "0") continue;
      still_open.push_back({o, e});
      diffs.push_back(d);
      differs.push_back(d != ctx.real_val(0));
    }
    if (still_open.empty()) continue;

    // Before the solver: a few random small-integer points, evaluated exactly by Z3's
    // simplifier. Nonlinear refutations (products of inputs) are often hard for the
    // solver and easy to hit this way; a point where an element differs is a model.
    if (Clock::now() >= deadline)
      return finish(Verdict::Kind::Unknown, at + "z3 timed out (" + std::to_string(options.timeout_s) + " s)");
    z3::expr_vector all_vars(ctx);
    for (size_t v = 0; v < var_of.size(); ++v) all_vars.push_back(z3_of.var(static_cast<uint32_t>(v)));
    std::function<z3::expr(const z3::expr&)> eval_at;
    std::mt19937_64 rng(0x5eed + k);
    for (int trial = 0; trial < kRandomPoints && !eval_at; ++trial) {
      z3::expr_vector point(ctx);
      for (size_t v = 0; v < var_of.size(); ++v)
        point.push_back(ctx.real_val(static_cast<int>(rng() % 7) - 3));  // in [-3, 3]
      for (z3::expr d : diffs) {  // by value: substitute() is not const
        z3::expr at_point = d.substitute(all_vars, point).simplify();
        if (at_point.is_numeral() && at_point.get_decimal_string(0) != "0") {
          eval_at = [all_vars, point](z3::expr e) { return e.substitute(all_vars, point).simplify(); };
          break;
        }
      }
      if (Clock::now() > deadline) break;
    }
    std::optional<z3::model> model;
    if (!eval_at) {
      const double left_s = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left_s <= 0)
        return finish(Verdict::Kind::Unknown, at + "z3 timed out (" + std::to_string(options.timeout_s) + " s)");
      ++result.solver_calls;
      z3::solver solver(ctx);
      z3::params p(ctx);
      p.set("timeout", saturate_float_to_int<unsigned>(std::max(1.0, std::ceil(left_s * 1000)), "z3 timeout"));
      if (options.rlimit) p.set("rlimit", options.rlimit);
      solver.set(p);
      solver.add(z3::mk_or(differs));
      z3::check_result r = z3::unknown;
      try {
        r = solver.check();
      } catch (const z3::exception& e) {
        return finish(Verdict::Kind::Unknown, at + "z3 error: " + e.msg());
      }
      if (r == z3::unsat) continue;
      if (r == z3::unknown) {
        std::string why = solver.reason_unknown();
        if (options.rlimit && why == "canceled") why = "resource limit " + std::to_string(options.rlimit) + " reached";
        return finish(Verdict::Kind::Unknown, at + "z3 gave up: " + why);
      }
      model = solver.get_model();
      eval_at = [&model](const z3::expr& e) { return model->eval(e, true); };
    }

    // A counterexample: the input values and the first element that differs there.
    std::vector<std::vector<double>> values(types.size());
    std::vector<std::vector<std::string>> texts(types.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      values[i].resize(inputs[i].data.size());
      texts[i].resize(inputs[i].data.size());
    }
    for (size_t v = 0; v < var_of.size(); ++v) {
      z3::expr val = eval_at(all_vars[static_cast<int>(v)]);
      values[var_of[v].first][var_of[v].second] = model_double(val);
      texts[var_of[v].first][var_of[v].second] = model_text(val);
    }
    std::string where;
    for (size_t i = 0; i < still_open.size() && where.empty(); ++i) {
      z3::expr d = eval_at(diffs[i]);
      if (d.is_numeral() && d.get_decimal_string(0) == "0") continue;
      auto [o, e] = still_open[i];
      where = "output " + std::to_string(o) + " element " + std::to_string(e) + ": source " +
              model_text(eval_at(z3_of(a[o].data[e]))) + " != target " + model_text(eval_at(z3_of(b[o].data[e])));
    }
    std::string point;
    for (size_t i = 0; i < texts.size(); ++i) point += " %" + rule.vars[i].name + "=" + element_list(texts[i]);
    const std::string float_diff = float_difference(src, tgt, types, values);
    result.float_confirmed = !float_diff.empty();
    // A random point's difference is an exact number (no function or x/0 left in
    // it); a solver model may rely on how it chose those.
    if (model && !z3_of.functions().empty() && !result.float_confirmed)
      return finish(Verdict::Kind::Unknown, at + "counterexample depends on uninterpreted " + join(z3_of.functions()) +
                                                " (float evaluator does not confirm it at" + point + ")");
    result.instantiation = k;
    result.counterexample = values;
    return finish(Verdict::Kind::Refuted,
                  at + where + ";" + point +
                      (result.float_confirmed ? " (float evaluator confirms: " + float_diff + ")"
                                              : " (float evaluator sees no difference at f32 rounding)"));
  }
  return finish(Verdict::Kind::Proved, "");
}

}  // namespace isomer
