// Threads per rank (planning/threads.h, Note [Threads per rank]).
#include "tfmpi/planning/threads.h"

#include <gtest/gtest.h>

#include <numeric>

namespace tfmpi::planning {
namespace {

std::vector<int> Cpus(int n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(Threads, OneRankKeepsTheWholeHost) {
  const ThreadPlan p = PlanThreads(Cpus(8), std::nullopt, 0, 1, true);
  EXPECT_EQ(p.cores, 8);
  EXPECT_EQ(p.intra_op, 8);
  EXPECT_EQ(p.inter_op, 8);
  EXPECT_TRUE(p.bind_cpus.empty());
}

TEST(Threads, RanksSplitTheCoresAndTheRemainderGoesFirst) {
  int total = 0;
  std::vector<int> sizes;
  for (int r = 0; r < 3; ++r) {
    const ThreadPlan p = PlanThreads(Cpus(8), std::nullopt, r, 3, false);
    EXPECT_EQ(p.intra_op, p.cores);
    EXPECT_EQ(p.inter_op, p.cores);
    EXPECT_TRUE(p.bind_cpus.empty());
    sizes.push_back(p.cores);
    total += p.cores;
  }
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(total, 8);
}

TEST(Threads, MoreRanksThanCoresGetOneThreadEachAndNoBinding) {
  const ThreadPlan p = PlanThreads(Cpus(2), std::nullopt, 2, 3, true);
  EXPECT_EQ(p.cores, 1);
  EXPECT_TRUE(p.bind_cpus.empty());
}

TEST(Threads, TheCgroupQuotaCapsTheHostAndForbidsBinding) {
  const ThreadPlan p = PlanThreads(Cpus(16), 4.0, 1, 2, true);
  EXPECT_EQ(p.cores, 2);
  EXPECT_TRUE(p.bind_cpus.empty());
  EXPECT_NE(p.why.find("quota"), std::string::npos) << p.why;
  // A fractional quota counts as its nearest whole number of cores, at least one.
  EXPECT_EQ(PlanThreads(Cpus(16), 0.3, 0, 2, false).cores, 1);
  EXPECT_EQ(PlanThreads(Cpus(16), 2.6, 0, 1, false).cores, 3);
  // A quota above the CPU count changes nothing.
  EXPECT_EQ(PlanThreads(Cpus(4), 64.0, 0, 2, false).cores, 2);
}

TEST(Threads, BindingHandsOutDisjointRunsOfTheAffinityList) {
  const std::vector<int> cpus = {1, 3, 5, 7, 9};  // an affinity mask with gaps
  std::vector<int> seen;
  for (int r = 0; r < 2; ++r) {
    const ThreadPlan p = PlanThreads(cpus, std::nullopt, r, 2, true);
    EXPECT_EQ(static_cast<int>(p.bind_cpus.size()), p.cores);
    seen.insert(seen.end(), p.bind_cpus.begin(), p.bind_cpus.end());
  }
  EXPECT_EQ(seen, cpus);
}

TEST(Threads, EmptyAffinityAndBadRanksStillGiveAUsablePlan) {
  const ThreadPlan p = PlanThreads({}, std::nullopt, 5, 0, true);
  EXPECT_EQ(p.cores, 1);
  EXPECT_TRUE(p.bind_cpus.empty());
}

}  // namespace
}  // namespace tfmpi::planning
