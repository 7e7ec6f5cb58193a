// The node probe's system-facing part: reads /proc, /sys and cgroups, asks
// NVML about GPUs, runs the benchmark. The parsing is in proc_parse.h.
#pragma once

#include "tfmpi/probe/node_report.h"

namespace tfmpi::probe {

// Everything but the benchmark fields, which RunComputeBenchmark fills in.
NodeReport ProbeNode();

// GPUs through NVML, loaded at run time (dlopen "libnvidia-ml.so.1"); empty
// when the library is missing or fails (Note [Unknown values]).
std::vector<GpuInfo> ProbeGpus();

// See Note [Compute benchmark] (benchmark.cc). Fills bench_gflops/bench_seconds.
void RunComputeBenchmark(double seconds, NodeReport* report);

}  // namespace tfmpi::probe
