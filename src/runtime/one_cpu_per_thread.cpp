// runtime::OneCpuPerThread (runtime.h): an OpenMP team pinned one thread per CPU
// around the guard's timed runs.
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/one_cpu_per_thread.h"
#include "runtime/runtime.h"

namespace isomer::runtime {

namespace {

std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool set_thread_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

std::string list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

bool delegates(const std::vector<StepInfo>& steps) {
  for (const StepInfo& s : steps)
    if (s.kind == "onnxruntime" || delegates(s.body)) return true;
  return false;
}

}  // namespace

std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return {};
  return cpus_of(set);
}

OneCpuPerThread::OneCpuPerThread(int threads) {
  const std::vector<int> mine = thread_cpus();
  const int team = threads > 0 ? threads : static_cast<int>(mine.size());
  const std::string n = std::to_string(team) + (team == 1 ? " thread" : " threads");
  if (team <= 1 || team > static_cast<int>(mine.size())) {
    note_ = n + (team <= 1 ? "" : " on " + std::to_string(mine.size()) + " CPUs, not pinned");
    return;
  }
  std::vector<int> cpus(mine.begin(), mine.begin() + team);
  saved_.assign(team, {});
  bool ok = true;
  // libgomp runs thread i of every later team of this size from this thread on the
  // same pool thread, so the oneDNN and native kernels' regions run where this one did.
#pragma omp parallel num_threads(team) reduction(&& : ok)
  {
    const int t = omp_get_thread_num();
    if (omp_get_num_threads() != team) {
      ok = false;
    } else {
      saved_[t] = thread_cpus();
      ok = set_thread_cpus({cpus[t]});
    }
  }
  if (!ok) {
    note_ = n + ", not pinned (the team could not be placed)";
    restore();
    return;
  }
  cpus_ = std::move(cpus);
  note_ = n + ", one per CPU (" + list(cpus_) + ")";
}

OneCpuPerThread::~OneCpuPerThread() { restore(); }

void OneCpuPerThread::restore() {
  if (saved_.empty()) return;
  const int team = static_cast<int>(saved_.size());
#pragma omp parallel num_threads(team)
  {
    const int t = omp_get_thread_num();
    if (omp_get_num_threads() == team && !saved_[t].empty()) set_thread_cpus(saved_[t]);
  }
  saved_.clear();
}

std::string why_runs_stay_unpinned(const Executable& exe) {
  if (exe.threads() <= 1) return "1 thread";
  for (const char* var : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"})
    if (std::getenv(var)) return std::string("not pinned (") + var + " set by the user)";
  if (!openmp_spins_by_isomer()) return "not pinned (the OpenMP waits are not isomer's short spin)";
  if (delegates(exe.steps())) return "not pinned (a step runs in ONNX Runtime's helper)";
  return "";
}

RunPlacement::RunPlacement(const Executable& exe) : note_(why_runs_stay_unpinned(exe)) {
  if (note_.empty()) note_ = pinned_.emplace(exe.threads()).note();
}

}  // namespace isomer::runtime
