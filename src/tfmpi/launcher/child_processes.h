// Running several commands at once, each bounded in time (the probes).
//
// Note [Ending a probe that hangs]
// Each command runs in its own process group. At the deadline the group gets
// SIGTERM, then SIGKILL a second later: mpirun ignores SIGTERM while it waits
// for a lost host. A command counts as finished when its process has exited;
// its output is read until the pipe closes or half a second later, since a
// remote-shell child that outlives it may hold the pipe open.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tfmpi::launcher {

struct ChildResult {
  int exit_status = -1;  // exit code, 128+signal, or -1 when it could not start
  bool timed_out = false;
  double seconds = 0;
  std::string output;    // stdout and stderr together
};

// Runs every argv at once; `on_done(index, result)` is called as each ends.
std::vector<ChildResult> RunAllWithTimeout(const std::vector<std::vector<std::string>>& commands,
                                           double timeout_seconds,
                                           const std::function<void(std::size_t, const ChildResult&)>& on_done);

}  // namespace tfmpi::launcher
