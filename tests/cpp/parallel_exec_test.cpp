// Plans executed: every rank graph (parallel/lower.h) run on isomer's runtime with
// its collectives between threads (LocalGroup) computes the model's outputs, for
// data parallelism and for random strategies over every operator's candidates, on
// meshes of one and two link classes. Also the layouts' redistribution steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "parallel/execute.h"
#include "parallel/layout.h"
#include "parallel/lower.h"
#include "parallel/strategy.h"
#include "parallel_models.h"

namespace isomer {
namespace {

using namespace parallel;

double max_rel_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  std::vector<double> x = a.to_f64(), y = b.to_f64();
  double scale = 1e-6, err = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) err = std::max(err, std::abs(x[i] - y[i]));
  return err / scale;
}

// Runs `s` on every rank and compares each rank's outputs with the reference evaluator.
void expect_plan_computes_model(const ParallelGraph& pg, const Strategy& s, const std::string& what) {
  std::vector<Graph> ranks;
  for (int r = 0; r < pg.mesh().devices(); ++r) ranks.push_back(lower_rank(pg, s, r));
  const std::vector<Tensor> inputs = random_inputs(pg.graph(), 7);
  const std::vector<Tensor> want = evaluate(pg.graph(), inputs);
  runtime::RuntimeOptions opts;
  opts.threads = 1;
  const auto got = run_local(ranks, inputs, opts);
  for (size_t r = 0; r < got.size(); ++r)
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_LT(max_rel_error(got[r][o], want[o]), 1e-4) << what << " rank " << r << " output " << o;
}

Strategy random_strategy(const ParallelGraph& pg, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Strategy s(static_cast<size_t>(pg.size()));
  for (int i = 0; i < pg.size(); ++i) s[static_cast<size_t>(i)] = static_cast<int>(rng() % pg.candidates(i).size());
  return s;
}

void check_model(const Graph& g, const Cluster& c, int random_plans) {
  ParallelGraph pg(g, Mesh(c));
  expect_plan_computes_model(pg, pg.data_parallel(), "data parallel");
  for (int k = 0; k < random_plans; ++k) expect_plan_computes_model(pg, random_strategy(pg, 11 + k), "random " + std::to_string(k));
}

TEST(ParallelExec, MlpPlansComputeTheModel) {
  check_model(test::mlp_graph(8, 8, 2), test::test_cluster(1, 4), 6);
  check_model(test::mlp_graph(8, 8, 2), test::test_cluster(2, 2), 4);
}

TEST(ParallelExec, TransformerPlansComputeTheModel) {
  check_model(test::transformer_graph(2, 4, 16, 4), test::test_cluster(1, 4), 5);
  check_model(test::transformer_graph(4, 4, 8, 2), test::test_cluster(2, 2), 3);
}

TEST(ParallelExec, CnnPlansComputeTheModel) { check_model(test::cnn_graph(4), test::test_cluster(1, 4), 5); }

TEST(ParallelLayout, RedistributionSteps) {
  Mesh mesh(test::test_cluster(2, 4));  // axes: n0 (2), d0 (2), d1 (2)
  const std::vector<int64_t> dims{8, 8};
  auto kinds = [&](const Layout& from, const Layout& to) {
    std::string s;
    for (const CommStep& st : redistribute(from, to, dims, mesh)) s += std::string(step_name(st.kind)) + mesh.axes_text(st.axes) + " ";
    return s;
  };
  const Layout whole = Layout::replicated(2);
  Layout rows{{{1, 2}, {}}, {}}, cols{{{}, {1, 2}}, {}}, partial{{{}, {}}, {1, 2}};
  EXPECT_EQ(kinds(whole, rows), "slice[d0 d1] ");
  EXPECT_EQ(kinds(rows, whole), "all_gather[d0 d1] ");
  EXPECT_EQ(kinds(partial, whole), "all_reduce[d0 d1] ");
  EXPECT_EQ(kinds(partial, rows), "reduce_scatter[d0 d1] ");
  EXPECT_EQ(kinds(rows, cols), "all_gather[d0 d1] slice[d0 d1] ");
  // Cut first along the axis the source holds in copies, then sum the smaller block.
  Layout partial_n{{{}, {}}, {0}}, target{{{1}, {0}}, {}};
  EXPECT_EQ(kinds(partial_n, target), "slice[d0] reduce_scatter[n0] ");
  EXPECT_EQ(kinds(rows, rows), "");
}

TEST(ParallelLayout, MeshAndLocalBlocks) {
  Mesh mesh(test::test_cluster(2, 4));
  ASSERT_EQ(mesh.num_axes(), 3);
  EXPECT_TRUE(mesh.axis(0).inter_node);
  EXPECT_EQ(mesh.coords(5), (std::vector<int>{1, 0, 1}));
  Layout l{{{0}, {2}}, {}};
  EXPECT_EQ(local_dims({8, 6}, l, mesh), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(block_offsets({8, 6}, l, mesh, 5), (std::vector<int64_t>{4, 3}));
  EXPECT_THROW(local_dims({7, 6}, l, mesh), Error);
}

}  // namespace
}  // namespace isomer
