#include "verify/field_verifier.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <unordered_map>
#include <cmath>
#include <optional>
#include <string>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/float_to_int.h"
#include "ops/op.h"
#include "rules/binding.h"
#include "rules/fold.h"

namespace isomer {
namespace {

// splitmix64: a tiny, well-mixed, reproducible generator.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, p): 61 random bits, rejecting the one value p itself.
  Fp field() {
    for (;;) {
      uint64_t v = next() >> 3;
      if (v < Fp::kP) return Fp(v);
    }
  }
};

// The first operator of `g` without field semantics, if any.
std::optional<std::string> missing_field_semantics(const Graph& g) {
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() == NodeKind::Opaque) return n->op_type() + " (opaque)";
    if (n->kind() == NodeKind::Op && !n->op()->eval_field) return n->op_type();
  }
  return std::nullopt;
}

std::string short_inputs(const Rule& rule, const RuleInstance& inst, const std::vector<FieldArray>& inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size() && i < inst.input_vars.size(); ++i) {
    if (inputs[i].numel() > 8) continue;
    s += " %";
    s += rule.vars[static_cast<size_t>(inst.input_vars[i])].name;
    s += "=[";
    for (size_t k = 0; k < inputs[i].data.size(); ++k) {
      if (k) s += ",";
      s += std::to_string(inputs[i].data[k].value());
    }
    s += "]";
  }
  return s;
}

// Every tensor fold in `e` has field semantics.
bool fold_has_field(const Expr& e) {
  if (e.kind == Expr::Kind::Call && e.fold && e.fold->tensor_fold() && !e.fold->eval_field) return false;
  for (const Expr& a : e.args)
    if (!fold_has_field(a)) return false;
  return true;
}

// A fold's degree in the inputs: at most the sum of its tensor operands' degrees (a
// product of them); the operands are inputs (degree 1), constants (0) or earlier folds.
int64_t fold_degree(const Expr& e, const Rule& rule, const RuleInstance& inst, const std::vector<int64_t>& node_degree) {
  int64_t d = 0;
  if (e.kind == Expr::Kind::Ref) {
    if (e.ref.kind == ExprRef::Kind::Operand)
      return std::find(inst.input_vars.begin(), inst.input_vars.end(), e.ref.index) != inst.input_vars.end() ? 1 : 0;
    if (e.ref.kind == ExprRef::Kind::TargetValue) return node_degree[static_cast<size_t>(e.ref.index)];
    return 0;
  }
  for (const Expr& a : e.args) d += fold_degree(a, rule, inst, node_degree);
  return d;
}

}  // namespace

int64_t degree_bound(const Graph& g) { return degree_bound(g, std::vector<int64_t>(g.inputs().size(), 1)); }

int64_t degree_bound(const Graph& g, const std::vector<int64_t>& input_degrees) {
  std::unordered_map<const Node*, int64_t> degree;
  for (size_t i = 0; i < g.inputs().size() && i < input_degrees.size(); ++i) degree[g.inputs()[i].get()] = input_degrees[i];
  auto deg = [&](const Value& v) -> int64_t { return v.present() ? degree.at(v.node.get()) : 0; };
  for (const NodePtr& n : g.topo_order()) {
    int64_t d = 0;
    if (n->kind() == NodeKind::Input) {
      d = degree.count(n.get()) ? degree.at(n.get()) : 1;
    } else if (n->kind() == NodeKind::Op) {
      require(n->op()->eval_field != nullptr, "no field semantics for " + n->op_type());
      bool max_like = n->op_type() == "Add" || n->op_type() == "Sub" || n->op_type() == "Concat";
      for (const Value& in : n->inputs()) d = max_like ? std::max(d, deg(in)) : d + deg(in);
    } else if (n->kind() == NodeKind::Opaque) {
      throw Error("no field semantics for opaque " + n->op_type());
    }
    degree[n.get()] = d;
  }
  int64_t out = 0;
  for (const Value& v : g.outputs()) out = std::max(out, deg(v));
  return out;
}

