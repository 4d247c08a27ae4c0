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

Verdict verify_rule(const Rule& rule, const VerifyOptions& options) {
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
