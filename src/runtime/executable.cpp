// The compiled graph: buffers planned by liveness, primitives bound to them once,
// then run as often as asked.
#include <omp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <unordered_set>

#include "ir/run_limit.h"
#include "kernels/parallel.h"
#include "runtime/clock.h"
#include "runtime/compiler.h"
#include "runtime/precision.h"

namespace isomer::runtime {

namespace {

struct AlignedBuffer {
  char* ptr = nullptr;
  size_t size = 0;
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : size(n) {
    require(n <= max_tensor_bytes(), "out of memory: a buffer of " + std::to_string(n) + " bytes is more than this process may allocate");
    ptr = static_cast<char*>(std::aligned_alloc(64, std::max<size_t>(64, (n + 63) / 64 * 64)));
    require(ptr != nullptr, "out of memory allocating " + std::to_string(n) + " bytes");
    std::memset(ptr, 0, n);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : ptr(o.ptr), size(o.size) { o.ptr = nullptr; }
  AlignedBuffer& operator=(AlignedBuffer&&) = delete;
  ~AlignedBuffer() { std::free(ptr); }
};

template <class Once>
int warm_up(int warmup, int repeats, double budget_ms, Once once) {
  double spent = 0, last = 0;
  for (int k = 0; k < warmup; ++k) {
    last = once();
    spent += last;
    if (budget_ms > 0 && spent >= budget_ms / 5) break;
  }
  return timed_runs(repeats, budget_ms, last);
}

}  // namespace

int timed_runs(int repeats, double budget_ms, double run_ms) {
  const int n = std::max(repeats, 1);
  if (budget_ms <= 0 || run_ms <= 0) return n;
  const double fit = std::ceil(budget_ms / run_ms);
  return static_cast<int>(std::clamp(fit, static_cast<double>(std::min(n, kMinTimedRuns)), static_cast<double>(n)));
}

struct Executable::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{eng};
  int threads = 1;
  bool processor_clock = false;  // RuntimeOptions::processor_clock
  std::deque<RtValue> values;
  std::vector<RtStep> steps;
  std::vector<StepInfo> infos;
  std::vector<int> input_ids, output_ids;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<int> buffer_of;  // value id -> buffer index (-1: constant storage)
  std::vector<AlignedBuffer> buffers;
  size_t value_bytes = 0;
  // Per step: bound arguments or function.
  std::vector<std::unordered_map<int, dnnl::memory>> bound;
  std::vector<std::function<void()>> fns;
  // Inputs read where the caller's tensor holds them, not copied into the arena:
  // per input, whether it can be (plain, dense, no step writes its buffer) and the
  // steps that reach its buffer (rebound when a run's tensor lives elsewhere).
  std::vector<bool> in_place;
  std::vector<std::vector<size_t>> in_place_steps;
  // Outputs written straight into the tensors a run returns (plain, dense, their
  // own buffer): per output, whether it can be, and the steps that reach it.
  std::vector<bool> out_direct;
  std::vector<std::vector<size_t>> out_steps;
  std::unordered_map<int, const char*> moved;  // root -> where its bytes are this run
  std::vector<Tensor> held;  // the last run's in-place inputs: steps timed alone read them
  std::vector<std::shared_ptr<const void>> shared_constants;  // keeps shared derived constants shared

  int root(int id) const { return values[id].alias_of >= 0 ? values[id].alias_of : id; }

  char* data(int id) { return root_data(root(id)) + values[id].byte_offset; }

  char* root_data(int r) {
    if (!moved.empty())
      if (auto it = moved.find(r); it != moved.end()) return const_cast<char*>(it->second);
    RtValue& v = values[r];
    if (v.storage) return v.storage->data();
    if (v.known) {
      // A constant read directly by a step: its own bytes, shared with the graph (no
      // step writes a constant), aligned as a heap copy would be; else copied once.
      const char* bytes = v.known->bytes().data();
      if (reinterpret_cast<uintptr_t>(bytes) % alignof(std::max_align_t) == 0) return const_cast<char*>(bytes);
      v.storage = std::make_shared<std::vector<char>>(bytes, bytes + v.known->byte_size());
      return v.storage->data();
    }
    return buffers[buffer_of[r]].ptr;
  }

