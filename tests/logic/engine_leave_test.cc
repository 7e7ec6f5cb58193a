// Note [Ranks that stop early]: when a rank shuts down while others still
// wait for collectives it will never submit, their requests fail at once,
// naming the rank and, if it gave one, the error it stopped on.
#include <gtest/gtest.h>

#include <future>

#include "contains.h"
#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::Await;
using testing::Contains;
using testing::DeadlineIn;
using testing::RunEngines;
using testing::TestOptions;

class EngineLeaveTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }

  // Every rank but the last waits for 'w', which the last rank never submits:
  // it leaves (with `reason`, if not empty) once the others have enqueued it.
  // Returns nothing; checks each waiting rank's error with `check`.
  void Run(const std::string& reason,
           const std::function<void(int rank, const Status&)>& check) {
    const int last = size() - 1;
    std::atomic<int> waiting{0};
    std::promise<void> all_waiting;
    std::shared_future<void> all_waiting_f = all_waiting.get_future().share();
    RunEngines(size(), TestOptions(), [&](int rank, Engine& engine) {
      if (rank == last) {
        ASSERT_EQ(all_waiting_f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
        if (!reason.empty()) engine.SetExitReason(reason);
        engine.Shutdown();
        return;
      }
      float w = 1;
      Completion done;
      Request req;
      req.meta.name = "w";
      req.meta.shape = {1};
      req.input = req.output = &w;
      req.done = done.Callback();
      const Clock::time_point start = Clock::now();
      ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
      if (++waiting == last) all_waiting.set_value();
      const Status s = Await(done, "w", DeadlineIn());
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "fails quickly";
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
      check(rank, s);
      EXPECT_EQ(w, 1.0f);
    });
  }
};

TEST_P(EngineLeaveTest, ExitReasonNamesTheRankAndTheError) {
  const int last = size() - 1;
  Run("ValueError: bad batch", [&](int rank, const Status& s) {
    EXPECT_TRUE(Contains(s.message(),
                         {fmt::format("rank {} stopped with an error: ValueError: bad batch", last),
                          fmt::format("Rank {} was still waiting for 'w'", rank)}));
    EXPECT_FALSE(Contains(s.message(), {"numbers of steps"}));
  });
}

TEST_P(EngineLeaveTest, RankThatFinishedIsNamed) {
  const int last = size() - 1;
  Run("", [&](int rank, const Status& s) {
    // "rank 7 has finished ..." or, if a rank whose 'w' already failed has
    // shut down too by the time this one fails, "ranks 0, 7 have finished ...".
    const std::string tail =
        fmt::format(" finished (shut tfmpi down) while rank {} still waits for 'w'", rank);
    ASSERT_TRUE(Contains(s.message(), {tail, "different numbers of steps"}));
    const std::string who = s.message().substr(0, s.message().find(tail));
    EXPECT_TRUE(Contains(who, {std::to_string(last)})) << who;
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineLeaveTest, ::testing::Values(2, 3, 5, 8),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// The leave notice rides on one full round per leaving rank; the steady state
// (cached tensors, nobody leaving) stays free of full rounds.
TEST(EngineLeave, SteadyStateStaysQuiet) {
  const auto stats = RunEngines(3, TestOptions(), [](int, Engine& engine) {
    testing::SumOnce(engine, "g", 8);  // negotiated in full, then cached
    const std::uint64_t full = engine.Stats().full_rounds;
    for (int step = 0; step < 20; ++step) testing::SumOnce(engine, "g", 8);
    // Read before the last step: no rank can start leaving until it completes.
    EXPECT_EQ(engine.Stats().full_rounds, full);
    testing::SumOnce(engine, "g", 8);
  });
  for (const EngineStats& s : stats) EXPECT_GE(s.cache_hits, 20u);
}

}  // namespace
}  // namespace tfmpi
