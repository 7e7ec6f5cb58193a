// The response cache as the whole engine uses it: steps where every rank
// submits one tensor and waits, so hits and evictions are deterministic.
#include <gtest/gtest.h>

#include <numeric>

#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::RunEngines;
using testing::SumOnce;

// Every rank allgathers `name`, contributing first_dim rows of {2} int32.
void GatherOnce(Engine& engine, const std::string& name,
                const std::vector<std::int64_t>& first_dims) {
  const int rank = engine.rank();
  std::vector<std::int32_t> mine(static_cast<std::size_t>(2 * first_dims[rank]), rank);
  auto out = std::make_shared<std::vector<std::int32_t>>();
  auto shape = std::make_shared<Shape>();
  Completion done;
  Request req;
  req.meta.name = name;
  req.meta.kind = CollectiveKind::kAllgather;
  req.meta.dtype = DataType::kInt32;
  req.meta.shape = {first_dims[rank], 2};
  req.input = mine.data();
  req.allocate_output = [out, shape](const Shape& s) -> void* {
    *shape = s;
    out->assign(static_cast<std::size_t>(NumElements(s)), -1);
    return out->data();
  };
  req.done = done.Callback();
  ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
  const Status s = testing::Await(done, name, testing::DeadlineIn());
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::int32_t> expected;
  for (std::size_t r = 0; r < first_dims.size(); ++r)
    expected.insert(expected.end(), static_cast<std::size_t>(2 * first_dims[r]),
                    static_cast<std::int32_t>(r));
  const std::int64_t rows = std::accumulate(first_dims.begin(), first_dims.end(), std::int64_t{0});
  EXPECT_EQ(*shape, (Shape{rows, 2}));
  EXPECT_EQ(*out, expected) << name << " on rank " << rank;
}

class EngineCacheTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }

  // Runs tensors one at a time in this order: A B C A C B C A.
  std::uint64_t HitsForSequence(std::size_t capacity) {
    EngineOptions o = testing::TestOptions();
    o.cache_capacity = capacity;
    const auto stats = RunEngines(size(), o, [&](int, Engine& engine) {
      for (const char* name : {"A", "B", "C", "A", "C", "B", "C", "A"}) SumOnce(engine, name, 3);
    });
    for (const EngineStats& s : stats) EXPECT_EQ(s.cache_hits, stats[0].cache_hits);
    return stats[0].cache_hits;
  }
};

TEST_P(EngineCacheTest, LargeCacheServesEveryRepeat) { EXPECT_EQ(HitsForSequence(16), 5u); }

// Capacity 2: C evicts A, A evicts B, C hits, B evicts A, C hits, A misses.
TEST_P(EngineCacheTest, LeastRecentlyUsedEntryIsEvicted) { EXPECT_EQ(HitsForSequence(2), 2u); }

TEST_P(EngineCacheTest, CapacityZeroNeverHits) { EXPECT_EQ(HitsForSequence(0), 0u); }

// A cached allgather must not serve a step whose first dimensions changed.
TEST_P(EngineCacheTest, AllgatherFirstDimensionsMayChangeBetweenSteps) {
  std::vector<std::int64_t> even, odd;
  for (int r = 0; r < size(); ++r) {
    even.push_back(r % 2);
    odd.push_back((r + 1) % 2 + 1);
  }
  const auto stats = RunEngines(size(), testing::TestOptions(), [&](int, Engine& engine) {
    GatherOnce(engine, "g", even);
    GatherOnce(engine, "g", odd);
    GatherOnce(engine, "g", even);
    GatherOnce(engine, "g", even);  // the only repeat: a hit
  });
  for (const EngineStats& s : stats) EXPECT_EQ(s.cache_hits, 1u);
}

TEST_P(EngineCacheTest, ShapeMayChangeBetweenSteps) {
  const auto stats = RunEngines(size(), testing::TestOptions(), [&](int, Engine& engine) {
    SumOnce(engine, "w", 4);
    SumOnce(engine, "w", 6);
    SumOnce(engine, "w", 6);  // hit
    SumOnce(engine, "w", 0);
    SumOnce(engine, "w", 0);  // hit
  });
  for (const EngineStats& s : stats) EXPECT_EQ(s.cache_hits, 2u);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineCacheTest, ::testing::Range(1, 17),
                         [](const auto& info) { return "ranks_" + std::to_string(info.param); });

}  // namespace
}  // namespace tfmpi
