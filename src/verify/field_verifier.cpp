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

std::string short_inputs(const Rule& rule, const std::vector<FieldArray>& inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].numel() > 8) continue;
    s += " %";
    s += rule.vars[i].name;
    s += "=[";
    for (size_t k = 0; k < inputs[i].data.size(); ++k) {
      if (k) s += ",";
      s += std::to_string(inputs[i].data[k].value());
    }
    s += "]";
  }
  return s;
}

}  // namespace

int64_t degree_bound(const Graph& g) {
  std::unordered_map<const Node*, int64_t> degree;
  auto deg = [&](const Value& v) -> int64_t { return v.present() ? degree.at(v.node.get()) : 0; };
  for (const NodePtr& n : g.topo_order()) {
    int64_t d = 0;
    if (n->kind() == NodeKind::Input) {
      d = 1;
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
  for (size_t k = 0; k < rule.verify_shapes.size(); ++k) {
    const auto& types = rule.verify_shapes[k];
    Graph src, tgt;
    try {
      src = rule.build_source(types);
      tgt = rule.build_target(types);
    } catch (const Error& e) {
      return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, std::string("sides do not build: ") + e.what()});
    }
    for (const Graph* side : {&src, &tgt})
      if (auto op = missing_field_semantics(*side))
        return finish({Verdict::Kind::Unknown, 0, 0, 0, -1, "needs Z3 (no field semantics for " + *op + ")"});
    int64_t d = std::max<int64_t>({degree_bound(src), degree_bound(tgt), 1});
    double bits_per_trial = log2_p - std::log2(static_cast<double>(d));
    int trials = std::max(options.min_trials,
                          saturate_float_to_int<int>(std::ceil(options.target_bits / bits_per_trial), "trial count"));
    Rng rng{options.seed + 0x9e37 * k};
    for (int t = 0; t < trials; ++t) {
      std::vector<FieldArray> inputs;
      for (const TensorType& type : types) {
        FieldArray a(static_dims(type.shape, "verify shape"));
        for (Fp& x : a.data) x = rng.field();
        inputs.push_back(std::move(a));
      }
      std::vector<FieldArray> a, b;
      try {
        a = evaluate_field(src, inputs);
        b = evaluate_field(tgt, inputs);
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
                             std::to_string(options.seed) + ": " + where + short_inputs(rule, inputs)});
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
