#include "tfmpi/probe/host_cpus.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tfmpi/probe/proc_parse.h"

namespace tfmpi::probe {

std::optional<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// See Note [Finding the CPU quota] (proc_parse.h).
void ReadQuota(HostCpus* r) {
  const auto self = ReadTextFile("/proc/self/cgroup");
  const auto cgroup = self ? ParseSelfCgroup(*self) : std::nullopt;
  if (!cgroup) {
    r->quota_source = "unknown: no cpu cgroup in /proc/self/cgroup";
    return;
  }
  const auto mountinfo = ReadTextFile("/proc/self/mountinfo");
  const auto mount = mountinfo ? FindCgroupMount(*mountinfo, cgroup->v2) : std::nullopt;
  const std::vector<std::string> dirs = mount ? CgroupDirsUpward(*mount, cgroup->path)
                                              : std::vector<std::string>{};
  const char* version = cgroup->v2 ? "cgroup v2" : "cgroup v1";
  // The first level must be readable, or we are looking at another hierarchy
  // (a remounted /sys: Note [Unknown values]).
  const std::string first_file = dirs.empty() ? "" : dirs.front() + (cgroup->v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  if (dirs.empty() || !ReadTextFile(first_file)) {
    r->quota_source = std::string("unknown: ") + version + " hierarchy not visible here";
    return;
  }
  std::optional<double> tightest;
  for (const std::string& dir : dirs) {
    std::optional<double> level;
    if (cgroup->v2) {
      if (auto text = ReadTextFile(dir + "/cpu.max")) level = ParseCpuMax(*text);
    } else {
      auto quota = ReadTextFile(dir + "/cpu.cfs_quota_us");
      auto period = ReadTextFile(dir + "/cpu.cfs_period_us");
      if (quota && period) level = ParseCfsQuota(*quota, *period);
    }
    if (level && (!tightest || *level < *tightest)) tightest = level;
  }
  r->quota = tightest;
  r->quota_source = tightest ? version : std::string(version) + ", unlimited";
}

}  // namespace

HostCpus ReadHostCpus() {
  HostCpus r;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) r.affinity.push_back(cpu);
    }
  }
  ReadQuota(&r);
  return r;
}

bool BindProcessTo(const std::vector<int>& cpus, std::string* error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) {
    *error = std::string("cannot list /proc/self/task: ") + std::strerror(errno);
    return false;
  }
  bool ok = true;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (::sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) {
      *error = std::string("sched_setaffinity: ") + std::strerror(errno);
      ok = false;
    }
  }
  ::closedir(tasks);
  return ok;
}

}  // namespace tfmpi::probe
