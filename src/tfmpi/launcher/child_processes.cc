#include "tfmpi/launcher/child_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tfmpi/launcher/escalation.h"

namespace tfmpi::launcher {

namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int fd = -1;
  bool exited = false;
  bool reported = false;
  Clock::time_point exited_at;
  ChildResult result;
};

pid_t Spawn(const std::vector<std::string>& argv, int* read_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return -1;
  }
  ::setpgid(pid, pid);  // also here: no race with the kill below
  *read_fd = fds[0];
  return pid;
}

void Drain(Child* c) {
  char buffer[4096];
  const ssize_t n = ::read(c->fd, buffer, sizeof buffer);
  if (n > 0) {
    c->result.output.append(buffer, static_cast<std::size_t>(n));
  } else {
    ::close(c->fd);
    c->fd = -1;
  }
}

}  // namespace

std::vector<ChildResult> RunAllWithTimeout(const std::vector<std::vector<std::string>>& commands,
                                           double timeout_seconds,
                                           const std::function<void(std::size_t, const ChildResult&)>& on_done) {
  const auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds));
  std::vector<Child> children(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    children[i].pid = Spawn(commands[i], &children[i].fd);
    if (children[i].pid < 0) children[i].exited = true;
  }
  bool killed = false;
  for (;;) {
    const auto now = Clock::now();
    bool all_done = true;
    std::vector<pollfd> fds;
    for (std::size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (!c.exited && c.pid > 0) {
        int status = 0;
        if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
          c.exited = true;
          c.exited_at = now;
          c.result.exit_status = ExitStatusFor(status, 0);
          c.result.seconds = std::chrono::duration<double>(now - start).count();
        }
      }
      const bool pipe_done = c.fd < 0 || (c.exited && now - c.exited_at > std::chrono::milliseconds(500));
      if (c.exited && pipe_done && !c.reported) {
        if (c.fd >= 0) ::close(c.fd), c.fd = -1;
        c.reported = true;
        if (on_done) on_done(i, c.result);
      }
      if (!c.reported) all_done = false;
      if (c.fd >= 0) fds.push_back({c.fd, POLLIN, 0});
    }
    if (all_done) break;
    if (now >= deadline) {
      const int sig = !killed ? SIGTERM : SIGKILL;
      for (Child& c : children) {
        if (!c.exited && c.pid > 0) {
          ::kill(-c.pid, sig);
          c.result.timed_out = true;
        }
      }
      if (killed) {  // after SIGKILL: collect them below, output as it is
        for (Child& c : children) {
          if (c.fd >= 0 && c.result.timed_out) ::close(c.fd), c.fd = -1;
        }
      }
      killed = true;
      const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1));
      deadline = now + grace;
    }
    ::poll(fds.data(), fds.size(), 50);
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      for (Child& c : children) {
        if (c.fd == p.fd) Drain(&c);
      }
    }
  }
  std::vector<ChildResult> results;
  for (Child& c : children) {
    if (c.pid < 0) c.result.output = "could not start the probe command";
    results.push_back(std::move(c.result));
  }
  return results;
}

}  // namespace tfmpi::launcher
