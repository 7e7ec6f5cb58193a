#include "tfmpi/launcher/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "tfmpi/launcher/escalation.h"

namespace tfmpi::launcher {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  return set;
}

// In the child, before exec: its own process group and tfmpirun's signal mask
// (tfmpirun installs no handlers, so signals it ignores, e.g. under nohup,
// stay ignored in mpirun). A background process group that reads the terminal is stopped (SIGTTIN), so
// when stdin is a terminal mpirun reads /dev/null instead.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, const sigset_t& old_mask) {
  ::setpgid(0, 0);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (::isatty(STDIN_FILENO)) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
  }
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "tfmpirun: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

timespec Until(Escalation::Clock::time_point deadline) {
  const auto left = deadline - Escalation::Clock::now();
  const auto ns = std::max<long long>(
      0, std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
  return {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

int SuperviseMpirun(const std::vector<std::string>& args, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const sigset_t watched = WatchedSignals();
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &watched, &old_mask);  // delivered through sigtimedwait only
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    *error = std::string("cannot start mpirun: ") + std::strerror(errno);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return -1;
  }
  if (child == 0) ExecChild(argv, old_mask);
  ::setpgid(child, child);  // also here: a signal may come before the child runs
  Escalation escalation;
  int wait_status = 0;
  bool killed = false;
  while (true) {
    const pid_t done = ::waitpid(child, &wait_status, WNOHANG);
    if (done == child) break;
    if (!killed && escalation.KillDue(Escalation::Clock::now())) {
      ::kill(-child, SIGKILL);
      killed = true;
    }
    siginfo_t info;
    int sig;
    const auto at = escalation.kill_at();
    if (at && !killed) {
      const timespec timeout = Until(*at);
      sig = ::sigtimedwait(&watched, &info, &timeout);
    } else {
      sig = ::sigwaitinfo(&watched, &info);
    }
    if (sig <= 0 || sig == SIGCHLD) continue;
    const Escalation::Action action = escalation.OnSignal(sig, Escalation::Clock::now());
    killed = killed || action == Escalation::Action::kKill;
    ::kill(-child, action == Escalation::Action::kForward ? sig : SIGKILL);
  }
  // Whatever mpirun left in its group (remote-shell clients, for one).
  ::kill(-child, SIGKILL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return ExitStatusFor(wait_status, escalation.first_signal());
}

}  // namespace tfmpi::launcher
