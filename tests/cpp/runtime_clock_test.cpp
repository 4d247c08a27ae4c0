// RuntimeOptions::processor_clock: steps timed in processor time leave out the time
// the process spends preempted, which wall-clock times of the same steps carry.
#include <gtest/gtest.h>

#include <csignal>
#include <numeric>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval/evaluator.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

std::unique_ptr<runtime::Executable> compile1(const Graph& g, bool processor_clock) {
  runtime::RuntimeOptions o;
  o.threads = 1;
  o.processor_clock = processor_clock;
  return runtime::compile(g, o);
}

double total(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Pins this thread, and two processes that spin until killed, to the processor this
// thread runs on: each then gets about a third of it.
class Crowded {
 public:
  Crowded() {
    CPU_ZERO(&old_);
    sched_getaffinity(0, sizeof(old_), &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
    for (pid_t& p : spinners_) {
      p = ::fork();
      if (p == 0) {
        for (volatile unsigned long k = 0;; ++k) {
        }
      }
    }
  }
  ~Crowded() {
    for (pid_t p : spinners_)
      if (p > 0) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
    sched_setaffinity(0, sizeof(old_), &old_);
  }
  bool pinned() const { return pinned_; }

 private:
  cpu_set_t old_;
  bool pinned_ = false;
  pid_t spinners_[2] = {-1, -1};
};

TEST(RuntimeClock, ProcessorTimeLeavesOutPreemption) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({512, 1024})});
  Value w = b.constant(Tensor::from_f64(DType::Float32, {1024, 1024}, std::vector<double>(1024 * 1024, 0.001)));
  Value a = b.op1("Tanh", {b.op1("MatMul", {x, w})});
  const Graph g = b.finish({b.op1("MatMul", {a, w})}, {"y"});
  auto cpu = compile1(g, true), wall = compile1(g, false);
  const std::vector<Tensor> in = random_inputs(g, 1);
  cpu->run(in);
  wall->run(in);
  // Steps of about 10 ms, longer than the scheduler's slice, so that preemption lands
  // inside them in every run (profile_steps drops the runs it spares or hits most).
  // Crowded, only the wall clock grows.
  double quiet = 0, busy_cpu = 0, busy_wall = 0;
  for (int k = 0; k < 3; ++k) quiet += total(cpu->profile_steps(1, 5));
  {
    Crowded c;
    ASSERT_TRUE(c.pinned());
    for (int k = 0; k < 3; ++k) {
      busy_cpu += total(cpu->profile_steps(1, 5));
      busy_wall += total(wall->profile_steps(1, 5));
    }
  }
  EXPECT_LT(busy_cpu, 0.6 * busy_wall) << "processor " << busy_cpu << " ms, wall " << busy_wall << " ms";
  EXPECT_LT(busy_cpu, 2.0 * quiet) << "crowded " << busy_cpu << " ms, quiet " << quiet << " ms";
  for (size_t s = 0; s < cpu->steps().size(); ++s) EXPECT_GT(cpu->time_step(s, 1, 3), 0.0);
}

}  // namespace
}  // namespace isomer
