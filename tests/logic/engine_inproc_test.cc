// The whole Engine over the in-process transport, threads as ranks, world
// sizes 1..16: every collective, dtype and op, random submission orders,
// several iterations (so the response cache serves the later ones), with the
// cache off, a tiny cache, and small fusion/direct thresholds.
#include <gtest/gtest.h>

#include "engine_ranks.h"
#include "workload.h"

namespace tfmpi {
namespace {

using testing::RunEngines;
using testing::RunWorkload;
using testing::TestOptions;

constexpr int kIterations = 3;

class EngineWorkloadTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }

  // Runs kIterations of the mixed workload on every rank, each rank in its
  // own random order per iteration. Returns each rank's final stats.
  std::vector<EngineStats> Run(const EngineOptions& options,
                               const testing::WrapCommunicator& wrap = nullptr) {
    tensors_ = testing::MixedWorkload(0, size()).size();
    return RunEngines(size(), options, [&](int rank, Engine& engine) {
      EXPECT_EQ(engine.rank(), rank);
      EXPECT_EQ(engine.size(), size());
      EXPECT_EQ(engine.transport_name(), "inproc");
      for (int it = 0; it < kIterations; ++it) {
        const auto work = testing::MixedWorkload(rank, size());
        ASSERT_EQ(work.size(), tensors_);
        RunWorkload(engine, work, 7919u * static_cast<unsigned>(it) + static_cast<unsigned>(rank),
                    "rank " + std::to_string(rank) + " iteration " + std::to_string(it));
        // Stats are published before callbacks fire, so they already count this iteration.
        const EngineStats s = engine.Stats();
        EXPECT_EQ(s.tensors, tensors_ * (it + 1)) << "rank " << rank << " iteration " << it;
        if (options.cache_capacity >= tensors_) {
          EXPECT_EQ(s.cache_hits, tensors_ * it) << "rank " << rank << " iteration " << it;
        }
      }
    }, wrap);
  }

  std::size_t tensors_ = 0;
};

TEST_P(EngineWorkloadTest, DefaultOptions) {
  const auto stats = Run(TestOptions());
  for (std::size_t r = 0; r < stats.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(stats[r].tensors, tensors_ * kIterations);
    // The first iteration is negotiated in full; every later tensor is a cache hit.
    EXPECT_EQ(stats[r].cache_hits, tensors_ * (kIterations - 1));
    EXPECT_GT(stats[r].fused_groups, 0u);
    EXPECT_LT(stats[r].groups, stats[r].tensors);
    EXPECT_GE(stats[r].cycles, stats[r].busy_cycles);
  }
}

TEST_P(EngineWorkloadTest, CacheDisabled) {
  EngineOptions o = TestOptions();
  o.cache_capacity = 0;
  const auto stats = Run(o);
  for (const EngineStats& s : stats) {
    EXPECT_EQ(s.tensors, tensors_ * kIterations);
    EXPECT_EQ(s.cache_hits, 0u);
    EXPECT_GE(s.full_rounds, static_cast<std::uint64_t>(kIterations));
  }
}

TEST_P(EngineWorkloadTest, TinyCacheEvicts) {
  EngineOptions o = TestOptions();
  o.cache_capacity = 3;
  const auto stats = Run(o);
  for (const EngineStats& s : stats) {
    EXPECT_EQ(s.tensors, tensors_ * kIterations);
    EXPECT_LT(s.cache_hits, tensors_ * (kIterations - 1)) << "3 entries cannot serve everything";
  }
}

TEST_P(EngineWorkloadTest, SmallFusionAndDirectThresholds) {
  EngineOptions o = TestOptions();
  o.fusion_threshold = 32;  // most buckets hold a few tensors
  o.direct_threshold = 24;  // larger tensors run straight from the caller's buffers
  const auto stats = Run(o);
  for (const EngineStats& s : stats) EXPECT_EQ(s.tensors, tensors_ * kIterations);
}

// Every transport call moves at most 7 elements: fused reduces and broadcasts
// of several roots run in rounds (Note [Owner layout]).
TEST_P(EngineWorkloadTest, SmallMessagesRunInRounds) {
  const auto stats = Run(TestOptions(), [](int, std::unique_ptr<Communicator> inner) {
    EXPECT_TRUE(inner->SetMaxMessageElements(7).ok());
    return inner;
  });
  for (const EngineStats& s : stats) EXPECT_EQ(s.tensors, tensors_ * kIterations);
}

// Eight 16-byte allreduces against a 32-byte fusion threshold: groups may
// hold two tensors, never three. tensors - groups counts the tensors that
// rode along in someone's group; with pairs only, that equals fused_groups.
TEST_P(EngineWorkloadTest, FusedGroupsRespectTheFusionThreshold) {
  EngineOptions o = TestOptions();
  o.fusion_threshold = 32;
  constexpr int kTensors = 8;
  const auto stats = RunEngines(size(), o, [&](int rank, Engine& engine) {
    for (int it = 0; it < kIterations; ++it) {
      std::vector<std::vector<float>> bufs(kTensors, std::vector<float>(4));
      std::vector<Completion> done(kTensors);
      std::vector<Request> burst;  // enqueued together: one cycle sees them all
      for (int t = 0; t < kTensors; ++t) {
        for (int i = 0; i < 4; ++i) bufs[t][i] = static_cast<float>(rank * 100 + t * 4 + i);
        Request req;
        req.meta.name = "pair." + std::to_string(t);
        req.meta.shape = {4};
        req.input = req.output = bufs[t].data();
        req.done = done[t].Callback();
        burst.push_back(std::move(req));
      }
      for (const Status& s : engine.EnqueueAll(std::move(burst))) ASSERT_TRUE(s.ok()) << s.ToString();
      const auto deadline = testing::DeadlineIn();
      const float n = static_cast<float>(size());
      for (int t = 0; t < kTensors; ++t) {
        const Status s = testing::Await(done[t], "pair." + std::to_string(t), deadline);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (int i = 0; i < 4; ++i)
          EXPECT_EQ(bufs[t][i], 100 * n * (n - 1) / 2 + n * static_cast<float>(t * 4 + i));
      }
    }
  });
  for (const EngineStats& s : stats) {
    EXPECT_EQ(s.tensors, static_cast<std::uint64_t>(kTensors * kIterations));
    EXPECT_GT(s.fused_groups, 0u);
    EXPECT_EQ(s.tensors - s.groups, s.fused_groups) << "a group of three broke the threshold";
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineWorkloadTest, ::testing::Range(1, 17),
                         [](const auto& info) { return "ranks_" + std::to_string(info.param); });

}  // namespace
}  // namespace tfmpi
