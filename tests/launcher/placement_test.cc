// PlanPlacement (Note [Placement scoring]): slow, unreachable and short-of-
// memory hosts left out with a reason, ties going to fewer hosts, rank speeds
// in rank order.
#include "tfmpi/planning/placement.h"

#include <gtest/gtest.h>

namespace tfmpi::planning {
namespace {

ProbedHost Host(const std::string& name, int slots, double gflops, int cpus = 8) {
  probe::NodeReport r;
  r.hostname = name;
  r.online_cpus = r.affinity_cpus = cpus;
  r.mem_available_bytes = 64ull << 30;
  r.bench_gflops = gflops;
  return {name, slots, r, "", std::nullopt};
}

ProbedHost Dead(const std::string& name, int slots) {
  return {name, slots, std::nullopt, "unreachable: no probe result within 20 s", std::nullopt};
}

PlacementPlan Plan(const std::vector<ProbedHost>& hosts, int np) {
  PlacementOptions o;
  o.num_proc = np;
  return PlanPlacement(hosts, o);
}

TEST(Placement, SlowHostLeftOut) {
  const PlacementPlan p = Plan({Host("a", 1, 10), Host("b", 1, 9.5), Host("c", 1, 2.5)}, 2);
  ASSERT_FALSE(p.error);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(p.hosts[2].chosen_slots, 0);
  EXPECT_NE(p.hosts[2].reason.find("left out: slower (0.25 of the fastest)"), std::string::npos)
      << p.hosts[2].reason;
  ASSERT_EQ(p.rank_speeds.size(), 2u);
  EXPECT_DOUBLE_EQ(p.rank_speeds[0], 1.0);
  EXPECT_DOUBLE_EQ(p.rank_speeds[1], 0.95);
}

TEST(Placement, ChosenHostsKeepPoolOrder) {
  const PlacementPlan p = Plan({Host("slow", 1, 1), Host("x", 1, 5), Host("fast", 1, 10)}, 2);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"x", 1}, {"fast", 1}}));
  EXPECT_EQ(FormatRankSpeeds(p.rank_speeds), "0.500,1.000");
}

TEST(Placement, UnreachableHostLeftOutWithItsReason) {
  const PlacementPlan p = Plan({Host("a", 1, 10), Dead("b", 1), Host("c", 1, 10)}, 2);
  ASSERT_FALSE(p.error);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"a", 1}, {"c", 1}}));
  EXPECT_EQ(p.hosts[1].reason, "left out: unreachable: no probe result within 20 s");
  EXPECT_FALSE(p.hosts[1].usable);
}

TEST(Placement, TooFewUsableSlotsIsAnError) {
  const PlacementPlan p = Plan({Host("a", 2, 10), Dead("b", 2)}, 3);
  ASSERT_TRUE(p.error);
  EXPECT_EQ(*p.error, "-np 3 needs 3 slots but only 2 of the pool's hosts' slots are usable");
  EXPECT_TRUE(p.chosen.empty());
}

TEST(Placement, EqualSpeedsPreferFewerHosts) {
  // 4 ranks: the 4-slot host alone rather than spreading over the 2-slot ones.
  const PlacementPlan p = Plan({Host("a", 2, 10), Host("b", 2, 10), Host("big", 4, 9.5)}, 4);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"big", 4}}));
  EXPECT_NE(p.hosts[0].reason.find("not needed"), std::string::npos) << p.hosts[0].reason;
}

TEST(Placement, EqualSpeedsThenLowerLatency) {
  std::vector<ProbedHost> hosts = {Host("a", 1, 10), Host("b", 1, 10), Host("c", 1, 10)};
  hosts[0].latency_us = 0;
  hosts[1].latency_us = 500;
  hosts[2].latency_us = 40;
  EXPECT_EQ(Plan(hosts, 2).chosen, (std::vector<std::pair<std::string, int>>{{"a", 1}, {"c", 1}}));
}

TEST(Placement, PartlyUsedHostSaysSo) {
  const PlacementPlan p = Plan({Host("a", 4, 10), Host("b", 4, 5)}, 6);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"a", 4}, {"b", 2}}));
  EXPECT_EQ(p.hosts[1].reason, "uses 2 of 4 slots");
  EXPECT_EQ(FormatRankSpeeds(p.rank_speeds), "1.000,1.000,1.000,1.000,0.500,0.500");
}

TEST(Placement, MoreSlotsThanCoresShareThem) {
  // 4 slots on 2 usable cores: each slot gets half a core's speed.
  ProbedHost crowded = Host("crowded", 4, 10, 2);
  const PlacementPlan p = Plan({crowded, Host("b", 1, 8)}, 1);
  EXPECT_DOUBLE_EQ(p.hosts[0].speed_per_slot, 5);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"b", 1}}));
}

TEST(Placement, QuotaCapsUsableCores) {
  // 2 slots on a 1.5-core quota: the one-thread benchmark ran at full speed, the slots share.
  ProbedHost quota = Host("q", 2, 10);
  quota.report->cpu_quota = 1.5;
  EXPECT_DOUBLE_EQ(Plan({quota}, 1).hosts[0].speed_per_slot, 7.5);
}

TEST(Placement, AQuotaBelowOneCoreCountsOnceThroughTheBenchmark) {
  // The benchmark (one thread) already ran at the quota's speed: one slot gets all of it,
  // two slots half each.
  ProbedHost small = Host("q", 1, 2.5);
  small.report->cpu_quota = 0.25;
  EXPECT_DOUBLE_EQ(Plan({small}, 1).hosts[0].speed_per_slot, 2.5);
  ProbedHost shared = Host("q", 2, 5);
  shared.report->cpu_quota = 0.5;
  EXPECT_DOUBLE_EQ(Plan({shared}, 1).hosts[0].speed_per_slot, 2.5);
}

TEST(Placement, UnsetSlotsAreTheProbedCores) {
  ProbedHost h = Host("a", 1, 10, 6);
  h.slots.reset();
  EXPECT_EQ(Plan({h}, 6).chosen, (std::vector<std::pair<std::string, int>>{{"a", 6}}));
}

TEST(Placement, ShortOfMemoryLeftOut) {
  ProbedHost low = Host("low", 4, 20);
  low.report->mem_available_bytes = 512ull << 20;  // 128 MiB per slot
  const PlacementPlan p = Plan({low, Host("b", 2, 10)}, 2);
  EXPECT_EQ(p.chosen, (std::vector<std::pair<std::string, int>>{{"b", 2}}));
  EXPECT_EQ(p.hosts[0].reason, "left out: 128 MiB available memory per slot, below 256 MiB");
}

}  // namespace
}  // namespace tfmpi::planning
