// Note [Idle cycles] (engine_loop.cc): while no rank has anything pending the
// cycles lengthen, and a request still completes promptly on every rank.
#include <gtest/gtest.h>

#include <thread>

#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::RunEngines;
using testing::SumOnce;

class EngineIdleTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineIdleTest, IdleCyclesLengthen) {
  EngineOptions options = testing::TestOptions();
  options.cycle_time_ms = 2;
  // 300 ms idle: about 150 cycles at a fixed 2 ms period, about 20 once they
  // have doubled to 16 ms. A loaded machine only runs fewer cycles, so the
  // bound fails only if idle cycles do not lengthen.
  const auto stats = RunEngines(GetParam(), options, [](int, Engine&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  for (const EngineStats& s : stats) EXPECT_LT(s.cycles, 75u);
}

TEST_P(EngineIdleTest, RequestsAfterIdleSpellsCompleteOnEveryRank) {
  EngineOptions options = testing::TestOptions();
  options.cycle_time_ms = 2;
  RunEngines(GetParam(), options, [](int rank, Engine& engine) {
    for (int step = 0; step < 3; ++step) {
      // Ranks come back from idle at different times: the early ones wait in
      // the negotiation for the late ones, which wake for their own request.
      std::this_thread::sleep_for(std::chrono::milliseconds(60 + 15 * ((rank + step) % 3)));
      SumOnce(engine, "after_idle_" + std::to_string(step), 64);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineIdleTest, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace tfmpi
