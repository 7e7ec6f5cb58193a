// Pure: parsing the /proc and cgroup files a node probe reads. Each function
// takes the file's text and returns nullopt for text it does not understand.
//
// Note [Finding the CPU quota]
// A process's quota is the tightest limit on the path from its cgroup up to
// the root of the mounted hierarchy: a parent's limit binds its children.
// * v2: /proc/self/cgroup has "0::/path"; each level's cpu.max holds
//   "max 100000" (no limit) or "QUOTA PERIOD" in microseconds.
// * v1: the line whose controller list holds "cpu" ("4:cpu,cpuacct:/path");
//   each level's cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us.
// The path in /proc/self/cgroup is relative to the hierarchy's root, which is
// mounted where /proc/self/mountinfo says (field 5), showing the part of the
// hierarchy named by field 4 (a container sees only its own subtree).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfmpi::probe {

// "0-3,8,10-11" (sysfs cpu lists) -> 7.
std::optional<int> CountCpuList(const std::string& text);

// /proc/loadavg -> the 1-minute load.
std::optional<double> ParseLoad1(const std::string& text);

struct MemInfo {
  std::uint64_t total_bytes = 0;
  std::uint64_t available_bytes = 0;
};
// /proc/meminfo (MemTotal, MemAvailable; MemFree + Cached on old kernels).
std::optional<MemInfo> ParseMemInfo(const std::string& text);

// The process's cpu cgroup from /proc/self/cgroup.
struct CgroupPath {
  bool v2 = false;
  std::string path;  // relative to the hierarchy's root, starts with '/'
};
std::optional<CgroupPath> ParseSelfCgroup(const std::string& text);

// Where that hierarchy is mounted, from /proc/self/mountinfo: v2 is the
// "cgroup2" file system, v1 the "cgroup" one whose options include "cpu".
struct CgroupMount {
  std::string root;         // the hierarchy path shown at the mount point
  std::string mount_point;
};
std::optional<CgroupMount> FindCgroupMount(const std::string& mountinfo, bool v2);

// The directories to read, from the process's cgroup up to the mount point.
// Empty when the cgroup is not visible under that mount.
std::vector<std::string> CgroupDirsUpward(const CgroupMount& mount, const std::string& cgroup_path);

// One level's limit in cores; nullopt: no limit at this level (or unreadable).
std::optional<double> ParseCpuMax(const std::string& text);                  // v2 cpu.max
std::optional<double> ParseCfsQuota(const std::string& quota_us, const std::string& period_us);  // v1

}  // namespace tfmpi::probe