  // Assigns buffers to values by liveness: a buffer is reused once every reader of
  // its previous value has run.
  void plan() {
    const int n = static_cast<int>(values.size());
    const int nsteps = static_cast<int>(steps.size());
    std::vector<int> def(n, -2), last(n, -2);
    auto is_buffered = [&](int r) { return !values[r].known && !values[r].storage; };
    for (int id : input_ids) def[root(id)] = -1;
    for (int s = 0; s < nsteps; ++s) {
      for (int w : steps[s].writes)
        if (def[root(w)] == -2) def[root(w)] = s;
      for (int r : steps[s].reads) last[root(r)] = std::max(last[root(r)], s);
      for (int w : steps[s].writes) last[root(w)] = std::max(last[root(w)], s);
    }
    for (int id : output_ids) last[root(id)] = nsteps;
    // Inputs stay untouched for the whole run: steps timed alone or again
    // (profile_steps, time_step) read them as the run left them.
    for (int id : input_ids) last[root(id)] = nsteps;
    buffer_of.assign(n, -1);
    std::vector<size_t> sizes;
    std::vector<int> free_list;
    auto allocate = [&](int r) {
      size_t need = values[r].bytes;
      value_bytes += need;
      // Smallest free buffer that fits, else the largest free one (grown).
      int best = -1;
      for (int b : free_list)
        if (sizes[b] >= need && (best < 0 || sizes[b] < sizes[best])) best = b;
      if (best < 0)
        for (int b : free_list)
          if (best < 0 || sizes[b] > sizes[best]) best = b;
      if (best < 0) {
        sizes.push_back(need);
        best = static_cast<int>(sizes.size()) - 1;
      } else {
        free_list.erase(std::find(free_list.begin(), free_list.end(), best));
        sizes[best] = std::max(sizes[best], need);
      }
      buffer_of[r] = best;
    };
    std::vector<std::vector<int>> dies(nsteps + 1);
    for (int r = 0; r < n; ++r)
      if (root(r) == r && is_buffered(r) && def[r] != -2) dies[std::max(last[r], std::max(def[r], 0))].push_back(r);
    for (int id : input_ids)
      if (buffer_of[root(id)] < 0) allocate(root(id));
    for (int s = 0; s < nsteps; ++s) {
      for (int w : steps[s].writes) {
        int r = root(w);
        if (buffer_of[r] < 0 && is_buffered(r)) allocate(r);
      }
      for (int r : dies[s]) free_list.push_back(buffer_of[r]);
    }
    for (size_t b = 0; b < sizes.size(); ++b) buffers.emplace_back(sizes[b]);
  }

  void bind() {
    bound.resize(steps.size());
    fns.resize(steps.size());
    auto data_fn = [this](int id) { return data(id); };
    for (size_t s = 0; s < steps.size(); ++s) {
      RtStep& st = steps[s];
      if (st.prim) {
        for (const auto& [arg, id] : st.args) bound[s].emplace(arg, dnnl::memory(values[id].md, eng, data(id)));
      } else {
        fns[s] = st.make_fn(data_fn);
      }
    }
  }

  // A value that is its buffer's whole content, row-major: it can live elsewhere.
  bool movable(int id) const {
    const RtValue& v = values[id];
    const size_t plain_bytes = static_cast<size_t>(num_elements(v.dims)) * dtype_size(v.dtype);
    return root(id) == id && v.byte_offset == 0 && !v.known && !v.storage && v.bytes == plain_bytes &&
           (!v.md.data.ndims || is_plain(v.md, v.dims));
  }

