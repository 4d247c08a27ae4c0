// Rule generation shared among ranks (generate/shards.h) writes what one process
// writes: two ranks as threads exchanging their results through a LocalGroup.
#include <gtest/gtest.h>

#include <thread>

#include "generate/generate.h"
#include "parallel/comm.h"

namespace isomer {
namespace {

gen::GenerateOptions options() {
  gen::GenerateOptions o;
  o.max_ops = 2;
  o.ops = {"MatMul", "Add", "Relu", "Transpose", "Concat"};
  o.jobs = 1;
  return o;
}

TEST(ParallelGenerate, ShardedRunWritesTheSameBytes) {
  const gen::GenerateOptions one = options();
  const std::string want = gen::print_generated(gen::generate_rules(one), one);
  ASSERT_GT(want.size(), 1000u);
  parallel::LocalGroup group(2);
  std::string got[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      gen::GenerateOptions o = options();
      parallel::Communicator& c = group.rank(r);
      o.shards.rank = r;
      o.shards.count = 2;
      o.shards.all_gather = [&c](const std::string& mine) { return c.all_gather_strings(mine); };
      got[r] = gen::print_generated(gen::generate_rules(o), o);
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}

}  // namespace
}  // namespace isomer
