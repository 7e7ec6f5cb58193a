#include "tfmpi/probe/node_probe.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tfmpi/probe/proc_parse.h"

namespace tfmpi::probe {

namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// See Note [Finding the CPU quota] (proc_parse.h).
void ProbeQuota(NodeReport* r) {
  const auto self = ReadFile("/proc/self/cgroup");
  const auto cgroup = self ? ParseSelfCgroup(*self) : std::nullopt;
  if (!cgroup) {
    r->quota_source = "unknown: no cpu cgroup in /proc/self/cgroup";
    return;
  }
  const auto mountinfo = ReadFile("/proc/self/mountinfo");
  const auto mount = mountinfo ? FindCgroupMount(*mountinfo, cgroup->v2) : std::nullopt;
  const std::vector<std::string> dirs = mount ? CgroupDirsUpward(*mount, cgroup->path)
                                              : std::vector<std::string>{};
  const char* version = cgroup->v2 ? "cgroup v2" : "cgroup v1";
  // The first level must be readable, or we are looking at another hierarchy
  // (a remounted /sys: Note [Unknown values]).
  const std::string first_file = dirs.empty() ? "" : dirs.front() + (cgroup->v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  if (dirs.empty() || !ReadFile(first_file)) {
    r->quota_source = std::string("unknown: ") + version + " hierarchy not visible here";
    return;
  }
  std::optional<double> tightest;
  for (const std::string& dir : dirs) {
    std::optional<double> level;
    if (cgroup->v2) {
      if (auto text = ReadFile(dir + "/cpu.max")) level = ParseCpuMax(*text);
    } else {
      auto quota = ReadFile(dir + "/cpu.cfs_quota_us");
      auto period = ReadFile(dir + "/cpu.cfs_period_us");
      if (quota && period) level = ParseCfsQuota(*quota, *period);
    }
    if (level && (!tightest || *level < *tightest)) tightest = level;
  }
  r->cpu_quota = tightest;
  r->quota_source = tightest ? version : std::string(version) + ", unlimited";
}

}  // namespace

NodeReport ProbeNode() {
  NodeReport r;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) r.hostname = host;
  const auto online = ReadFile("/sys/devices/system/cpu/online");
  const auto counted = online ? CountCpuList(*online) : std::nullopt;
  r.online_cpus = counted ? *counted : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  r.affinity_cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : r.online_cpus;
  ProbeQuota(&r);
  if (auto text = ReadFile("/proc/loadavg")) r.load1 = ParseLoad1(*text).value_or(0);
  if (auto text = ReadFile("/proc/meminfo")) {
    if (auto mem = ParseMemInfo(*text)) {
      r.mem_total_bytes = mem->total_bytes;
      r.mem_available_bytes = mem->available_bytes;
    }
  }
  r.gpus = ProbeGpus();
  return r;
}

}  // namespace tfmpi::probe
