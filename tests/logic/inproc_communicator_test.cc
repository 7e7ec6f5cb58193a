// InProcCommunicator: the fake transport the engine tests run on must itself
// be right, at every world size from 1 to 16.
#include "tfmpi/transport/inproc/inproc_communicator.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "spawn.h"

namespace tfmpi {
namespace {

using testing::Spawn;

class InProcTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
  // Runs fn(comm) on one rank thread per rank of a fresh world.
  void Run(const std::function<void(InProcCommunicator&)>& fn) {
    auto world = std::make_shared<InProcWorld>(size());
    Spawn(size(), [&](int rank) {
      InProcCommunicator comm(world, rank);
      fn(comm);
    });
  }
};

TEST_P(InProcTest, RankAndSize) {
  Run([&](InProcCommunicator& c) {
    EXPECT_EQ(c.size(), size());
    EXPECT_EQ(c.local_size(), size());
    EXPECT_EQ(c.local_rank(), c.rank());
    EXPECT_EQ(c.name(), "inproc");
  });
}

TEST_P(InProcTest, AllreduceSumAndMax) {
  const std::int64_t n = size();
  Run([&](InProcCommunicator& c) {
    std::vector<std::int64_t> in = {c.rank() + 1, 10 * c.rank(), -c.rank()}, out(3, -99);
    ASSERT_TRUE(c.Allreduce(in.data(), out.data(), 3, DataType::kInt64, ReduceOp::kSum).ok());
    EXPECT_EQ(out, (std::vector<std::int64_t>{n * (n + 1) / 2, 10 * n * (n - 1) / 2,
                                              -n * (n - 1) / 2}));
    ASSERT_TRUE(c.Allreduce(in.data(), in.data(), 3, DataType::kInt64, ReduceOp::kMax).ok());
    EXPECT_EQ(in, (std::vector<std::int64_t>{n, 10 * (n - 1), 0})) << "in place";
  });
}

TEST_P(InProcTest, BroadcastFromEveryRoot) {
  Run([&](InProcCommunicator& c) {
    for (int root = 0; root < size(); ++root) {
      std::vector<float> buf(5, -1.0f);
      if (c.rank() == root) std::iota(buf.begin(), buf.end(), 100.0f * root);
      ASSERT_TRUE(c.Broadcast(buf.data(), buf.size(), DataType::kFloat32, root).ok());
      for (int i = 0; i < 5; ++i) EXPECT_EQ(buf[i], 100.0f * root + i) << "root " << root;
    }
  });
}

TEST_P(InProcTest, AllgathervConcatenatesInRankOrder) {
  std::vector<std::size_t> counts;
  std::vector<std::int32_t> expected;
  for (int r = 0; r < size(); ++r) {
    counts.push_back(static_cast<std::size_t>(r % 3));  // some ranks send nothing
    for (int k = 0; k < r % 3; ++k) expected.push_back(100 * r + k);
  }
  Run([&](InProcCommunicator& c) {
    std::vector<std::int32_t> mine;
    for (int k = 0; k < c.rank() % 3; ++k) mine.push_back(100 * c.rank() + k);
    std::vector<std::int32_t> out(expected.size() + 1, -1);
    ASSERT_TRUE(c.Allgatherv(mine.data(), out.data(), counts, DataType::kInt32).ok());
    EXPECT_EQ(std::vector<std::int32_t>(out.begin(), out.end() - 1), expected);
    EXPECT_EQ(out.back(), -1) << "nothing written past the end";
  });
}

TEST_P(InProcTest, BitwiseAndClearsABitPerRank) {
  Run([&](InProcCommunicator& c) {
    std::vector<std::uint64_t> words = {~std::uint64_t{0}, ~std::uint64_t{0}};
    words[0] &= ~(std::uint64_t{1} << c.rank());
    words[1] &= ~(std::uint64_t{1} << (63 - c.rank()));
    ASSERT_TRUE(c.BitwiseAnd(words.data(), words.size()).ok());
    const std::uint64_t low = size() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << size()) - 1;
    EXPECT_EQ(words[0], ~low);
    EXPECT_EQ(words[1], ~(low << (64 - size())));
  });
}

TEST_P(InProcTest, GatherToRootAndBroadcastFromRoot) {
  Run([&](InProcCommunicator& c) {
    std::vector<std::string> all = {"stale"};
    ASSERT_TRUE(c.GatherToRoot(std::string(c.rank(), 'x') + std::to_string(c.rank()), &all).ok());
    if (c.rank() == 0) {
      ASSERT_EQ(all.size(), static_cast<std::size_t>(size()));
      for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], std::string(r, 'x') + std::to_string(r));
    } else {
      EXPECT_TRUE(all.empty());
    }
    std::string data = c.rank() == 0 ? "decision" : "ignored";
    ASSERT_TRUE(c.BroadcastFromRoot(&data).ok());
    EXPECT_EQ(data, "decision");
  });
}

// Back-to-back rounds must not mix: each round's result holds that round's values.
TEST_P(InProcTest, ManyRoundsDoNotInterleave) {
  Run([&](InProcCommunicator& c) {
    for (std::int64_t round = 0; round < 300; ++round) {
      std::int64_t v = round * 1000 + c.rank(), sum = 0;
      ASSERT_TRUE(c.Allreduce(&v, &sum, 1, DataType::kInt64, ReduceOp::kSum).ok());
      const std::int64_t n = size();
      ASSERT_EQ(sum, round * 1000 * n + n * (n - 1) / 2) << "round " << round;
      if (round % 50 == 0) {
        ASSERT_TRUE(c.Barrier().ok());
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, InProcTest, ::testing::Range(1, 17),
                         [](const auto& info) { return "ranks_" + std::to_string(info.param); });

}  // namespace
}  // namespace tfmpi
