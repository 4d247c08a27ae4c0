#pragma once
// A limit on how long one run of a model may take while `optimize` runs it for its own
// purposes (the check, the guard's timings, the cost model's pricing). A valid model
// may ask for hours by its own meaning (a Loop whose trip count is 10^9 and whose
// condition never ends it): `isomer run` runs it as asked, but `optimize` must not
// hang on it. While a RunLimit lives, each RunScope arms a deadline, and the places
// that run a model (the runtime's steps, the reference evaluator's nodes, the wait on
// ONNX Runtime's helper) call check_run_limit(), which throws RunLimitExceeded past
// it. The first run that exceeds the limit makes every later scope throw at once:
// the rest of optimize's runs are skipped, for the same reason, without waiting again.
#include <chrono>
#include <optional>
#include <string>

#include "ir/error.h"

namespace isomer {

struct RunLimitExceeded : Error {
  using Error::Error;
};

// Installs a limit of `seconds` per run for this process while it lives (<= 0: none).
// Not nested: optimize installs one.
class RunLimit {
 public:
  // `origin` says where the limit came from, for the message ("--run-limit").
  RunLimit(double seconds, std::string origin);
  ~RunLimit();
  RunLimit(const RunLimit&) = delete;
  RunLimit& operator=(const RunLimit&) = delete;
  // What exceeded the limit ("" when nothing did).
  static std::string exceeded();
};

// `runs` runs of a model: the deadline is `runs` times the limit from now (an
// enclosing scope's deadline stays). Throws RunLimitExceeded when an earlier run
// exceeded the limit. Without a RunLimit it does nothing.
class RunScope {
 public:
  explicit RunScope(int runs = 1);
  ~RunScope();
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  bool armed_ = false;
};

// Throws RunLimitExceeded past the armed deadline; cheap (one atomic load) when none is.
void check_run_limit();

// Throws RunLimitExceeded (the armed deadline passed while waiting on something
// that cannot call check_run_limit(), such as ONNX Runtime's helper).
[[noreturn]] void exceed_run_limit();

// The time left before the armed deadline; nullopt when none is armed.
std::optional<std::chrono::steady_clock::duration> run_time_left();

}  // namespace isomer