  // The steps that reach root r's buffer; false if one writes it and `read_only`.
  bool steps_reaching(int r, bool read_only, std::vector<size_t>& out) const {
    for (size_t s = 0; s < steps.size(); ++s) {
      bool touches = false;
      for (int w : steps[s].writes) {
        if (root(w) == r && read_only) return false;
        touches = touches || root(w) == r;
      }
      for (int v : steps[s].reads) touches = touches || root(v) == r;
      for (const auto& [arg, v] : steps[s].args) touches = touches || root(v) == r;
      if (touches) out.push_back(s);
    }
    return true;
  }

  // Which inputs are read in place and which outputs written in place, and the
  // steps to rebind for each.
  void plan_in_place() {
    std::unordered_map<int, int> uses;  // root -> how many inputs and outputs are it
    for (int id : input_ids) ++uses[root(id)];
    for (int id : output_ids) ++uses[root(id)];
    in_place.assign(input_ids.size(), false);
    in_place_steps.assign(input_ids.size(), {});
    for (size_t i = 0; i < input_ids.size(); ++i) {
      const int id = input_ids[i];
      in_place[i] = movable(id) && uses[id] == 1 && steps_reaching(id, /*read_only=*/true, in_place_steps[i]);
    }
    out_direct.assign(output_ids.size(), false);
    out_steps.assign(output_ids.size(), {});
    for (size_t i = 0; i < output_ids.size(); ++i) {
      const int id = output_ids[i];
      out_direct[i] = movable(id) && uses[id] == 1 && steps_reaching(id, /*read_only=*/false, out_steps[i]) &&
                      !out_steps[i].empty();
    }
  }

  // Points the steps in `reach` at `bytes` for root r (or back at the arena: nullptr).
  void rebind(int r, const char* bytes, const std::vector<size_t>& reach) {
    if (bytes) moved[r] = bytes;
    else moved.erase(r);
    auto data_fn = [this](int id) { return data(id); };
    for (size_t s : reach) {
      RtStep& st = steps[s];
      if (st.prim) {
        for (const auto& [arg, id] : st.args)
          if (root(id) == r) bound[s].at(arg).set_data_handle(data(id));
      } else {
        fns[s] = st.make_fn(data_fn);
      }
    }
  }

  // Runs step s and returns its milliseconds, on the wall clock or in processor time.
  double timed_step(size_t s);

  // Per step left in a run that leaves out `skip`: whether a whole run moves more
  // data through the cores than their caches (L2) hold between the write of a value
  // the step reads and the step, so that it reads that value cold. A whole run's
  // steps that are left out no longer evict it: a merged convolution over parts
  // that other branches made long before (NasNet-A's deferred Concats) was timed as
  // if they were hot, and priced too cheap. Weights and graph inputs, read once a
  // run, are cold in a whole run that moves more than the caches hold, and hot in a
  // run of a few steps: the first step that runs is marked then, so that each such
  // run starts from evicted caches (one eviction a run, not one before every step
  // that reads a weight).
  std::vector<bool> cold_reads(const std::vector<bool>& skip) const {
    const size_t n = steps.size();
    std::vector<bool> cold(n, false);
    const double cache = static_cast<double>(kernels::l2_bytes_per_core()) * std::max(threads, 1);
    std::vector<double> before(n + 1, 0.0);  // bytes the steps before s move
    for (size_t s = 0; s < n; ++s) {
      double moved_bytes = 0;
      for (int v : steps[s].reads) moved_bytes += static_cast<double>(values[v].bytes);
      for (int v : steps[s].writes) moved_bytes += static_cast<double>(values[v].bytes);
      before[s + 1] = before[s] + moved_bytes;
    }
    for (size_t s = 0; s < n; ++s)
      if (!skip[s]) {
        cold[s] = before[n] > cache;
        break;
      }
    std::unordered_map<int, size_t> last_touch;  // root written this run -> the last step touching it
    for (size_t s = 0; s < n; ++s) {
      if (!skip[s])
        for (int v : steps[s].reads)
          if (auto it = last_touch.find(root(v)); it != last_touch.end() && before[s] - before[it->second + 1] > cache)
            cold[s] = true;
      for (int v : steps[s].writes) last_touch[root(v)] = s;
      for (int v : steps[s].reads)
        if (auto it = last_touch.find(root(v)); it != last_touch.end()) it->second = s;
    }
    return cold;
  }

