#pragma once
// Threading and instruction-set helpers shared by the native kernels. Built
// without OpenMP (the fuzzing harnesses, which take the operator table's kernels
// but not the runtime), a team is always one thread.
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <exception>
#include <mutex>

// A hot loop compiled three times, for AVX-512, AVX2 and the x86-64 baseline; the
// dynamic loader picks the best the CPU has (GCC's function multiversioning), so
// one binary runs everywhere and uses the vector units where they exist.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ISOMER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ISOMER_CLONES
#endif

namespace isomer::kernels {

// Runs body(t, team) on `team` OpenMP threads (inline when team <= 1). An
// exception thrown by a body is rethrown here after the team has joined.
template <class F>
void parallel_teams(int team, F&& body) {
  if (team <= 1) {
    body(0, 1);
    return;
  }
#if !defined(_OPENMP)
  body(0, 1);
#else
  std::exception_ptr error;
  std::mutex m;
#pragma omp parallel num_threads(team)
  {
    try {
      body(omp_get_thread_num(), omp_get_num_threads());
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
#endif
}

}  // namespace isomer::kernels
