#pragma once
// The execution simulator (FlexFlow, Jia et al., SysML 2019, section 5): a task
// graph of compute tasks (one operator's block on a device) and transfer tasks (the
// collectives and slices that move a tensor between the layouts of its producer
// and consumer, layout.h), list-scheduled on the devices and links, each running one
// task at a time; the step time is when the last task finishes.
//
// Every operator is spread over the whole mesh, so every device runs the same
// sequence of tasks: the simulator schedules the tasks of one device, on three
// resources: its compute stream, its intra-node link, and its node's network link
// (shared by the groups of the node, see machine.h). Tasks are listed in a fixed
// priority order (forward in topological order, then the backward pass in reverse,
// then the outputs) and each resource takes its tasks in that order, each starting
// when its inputs are done and its resource is free.
//
// Modes. Inference: the forward pass, and the outputs gathered whole on every
// device. Training step: the forward pass, the backward pass (each block about
// twice its forward cost; each input's gradient moved back to its producer's
// layout, summed first where the block saw only part of the work), and the
// gradients of weights held in copies summed across the copies (an all-reduce).
//
// Memory. Per device: the weight blocks; inference: the most activation bytes live
// at once (in topological order); training: every activation kept for the backward
// pass, plus gradients and two optimizer moments per weight. A plan whose device
// memory exceeds the capacity does not fit.
//
// Incremental. The task list is kept in blocks (the forward block of each operator,
// its backward block, the outputs). Changing one operator's configuration rebuilds
// only the blocks that read its configuration (its own and its consumers'), and the
// schedule is recomputed from the first changed block on, block by block, until a
// block whose inputs and start state are unchanged.
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/compute.h"
#include "parallel/strategy.h"

namespace isomer::parallel {

struct SimResult {
  double step_ms = 0;
  double compute_ms = 0;   // busy time of the compute stream
  double comm_ms = 0;      // busy time of the links
  double overlap_ms = 0;   // compute + communication - step: what ran at the same time
  double memory_bytes = 0; // per device
  bool fits = true;        // memory_bytes <= capacity
  size_t tasks = 0;
};

struct SimStats {
  size_t full = 0, incremental = 0;        // simulations of each kind
  size_t blocks_rebuilt = 0, blocks_scheduled = 0, blocks_total = 0;
};

enum class Mode { Inference, Training };
const char* mode_name(Mode m);

class Simulator {
 public:
  Simulator(const ParallelGraph& pg, const Cluster& cluster, ComputeModel& compute, Mode mode);

  // Simulates `s` from scratch.
  SimResult simulate(const Strategy& s);
  // `s` differs from the strategy last simulated in the configurations of `changed`
  // ops only: rebuilds and reschedules what they touch. Same answer as simulate(s).
  SimResult update(const Strategy& s, const std::vector<int>& changed);

  // The forward block cost of op i under candidate c (compute only), and the cost of
  // moving a tensor between layouts (for the search's additive estimates).
  double op_ms(int i, int c);
  double move_ms(const Layout& from, const Layout& to, const std::vector<int64_t>& dims, size_t elem);
  // Gradient summation of op i's weights under candidate c (training; 0 otherwise).
  double weight_sync_ms(int i, int c);
  // The additive cost of op i under candidate c with the other operators as in `s`:
  // its compute (3x in training: forward and backward), weight gradient sums, and the
  // moves into it (and back, for gradients); with `with_users`, also the moves out of
  // it to its consumers (and the outputs' gathering). Used to rank configurations.
  double local_ms(const Strategy& s, int i, int c, bool with_users = true);
  // The candidate of op i with the least local_ms given `s` (candidates visited by
  // increasing compute cost, stopping where compute alone exceeds the best).
  int best_config(const Strategy& s, int i, bool with_users = true);
  Mode mode() const { return mode_; }
  const SimStats& stats() const { return stats_; }
  const ParallelGraph& graph() const { return pg_; }
  const Cluster& cluster() const { return cluster_; }
  // Per-device memory of `s` in bytes.
  double memory_bytes(const Strategy& s);

  struct Task {
    int resource = 0;  // 0 compute, 1 intra-node link, 2 network link
    double ms = 0;
    std::vector<std::pair<int, int>> deps;  // (block, task)
    double start = 0, finish = 0;
  };

 private:
  struct Block {
    std::vector<Task> tasks;
    std::vector<int> chain_end;      // backward blocks: per input slot, the last task of its gradient's moves
    double state_in[3] = {0, 0, 0};  // resource free times when the block starts
    bool dirty = true;               // tasks changed since last scheduled
    bool times_changed = false;      // a finish time moved in the last schedule
  };
  void build_block(int b, const Strategy& s);
  // Appends the steps moving a value from layout `from` to `to`; returns the last task
  // (or `after` when nothing moves).
  const std::vector<std::pair<int, double>>& move_tasks(const Layout& from, const Layout& to,
                                                        const std::vector<int64_t>& dims, size_t elem);
  std::pair<int, int> add_moves(int b, std::pair<int, int> after, const Layout& from, const Layout& to,
                                const std::vector<int64_t>& dims, size_t elem);
  SimResult schedule(int first_block, const Strategy& s);
  int fwd_block(int i) const { return i; }
  int bwd_block(int i) const { return 2 * n_ - 1 - i; }
  int out_block() const { return mode_ == Mode::Training ? 2 * n_ : n_; }
  std::pair<int, int> last_task(int b) const;
  std::pair<int, int> compute_task(int b) const;

  const ParallelGraph& pg_;
  const Cluster& cluster_;
  ComputeModel& compute_;
  Mode mode_;
  int n_;
  std::vector<Block> blocks_;
  std::vector<int> block_compute_;  // index of each block's compute task (-1 none)
  Strategy last_;
  std::vector<std::vector<double>> op_ms_, sync_ms_;  // [op][candidate], < 0 not known
  std::vector<std::vector<int>> by_compute_;  // [op]: candidates by forward + backward compute and weight sums
  std::unordered_map<uint64_t, std::vector<std::pair<int, double>>> move_memo_;
  SimStats stats_;
};

}  // namespace isomer::parallel
