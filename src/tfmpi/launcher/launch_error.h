// The launcher's error model: every check before mpirun starts returns either
// nothing or a LaunchError, which main() prints as "tfmpirun: <message>" on
// stderr before exiting with `exit_code`. Nothing is launched after an error.
#pragma once

#include <string>

namespace tfmpi::launcher {

// Exit codes follow the shell's conventions.
inline constexpr int kExitUsage = 2;       // bad flags or arguments
inline constexpr int kExitNotFound = 127;  // mpirun or COMMAND not found / not executable

struct LaunchError {
  int exit_code = kExitUsage;
  std::string message;  // without the "tfmpirun: " prefix; may span lines
};

}  // namespace tfmpi::launcher
