// Pure: the mpirun command lines that run tfmpi-probe on the pool's hosts.
//
// Note [Probing through mpirun]
// The probes reach hosts the way ranks will: through mpirun and whatever
// remote shell or agent its --mpi-args name, so a host that cannot run ranks
// cannot pass its probe either. Each host gets its own `mpirun -np 1` (node
// probe, all started at once, each with a timeout), so one dead or hung host
// delays nothing but its own probe; then one `mpirun` with one rank per host
// that answered measures the links (Note [Bounded link probe]).
#pragma once

#include <string>
#include <vector>

#include "tfmpi/launcher/mpi_flavor.h"

namespace tfmpi::launcher {

struct ProbeSetup {
  std::string mpirun;
  MpiFlavor flavor = MpiFlavor::kOpenMpi;
  bool is_root = false;
  std::vector<std::string> mpi_args;  // --mpi-args, as for the job
  std::string probe_program;          // tfmpi-probe's path (the same on every host)
  double bench_seconds = 0.5;
  double link_seconds = 1.0;
};

std::vector<std::string> NodeProbeCommand(const ProbeSetup& setup, const std::string& host);
std::vector<std::string> LinkProbeCommand(const ProbeSetup& setup, const std::vector<std::string>& hosts);

// What a failed probe's output says, in one line: the headline of Open MPI's
// first help box (the line after a row of dashes) when there is one, else
// the last two non-empty lines joined by "; ".
std::string FailureSummary(const std::string& output);

}  // namespace tfmpi::launcher
