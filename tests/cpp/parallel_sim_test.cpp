// The machine model, the simulator and the search (parallel/): collective costs
// against the ring formulas, a simulated step worked out by hand, incremental
// re-simulation equal to simulating from scratch, memory, the baselines, and the
// search's guarantees (never slower than data parallelism, deterministic, budgets,
// interruption), cluster.json errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <set>

#include "ir/error.h"
#include "parallel/calibrate.h"
#include "parallel/search.h"
#include "parallel_models.h"

namespace isomer {
namespace {

using namespace parallel;

TEST(ParallelMachine, RingCollectives) {
  Cluster c = test::test_cluster(2, 4);  // intra 2400 Gbit/s 5 us, inter 200 Gbit/s 10 us
  Mesh mesh(c);
  const double bytes = 64e6;
  // Within a node (4 devices): ring all-reduce 2(g-1)/g * S / B + 2(g-1) * latency.
  const double intra = 2.0 * 3 / 4 * bytes * 8 / 2400e9 * 1e3 + 6 * 5e-3;
  EXPECT_NEAR(collective_ms(c, mesh, Collective::AllReduce, {1, 2}, bytes), intra, 1e-9);
  // Across the two nodes, one device per node per group: the node's link carries the
  // four groups of its devices.
  const double inter = 4 * (2.0 * 1 / 2) * bytes * 8 / 200e9 * 1e3 + 2 * 10e-3;
  EXPECT_NEAR(collective_ms(c, mesh, Collective::AllReduce, {0}, bytes), inter, 1e-9);
  // All-gather of 1 MB blocks over the node: (g-1) blocks in.
  EXPECT_NEAR(collective_ms(c, mesh, Collective::AllGather, {1, 2}, 1e6), 3 * 1e6 * 8 / 2400e9 * 1e3 + 3 * 5e-3, 1e-9);
  EXPECT_EQ(collective_ms(c, mesh, Collective::AllReduce, {}, bytes), 0);
}

TEST(ParallelMachine, CalibrationFitRecoversTheLink) {
  // Points made from a link of 7 us and 3 Gbit/s come back as that link.
  for (Collective k : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    std::vector<std::pair<double, double>> pts;
    auto [steps, factor] = ring_terms(k, 2);
    for (double b : {4e3, 64e3, 1e6, 16e6}) pts.emplace_back(b, steps * 7e-3 + factor * b * 8 / 3e9 * 1e3);
    LinkModel::Fit f = fit_ring(k, 2, pts);
    EXPECT_NEAR(f.latency_us, 7, 1e-6) << collective_name(k);
    EXPECT_NEAR(f.gbps, 3, 1e-9) << collective_name(k);
  }
}

TEST(ParallelMachine, ClusterFileErrors) {
  Cluster c = parse_cluster(R"({"nodes": 2, "devices_per_node": 8, "device": {"tflops": 100, "memory_gb": 80,
      "bandwidth_gbps": 2000}, "intra_node": {"bandwidth_gbps": 2400, "latency_us": 5},
      "inter_node": {"bandwidth_gbps": 200, "latency_us": 10}})");
  EXPECT_EQ(c.devices(), 16);
  EXPECT_EQ(Mesh(c).num_axes(), 4);  // 2 = n0, 8 = d0 d1 d2
  ASSERT_TRUE(c.device.has_value());
  EXPECT_FALSE(parse_cluster(R"({"nodes": 1, "devices_per_node": 2})").device.has_value());  // measure this machine
  auto message = [](const std::string& text) {
    try {
      parse_cluster(text, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"nodes": 0})").find("\"nodes\" must be a positive integer"), std::string::npos);
  EXPECT_NE(message(R"({"device": {"tflops": 1}})").find("missing \"bandwidth_gbps\""), std::string::npos);
  EXPECT_NE(message(R"({"nodez": 1})").find("unknown key \"nodez\""), std::string::npos);
  EXPECT_NE(message("{").find("cluster file 'c.json'"), std::string::npos);
}

