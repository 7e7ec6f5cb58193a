// `--placement aware`: probe the pool, choose hosts and slots, report.
// The probes run through mpirun (Note [Probing through mpirun]); the choice
// is planning::PlanPlacement (Note [Placement scoring]).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfmpi/launcher/hostfile.h"
#include "tfmpi/launcher/launch_error.h"
#include "tfmpi/launcher/probe_commands.h"

namespace tfmpi::launcher {

struct AwarePlacement {
  std::string hosts;         // -H list for mpirun: "host:slots,..." in pool order
  std::string probe_speeds;  // TFMPI_PROBE_SPEEDS
};

// Probes every host of `pool` (progress on stderr), prints the table and the
// decision on stderr, writes `json_file` if not empty. Hosts that fail their
// probe are left out; too few usable slots is an error.
std::optional<AwarePlacement> PlaceAware(const HostPool& pool, int num_proc, const ProbeSetup& setup,
                                         double timeout_seconds, const std::string& json_file,
                                         LaunchError* error);

}  // namespace tfmpi::launcher
