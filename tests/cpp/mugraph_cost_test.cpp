// The μGraph cost model on fixed inputs (nominal machine rates): a contraction is
// priced by the call its kernel plan makes, so tilings whose micro-kernel calls
// are narrow or short rank below those that fill the register blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "ir/text.h"
#include "mugraph/cost.h"
#include "mugraph/search.h"
#include "mugraph_test_util.h"

namespace isomer::mugraph {
namespace {

Machine avx512_machine() {
  Machine m;
  m.avx2 = m.avx512 = m.fma = true;
  m.vector_floats = 16;
  return m;
}

// Two vectors of columns by 8 rows keep 16 accumulators in flight; one row, or
// half a vector of columns, leaves the FMA pipes waiting or idle lanes.
TEST(MuGraphCost, GemmEfficiencyFollowsTheRegisterBlocks) {
  const Machine m = avx512_machine();
  const double full = gemm_efficiency(m, 64, 128, 64);
  EXPECT_GT(full, 0.8);
  EXPECT_LE(full, 1.0);
  EXPECT_LT(gemm_efficiency(m, 1, 128, 64), 0.5 * full) << "one row: two accumulators wait out the FMA latency";
  EXPECT_LT(gemm_efficiency(m, 64, 8, 64), 0.6 * full) << "8 columns fill half a 16-lane vector";
  EXPECT_LT(gemm_efficiency(m, 64, 128, 4), 0.8 * full) << "a short k pays the accumulators' loads and stores";
  EXPECT_NEAR(gemm_efficiency(m, 64, 127, 64), gemm_efficiency(m, 64, 128, 64), 0.05);
}

// Causal GQA attention as LLaMA's block has it (16 query heads on 4 KV heads, 128
// tokens): the estimate put tilings looping over 8 keys at a time first (their
// Q·Kᵀ calls 8 columns wide, P·V's 8 deep), which measured 0.43 ms against 0.34 for
// tilings of whole KV blocks of 64 or more (processor time, one thread). Priced by
// their calls, the first-ranked tiling no longer runs chunks under a vector pair.
TEST(MuGraphCost, AttentionRanksFullRegisterBlocksFirst) {
  setenv("ISOMER_MUGRAPH_NO_MEASURE", "1", 0);
  const int s = 128;
  std::vector<float> mask(static_cast<size_t>(s * s));
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < s; ++j) mask[static_cast<size_t>(i * s + j)] = j <= i ? 0.0f : -INFINITY;
  const std::vector<std::vector<float>> constants = {{}, {}, {}, mask};
  Program p = from_body(parse_graph(testing::gqa_attention_body(16, 4, s, 64)));
  SearchOptions o;
  o.max_seconds = 10;
  double best = INFINITY;
  BlockGraph first;
  for (const BlockGraph& st : search_structures(p, o, nullptr))
    for (const BlockGraph& g : tilings(p, st, 1, 2, constants)) {
      const double ms = estimate_ms(p, g, 1, constants);
      if (ms < best) best = ms, first = g;
    }
  ASSERT_TRUE(std::isfinite(best));
  const bool narrow = first.loop_atom >= 0 && first.chunk > 0 && first.chunk < 2 * machine().vector_floats &&
                      first.chunk < p.extent(first.loop_atom);
  EXPECT_FALSE(narrow) << first.to_text(p);
}

}  // namespace
}  // namespace isomer::mugraph
