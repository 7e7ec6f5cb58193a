// Pure: how tfmpirun ends a job it was asked to stop, and the status it exits
// with. The system calls are in supervisor.cc.
//
// Note [Stopping the job]
// tfmpirun runs mpirun as a child in a process group of its own (so a
// terminal's Ctrl-C reaches tfmpirun only, which decides) and stays to watch
// it. A SIGINT, SIGTERM or SIGHUP is passed on to mpirun's group; Open MPI's
// mpirun then has its daemons end the ranks. But mpirun waits for every daemon
// to confirm, and one on a host whose link is down never does: mpirun would
// ignore the signal until TCP gives the connection up (about 15 minutes). So
// kKillGrace after the first signal, or at once on a second one, mpirun's
// group gets SIGKILL. Open MPI's daemons are not in that group (they run as
// daemons): each ends its ranks and itself when it loses its connection to
// mpirun, at once where the link is up. A host whose link is down cannot be
// told; its daemon gives up through the TCP keepalive that tfmpirun turns on,
// or is ended by its own ranks once they miss their peers (Notes [Losing a
// host], mpirun_command.h, and [Lost peers], planning/liveness.h). So the job
// ends within 10 s of the signal in every state, but on a host that is cut
// off, which follows within the peer timeout.
#pragma once

#include <chrono>
#include <optional>

namespace tfmpi::launcher {

inline constexpr std::chrono::milliseconds kKillGrace{5000};

class Escalation {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Action { kForward, kKill };

  explicit Escalation(std::chrono::milliseconds grace = kKillGrace) : grace_(grace) {}

  // A termination signal arrived: the first is forwarded, a later one kills.
  Action OnSignal(int signal, Clock::time_point now);
  // When the group must be killed if mpirun is still running (none before a signal).
  std::optional<Clock::time_point> kill_at() const { return kill_at_; }
  bool KillDue(Clock::time_point now) const { return kill_at_ && now >= *kill_at_; }
  int first_signal() const { return first_signal_; }

 private:
  std::chrono::milliseconds grace_;
  std::optional<Clock::time_point> kill_at_;
  int first_signal_ = 0;
};

// tfmpirun's exit status from mpirun's wait status: its exit code, or 128 +
// the signal that killed it. If tfmpirun was asked to stop (`stop_signal`
// non-zero) and mpirun still reports success, 128 + that signal: the job did
// not finish.
int ExitStatusFor(int wait_status, int stop_signal);

}  // namespace tfmpi::launcher