  // Moves the caches' contents out to memory beyond them (L3 on most CPUs), on each
  // of the run's threads, by writing a scratch buffer twice their size.
  void evict_caches() {
    const size_t per = 2 * kernels::l2_bytes_per_core();
    scratch.resize(std::max(scratch.size(), per * static_cast<size_t>(std::max(threads, 1))));
    char* base = scratch.data();
#pragma omp parallel num_threads(std::max(threads, 1))
    {
      char* mine = base + per * static_cast<size_t>(omp_get_thread_num());
      for (size_t k = 0; k < per; k += 64) mine[k] = static_cast<char>(mine[k] + 1);
    }
  }
  std::vector<char> scratch;  // evict_caches' buffer

  void run_step(size_t s) {
    check_run_limit();  // a Loop's body runs its steps through here once per iteration
    // A step planned for a smaller team (Compiler::TeamScope) runs with that many
    // OpenMP threads, which is what the native kernels and oneDNN ask for.
    struct Team {
      int team, threads;
      Team(int t, int all) : team(t > 0 && t != all ? t : 0), threads(all) {
        if (team) omp_set_num_threads(team);
      }
      ~Team() {
        if (team) omp_set_num_threads(threads);
      }
    } scope(steps[s].team, threads);
    if (steps[s].prim) steps[s].prim->execute(stream, bound[s]);
    else fns[s]();
  }
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

const std::vector<StepInfo>& Executable::steps() const { return impl_->infos; }
const std::vector<std::vector<int64_t>>& Executable::input_dims() const { return impl_->input_dims; }
std::vector<TensorType> Executable::output_types() const {
  std::vector<TensorType> out;
  for (int id : impl_->output_ids) out.push_back({impl_->values[id].dtype, make_shape(impl_->values[id].dims)});
  return out;
}
int Executable::threads() const { return impl_->threads; }
size_t Executable::value_bytes() const { return impl_->value_bytes; }
size_t Executable::arena_bytes() const {
  size_t total = 0;
  for (const auto& b : impl_->buffers) total += b.size;
  return total;
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  require(inputs.size() == m.input_ids.size(), "the model has " + std::to_string(m.input_ids.size()) + " inputs, " +
                                                   std::to_string(inputs.size()) + " given");
  set_threads(m.threads);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const RtValue& v = m.values[m.input_ids[i]];
    require(inputs[i].dtype() == v.dtype && inputs[i].dims() == v.dims,
            "input '" + v.name + "' is " + to_string(inputs[i].type()) + ", the model was compiled for " +
                to_string(TensorType{v.dtype, make_shape(v.dims)}));
    const char* bytes = inputs[i].bytes().data();
    const int r = m.input_ids[i];
    auto at = m.moved.find(r);
    const char* now = at == m.moved.end() ? nullptr : at->second;
    if (m.in_place[i]) {
      // Read where the tensor is (it is immutable and held until the next run).
      if (now != bytes) m.rebind(r, bytes, m.in_place_steps[i]);
    } else {
      std::memcpy(m.data(r), bytes, inputs[i].byte_size());
    }
  }
  std::vector<Tensor> held;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (m.in_place[i]) held.push_back(inputs[i]);
  m.held = std::move(held);
  // Outputs that can be are written where the returned tensors will hold them,
  // in blocks left uninitialised: the steps write every byte.
  std::vector<Bytes> direct(m.output_ids.size());
  for (size_t i = 0; i < m.output_ids.size(); ++i)
    if (m.out_direct[i]) {
      direct[i] = Bytes::uninitialized(m.values[m.output_ids[i]].bytes);
      m.rebind(m.output_ids[i], direct[i].data(), m.out_steps[i]);
    }
  try {
    for (size_t s = 0; s < m.steps.size(); ++s) m.run_step(s);
    m.stream.wait();
  } catch (...) {
    for (size_t i = 0; i < m.output_ids.size(); ++i)
      if (m.out_direct[i]) m.rebind(m.output_ids[i], nullptr, m.out_steps[i]);
    throw;
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < m.output_ids.size(); ++i) {
    const int id = m.output_ids[i];
    const RtValue& v = m.values[id];
    size_t bytes = static_cast<size_t>(num_elements(v.dims)) * dtype_size(v.dtype);
    if (m.out_direct[i]) {
      // Back to the arena: the returned tensor is the caller's now, and steps
      // timed alone must not write into it.
      m.rebind(id, nullptr, m.out_steps[i]);
      out.emplace_back(v.dtype, v.dims, std::move(direct[i]));
    } else {
      out.emplace_back(v.dtype, v.dims, std::string(m.data(id), bytes));
    }
  }
  return out;
}

void Executable::run_raw(const std::vector<const char*>& inputs, const std::vector<char*>& outputs) {
  Impl& m = *impl_;
  require(inputs.size() == m.input_ids.size() && outputs.size() == m.output_ids.size(),
          "run_raw: " + std::to_string(inputs.size()) + " inputs and " + std::to_string(outputs.size()) +
              " outputs for a graph of " + std::to_string(m.input_ids.size()) + " and " +
              std::to_string(m.output_ids.size()));
  auto plain_bytes = [&](int id) {
    return static_cast<size_t>(num_elements(m.values[id].dims)) * dtype_size(m.values[id].dtype);
  };
  set_threads(m.threads);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int r = m.input_ids[i];
    // Copied into the arena: a buffer that changes every iteration would rebind steps.
    if (m.moved.count(r)) m.rebind(r, nullptr, m.in_place_steps[i]);
    if (const size_t n = plain_bytes(r)) std::memcpy(m.data(r), inputs[i], n);
  }
  for (size_t s = 0; s < m.steps.size(); ++s) m.run_step(s);
  m.stream.wait();
  for (size_t i = 0; i < outputs.size(); ++i)
    if (const size_t n = plain_bytes(m.output_ids[i])) std::memcpy(outputs[i], m.data(m.output_ids[i]), n);
}


