// Pure: how many threads each rank on a host gives TensorFlow.
//
// Note [Threads per rank]
// TensorFlow sizes its intra-op and inter-op pools (and oneDNN, through the
// intra-op pool) to every CPU the process may run on. k ranks on one host
// each do that, so the host runs k times as many busy threads as it has
// cores, and each rank's step is slowed by switching and cache traffic
// rather than sped up. A rank's fair part of the host is
//   c = min(affinity CPUs, the cgroup quota rounded to whole cores, at least 1),
//   rank r of k (r = the local rank): c // k cores, plus one for r < c % k,
// at least 1 (a host with fewer cores than ranks is oversubscribed whatever
// we do). Both pools get that many threads.
// A rank alone on its host (k = 1) keeps TensorFlow's defaults, unless the
// host's cgroup quota, rounded as above, is below the CPUs the rank sees (a
// container or batch system's limit): TensorFlow sizes its pools to the CPUs,
// its threads spend the quota early in each period and the whole cgroup is
// then throttled until the period ends (CFS bandwidth control, 100 ms by
// default). Steps that land in a throttled stretch stall; in a job every
// rank waits for them. With the pools sized to the quota, the same CNN on a
// host of one core and two CPUs took 22% less time per step as one process,
// and 13% less at 2 ranks across two such hosts (docs/performance-history.md,
// "Thread pools under a CPU quota"; the median step hides the stalls, the mean
// shows them).
// Binding (optional): rank r also keeps only its own consecutive CPUs of the
// affinity list, so two ranks' threads never share a core. That needs whole
// CPUs to hand out: no quota below the CPU count and no more ranks than CPUs;
// otherwise the plan binds nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tfmpi::planning {

struct ThreadPlan {
  int cores = 0;            // this rank's part of the host
  int intra_op = 0;         // TensorFlow's intra-op pool (and math libraries)
  int inter_op = 0;         // TensorFlow's inter-op pool
  std::vector<int> bind_cpus;  // CPUs to keep; empty: leave the affinity alone
  bool apply = false;       // false: keep TensorFlow's defaults (the sizes are still filled)
  std::string why;          // one line: "2 of 4 cores (4 CPUs, 2 ranks on this host)"
};

// `cpus`: the CPU ids in the process's affinity mask; `quota`: the cgroup
// limit in cores (nullopt: none known). local_rank in [0, local_size).
ThreadPlan PlanThreads(const std::vector<int>& cpus, std::optional<double> quota,
                       int local_rank, int local_size, bool bind);

}  // namespace tfmpi::planning
