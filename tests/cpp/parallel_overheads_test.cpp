// The host overheads of a measured machine (machine.h HostOverheads) and the measured
// collective points of a calibration: read from a calibration file, priced by the
// machine model, and added by the simulator (contention, weights from memory,
// dispatch per collective, collectives that hold the compute stream), worked out by
// hand; incremental simulation still equals simulating from scratch when the weights
// start or stop streaming; and the joint search's rules (rules/parallel/joint.rules)
// giving a plan parallelization alone cannot. No timings: every number is computed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "ir/error.h"
#include "parallel/calibrate.h"
#include "parallel/search.h"
#include "parallel_models.h"
#include "runtime/runtime.h"
#include "search/search.h"

namespace isomer {
namespace {

using namespace parallel;

std::string write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p.string();
}

const char* kCalibration = R"({"ranks": 2, "link": "intra_node", "collectives": {
  "all_reduce": {"latency_us": 10, "bandwidth_gbps": 1,
                 "points_bytes_ms": [[64, 0.02], [1000000, 10], [4000000, 52]]},
  "all_gather": {"latency_us": 10, "bandwidth_gbps": 1}},
  "host": {"dispatch_us": 20, "compute_contention": 1.5, "weight_stream_gbytes_per_s": 10,
           "cache_bytes": 1000000, "blocking_collectives": true}})";

TEST(ParallelOverheads, CalibrationFileGivesHostAndPoints) {
  const auto dir = std::filesystem::temp_directory_path() / "isomer_overheads_test";
  std::filesystem::create_directories(dir);
  write_file(dir / "calib.json", kCalibration);
  const std::string measured =
      write_file(dir / "measured.json", R"({"nodes": 1, "devices_per_node": 2, "intra_node": {"calibration": "calib.json"}})");
  Cluster c = load_cluster(measured);
  EXPECT_DOUBLE_EQ(c.host.dispatch_us, 20);
  EXPECT_DOUBLE_EQ(c.host.compute_contention, 1.5);
  EXPECT_DOUBLE_EQ(c.host.weight_stream_gbytes_per_s, 10);
  EXPECT_DOUBLE_EQ(c.host.cache_bytes, 1e6);
  EXPECT_TRUE(c.host.blocking_collectives);
  const LinkModel::Fit ar = c.intra.for_collective(Collective::AllReduce);
  ASSERT_EQ(ar.points.size(), 3u);
  EXPECT_EQ(ar.ranks, 2);
  // Read off the points: the smallest's time below it, linear between, the last
  // segment's slope beyond.
  EXPECT_DOUBLE_EQ(ar.measured_ms(8), 0.02);
  EXPECT_NEAR(ar.measured_ms(2500000), 31, 1e-9);
  EXPECT_NEAR(ar.measured_ms(7000000), 52 + 3e6 * 42 / 3e6, 1e-9);
  // A group of the calibrated size uses the points; the ring model otherwise.
  Mesh mesh(c);
  EXPECT_NEAR(collective_ms(c, mesh, Collective::AllReduce, {0}, 2500000), 31, 1e-9);
  EXPECT_NEAR(collective_ms(c, mesh, Collective::AllGather, {0}, 1e6), 1 * 10e-3 + 1e6 * 8 / 1e9 * 1e3, 1e-9);
  // Gradient buckets pay the fixed cost (the smallest message) in proportion to their share.
  EXPECT_NEAR(gradient_sync_ms(c, mesh, {0}, 1e6), 10 - (1 - 1e6 / kGradientBucketBytes) * 0.02, 1e-9);

  // Given device rates, the host's overheads are not this machine's: ignored.
  const std::string rates = write_file(dir / "rates.json", R"({"nodes": 1, "devices_per_node": 2,
      "device": {"tflops": 1, "memory_gb": 1, "bandwidth_gbps": 1}, "intra_node": {"calibration": "calib.json"}})");
  Cluster r = load_cluster(rates);
  EXPECT_DOUBLE_EQ(r.host.compute_contention, 1);
  EXPECT_DOUBLE_EQ(r.host.dispatch_us, 0);
  EXPECT_FALSE(r.host.blocking_collectives);

  write_file(dir / "bad.json", R"({"ranks": 2, "collectives": {"all_reduce": {"bandwidth_gbps": 1,
      "points_bytes_ms": [[64, 0.1], [64, 0.2]]}}})");
  write_file(dir / "bad_cluster.json", R"({"nodes": 1, "devices_per_node": 2, "intra_node": {"calibration": "bad.json"}})");
  try {
    load_cluster((dir / "bad_cluster.json").string());
    ADD_FAILURE() << "a repeated size must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("repeats a size"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(ParallelOverheads, FitOnRelativeErrorsKeepsTheFixedCost) {
  // 30 us per ring step and 1 Gbit/s, the largest point 40% slow (a protocol switch
  // or retransmissions): the small messages still set the fixed cost.
  auto [steps, factor] = ring_terms(Collective::AllReduce, 2);
  std::vector<std::pair<double, double>> pts;
  for (double b : {64.0, 16384.0, 131072.0, 1048576.0, 4194304.0})
    pts.emplace_back(b, steps * 30e-3 + factor * b * 8 / 1e9 * 1e3);
  pts.back().second *= 1.4;
  const LinkModel::Fit f = fit_ring(Collective::AllReduce, 2, pts);
  EXPECT_NEAR(f.latency_us, 30, 3);
  EXPECT_NEAR(f.gbps, 1, 0.1);
}

