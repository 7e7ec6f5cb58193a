// The placement table and JSON (placement_report.h): measurements, scores,
// the decision and why hosts were left out.
#include "tfmpi/launcher/placement_report.h"

#include <gtest/gtest.h>

#include "contains.h"  // tests/logic

namespace tfmpi::launcher {
namespace {

using tfmpi::testing::Contains;

ProbeRound Round() {
  ProbeRound round;
  probe::NodeReport r;
  r.hostname = "n1";
  r.affinity_cpus = r.online_cpus = 4;
  r.mem_available_bytes = 8ull << 30;
  r.bench_gflops = 10;
  round.hosts.push_back({"node1", 2, r, "", 0.0});
  r.bench_gflops = 2;
  r.cpu_quota = 0.25;
  round.hosts.push_back({"node2", 1, r, "", 50.0});
  round.hosts.push_back({"node3", 1, std::nullopt, "unreachable: no probe result within 5 s", std::nullopt});
  round.links.push_back({"node1", "node2", 50, 110});
  round.seconds = 1.5;
  return round;
}

planning::PlacementPlan Plan(const ProbeRound& round, int np) {
  planning::PlacementOptions o;
  o.num_proc = np;
  return planning::PlanPlacement(round.hosts, o);
}

TEST(PlacementReport, TableShowsMeasurementsDecisionAndReasons) {
  const ProbeRound round = Round();
  const std::string t = FormatPlacementTable(round, Plan(round, 2), 2);
  EXPECT_TRUE(Contains(t, {"placement for -np 2 over 3 hosts (probed in 1.5 s)", "GFLOP/s", "(first)",
                           "0.25",  // node2's quota
                           "left out: slower", "left out: unreachable: no probe result within 5 s",
                           "chosen: node1:2 (ranks fill them in this order); TFMPI_PROBE_SPEEDS=1.000,1.000"}));
}

TEST(PlacementReport, TableSaysWhyThereIsNoPlacement) {
  const ProbeRound round = Round();
  const std::string t = FormatPlacementTable(round, Plan(round, 5), 5);
  EXPECT_NE(t.find("no placement: -np 5 needs 5 slots but only 3"), std::string::npos) << t;
}

TEST(PlacementReport, Json) {
  const ProbeRound round = Round();
  const std::string j = PlacementJson(round, Plan(round, 2), 2);
  EXPECT_TRUE(Contains(j, {"\"rank_speeds\"", "\"chosen_slots\": 2", "\"probe\": null", "\"bench_gflops\""}));
}

}  // namespace
}  // namespace tfmpi::launcher