// One MatMul [8,64]x[64,64] on two devices, data parallel, worked out by hand.
TEST(ParallelSim, DataParallelStepByHand) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({8, 64})});
  Graph g = b.finish({b.op1("MatMul", {x, b.constant(test::pweights({64, 64}, 1))})}, {"y"});
  Cluster c = test::test_cluster(1, 2);
  ParallelGraph pg(g, Mesh(c));
  RatesModel rates(*c.device);
  // Forward block: 2*4*64*64 flops (compute-bound? no: bytes dominate at 2000 GB/s).
  const double bytes = (4 * 64 + 64 * 64 + 4 * 64) * 4.0;
  const double flops = 2.0 * 4 * 64 * 64;
  const double fwd = (std::max(flops / 100e12, bytes / 2000e9) + 2e-6) * 1e3;
  Simulator infer(pg, c, rates, Mode::Inference);
  SimResult r = infer.simulate(pg.data_parallel());
  // Then the output gathered: all-gather of a 4x64 block over 2 devices.
  const double gather = 1 * 4 * 64 * 4.0 * 8 / 2400e9 * 1e3 + 5e-3;
  EXPECT_NEAR(r.step_ms, fwd + gather, 1e-9);
  EXPECT_NEAR(r.comm_ms, gather, 1e-9);
  // Training: forward, backward (2x), the weight's gradient all-reduced (64x64 floats),
  // its latency in proportion to its share of a 25 MB bucket.
  Simulator train(pg, c, rates, Mode::Training);
  r = train.simulate(pg.data_parallel());
  const double sync = 2.0 * 1 / 2 * 64 * 64 * 4.0 * 8 / 2400e9 * 1e3 + 2 * 5e-3 * (64 * 64 * 4.0 / 25e6);
  EXPECT_NEAR(r.step_ms, 3 * fwd + sync, 1e-9);
  EXPECT_NEAR(r.memory_bytes, 4 * 64 * 64 * 4.0 + 4 * 64 * 4.0, 1e-6);
}

TEST(ParallelSim, IncrementalEqualsFullSimulation) {
  for (Mode mode : {Mode::Inference, Mode::Training}) {
    Cluster c = test::test_cluster(2, 4);
    ParallelGraph pg(test::transformer_graph(4, 8, 32, 4, 2), Mesh(c));
    RatesModel rates(*c.device);
    Simulator inc(pg, c, rates, mode), full(pg, c, rates, mode);
    Strategy s = pg.data_parallel();
    inc.simulate(s);
    std::mt19937_64 rng(3);
    for (int step = 0; step < 300; ++step) {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(pg.size()));
      s[static_cast<size_t>(i)] = static_cast<int>(rng() % pg.candidates(i).size());
      SimResult a = inc.update(s, {i}), b = full.simulate(s);
      ASSERT_DOUBLE_EQ(a.step_ms, b.step_ms) << mode_name(mode) << " step " << step;
      ASSERT_DOUBLE_EQ(a.comm_ms, b.comm_ms);
      ASSERT_EQ(a.tasks, b.tasks);
    }
    EXPECT_GT(inc.stats().incremental, 0u);
    // Re-simulating a change touches fewer blocks than simulating everything.
    EXPECT_LT(inc.stats().blocks_rebuilt, full.stats().blocks_rebuilt);
  }
}

TEST(ParallelSim, MemoryOverCapacityDoesNotFit) {
  Cluster c = test::test_cluster(1, 2);
  c.memory_gb = 1e-6;  // 1 KB per device
  ParallelGraph pg(test::mlp_graph(8, 16, 2), Mesh(c));
  RatesModel rates(*c.device);
  Simulator sim(pg, c, rates, Mode::Training);
  EXPECT_FALSE(sim.simulate(pg.data_parallel()).fits);
}