// One MatMul [8,64]x[64,64], data parallel on two devices, with host overheads.
TEST(ParallelOverheads, SimulatorAddsHostOverheadsByHand) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({8, 64})});
  Graph g = b.finish({b.op1("MatMul", {x, b.constant(test::pweights({64, 64}, 1))})}, {"y"});
  Cluster c = test::test_cluster(1, 2);
  ParallelGraph pg(g, Mesh(c));
  RatesModel rates(*c.device);
  const double bytes = (4 * 64 + 64 * 64 + 4 * 64) * 4.0;
  const double fwd = (std::max(2.0 * 4 * 64 * 64 / 100e12, bytes / 2000e9) + 2e-6) * 1e3;
  const double gather = 4 * 64 * 4.0 * 8 / 2400e9 * 1e3 + 5e-3;
  c.host.compute_contention = 1.5;
  c.host.dispatch_us = 20;
  c.host.weight_stream_gbytes_per_s = 10;
  c.host.blocking_collectives = true;
  // The node's weights (2 x 16 KiB) fit the cache: contention and dispatch only.
  c.host.cache_bytes = 1e6;
  {
    Simulator sim(pg, c, rates, Mode::Inference);
    const SimResult r = sim.simulate(pg.data_parallel());
    EXPECT_NEAR(r.step_ms, 1.5 * fwd + 0.02 + gather, 1e-9);
    EXPECT_NEAR(r.compute_ms, 1.5 * fwd + 0.02, 1e-9);
    EXPECT_NEAR(r.comm_ms, gather, 1e-9);
    EXPECT_FALSE(sim.weights_stream(pg.data_parallel()));
  }
  // They do not: every step reads the block's weight (16 KiB) from memory.
  c.host.cache_bytes = 16384;
  {
    Simulator sim(pg, c, rates, Mode::Inference);
    EXPECT_TRUE(sim.weights_stream(pg.data_parallel()));
    const SimResult r = sim.simulate(pg.data_parallel());
    EXPECT_NEAR(r.step_ms, 1.5 * fwd + 16384 / 10e9 * 1e3 + 0.02 + gather, 1e-9);
  }
}

TEST(ParallelOverheads, BlockingCollectivesDoNotOverlapCompute) {
  // Training a 3-layer MLP, data parallel: a weight's gradient sum can run while the
  // layer below computes its gradients, unless the collective holds the compute stream.
  Cluster c = test::test_cluster(1, 2);
  ParallelGraph pg(test::mlp_graph(64, 512, 3), Mesh(c));
  RatesModel rates(*c.device);
  Simulator overlapping(pg, c, rates, Mode::Training);
  const SimResult a = overlapping.simulate(pg.data_parallel());
  c.host.blocking_collectives = true;
  Simulator blocking(pg, c, rates, Mode::Training);
  const SimResult r = blocking.simulate(pg.data_parallel());
  EXPECT_GT(a.overlap_ms, 0);
  EXPECT_NEAR(r.overlap_ms, 0, 1e-12);
  EXPECT_NEAR(r.step_ms, r.compute_ms + r.comm_ms, 1e-9);
  EXPECT_NEAR(r.compute_ms, a.compute_ms, 1e-12);
  EXPECT_GT(r.step_ms, a.step_ms);
}

