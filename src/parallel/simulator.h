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
// Measured hosts (machine.h HostOverheads, from `isomer calibrate`): compute tasks
// are slowed by the contention between the node's ranks and, when the node's weights
// overflow its cache, by reading the block's weights from memory; every collective
// first costs a dispatch on the compute stream, and a blocking collective holds the
// compute stream while it runs (run-plan's ranks call MPI from their one thread).
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

  // The forward cost of op i's block under candidate c (compute only).
  double op_ms(int i, int c);
  // Gradient summation of op i's weights under candidate c (training; 0 otherwise).
  double weight_sync_ms(int i, int c);
  // Gathering output o of op p (candidate pc) whole on every device (inference outputs).
  double output_gather_ms(int p, int pc, int o);
  // The additive cost of op i under candidate c with the other operators as in `s`:
  // its compute (3x in training: forward and backward), weight gradient sums, and the
  // moves into it (and back, for gradients); with `with_users`, also the moves out of
  // it to its consumers (and the outputs' gathering). Used to rank configurations.
  double local_ms(const Strategy& s, int i, int c, bool with_users = true);
  // The candidate of op i with the least local_ms given `s`, among a shortlist: the
  // current one, the kShortlist cheapest by their own work, and those that take a
  // neighbour's layout as it is.
  int best_config(const Strategy& s, int i, bool with_users = true);
  static constexpr size_t kShortlist = 12;
  // Mesh axes best_config may use (bit a = axis a); all by default.
  void set_allowed_axes(uint64_t mask) { allowed_ = mask; }
  uint64_t allowed_axes() const { return allowed_; }
  // Op i's candidates by forward + backward compute and weight gradient sums.
  const std::vector<int>& by_compute(int i);
  Mode mode() const { return mode_; }
  const SimStats& stats() const { return stats_; }
  const ParallelGraph& graph() const { return pg_; }
  const Cluster& cluster() const { return cluster_; }
  // Per-device memory of `s` in bytes, and the weights' part of it.
  double memory_bytes(const Strategy& s);
  double weight_bytes(const Strategy& s);
  // The compute task of op i's forward block under candidate c: its op_ms with the
  // host overheads of the cluster (machine.h HostOverheads: contention between the
  // ranks, weights read from memory when the node's weights overflow the cache).
  double task_ms(int i, int c);
  // Whether the weights of `s` are read from memory every step (HostOverheads).
  bool weights_stream(const Strategy& s);

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
    double compute_ms = 0, comm_ms = 0, last_finish = 0;  // of the last schedule
    bool dirty = true;               // tasks changed since last scheduled
  };
  // A redistribution priced: its tasks (resource, ms) in order and their sum.
  struct Move {
    std::vector<std::pair<int, double>> tasks;
    double ms = 0;
  };
  // Per operator, filled per candidate on first use: hashes of its layouts (inputs,
  // input gradients, outputs, outputs without partial sums) and its memory.
  struct OpCache {
    int nin = 0, nout = 0;
    std::vector<char> have;
    std::vector<uint64_t> keys;        // per candidate: nin + nin + nout + nout
    std::vector<double> out_bytes;     // per candidate: nout
    std::vector<double> weight_bytes;  // per candidate: nin (constant inputs; 0 others)
  };
  const uint64_t* keys(int i, int c);
  const Move& fwd_move(int p, int pc, int po, int i, int c, int j);
  const Move& bwd_move(int i, int c, int j, int p, int pc, int po);
  const Move& out_move(int p, int pc, int po);
  const Move& priced(uint64_t key, const Layout& from, const Layout& to, const std::vector<int64_t>& dims, size_t elem);
  void build_block(int b, const Strategy& s);
  // Appends a move's tasks after `after`; returns the last task (or `after`).
  std::pair<int, int> add_moves(int b, std::pair<int, int> after, const Move& m);
  SimResult schedule(int first_block, const Strategy& s);
  int fwd_block(int i) const { return i; }
  int bwd_block(int i) const { return 2 * n_ - 1 - i; }
  int out_block() const { return mode_ == Mode::Training ? 2 * n_ : n_; }

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
  std::vector<OpCache> cache_;
  std::vector<std::vector<int>> last_use_;    // [op][output]: last consumer (n = graph output)
  std::unordered_map<uint64_t, Move> moves_;
  SimStats stats_;
  uint64_t allowed_ = ~uint64_t{0};
  bool streaming_ = false;  // weights_stream() of the strategy last simulated
};

}  // namespace isomer::parallel
