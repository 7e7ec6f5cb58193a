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
  EXPECT_FALSE(p.apply);  // TensorFlow's defaults already use the whole host
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

TEST(Threads, ALoneRankKeepsToACgroupQuotaBelowItsCpus) {
  // Two CPUs visible, one core of quota: TensorFlow's default pools would be throttled.
  const ThreadPlan capped = PlanThreads(Cpus(2), 1.0, 0, 1, true);
  EXPECT_TRUE(capped.apply);
  EXPECT_EQ(capped.intra_op, 1);
  EXPECT_EQ(capped.inter_op, 1);
  EXPECT_TRUE(capped.bind_cpus.empty());
  EXPECT_NE(capped.why.find("quota"), std::string::npos) << capped.why;
  // No quota, or a quota that does not cap the host: the defaults, and the line says so.
  const ThreadPlan unlimited = PlanThreads(Cpus(2), std::nullopt, 0, 1, false);
  EXPECT_FALSE(unlimited.apply);
  EXPECT_NE(unlimited.why.find("TensorFlow's defaults"), std::string::npos) << unlimited.why;
  EXPECT_FALSE(PlanThreads(Cpus(2), 2.2, 0, 1, false).apply);
  // Ranks that share a host always get a plan.
  EXPECT_TRUE(PlanThreads(Cpus(8), std::nullopt, 1, 2, false).apply);
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
