#pragma once
// One clock for everything that times runs: the wall clock, or processor time of the
// calling thread (one-thread runs execute on it, so preemption by another process
// does not count) or of the whole process (every worker's time).
#include <chrono>
#include <ctime>

namespace isomer::runtime {

enum class StepClock { wall, thread, process };

// Milliseconds on clock `c`, to subtract from one another.
inline double clock_ms(StepClock c) {
  if (c == StepClock::wall)
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(c == StepClock::thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// The processor-time clock for runs on `threads` threads: the calling thread's on
// one (the run executes on it; a preemption by another process does not count),
// else the process's (every worker's).
inline StepClock run_clock(int threads) { return threads == 1 ? StepClock::thread : StepClock::process; }

}  // namespace isomer::runtime
