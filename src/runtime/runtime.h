#pragma once
// isomer's CPU runtime. A graph is compiled once into an Executable: shapes made
// concrete, compile-time computable values folded, operators lowered to oneDNN
// primitives (created once, with fused bias / activation / residual post-ops and
// BatchNormalization folded into a preceding convolution), memory formats chosen
// by the primitives (blocked layouts for convolutions, reorders only where a
// consumer needs another layout), a channel Concat read only by 1x1 convolutions
// never made (each convolution sums over the parts), and intermediate buffers
// shared by liveness.
// Operators oneDNN has no primitive for run through the operator table's `eval`
// hook (the reference semantics), on plain row-major data; operators isomer does
// not understand run on ONNX Runtime (runtime/delegate.h).
#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/clock.h"

namespace isomer::runtime {

struct RuntimeOptions {
  int threads = 0;                          // 0 = every core
  std::map<std::string, int64_t> bindings;  // extents of symbolic input dims (default 1)
  bool fuse = true;                         // post-op fusion and BatchNormalization folding
  bool blocked_layouts = true;              // let convolutions pick blocked memory formats
  // Operators isomer does not understand (opaque nodes) run on ONNX Runtime, node
  // by node, in a helper process (runtime/delegate.h); false: they make the graph
  // not runnable.
  bool delegate_opaque = true;
  // Matmuls with constant weights on isomer's packed-weights GEMM where it is the
  // faster kernel (CPUs without AVX-512, see kernels/gemm.h); false: oneDNN's.
  bool packed_gemm = true;
  // time_step and profile_steps time in processor time rather than wall time (a
  // 1-thread cost model on a busy machine, where preemption inflates whichever step
  // it lands in): the calling thread's on one thread, the process's on more; steps
  // run in another process (ONNX Runtime's delegate) stay in wall time.
  // ISOMER_PROFILE_CLOCK=cpu does the same for --profile.
  bool processor_clock = false;
};

// One step of a compiled graph, as the cost model sees it.
struct StepInfo {
  std::string kind;       // "conv", "matmul", "reorder", "eltwise", "fallback", ...
  std::string label;      // the node(s) it computes
  std::string signature;  // everything its running time depends on (shapes, layouts, post-ops)
  std::vector<std::string> ops;  // op types it covers (several when fused)
  // The graph nodes it computes, each by its first output's name (what the
  // model calls the tensor), for comparing the step with another engine's run of
  // the same nodes; empty for layout conversions and copies no node asked for.
  std::vector<std::string> nodes;
  double flops = 0;       // arithmetic operations
  double bytes = 0;       // bytes read and written
  bool boundary = false;  // converts a graph input or output between plain and internal layout
  // Why a node that could have run natively did not (a control-flow node left to ONNX
  // Runtime: "its branches give different output shapes"); empty otherwise.
  std::string note;
  // A control-flow step's bodies, compiled (both branches of an If, in order).
  std::vector<StepInfo> body;
};

// Timed runs of a step or graph whose warm-up run took `run_ms`: as many as
// `budget_ms` holds, at least kMinTimedRuns and at most `repeats` (all `repeats`
// without a budget or a warm-up).
inline constexpr int kMinTimedRuns = 3;
int timed_runs(int repeats, double budget_ms, double run_ms);

class Executable {
 public:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Runs the graph; inputs one per graph input, in order, with concrete dims equal
  // to those the graph was compiled for.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  const std::vector<StepInfo>& steps() const;
  // Times step i alone on the planned buffers: median milliseconds of `repeats`
  // runs after `warmup` runs. A positive `budget_ms` lets a long step take fewer
  // runs (timed_runs above): what a cost model wants, not a user's --repeat.
  double time_step(size_t i, int warmup, int repeats, double budget_ms = 0);
  // Times every step inside whole runs of the graph (so each sees the caches as
  // it does in a real run): per step, the mean milliseconds over the typical
  // runs (those whose total is in the middle half) of `repeats` runs after
  // `warmup` runs, so that the steps add up to a typical run. Runs on whatever
  // the buffers hold. `budget_ms` as for time_step, per whole run.
  //
  // With a budget, a long step or graph stops warming up once the warm-up has
  // taken a fifth of it, and is timed timed_runs(repeats, budget_ms, last warm-up
  // run) times. The search prices new operator shapes so: TASO's BERT took 18
  // runs of about 2 s to price whole, where 3 show the same typical time.
  //
  // `skip` (one flag per step, as repeated_steps() gives it): steps left out of the
  // warm-up and timed runs (their time is 0), so that a run costs only what is new.
  std::vector<double> profile_steps(int warmup, int repeats, double budget_ms = 0,
                                    const std::vector<bool>* skip = nullptr);
  // Per step: whether a timed run may leave it out (profile_steps' `skip`): an earlier
  // step has its signature, or `known(i)` says step i's time is known already. A step
  // that is run also runs the steps that last wrote the values it reads, so that it
  // reads them as a whole run leaves them (hot in cache). Only where every value a
  // step reads or writes is floating point, so that a step reading a buffer whose
  // producer did not run reads numbers it computes with at its usual speed, never
  // indices or shapes out of range; all false otherwise.
  std::vector<bool> steps_to_skip(const std::function<bool(size_t)>& known = {}) const;
  // Per step that a run leaving out `skip` runs: whether a whole run moves more
  // data than the cores' caches (L2) hold between the write of a value it reads and
  // the step, so that a whole run has it read that value cold. profile_steps with
  // `skip` evicts the caches (untimed) before such a step, so that it is timed as a
  // whole run would time it.
  std::vector<bool> cold_reads(const std::vector<bool>& skip) const;
  // The concrete input dims compiled for, and the output types.
  const std::vector<std::vector<int64_t>>& input_dims() const;
  std::vector<TensorType> output_types() const;
  // Runs the graph on buffers its caller owns (a loop's body, run once per
  // iteration): copies each input from `inputs` (dense row-major, of the compiled
  // types) and each output into `outputs`. An input and an output may share a buffer.
  void run_raw(const std::vector<const char*>& inputs, const std::vector<char*>& outputs);
  int threads() const;
  size_t arena_bytes() const;   // intermediate buffers after liveness sharing
  size_t value_bytes() const;   // the same without sharing