FieldVerifyResult field_verify(const Rule& rule, const FieldVerifyOptions& options) {
  auto start = std::chrono::steady_clock::now();
  FieldVerifyResult result;
  auto finish = [&](Verdict v) {
    v.time_s = std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e4) / 1e4;
    result.verdict = std::move(v);
    return result;
  };
  const double log2_p = std::log2(static_cast<double>(Fp::kP)) - 1e-9;  // p < 2^61: stay conservative
  int worst_bits = INT32_MAX, trials_used = 0;
  int64_t worst_degree = 0;
  for (size_t k = 0; k < rule.verify.size(); ++k) {
    RuleInstance inst;
    try {
      inst = instantiate(rule, k);
    } catch (const Error& e) {
      return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, std::string("sides do not build: ") + e.what()});
    }
    const Graph& src = inst.source;
    const Graph& tgt = inst.target;
    for (const Graph* side : {&src, &tgt})
      if (auto op = missing_field_semantics(*side))
        return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, "needs Z3 (no field semantics for " + *op + ")"});
    for (int node : inst.fold_nodes)
      if (!fold_has_field(rule.target.nodes[static_cast<size_t>(node)].fold))
        return finish({Verdict::Kind::Unknown, 0, 0, 0, -1,
                       "needs Z3 (no field semantics for fold " + rule.target.nodes[static_cast<size_t>(node)].fold.text + ")"});
    std::vector<int64_t> node_degree(rule.target.nodes.size(), 0);
    std::vector<int64_t> target_degrees(inst.input_vars.size(), 1);
    for (int node : inst.fold_nodes) {
      node_degree[static_cast<size_t>(node)] = fold_degree(rule.target.nodes[static_cast<size_t>(node)].fold, rule, inst, node_degree);
      target_degrees.push_back(node_degree[static_cast<size_t>(node)]);
    }
    int64_t d = std::max<int64_t>({degree_bound(src), degree_bound(tgt, target_degrees), 1});
    double bits_per_trial = log2_p - std::log2(static_cast<double>(d));
    int trials = std::max(options.min_trials,
                          saturate_float_to_int<int>(std::ceil(options.target_bits / bits_per_trial), "trial count"));
    Rng rng{options.seed + 0x9e37 * k};
    for (int t = 0; t < trials; ++t) {
      std::vector<FieldArray> inputs;
      for (const NodePtr& in : src.inputs()) {
        FieldArray a(static_dims(in->output_types()[0].shape, "verify shape"));
        for (Fp& x : a.data) x = rng.field();
        inputs.push_back(std::move(a));
      }
      std::vector<FieldArray> a, b;
      try {
        a = evaluate_field(src, inputs);
        std::vector<FieldArray> target_inputs = inputs;
        for (FieldArray& f : fold_inputs<Fp>(rule, inst, inputs)) target_inputs.push_back(std::move(f));
        b = evaluate_field(tgt, target_inputs);
      } catch (const NotApplicable& e) {
        return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, std::string("field evaluation failed: ") + e.what()});
      } catch (const Error& e) {
        return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, std::string("field evaluation failed: ") + e.what()});
      }
      for (size_t o = 0; o < a.size(); ++o) {
        std::string where;
        if (a[o].dims != b[o].dims) {
          where = "output " + std::to_string(o) + " has dims " + to_string(a[o].dims) + " vs " + to_string(b[o].dims);
        } else {
          for (size_t e = 0; e < a[o].data.size() && where.empty(); ++e)
            if (a[o].data[e] != b[o].data[e])
              where = "output " + std::to_string(o) + " element " + std::to_string(e) + ": source " +
                      std::to_string(a[o].data[e].value()) + " != target " + std::to_string(b[o].data[e].value());
        }
        if (!where.empty()) {
          result.instantiation = k;
          result.counterexample = inputs;
          return finish({Verdict::Kind::Refuted, 0, 0, 0, -1,
                         "at verify-shapes " + std::to_string(k + 1) + ", trial " + std::to_string(t) + ", seed " +
                             std::to_string(options.seed) + ": " + where + short_inputs(rule, inst, inputs)});
        }
      }
    }
    int bits = saturate_float_to_int<int>(std::floor(trials * bits_per_trial), "bits of confidence");
    if (bits < worst_bits) {
      worst_bits = bits;
      trials_used = trials;
      worst_degree = d;
    }
  }
  return finish({Verdict::Kind::Tested, worst_bits, trials_used, worst_degree, -1, ""});
}

void field_verify_all(RuleSet& set, const FieldVerifyOptions& options) {
  for (Rule& r : set.rules) r.verdict = field_verify(r, options).verdict;
}

}  // namespace isomer
