// Runs mpirun as a child in its own process group and waits for it, passing
// on SIGINT, SIGTERM and SIGHUP and escalating to SIGKILL (Note [Stopping the
// job], escalation.h). The decisions are in escalation.h; this is the part
// that makes system calls.
#pragma once

#include <string>
#include <vector>

namespace tfmpi::launcher {

// Starts argv (argv[0] a path) and returns tfmpirun's exit status for it, or
// -1 with `error` set when it could not be started.
int SuperviseMpirun(const std::vector<std::string>& argv, std::string* error);

}  // namespace tfmpi::launcher