 private:
  std::unique_ptr<Impl> impl_;
};

// Compiles `g`. Throws Error if a node cannot run (an opaque node ONNX Runtime
// cannot take, or without delegation; an operator whose shapes stay unknown) with
// a message that says which and why.
std::unique_ptr<Executable> compile(const Graph& g, const RuntimeOptions& opts = {});

// True if compile() can handle every node of `g` as far as the graph shows;
// otherwise `why` names the first node that cannot run on the isomer runtime.
// With delegation, compile() can still refuse an opaque node (ONNX Runtime
// unavailable, or output shapes that depend on data), saying why.
bool is_runnable(const Graph& g, std::string* why = nullptr, const RuntimeOptions& opts = {});

struct BenchResult {
  std::vector<double> ms;  // one per repeat
  double median = 0, min = 0, max = 0, mean = 0;
  int warmup = 0, threads = 0;
};

// End-to-end latency of `exe` on `inputs`, each run read on `clock` (processor time
// where other processes' turns must not count: the guard's and the μGraph search's).
BenchResult benchmark(Executable& exe, const std::vector<Tensor>& inputs, int warmup, int repeats,
                      StepClock clock = StepClock::wall);

// Facts about this machine and library, for reports and the cost cache key.
std::string cpu_model();
std::string dnnl_version();
int hardware_threads();  // the CPUs this process may run on
// OpenMP's wait policy, chosen per process from how busy the machine is when it
// starts (libgomp reads its policy once, when it loads, so the process restarts
// itself, same arguments, with the policy in its environment):
//  - other runnable tasks (the fewest of a few samples of /proc/loadavg's count;
//    $ISOMER_RUNNABLE_TASKS for tests) plus `threads` (0 = every CPU) exceed the
//    CPUs: OMP_WAIT_POLICY=PASSIVE. A spinning thread steals the time slices of
//    the threads it waits for: on this project's 2-core VM beside nice-19 jobs,
//    MobileNetV2 at 2 threads took 428 ms per run with libgomp's default spin
//    (~300k pause loops, ~10 ms) and 14.5 ms passive (632 vs 13.6 under load ~10).
//  - else GOMP_SPINCOUNT=1000 (tens of microseconds): enough to bridge the gap
//    between consecutive primitives without a wake-up while the cores are free
//    (libgomp's default was 3-30x slower once other work started). The runs pin
//    the team one thread per CPU (why_runs_stay_unpinned, one_cpu_per_thread.h):
//    unpinned, this VM's scheduler put both threads on one CPU and demo.onnx took
//    0.25 ms a run at 2 threads, 0.039 pinned, 0.066 passive (load 6-7). If other
//    work starts later the spin still costs: under load 6-7, 2 threads, SqueezeNet
//    1.1 took 9-17 ms a run with it, pinned or not, and 3.2 ms passive.
// A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is always kept, and one thread needs
// no policy. Call it first thing in a command, before any output; returns only
// when it did not restart (false). The library alone (Python bindings, tests)
// cannot restart and keeps libgomp's default unless the environment sets one.
// `as_on_a_quiet_machine`: the policy `isomer run` takes when nothing else is
// runnable, whatever runs now (optimize's guard: a verdict must not depend on
// whether another process was runnable at the moment it started; passive waits
// time a wake-up per step, and a rewrite with fewer steps read 1.27x faster on a
// model that runs the same).
bool choose_openmp_waits(int threads = 0, bool as_on_a_quiet_machine = false);
// The same for every CPU (kept for existing callers).
bool use_passive_openmp_waits();
// Runnable tasks on the machine other than this process (see above).
int other_runnable_tasks();
// What the OpenMP threads of this process do at a barrier and why, for reports.
std::string openmp_waits();
// Whether they spin briefly by isomer's choice: `isomer run` chose the spin when it
// started (choose_openmp_waits), or the Python module set it on import, and the user
// set no policy. Such a team is pinned one thread per CPU while it runs
// (why_runs_stay_unpinned, one_cpu_per_thread.h).
bool openmp_spins_by_isomer();
// Sets the thread count oneDNN (OpenMP) uses from now on; 0 = every core.
void set_threads(int threads);

double median(std::vector<double> v);

}  // namespace isomer::runtime
