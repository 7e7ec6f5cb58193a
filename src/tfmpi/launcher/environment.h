// Pure: which of the launching environment's variables reach the ranks.
//
// Note [Forwarding the environment]
// A script run by hand on one machine sees the user's whole environment (a
// data folder, TF_CPP_MIN_LOG_LEVEL, TF_USE_LEGACY_KERAS, a virtualenv's
// PATH and VIRTUAL_ENV). On other hosts, ranks start from the clean
// environment of the remote shell (ssh), so tfmpirun names every variable to
// forward, as horovodrun does: all of them, except those that describe this
// host, this shell session or this process rather than the job
// (IsHostSpecific: HOSTNAME, PWD, SHLVL, SSH_*, DISPLAY, GPU visibility, and
// the variables of MPI itself and of batch schedulers, which every rank gets
// from its own launcher), and names a shell could not export.
// * Open MPI: `-x NAME` per variable (mpirun sends its own value).
// * MPICH/Hydra: `-genv NAME VALUE` for tfmpi's own variables (TFMPI_*,
//   PYTHONPATH), `-genvlist a,b,c` for the rest. Hydra's default passes the
//   whole environment, HOSTNAME and CUDA_VISIBLE_DEVICES included; a
//   -genvlist passes only the names listed (ranks on the launching host still
//   inherit everything, as with Open MPI), `-genvnone` when none are left;
//   neither when --mpi-args has the user's own -genvall/-genvnone/-genvlist
//   (Hydra refuses two).
#pragma once

#include <map>
#include <set>
#include <string>

namespace tfmpi::launcher {

using Environment = std::map<std::string, std::string>;

// True for a variable that describes this host, session or process.
bool IsHostSpecific(const std::string& name);

// The names of `env` to forward to every rank (Note [Forwarding the environment]).
std::set<std::string> ForwardedVariables(const Environment& env);

}  // namespace tfmpi::launcher
