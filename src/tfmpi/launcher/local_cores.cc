#include "tfmpi/launcher/local_cores.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace tfmpi::launcher {

namespace {

bool ReadInt(const std::string& path, int* value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *value);
}

}  // namespace

int CountLocalCores() {
  const int fallback = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) return fallback;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = 0;
    int core = 0;
    if (!ReadInt(topology + "physical_package_id", &package) || !ReadInt(topology + "core_id", &core)) {
      return CPU_COUNT(&mask);
    }
    cores.emplace(package, core);
  }
  return cores.empty() ? fallback : static_cast<int>(cores.size());
}

}  // namespace tfmpi::launcher
