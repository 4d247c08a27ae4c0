#pragma once
// An OpenMP team pinned one thread per CPU around the guard's timed runs, and around
// `isomer run --bench`'s and the Python module's runs when isomer chose the short spin.
#include <optional>
#include <string>
#include <vector>

namespace isomer::runtime {

// While it lives, each thread of this process's OpenMP team of `threads` (0 = every
// CPU) runs on a CPU of its own, the i-th thread on the i-th CPU this process may
// use; then each thread gets its own CPU mask back. What the short spin
// (choose_openmp_waits) assumes and `isomer run` finds on a quiet machine: a
// scheduler that packs work onto few CPUs while the machine is idle (this project's
// VM does) put the team's worker on its caller's CPU after it had slept through
// optimize's check, and there each barrier waited out a whole spin (~25 us) before
// the thread it waited for could run: the guard read 0.26 ms a run for a model
// `isomer run` runs in 0.028 ms. A team larger than the CPUs, or of one thread, is
// left as it is. Only around runs: a process started meanwhile (ONNX
// Runtime's helper) would inherit the calling thread's single CPU.
class OneCpuPerThread {
 public:
  explicit OneCpuPerThread(int threads);
  ~OneCpuPerThread();
  OneCpuPerThread(const OneCpuPerThread&) = delete;
  OneCpuPerThread& operator=(const OneCpuPerThread&) = delete;
  // The CPU of each thread of the team (thread 0: the caller); empty when not pinned.
  const std::vector<int>& cpus() const { return cpus_; }
  // For reports: "2 threads, one per CPU (0, 1)", or why the team was left as it was.
  const std::string& note() const { return note_; }

 private:
  void restore();  // gives each thread its CPUs back
  std::vector<int> cpus_;
  std::vector<std::vector<int>> saved_;  // each thread's CPUs before
  std::string note_;
};
// The CPUs the calling thread may run on.
std::vector<int> thread_cpus();

class Executable;

// Why runs of `exe` on the runtime (`isomer run`, the Python module's run and
// benchmark) keep their team where the scheduler puts it; empty: pin it one thread
// per CPU. Pinned when its OpenMP threads spin briefly at barriers by isomer's choice
// (openmp_spins_by_isomer): on this project's VM the scheduler put the worker on its
// caller's CPU, and each barrier then waited out the spin (~25 us) before the thread
// it waited for could run, loaded or not (demo.onnx at 2 threads: 0.25 ms a run, 0.06
// passive). Never when the user placed the threads (OMP_PROC_BIND, OMP_PLACES,
// GOMP_CPU_AFFINITY; OMP_PROC_BIND=false keeps them unpinned), nor when a step runs in
// ONNX Runtime's helper (a helper started there would inherit one CPU); a taskset
// mask is kept, since OneCpuPerThread pins only into the CPUs the caller may use.
std::string why_runs_stay_unpinned(const Executable& exe);

// A OneCpuPerThread for the runs of `exe` while it lives, when why_runs_stay_unpinned
// says so; note() says how the team was placed, for reports.
class RunPlacement {
 public:
  explicit RunPlacement(const Executable& exe);
  const std::string& note() const { return note_; }
  bool pinned() const { return pinned_.has_value() && !pinned_->cpus().empty(); }

 private:
  std::optional<OneCpuPerThread> pinned_;
  std::string note_;
};

}  // namespace isomer::runtime
