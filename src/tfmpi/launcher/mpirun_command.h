// Pure: the mpirun command line and environment for a launch.
//
// The environment every rank gets: Note [Forwarding the environment],
// environment.h.
//
// Note [Open MPI placement flags]
// `--bind-to none --map-by slot`, as horovodrun passes: Open MPI binds each
// rank to one core for small -np, which starves TensorFlow's thread pools.
// `--oversubscribe` only for local runs (no -H/--hostfile) with more ranks
// than cores, which Open MPI would otherwise refuse (with mpi_yield_when_idle,
// so waiting ranks give their core to computing ones); with hosts, the slots
// the user gave are the contract.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfmpi/launcher/environment.h"
#include "tfmpi/launcher/launch_options.h"
#include "tfmpi/launcher/mpi_flavor.h"

namespace tfmpi::launcher {

struct MpirunCommand {
  std::vector<std::string> argv;  // argv[0] is the mpirun to exec
  std::vector<std::pair<std::string, std::string>> env;  // to set before exec, in order
};

// `local_cores`: cores mpirun counts as local slots; `is_root`: euid == 0.
// `options.mpirun` is argv[0] ("mpirun" when empty); `options.seed`, when set,
// becomes TFMPI_SEED (main() resolves the default before calling this).
MpirunCommand BuildMpirunCommand(const LaunchOptions& options, MpiFlavor flavor,
                                 const Environment& env_in, int local_cores, bool is_root);

// One line a shell can run: "NAME=value ... mpirun -np 2 ...".
std::string FormatCommandLine(const MpirunCommand& command);

}  // namespace tfmpi::launcher