double Executable::Impl::timed_step(size_t s) {
  // RuntimeOptions::processor_clock (one thread: the step runs on this thread, and
  // an idle OpenMP worker left spinning does not count), else ISOMER_PROFILE_CLOCK=cpu
  // (--profile on any number of threads: the whole process). A step run in another
  // process (ONNX Runtime's delegate) is timed on the wall clock.
  static const bool from_env = [] {
    const char* e = std::getenv("ISOMER_PROFILE_CLOCK");
    return e && std::string(e) == "cpu";
  }();
  const StepClock c = infos[s].kind == "onnxruntime" ? StepClock::wall
                      : processor_clock && threads == 1 ? StepClock::thread
                      : processor_clock || from_env     ? StepClock::process
                                                        : StepClock::wall;
  const double t0 = clock_ms(c);
  run_step(s);
  stream.wait();
  return clock_ms(c) - t0;
}

double Executable::time_step(size_t i, int warmup, int repeats, double budget_ms) {
  Impl& m = *impl_;
  require(i < m.steps.size(), "no step " + std::to_string(i));
  set_threads(m.threads);
  const int runs = warm_up(warmup, repeats, budget_ms, [&] { return m.timed_step(i); });
  std::vector<double> ms;
  for (int k = 0; k < runs; ++k) ms.push_back(m.timed_step(i));
  return median(ms);
}

