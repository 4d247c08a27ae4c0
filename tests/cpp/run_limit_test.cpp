// optimize's limit on its own runs of a model (ir/run_limit.h).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ir/run_limit.h"

namespace isomer {
namespace {

TEST(RunLimit, NothingWithoutALimit) {
  RunScope scope;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_NO_THROW(check_run_limit());
  EXPECT_FALSE(run_time_left().has_value());
  EXPECT_EQ(RunLimit::exceeded(), "");
}

TEST(RunLimit, ARunPastItThrowsAndEveryLaterRunIsSkipped) {
  RunLimit limit(0.02, "--run-limit");
  {
    RunScope scope;
    EXPECT_NO_THROW(check_run_limit());
    ASSERT_TRUE(run_time_left().has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    EXPECT_THROW(check_run_limit(), RunLimitExceeded);
  }
  EXPECT_FALSE(run_time_left().has_value());  // the scope disarmed its deadline
  EXPECT_THROW(RunScope again, RunLimitExceeded);
  EXPECT_NE(RunLimit::exceeded().find("per run (--run-limit)"), std::string::npos) << RunLimit::exceeded();
}

TEST(RunLimit, ScopesOfSeveralRunsGetSeveralLimits) {
  RunLimit limit(0.02, "test");
  RunScope scope(5);  // 0.1 s
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_NO_THROW(check_run_limit());
  EXPECT_EQ(RunLimit::exceeded(), "");
}

}  // namespace
}  // namespace isomer