TEST(ParallelSearch, MegatronBaselineOnATransformer) {
  Cluster c = test::test_cluster(2, 4);
  ParallelGraph pg(test::transformer_graph(4, 8, 32, 4), Mesh(c));
  RatesModel rates(*c.device);
  Simulator sim(pg, c, rates, Mode::Training);
  std::optional<Strategy> m = megatron_strategy(pg, sim);
  ASSERT_TRUE(m.has_value());
  // The six products with a weight: q, k, v and up column-parallel (P over devices of
  // a node), out and down row-parallel (R over the same devices); the batch over the nodes.
  std::string kinds;
  std::set<std::string> tp_groups;
  for (int i = 0; i < pg.size(); ++i)
    if (pg.node(i).op_type() == "MatMul" && pg.node(i).inputs()[1].constant()) {
      const OpConfig& cfg = pg.config(i, (*m)[static_cast<size_t>(i)]);
      const std::string text = pg.config_text(i, cfg);
      EXPECT_EQ(text.rfind("S[n0", 0), 0u) << text;
      const size_t at = text.find_first_of("PR", 1);
      ASSERT_NE(at, std::string::npos) << text;
      kinds += text[at];
      tp_groups.insert(text.substr(at + 1));
    }
  EXPECT_EQ(kinds, "PPPRPR");
  EXPECT_EQ(tp_groups.size(), 1u);
  EXPECT_EQ(tp_groups.begin()->find('n'), std::string::npos);  // within a node
  EXPECT_FALSE(megatron_strategy(ParallelGraph(test::cnn_graph(4), Mesh(test::test_cluster(2, 1))), sim).has_value());
}

ParallelSearchReport search(const Graph& g, const Cluster& c, ComputeModel& compute, ParallelSearchOptions o) {
  return parallel_search(g, {c, compute}, o);
}

TEST(ParallelSearch, NeverSlowerThanDataParallelAndDeterministic) {
  Cluster c = test::test_cluster(2, 4);
  RatesModel rates(*c.device);
  for (const Graph& g : {test::transformer_graph(4, 8, 32, 4), test::mlp_graph(16, 64, 3), test::cnn_graph(8)}) {
    for (auto alg : {ParallelSearchOptions::Algorithm::FlexFlow, ParallelSearchOptions::Algorithm::Unity}) {
      ParallelSearchOptions o;
      o.algorithm = alg;
      o.max_steps = 600;
      o.seed = 5;
      ParallelSearchReport a = search(g, c, rates, o), b = search(g, c, rates, o);
      EXPECT_LE(a.best.sim.step_ms, a.data_parallel.sim.step_ms);
      EXPECT_EQ(a.best.strategy, b.best.strategy);
      EXPECT_EQ(a.stop_reason, "steps");
      EXPECT_EQ(a.steps, 600u);
    }
  }
}

TEST(ParallelSearch, BudgetsAndInterruption) {
  Cluster c = test::test_cluster(2, 4);
  RatesModel rates(*c.device);
  ParallelSearchOptions o;
  o.max_steps = 100000000;
  o.budget_s = 0.3;
  ParallelSearchReport r = search(test::transformer_graph(4, 8, 32, 4), c, rates, o);
  EXPECT_EQ(r.stop_reason, "time");
  EXPECT_LT(r.seconds, 5);
  std::atomic<bool> stop{true};
  o.interrupt = &stop;
  o.budget_s = 100;
  r = search(test::transformer_graph(4, 8, 32, 4), c, rates, o);
  EXPECT_EQ(r.stop_reason, "interrupted");
  EXPECT_LE(r.best.sim.step_ms, r.data_parallel.sim.step_ms);
}

// The search finds Megatron's plan where it is much faster than data parallelism
// (a wide MLP at a small batch: weights dominate).
TEST(ParallelSearch, FindsTensorParallelismWhereItWins) {
  Cluster c = test::test_cluster(1, 8);
  RatesModel rates(*c.device);
  ParallelSearchOptions o;
  o.max_steps = 2000;
  ParallelSearchReport r = search(test::mlp_graph(8, 1024, 3), c, rates, o);
  EXPECT_LT(r.best.sim.step_ms, 0.6 * r.data_parallel.sim.step_ms);
}

}  // namespace
}  // namespace isomer