std::vector<bool> Executable::steps_to_skip(const std::function<bool(size_t)>& known) const {
  const Impl& m = *impl_;
  std::vector<bool> out(m.steps.size(), false);
  auto floating = [&](int id) {
    const DType t = m.values[static_cast<size_t>(id)].dtype;
    return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
  };
  for (const RtStep& s : m.steps) {
    if (!std::all_of(s.reads.begin(), s.reads.end(), floating) ||
        !std::all_of(s.writes.begin(), s.writes.end(), floating))
      return out;
  }
  std::unordered_set<std::string> seen;
  for (size_t s = 0; s < m.steps.size(); ++s)
    out[s] = !seen.insert(m.infos[s].signature).second || (known && known(s));
  // The buffer a value lives in: views are read and written through their root.
  auto root = [&](int id) {
    while (m.values[static_cast<size_t>(id)].alias_of >= 0) id = m.values[static_cast<size_t>(id)].alias_of;
    return id;
  };
  std::unordered_map<int, size_t> last_writer;  // root value -> the last step before this one writing it
  std::vector<bool> keep(m.steps.size(), false);
  for (size_t s = 0; s < m.steps.size(); ++s) {
    if (!out[s])
      for (int r : m.steps[s].reads)
        if (auto it = last_writer.find(root(r)); it != last_writer.end()) keep[it->second] = true;
    for (int w : m.steps[s].writes) last_writer[root(w)] = s;
  }
  for (size_t s = 0; s < m.steps.size(); ++s)
    if (keep[s]) out[s] = false;
  return out;
}

std::vector<bool> Executable::cold_reads(const std::vector<bool>& skip) const {
  require(skip.size() == impl_->steps.size(), "cold_reads: one flag per step");
  return impl_->cold_reads(skip);
}

std::vector<double> Executable::profile_steps(int warmup, int repeats, double budget_ms, const std::vector<bool>* skip) {
  Impl& m = *impl_;
  set_threads(m.threads);
  auto runs_step = [&](size_t s) { return !skip || s >= skip->size() || !(*skip)[s]; };
  // A run that leaves steps out reads cold, before a step, what a whole run would
  // have left cold (Impl::cold_reads); the eviction itself is not timed.
  const bool leaves_out = skip && skip->size() == m.steps.size() && std::count(skip->begin(), skip->end(), true) > 0;
  const std::vector<bool> cold = leaves_out ? m.cold_reads(*skip) : std::vector<bool>(m.steps.size(), false);
  auto step_ms = [&](size_t s) {
    if (cold[s]) m.evict_caches();
    return m.timed_step(s);
  };
  const size_t runs = static_cast<size_t>(warm_up(warmup, repeats, budget_ms, [&] {
    double total = 0;
    for (size_t s = 0; s < m.steps.size(); ++s)
      if (runs_step(s)) total += step_ms(s);
    return total;
  }));
  std::vector<std::vector<double>> ms(runs, std::vector<double>(m.steps.size(), 0.0));
  std::vector<double> totals(runs, 0.0);
  for (size_t k = 0; k < runs; ++k)
    for (size_t s = 0; s < m.steps.size(); ++s) {
      if (!runs_step(s)) continue;
      ms[k][s] = step_ms(s);
      totals[k] += ms[k][s];
    }
  // The steps of typical runs: the runs whose total is in the middle half, each
  // step averaged over them. Then the steps' costs add up to a typical run's
  // latency (what end-to-end medians measure); a per-step median would not (each
  // step's median drops the delays, from preemption or a cold cache, that some
  // step of nearly every run suffers, so their sum falls short of the median run).
  std::vector<size_t> order(runs);
  for (size_t k = 0; k < runs; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return totals[a] < totals[b]; });
  size_t lo = runs / 4, hi = std::max(lo + 1, runs - runs / 4);
  std::vector<double> out(m.steps.size(), 0.0);
  for (size_t r = lo; r < hi; ++r)
    for (size_t s = 0; s < m.steps.size(); ++s) out[s] += ms[order[r]][s];
  for (double& v : out) v /= static_cast<double>(hi - lo);
  return out;
}

