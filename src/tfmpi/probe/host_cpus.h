// The CPUs this process may use: its affinity mask and the cgroup CPU quota
// over it (Note [Finding the CPU quota], proc_parse.h). Reads /proc and the
// cgroup files; the node probe reports it and each rank sizes its thread
// pools from it (Note [Threads per rank], planning/threads.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tfmpi::probe {

struct HostCpus {
  std::vector<int> affinity;          // CPU ids this process may run on
  std::optional<double> quota;        // cores allowed by cgroups; absent: unknown or unlimited
  std::string quota_source;           // "cgroup v2", "cgroup v1, unlimited", "unknown: why"
};

HostCpus ReadHostCpus();

// A whole file's text; nullopt when it cannot be read.
std::optional<std::string> ReadTextFile(const std::string& path);

// Keeps only `cpus` in the affinity of every thread of this process (threads
// started later inherit it). False, with *error, when the kernel refuses.
bool BindProcessTo(const std::vector<int>& cpus, std::string* error);

}  // namespace tfmpi::probe
