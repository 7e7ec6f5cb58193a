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
//
// Note [Losing a host]
// Open MPI's mpirun and daemons talk over TCP connections that are idle while
// the ranks train. When a host's link goes down nothing tells either end:
// mpirun waits for that daemon forever, and once it has sent the daemon
// something (the order to end the job) TCP retries for about 15 minutes.
// With the TCP keepalive on (probes every second, the connection given up
// after `probes` unanswered ones) mpirun notices the dead idle connection and
// ends the job, saying which host it lost. The probes are set from
// TFMPI_PEER_TIMEOUT_SECONDS (given up between 0.6 and 0.6 timeout + 1 s after
// the loss) so that the ranks' heartbeats report the silent rank first (at
// half the timeout), and mpirun has given the host up before the ranks' own
// exit (at the timeout) has it send that host the order to end the job, which
// TCP could not deliver. The lost host's daemon usually holds ranks' output it
// could not deliver, and a keepalive never fires while data waits: its ranks
// end it (Note [Ending this host's part of the job],
// transport/mpi/peer_watchdog.cc; Note [Lost peers], planning/liveness.h).
// Not with MPICH (Hydra has no such setting), nor when --mpi-args sets a
// keepalive parameter itself.
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

// Open MPI flags for Note [Losing a host], from TFMPI_PEER_TIMEOUT_SECONDS in
// `env` (default 45; unparsable values count as the default); none when it is 0.
std::vector<std::string> KeepaliveArgs(const Environment& env);

// One line a shell can run: "NAME=value ... mpirun -np 2 ...".
std::string FormatCommandLine(const MpirunCommand& command);

}  // namespace tfmpi::launcher
