#pragma once
// Threading and instruction-set helpers shared by the native kernels. Built
// without OpenMP (the fuzzing harnesses, which take the operator table's kernels
// but not the runtime), a team is always one thread.
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <unistd.h>

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

// True when this process's OpenMP threads sleep while they wait
// (OMP_WAIT_POLICY=PASSIVE, which the runtime chooses when other work holds the
// cores: runtime/runtime.h). Each parallel region then waits for the scheduler to
// wake its threads on cores that are busy, which costs far more than waking a
// spinning thread: kernels ask for more work per thread before they take a team.
inline bool team_threads_sleep() {
  const char* p = std::getenv("OMP_WAIT_POLICY");
  return p && (std::strcmp(p, "PASSIVE") == 0 || std::strcmp(p, "passive") == 0);
}

// The team for `units` of work, a unit being what pays for waking one more
// thread while threads spin between regions: at most `threads`, at least one,
// and a thread needs 4x as much while threads sleep (team_threads_sleep).
inline int team_for_work(int threads, double units) {
  const double per_thread = team_threads_sleep() ? 4.0 : 1.0;
  const double team = units / per_thread;
  return team < 1 ? 1 : team >= threads ? threads : static_cast<int>(team);
}

// The cache a core holds data in between steps (L2), or 1 MiB where the system
// does not say.
inline size_t l2_bytes_per_core() {
  static const size_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? static_cast<size_t>(l2) : size_t{1} << 20;
  }();
  return bytes;
}

// The bytes a memory-bound step (a reorder, a normalization) reads and writes that
// pay for one more thread in team_for_work: attention's head transposes in a small
// ViT (34 KB) took 0.5 us on one thread and 9 us on two, LeViT's BatchNorm1d over
// 16x128 tokens 6 us and 17 us, waiting for the second thread to wake.
constexpr double kTeamBytes = 256.0 * 1024;

// A barrier for a team that meets many times in a row (a recurrence's steps, some
// microseconds apart). An OpenMP barrier under OMP_WAIT_POLICY=PASSIVE sleeps in
// the kernel and costs a wake-up (tens of microseconds) at every meeting; this one
// spins on a shared counter for a few microseconds, then yields the core, so a
// member waiting for one that lost its core lets it run instead of spinning on.
class SpinBarrier {
 public:
  explicit SpinBarrier(int members) : members_(members) {}

  void wait() {
    const unsigned round = round_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == members_) {
      arrived_.store(0, std::memory_order_relaxed);
      round_.store(round + 1, std::memory_order_release);
      return;
    }
    for (int spins = 0; round_.load(std::memory_order_acquire) == round; ++spins) {
      if (spins < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kSpins = 256;  // pause loops: some 5-20 microseconds
  const int members_;
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<unsigned> round_{0};
};

}  // namespace isomer::kernels
