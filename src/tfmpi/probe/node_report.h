// What a node probe measured on one host, and its JSON form (the probe
// program prints it; tfmpirun reads it back).
//
// Note [Unknown values]
// A probe reports what it could read. A CPU quota that cannot be read (no
// cgroup hierarchy in the probe's mount namespace: `ip netns exec` remounts
// /sys without one, and so do some containers) is absent, not "unlimited":
// the compute benchmark then tells the truth on its own, since it measures
// wall-clock throughput over several cgroup periods. No GPU (no NVML library,
// or NVML failing) is zero GPUs, never an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfmpi::probe {

struct GpuInfo {
  std::string name;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_free_bytes = 0;
  int utilization_percent = 0;
};

struct NodeReport {
  std::string hostname;
  int online_cpus = 0;                // CPUs online on the machine
  int affinity_cpus = 0;              // CPUs this process may run on
  std::optional<double> cpu_quota;    // cores allowed by cgroups; absent: unknown or unlimited
  std::string quota_source;           // "cgroup v2", "cgroup v1", "unlimited", "unknown: why"
  double load1 = 0;                   // 1-minute load average
  std::uint64_t mem_total_bytes = 0;
  std::uint64_t mem_available_bytes = 0;
  std::vector<GpuInfo> gpus;
  double bench_gflops = 0;            // single-thread wall-clock compute throughput
  double bench_seconds = 0;           // wall time the benchmark ran

  // Cores the host can give to ranks: affinity CPUs, capped by a known quota.
  double UsableCores() const;
};

// One link from the first probed host to another, measured by MPI ping-pong.
struct LinkReport {
  std::string from;
  std::string to;
  double latency_us = 0;        // half the round trip of a small message
  double bandwidth_mbyte_s = 0;  // one-way, from ~4 MiB messages
};

std::string ToJson(const NodeReport& report);
std::string ToJson(const std::vector<LinkReport>& links);

// Parse what ToJson wrote; nullopt (and *error) when malformed.
std::optional<NodeReport> NodeReportFromJson(const std::string& text, std::string* error);
std::optional<std::vector<LinkReport>> LinksFromJson(const std::string& text, std::string* error);

// The prefixes of the probe's result lines on stdout (other lines are ignored:
// MPI and the remote shell may print too).
inline constexpr const char* kNodeLinePrefix = "TFMPI_PROBE_NODE ";
inline constexpr const char* kLinksLinePrefix = "TFMPI_PROBE_LINKS ";

// The text after `prefix` on the last line of `output` that starts with it.
std::optional<std::string> FindResultLine(const std::string& output, const std::string& prefix);

}  // namespace tfmpi::probe
