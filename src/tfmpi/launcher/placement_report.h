// Pure: what `--placement aware` shows and saves: the table of hosts with
// their measurements, scores and the decision (stderr), and the same as JSON
// (--probe-json FILE). Columns: docs/placement.md.
#pragma once

#include <string>
#include <vector>

#include "tfmpi/planning/placement.h"
#include "tfmpi/probe/node_report.h"

namespace tfmpi::launcher {

struct ProbeRound {
  std::vector<planning::ProbedHost> hosts;   // pool order
  std::vector<probe::LinkReport> links;      // from the first answering host
  std::string links_error;                   // why links are missing, if they are
  double seconds = 0;                        // how long probing took
};

std::string FormatPlacementTable(const ProbeRound& round, const planning::PlacementPlan& plan,
                                 int num_proc);

std::string PlacementJson(const ProbeRound& round, const planning::PlacementPlan& plan, int num_proc);

}  // namespace tfmpi::launcher
