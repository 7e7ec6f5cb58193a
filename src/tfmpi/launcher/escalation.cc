#include "tfmpi/launcher/escalation.h"

#include <sys/wait.h>

namespace tfmpi::launcher {

Escalation::Action Escalation::OnSignal(int signal, Clock::time_point now) {
  if (first_signal_ == 0) {
    first_signal_ = signal;
    kill_at_ = now + grace_;
    return Action::kForward;
  }
  kill_at_ = now;
  return Action::kKill;
}

int ExitStatusFor(int wait_status, int stop_signal) {
  int status = 1;
  if (WIFEXITED(wait_status)) status = WEXITSTATUS(wait_status);
  else if (WIFSIGNALED(wait_status)) status = 128 + WTERMSIG(wait_status);
  if (status == 0 && stop_signal != 0) status = 128 + stop_signal;
  return status;
}

}  // namespace tfmpi::launcher