std::unique_ptr<Executable> compile(const Graph& g, const RuntimeOptions& opts) {
  std::string why;
  const bool runnable = is_runnable(g, &why, opts);  // fills `why` before the message is built
  require(runnable, "the model is not runnable on the isomer runtime: " + why);
  auto impl = std::make_unique<Executable::Impl>();
  impl->threads = opts.threads > 0 ? opts.threads : hardware_threads();
  impl->processor_clock = opts.processor_clock;
  set_threads(impl->threads);
  RuntimeOptions o = opts;
  o.threads = impl->threads;
  // Half models compute in float32 (runtime/precision.h).
  const Graph work = promote_half_to_float(g, &impl->shared_constants);
  Compiler c(work, o, impl->eng);
  c.run();
  impl->values = std::move(c.values_);
  impl->steps = std::move(c.steps_);
  impl->input_ids = std::move(c.input_ids_);
  impl->output_ids = std::move(c.output_ids_);
  impl->input_dims = std::move(c.input_dims_);
  for (const RtStep& s : impl->steps) impl->infos.push_back(s.info);
  impl->plan();
  impl->bind();
  impl->plan_in_place();
  return std::make_unique<Executable>(std::move(impl));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

BenchResult benchmark(Executable& exe, const std::vector<Tensor>& inputs, int warmup, int repeats, StepClock clock) {
  BenchResult r;
  r.warmup = warmup;
  r.threads = exe.threads();
  for (int k = 0; k < warmup; ++k) exe.run(inputs);
  for (int k = 0; k < std::max(repeats, 1); ++k) {
    const double t0 = clock_ms(clock);
    exe.run(inputs);
    r.ms.push_back(clock_ms(clock) - t0);
  }
  r.median = median(r.ms);
  r.min = *std::min_element(r.ms.begin(), r.ms.end());
  r.max = *std::max_element(r.ms.begin(), r.ms.end());
  double sum = 0;
  for (double x : r.ms) sum += x;
  r.mean = sum / static_cast<double>(r.ms.size());
  return r;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown cpu";
}

std::string dnnl_version() {
  const dnnl_version_t* v = ::dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

int hardware_threads() {
  // The CPUs this process may run on (taskset, cpusets), not every online one.
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

namespace {

// GOMP_SPINCOUNT when every thread has a core of its own (see choose_openmp_waits).
constexpr const char* kFreeMachineSpinCount = "1000";

// What this process's OpenMP threads do at a barrier, and why (openmp_waits()).
std::string& openmp_waits_note() {
  static std::string note;
  return note;
}

// The number field of an environment variable, or -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return end && *end == '\0' && x >= 0 ? static_cast<int>(x) : -1;
}

}  // namespace

int other_runnable_tasks() {
  if (int o = env_int("ISOMER_RUNNABLE_TASKS"); o >= 0) return o;
  // /proc/loadavg's fourth field counts the runnable tasks now ("5/97"), this
  // one included. A task that runs for a moment (a shell, a kernel worker) shows
  // in one sample, one that competes for the cores shows in all: take the fewest.
  int fewest = -1;
  for (int k = 0; k < 5; ++k) {
    if (k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::ifstream f("/proc/loadavg");
    double l1, l5, l15;
    int running = 0;
    char slash;
    if (!(f >> l1 >> l5 >> l15 >> running >> slash)) return 0;
    fewest = fewest < 0 ? running : std::min(fewest, running);
  }
  return std::max(0, fewest - 1);
}

std::string openmp_waits() {
  if (!openmp_waits_note().empty()) return openmp_waits_note();
  // isomer's Python module sets one when the user chose no policy, and says which
  // value it set (ISOMER_MODULE_<variable>) and why: another value in a child process
  // is the user's.
  auto who = [](const char* var, const char* value) {
    const char* module = std::getenv((std::string("ISOMER_MODULE_") + var).c_str());
    if (!module || std::strcmp(module, value) != 0) return std::string(" (set by the user)");
    const char* why = std::getenv("ISOMER_MODULE_OPENMP_WHY");
    return std::string(" (set by isomer's Python module, on import") + (why && *why ? std::string(": ") + why : "") +
           ")";
  };
  if (const char* p = std::getenv("OMP_WAIT_POLICY")) return std::string("OMP_WAIT_POLICY=") + p + who("OMP_WAIT_POLICY", p);
  if (const char* c = std::getenv("GOMP_SPINCOUNT")) return std::string("GOMP_SPINCOUNT=") + c + who("GOMP_SPINCOUNT", c);
  return "libgomp default";
}

bool openmp_spins_by_isomer() {
  const char* count = std::getenv("GOMP_SPINCOUNT");
  if (std::getenv("OMP_WAIT_POLICY") || !count) return false;
  // The restarted process: its note starts with what the parent chose ("spin 1000 (...").
  const char* chosen = std::getenv("ISOMER_OMP_REEXEC");
  if (chosen && std::strncmp(chosen, "spin ", 5) == 0 && std::strcmp(count, kFreeMachineSpinCount) == 0) return true;
  const char* module = std::getenv("ISOMER_MODULE_GOMP_SPINCOUNT");
  return module && std::strcmp(module, count) == 0;
}

bool choose_openmp_waits(int threads, bool as_on_a_quiet_machine) {
  if (const char* why = std::getenv("ISOMER_OMP_REEXEC")) {
    // The restarted process: report what its parent chose.
    openmp_waits_note() = why;
    return false;
  }
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;  // the user's choice
  const int cpus = hardware_threads();
  const int team = threads > 0 ? threads : cpus;
  if (team <= 1) {
    openmp_waits_note() = "libgomp default (1 thread: no barriers)";
    return false;
  }
  const int runnable = other_runnable_tasks();
  const int others = as_on_a_quiet_machine ? 0 : runnable;
  const std::string where = (as_on_a_quiet_machine ? "as isomer run on a quiet machine; " : "") +
                            std::to_string(runnable) + " other runnable tasks at start, " + std::to_string(team) +
                            " threads on " + std::to_string(cpus) + " CPUs";
  // A core for every thread: spin, but briefly. libgomp's default spin (~300k
  // pause loops, ~10 ms) is as fast as waiting passively while the machine stays
  // free, and 3-30x slower as soon as anything else runs, even at nice 19; ~1000
  // loops (tens of microseconds) bridge the gaps between consecutive primitives
  // without a wake-up and cost little if other work starts later (measurements:
  // issue-4 notes, session 3). Otherwise sleep at once: OMP_WAIT_POLICY=PASSIVE.
  const bool free_cores = others + team <= cpus;
  const char* var = free_cores ? "GOMP_SPINCOUNT" : "OMP_WAIT_POLICY";
  const char* value = free_cores ? kFreeMachineSpinCount : "PASSIVE";
  const std::string why = (free_cores ? std::string("spin ") + kFreeMachineSpinCount + " (" : "passive (") + where + ")";
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t p = 0; p < all.size();) {
    size_t e = all.find('\0', p);
    if (e == std::string::npos) e = all.size();
    args.push_back(all.substr(p, e - p));
    p = e + 1;
  }
  if (args.empty()) return false;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv(var, value, 1);
  ::setenv("ISOMER_OMP_REEXEC", why.c_str(), 1);  // never loop, whatever happens
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv("/proc/self/exe", argv.data());
  // exec failed: carry on with libgomp's default policy.
  ::unsetenv(var);
  ::unsetenv("ISOMER_OMP_REEXEC");
  openmp_waits_note() = "libgomp default (restarting with " + why + " failed)";
  return false;
}

bool use_passive_openmp_waits() { return choose_openmp_waits(0); }

void set_threads(int threads) { omp_set_num_threads(threads > 0 ? threads : hardware_threads()); }

}  // namespace isomer::runtime
