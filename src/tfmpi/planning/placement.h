// Pure: which hosts and slots a job runs on, from what the probes measured.
//
// Note [Placement scoring]
// * A host's speed per slot is its benchmark throughput (which already shows
//   its CPU quota and its background load: Note [Compute benchmark]) times
//   min(1, max(1, usable cores) / slots): ranks beyond the usable cores share
//   them. The benchmark runs one thread, so a quota below one core is in it
//   already and must not count twice (a 0.25-core host with one slot scores
//   its benchmark, not a quarter of it).
//   The load average is shown, not scored: it lags by a minute and, in a
//   container, is the whole machine's.
// * Left out before choosing: hosts whose probe failed or timed out (with
//   the reason), and hosts with less available memory per slot than
//   `min_memory_per_slot_bytes`.
// * Choosing: repeatedly take the fastest remaining host, except that among
//   hosts within `equal_speed_tolerance` of it, the one with more slots (so
//   fewer hosts and links), then the lower latency from the first host, then
//   the earlier one in the pool wins; give it as many of the remaining ranks
//   as it has slots. For a fixed -np this maximises the summed speed, which is
//   what the job gets when batch shares follow speed (TFMPI_PROBE_SPEEDS).
// * Chosen hosts keep the pool's order; ranks fill them slot by slot, so rank
//   r's speed is the speed of the r-th chosen slot in that order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfmpi/probe/node_report.h"

namespace tfmpi::planning {

struct ProbedHost {
  std::string name;                       // as in the pool
  std::optional<int> slots;               // unset: the probed cores
  std::optional<probe::NodeReport> report;  // unset: the probe failed
  std::string error;                      // why there is no report
  std::optional<double> latency_us;       // from the first host, if measured
};

struct PlacementOptions {
  int num_proc = 1;
  std::uint64_t min_memory_per_slot_bytes = 256ull << 20;
  double equal_speed_tolerance = 0.10;
};

struct HostDecision {
  std::string name;
  int slots = 0;                // slots considered (given or probed)
  double speed_per_slot = 0;    // GFLOP/s per slot (Note [Placement scoring])
  double relative_speed = 0;    // speed_per_slot / the fastest usable host's
  bool usable = false;
  int chosen_slots = 0;
  std::string reason;           // why left out, or partly used; empty when fully used
};

struct PlacementPlan {
  std::vector<HostDecision> hosts;  // pool order
  int usable_slots = 0;
  std::vector<std::pair<std::string, int>> chosen;  // pool order: host, ranks on it
  std::vector<double> rank_speeds;  // per rank, relative to the fastest chosen rank
  std::optional<std::string> error;  // too few usable slots
};

PlacementPlan PlanPlacement(const std::vector<ProbedHost>& hosts, const PlacementOptions& options);

// "1.000,0.952" (TFMPI_PROBE_SPEEDS).
std::string FormatRankSpeeds(const std::vector<double>& speeds);

}  // namespace tfmpi::planning
