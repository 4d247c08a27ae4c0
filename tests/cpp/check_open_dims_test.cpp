// The extents drawn inputs give open input dims, and graphs specialised to them
// (check/open_dims.h).
#include <gtest/gtest.h>

#include "check/engines.h"
#include "check/inputs.h"
#include "check/open_dims.h"
#include "eval/evaluator.h"
#include "ir/graph.h"
#include "ir/text.h"

namespace isomer {
namespace {

TEST(DrawnExtent, ByWhatTheNameSays) {
  for (const char* batch : {"batch", "batch_size", "BatchSize", "N", "b", "bs", "num_batches"})
    EXPECT_EQ(drawn_extent(batch), 1) << batch;
  for (const char* seq : {"seq", "seq_len", "seqLen", "sequence_length", "past_sequence_length", "tokens", "time",
                          "num_frames", "decoder_sequence_length"})
    EXPECT_EQ(drawn_extent(seq), 64) << seq;
  for (const char* side : {"height", "width", "H", "W", "image_height"}) EXPECT_EQ(drawn_extent(side), 224) << side;
  // Names that say nothing: dynamo's, TorchScript's unnamed dynamic axes.
  for (const char* other : {"s0", "s33", "input_ids_dynamic_axes_1", "unk__12", "dim"})
    EXPECT_EQ(drawn_extent(other), 1) << other;
}

TEST(DrawnBindings, NameEveryOpenDimTheUserLeftUnbound) {
  Graph g = parse_graph(R"(graph g(%x: f32[batch,seq,8], %m: i64[batch,seq], %y: f32[4,height]) {
    %0 = Relu(%x)
    return %0, %m, %y
  })");
  const std::map<std::string, int64_t> b = drawn_bindings(g, {{"height", 5}});
  EXPECT_EQ(b, (std::map<std::string, int64_t>{{"batch", 1}, {"height", 5}, {"seq", 64}}));
  EXPECT_EQ(extents_text(b), "batch=1, height=5, seq=64");
  ModelInputs in = valid_random_inputs(g, 0, b);
  ASSERT_TRUE(in.ok()) << in.impossible;
  EXPECT_EQ(in.tensors[0].dims(), (std::vector<int64_t>{1, 64, 8}));
  const auto shapes = open_input_shapes(g, b);
  EXPECT_EQ(shapes, (std::map<std::string, std::vector<int64_t>>{
                        {"m", {1, 64}}, {"x", {1, 64, 8}}, {"y", {4, 5}}}));
  EXPECT_EQ(open_input_shapes(g, in.tensors), shapes);
}

// dynamo names its dims s0, s33...: their role comes from the node that reads them.
TEST(DrawnBindings, AnUnsayingNameTakesItsRoleFromItsUse) {
  Graph g = parse_graph(R"(graph g(%ids: i64[s33,s50], %px: f32[s0,3,s1,s2], %x: f32[s7,s8,2], %r: f32[s11,1,2],
                                  %o: f32[s12,2], %n: i64[batch,s13]) {
    %emb = const f32[4,2] {1, 2, 3, 4, 5, 6, 7, 8}
    %0 = Gather(%emb, %ids) {axis = 0}
    %w = const f32[1,3,1,1] {1, 1, 1}
    %1 = Conv(%px, %w)
    %m = const f32[2,2] {1, 0, 0, 1}
    %2 = MatMul(%x, %m)
    %lw = const f32[1,4,2] {1, 1, 1, 1, 1, 1, 1, 1}
    %lr = const f32[1,4,1] {1, 1, 1, 1}
    %y, %h, %c = LSTM(%r, %lw, %lr) {hidden_size = 1}
    %3 = MatMul(%o, %m)
    %4 = Gather(%emb, %n) {axis = 0}
    return %0, %1, %2, %y, %3, %4
  })");
  const std::map<std::string, int64_t> b = drawn_bindings(g, {{"s2", 96}});
  EXPECT_EQ(b, (std::map<std::string, int64_t>{{"batch", 1},
                                               {"s0", 1},
                                               {"s1", 224},
                                               {"s11", 64},
                                               {"s12", 1},
                                               {"s13", 64},
                                               {"s2", 96},
                                               {"s33", 1},
                                               {"s50", 64},
                                               {"s7", 1},
                                               {"s8", 64}}));
  // Without names (the fallback for a model that refuses them) every dim is 1.
  for (const auto& [name, extent] : drawn_bindings(g, {}, false)) EXPECT_EQ(extent, 1) << name;
}

