#include "tfmpi/probe/node_probe.h"

#include <unistd.h>

#include "tfmpi/probe/host_cpus.h"
#include "tfmpi/probe/proc_parse.h"

namespace tfmpi::probe {

NodeReport ProbeNode() {
  NodeReport r;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) r.hostname = host;
  const auto online = ReadTextFile("/sys/devices/system/cpu/online");
  const auto counted = online ? CountCpuList(*online) : std::nullopt;
  r.online_cpus = counted ? *counted : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  const HostCpus cpus = ReadHostCpus();
  r.affinity_cpus = cpus.affinity.empty() ? r.online_cpus : static_cast<int>(cpus.affinity.size());
  r.cpu_quota = cpus.quota;
  r.quota_source = cpus.quota_source;
  if (auto text = ReadTextFile("/proc/loadavg")) r.load1 = ParseLoad1(*text).value_or(0);
  if (auto text = ReadTextFile("/proc/meminfo")) {
    if (auto mem = ParseMemInfo(*text)) {
      r.mem_total_bytes = mem->total_bytes;
      r.mem_available_bytes = mem->available_bytes;
    }
  }
  r.gpus = ProbeGpus();
  return r;
}

}  // namespace tfmpi::probe
