// GPUs through NVML, loaded at run time so that the probe runs (and reports
// zero GPUs) on hosts without NVIDIA's driver. Only the few entry points
// needed are declared here, with NVML's C ABI.
#include <dlfcn.h>

#include "tfmpi/probe/node_probe.h"

namespace tfmpi::probe {

namespace {

using NvmlReturn = int;  // NVML_SUCCESS == 0
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};

template <typename F>
F Symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(::dlsym(lib, name));
}

}  // namespace

std::vector<GpuInfo> ProbeGpus() {
  std::vector<GpuInfo> gpus;
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return gpus;
  auto init = Symbol<NvmlReturn (*)()>(lib, "nvmlInit_v2");
  auto shutdown = Symbol<NvmlReturn (*)()>(lib, "nvmlShutdown");
  auto count = Symbol<NvmlReturn (*)(unsigned*)>(lib, "nvmlDeviceGetCount_v2");
  auto handle = Symbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto name = Symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(lib, "nvmlDeviceGetName");
  auto memory = Symbol<NvmlReturn (*)(NvmlDevice, NvmlMemory*)>(lib, "nvmlDeviceGetMemoryInfo");
  auto utilization = Symbol<NvmlReturn (*)(NvmlDevice, NvmlUtilization*)>(lib, "nvmlDeviceGetUtilizationRates");
  unsigned n = 0;
  if (init != nullptr && shutdown != nullptr && count != nullptr && handle != nullptr &&
      init() == 0) {
    if (count(&n) == 0) {
      for (unsigned i = 0; i < n; ++i) {
        NvmlDevice device = nullptr;
        if (handle(i, &device) != 0) continue;
        GpuInfo gpu;
        char text[96] = {};
        if (name != nullptr && name(device, text, sizeof text - 1) == 0) gpu.name = text;
        NvmlMemory mem{};
        if (memory != nullptr && memory(device, &mem) == 0) {
          gpu.memory_total_bytes = mem.total;
          gpu.memory_free_bytes = mem.free;
        }
        NvmlUtilization use{};
        if (utilization != nullptr && utilization(device, &use) == 0) {
          gpu.utilization_percent = static_cast<int>(use.gpu);
        }
        gpus.push_back(gpu);
      }
    }
    shutdown();
  }
  ::dlclose(lib);
  return gpus;
}

}  // namespace tfmpi::probe