TEST(ParallelOverheads, IncrementalEqualsFullWhenWeightsStartStreaming) {
  Cluster c = test::test_cluster(1, 4);
  ParallelGraph pg(test::transformer_graph(4, 8, 32, 4, 2), Mesh(c));
  RatesModel rates(*c.device);
  c.host.compute_contention = 1.25;
  c.host.dispatch_us = 3;
  c.host.weight_stream_gbytes_per_s = 50;
  c.host.blocking_collectives = true;
  // Between the weights of data parallelism (all on every device) and those of a
  // plan that cuts every weight: proposals cross the threshold both ways.
  Simulator probe(pg, c, rates, Mode::Training);
  c.host.cache_bytes = 4 * 0.6 * probe.weight_bytes(pg.data_parallel());
  for (Mode mode : {Mode::Inference, Mode::Training}) {
    Simulator inc(pg, c, rates, mode), full(pg, c, rates, mode);
    Strategy s = pg.data_parallel();
    inc.simulate(s);
    std::mt19937_64 rng(5);
    int flips = 0;
    bool streaming = inc.weights_stream(s);
    for (int step = 0; step < 300; ++step) {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(pg.size()));
      s[static_cast<size_t>(i)] = static_cast<int>(rng() % pg.candidates(i).size());
      SimResult a = inc.update(s, {i}), b = full.simulate(s);
      ASSERT_DOUBLE_EQ(a.step_ms, b.step_ms) << mode_name(mode) << " step " << step;
      ASSERT_DOUBLE_EQ(a.compute_ms, b.compute_ms);
      flips += inc.weights_stream(s) != streaming;
      streaming = inc.weights_stream(s);
    }
    EXPECT_GT(flips, 0) << mode_name(mode);
  }
}

}  // namespace
}  // namespace isomer

namespace isomer {
namespace {

using namespace parallel;

// Unity's joint search with rules/parallel/joint.rules against the same search
// without rules: attention's scale folds into the query projection (one division
// fewer per layer), a plan no parallelization of the original graph has; the
// rewritten graph computes what the original does.
TEST(ParallelJoint, JointRulesBeatParallelizationOnly) {
  const Graph g = test::transformer_graph(4, 8, 32, 4, 2);
  Cluster c = test::test_cluster(1, 4);
  RatesModel rates(*c.device);
  ParallelSearchOptions o;
  o.algorithm = ParallelSearchOptions::Algorithm::Unity;
  o.max_steps = 400;
  o.max_graphs = 8;
  o.budget_s = 60;
  ParallelSearchReport alone = parallel_search(g, {c, rates}, o);
  o.rules = search_rules(load_rule_files({std::string(ISOMER_SOURCE_DIR) + "/rules/parallel/joint.rules"}));
  ASSERT_FALSE(o.rules.empty());
  ParallelSearchReport joint = parallel_search(g, {c, rates}, o);
  EXPECT_LT(joint.best.sim.step_ms, alone.best.sim.step_ms);
  EXPECT_EQ(joint.best.rules_applied.count("attention_scale_into_query"), 1u);
  EXPECT_EQ(joint.best.rules_applied.at("attention_scale_into_query"), 2u);  // both layers, one graph
  // Same outputs (the rule is proved; this checks it was applied as proved).
  const Graph& rewritten = joint.best.graph->graph();
  const std::vector<Tensor> in{test::pweights({4, 8, 32}, 77, 1.0)};
  const Tensor want = runtime::compile(g)->run(in).at(0), got = runtime::compile(rewritten)->run(in).at(0);
  const std::vector<double> a = want.to_f64(), b = got.to_f64();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-4 * (1 + std::abs(a[k]))) << k;
}

// A rule applied at every match at once where matches overlap (successive layers of
// a chain: one match's operand is another's root): the overlapping ones are left out,
// the search goes on.
TEST(ParallelJoint, OverlappingMatchesOfAChain) {
  Cluster c = test::test_cluster(1, 2);
  RatesModel rates(*c.device);
  ParallelSearchOptions o;
  o.max_steps = 200;
  o.max_graphs = 6;
  o.rules = search_rules(load_rule_files({std::string(ISOMER_SOURCE_DIR) + "/rules"}));
  ParallelSearchReport r = parallel_search(test::mlp_graph(16, 64, 4), {c, rates}, o);
  EXPECT_GT(r.graphs, 0u);
  EXPECT_LE(r.best.sim.step_ms, r.data_parallel.sim.step_ms);
}

}  // namespace
}  // namespace isomer
