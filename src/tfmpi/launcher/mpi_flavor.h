// Which MPI implementation an mpirun belongs to. The flags tfmpirun passes
// differ between Open MPI's mpirun and MPICH's Hydra (Intel MPI also uses
// Hydra and accepts its flags).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tfmpi::launcher {

enum class MpiFlavor { kOpenMpi, kMpich };

// "Open MPI" or "MPICH", for messages.
const char* MpiFlavorName(MpiFlavor flavor);

// Parses the --mpi-flavor spelling: "openmpi" or "mpich".
std::optional<MpiFlavor> ParseMpiFlavor(std::string_view name);

// Pure: classifies the output of `mpirun --version`. Open MPI prints
// "mpirun (Open MPI) 4.1.4" (older: "OpenRTE"); Hydra prints "HYDRA build
// details" and MPICH its name. nullopt when neither is recognised.
std::optional<MpiFlavor> DetectFlavor(std::string_view version_text);

// Side effect: runs `<mpirun> --version` and returns what it printed
// (stdout and stderr), or an empty string when it could not be run.
std::string ReadMpirunVersion(const std::string& mpirun);

}  // namespace tfmpi::launcher
