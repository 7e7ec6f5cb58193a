// Side effect: how many slots Open MPI will count on this machine.
//
// Open MPI 4 gives a local run one slot per *core* it may use (not per
// hardware thread), so on a machine with hyper-threading
// std::thread::hardware_concurrency() would overstate it and -np between the
// two counts would fail without --oversubscribe. This counts distinct
// (package, core) pairs among the CPUs in this process's affinity mask,
// falling back to the CPU count where sysfs has no topology.
#pragma once

namespace tfmpi::launcher {

int CountLocalCores();

}  // namespace tfmpi::launcher
