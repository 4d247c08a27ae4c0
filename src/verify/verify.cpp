#include "verify/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "verify/z3_verifier.h"

namespace isomer {

namespace {

Verdict verify_one(const Rule& rule, const VerifyOptions& options);

// The weaker of two verdicts (a refutation or an unknown wins; tested beats proved).
Verdict weaker(const Verdict& a, const Verdict& b) {
  auto rank = [](Verdict::Kind k) {
    switch (k) {
      case Verdict::Kind::Refuted: return 0;
      case Verdict::Kind::Unknown: return 1;
      case Verdict::Kind::None: return 2;
      case Verdict::Kind::Tested: return 3;
      case Verdict::Kind::Proved: return 4;
    }
    return 2;
  };
  if (rank(a.kind) != rank(b.kind)) return rank(a.kind) < rank(b.kind) ? a : b;
  Verdict v = a;
  if (a.kind == Verdict::Kind::Tested) {
    v.error_bits = std::min(a.error_bits, b.error_bits);
    v.trials = std::max(a.trials, b.trials);
    v.degree = std::max(a.degree, b.degree);
  }
  return v;
}

}  // namespace

Verdict verify_rule(const Rule& rule, const VerifyOptions& options) {
  if (!rule.variadic) return verify_one(rule, options);
  // A variadic rule: its expansion at each size its verify-shapes lines give.
  const auto start = std::chrono::steady_clock::now();
  Verdict v;
  bool first = true;
  for (size_t n : verify_arities(*rule.variadic)) {
    Verdict at = verify_one(expand_variadic(rule, n), options);
    if (!at.reason.empty()) at.reason = "expanded for " + std::to_string(n) + " elements: " + at.reason;
    v = first ? at : weaker(v, at);
    first = false;
  }
  v.time_s = std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e4) / 1e4;
  return v;
}

namespace {

Verdict verify_one(const Rule& rule, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto timed = [&](Verdict v) {
    v.time_s =
        std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e4) / 1e4;
    return v;
  };
  std::string z3_reason;
  if (options.use_z3) {
    Z3VerifyOptions z3_options;
    z3_options.timeout_s = options.timeout_s;
    z3_options.rlimit = options.rlimit;
    Verdict z3 = z3_verify(rule, z3_options).verdict;
    if (z3.kind == Verdict::Kind::Proved || z3.kind == Verdict::Kind::Refuted) return timed(std::move(z3));
    z3_reason = z3.reason;
  }
  Verdict field = field_verify(rule, options.field).verdict;
  if (field.kind == Verdict::Kind::Tested || field.kind == Verdict::Kind::Refuted || !options.use_z3)
    return timed(std::move(field));
  Verdict unknown;
  unknown.kind = Verdict::Kind::Unknown;
  unknown.reason = "z3: " + z3_reason + "; field: " + field.reason;
  return timed(std::move(unknown));
}

}  // namespace

void verify_all(RuleSet& set, const VerifyOptions& options, int jobs) {
  const size_t n = set.rules.size();
  std::vector<Verdict> verdicts(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        verdicts[i] = verify_rule(set.rules[i], options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(static_cast<size_t>(std::max(jobs, 1)), std::max<size_t>(n, 1));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  // Each verdict depends only on its rule, so the result is the same for any `jobs`.
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    set.rules[i].verdict = std::move(verdicts[i]);
  }
}

}  // namespace isomer
