// Note [Waking the cycle] (engine_loop.cc): a request does not wait for the
// cycle timer. The cycle here is a minute long and every wait below has a
// 30 s deadline, so each test fails (instead of passing slowly) if a request
// waits for the timer anywhere.
#include <gtest/gtest.h>

#include <thread>

#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::Await;
using testing::DeadlineIn;
using testing::RunEngines;
using testing::SumOnce;

EngineOptions MinuteCycles() {
  EngineOptions options = testing::TestOptions();
  options.cycle_time_ms = 60000;
  return options;
}

class EngineWakeTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineWakeTest, RanksThatSubmitAtDifferentTimesDoNotWaitForTheTimer) {
  RunEngines(GetParam(), MinuteCycles(), [](int rank, Engine& engine) {
    for (int step = 0; step < 4; ++step) {
      // The early ranks' cycles decide nothing; they must not then sleep a
      // whole cycle while the late ranks catch up.
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((rank + step) % 3)));
      SumOnce(engine, "staggered_" + std::to_string(step), 16);
    }
  });
}

TEST_P(EngineWakeTest, RequestsEnqueuedTogetherRunInOneCycle) {
  constexpr int kTensors = 12;
  const auto stats = RunEngines(GetParam(), MinuteCycles(), [](int rank, Engine& engine) {
    std::vector<std::vector<float>> bufs(kTensors, std::vector<float>(8, 1.0f + rank));
    std::vector<Completion> done(kTensors);
    std::vector<Request> reqs;
    for (int i = 0; i < kTensors; ++i) {
      Request r;
      r.meta.name = "together_" + std::to_string(i);
      r.meta.dtype = DataType::kFloat32;
      r.meta.shape = {8};
      r.input = r.output = bufs[i].data();
      r.done = done[i].Callback();
      reqs.push_back(std::move(r));
    }
    for (const Status& s : engine.EnqueueAll(std::move(reqs))) ASSERT_TRUE(s.ok()) << s.ToString();
    const float n = static_cast<float>(engine.size());
    for (int i = 0; i < kTensors; ++i) {
      const Status s = Await(done[i], "together_" + std::to_string(i), DeadlineIn());
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(bufs[i][0], n * (n + 1) / 2);
    }
  });
  for (const EngineStats& s : stats) {
    EXPECT_EQ(s.tensors, static_cast<std::uint64_t>(kTensors));
    EXPECT_EQ(s.groups, 1u) << "the tensors were not fused into one collective";
  }
}

TEST_P(EngineWakeTest, EnqueueAllRefusesOnlyTheBadRequests) {
  RunEngines(GetParam(), MinuteCycles(), [](int, Engine& engine) {
    std::vector<float> buf(4, 1.0f);
    Completion done;
    std::vector<Request> reqs(3);
    for (Request& r : reqs) {
      r.meta.name = "mixed";
      r.meta.dtype = DataType::kFloat32;
      r.meta.shape = {4};
      r.input = r.output = buf.data();
    }
    reqs[0].done = done.Callback();
    reqs[1].meta.name = "mixed_null";  // no buffers: refused by validation
    reqs[1].input = reqs[1].output = nullptr;
    // reqs[2] repeats the name of reqs[0], which is then in flight: refused
    const std::vector<Status> s = engine.EnqueueAll(std::move(reqs));
    ASSERT_EQ(s.size(), 3u);
    EXPECT_TRUE(s[0].ok()) << s[0].ToString();
    EXPECT_FALSE(s[1].ok());
    EXPECT_NE(s[1].message().find("null buffer"), std::string::npos) << s[1].ToString();
    EXPECT_FALSE(s[2].ok());
    EXPECT_NE(s[2].message().find("already in flight"), std::string::npos) << s[2].ToString();
    const Status d = Await(done, "mixed", DeadlineIn());
    EXPECT_TRUE(d.ok()) << d.ToString();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineWakeTest, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace tfmpi