// dynamo names a mask's dims apart from its token ids' and reads it at positions it
// computes (a GatherND), so no node tells the mask's sequence dim: it follows the ids'.
TEST(DrawnBindings, AMaskDimNoNodeTellsFollowsTheTokenIds) {
  Graph g = parse_graph(R"(graph g(%ids: i64[s33,s50], %mask: i64[s6,s81], %x: f32[s7,s8,2], %r: f32[s11,1,2]) {
    %emb = const f32[4,2] {1, 2, 3, 4, 5, 6, 7, 8}
    %0 = Gather(%emb, %ids) {axis = 0}
    %1 = Cast(%mask) {to = 1}
    %m = const f32[2,2] {1, 0, 0, 1}
    %2 = MatMul(%x, %m)
    %lw = const f32[1,4,2] {1, 1, 1, 1, 1, 1, 1, 1}
    %lr = const f32[1,4,1] {1, 1, 1, 1}
    %y, %h, %c = LSTM(%r, %lw, %lr) {hidden_size = 1}
    return %0, %1, %2, %y
  })");
  const std::map<std::string, int64_t> b = drawn_bindings(g);
  EXPECT_EQ(b.at("s50"), 64);
  EXPECT_EQ(b.at("s81"), 64);
  EXPECT_EQ(b.at("s6"), 1);
  // Only integer inputs follow each other: a float input's batch is no LSTM's time axis.
  EXPECT_EQ(b.at("s7"), 1);
  EXPECT_EQ(b.at("s11"), 64);
}

TEST(WithInputShapes, TheGraphImportedAgainWithStaticInputs) {
  Graph g = parse_graph(R"(graph g(%x: f32[batch,seq,8]) {
    %s = Shape(%x)
    %0 = Reshape(%x, %s)
    %1 = Relu(%0)
    return %1
  })");
  EXPECT_FALSE(with_input_shapes(g, {}));
  std::optional<Graph> fixed = with_input_shapes(g, {{"x", {2, 3, 8}}});
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->inputs()[0]->output_types()[0].shape, make_shape({2, 3, 8}));
  EXPECT_EQ(fixed->outputs()[0].type().shape, make_shape({2, 3, 8}));
  EXPECT_EQ(fixed->output_names(), g.output_names());
  // Dims the model cannot take (a rank it does not have) leave it as written.
  EXPECT_FALSE(with_input_shapes(g, {{"x", {2, 3}}}));
}

// Within a FixedGraphs scope a graph is exported and imported once per set of shapes
// (a copy of the graph is the same graph); another graph, or other shapes, once more.
TEST(WithInputShapes, FixedOncePerScope) {
  const char* text = R"(graph g(%x: f32[batch,seq,8]) {
    %0 = Relu(%x)
    return %0
  })";
  Graph g = parse_graph(text);
  const std::map<std::string, std::vector<int64_t>> at64 = {{"x", {1, 64, 8}}}, at2 = {{"x", {1, 2, 8}}};
  FixedGraphs scope;
  std::optional<Graph> first = with_input_shapes(g, at64);
  const Graph copy = g;
  std::optional<Graph> again = with_input_shapes(copy, at64);
  ASSERT_TRUE(first && again);
  EXPECT_TRUE(same_graph(*first, *again));
  EXPECT_EQ(scope.fixed(), 1u);
  EXPECT_EQ(scope.reused(), 1u);
  with_input_shapes(g, at2);
  with_input_shapes(parse_graph(text), at64);  // equal, but other nodes
  EXPECT_EQ(scope.fixed(), 3u);
  {
    FixedGraphs inner;  // a scope of its own: nothing of the outer one
    with_input_shapes(g, at64);
    EXPECT_EQ(inner.fixed(), 1u);
    EXPECT_EQ(inner.reused(), 0u);
  }
  with_input_shapes(g, at64);
  EXPECT_EQ(scope.reused(), 2u);
}

TEST(Engines, TheRuntimeRunsTheGraphFixedToTheInputsExtents) {
  Graph g = parse_graph(R"(graph g(%x: f32[batch,seq,8]) {
    %0 = Relu(%x)
    return %0
  })");
  const std::map<std::string, int64_t> b = drawn_bindings(g);
  ModelInputs in = valid_random_inputs(g, 1, b);
  EngineOptions eo;
  eo.threads = 1;
  eo.bindings = b;
  eo.input_shapes = open_input_shapes(g, in.tensors);
  Engines engines(eo);
  Prepared* p = engines.get(g, Engine::Runtime);
  ASSERT_NE(p, nullptr);
  const std::vector<Tensor> got = p->run(in.tensors);
  const std::vector<Tensor> want = evaluate(g, in.tensors);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].dims(), want[0].dims());
  EXPECT_EQ(got[0].to_f64(), want[0].to_f64());
}

}  // namespace
}  // namespace isomer
