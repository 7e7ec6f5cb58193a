#include "tfmpi/planning/threads.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tfmpi::planning {

ThreadPlan PlanThreads(const std::vector<int>& cpus, std::optional<double> quota,
                       int local_rank, int local_size, bool bind) {
  const int k = std::max(1, local_size);
  const int r = std::clamp(local_rank, 0, k - 1);
  const int n_cpus = std::max(1, static_cast<int>(cpus.size()));
  int host = n_cpus;
  bool capped = false;
  if (quota && std::isfinite(*quota) && *quota > 0) {
    const int whole = std::max(1, static_cast<int>(std::lround(*quota)));
    if (whole < host) {
      host = whole;
      capped = true;
    }
  }
  ThreadPlan plan;
  plan.cores = std::max(1, host / k + (r < host % k ? 1 : 0));
  plan.intra_op = plan.cores;
  plan.inter_op = plan.cores;
  plan.apply = k > 1 || capped;
  if (bind && !capped && k <= static_cast<int>(cpus.size()) && k > 1) {
    int first = r * (host / k) + std::min(r, host % k);
    plan.bind_cpus.assign(cpus.begin() + first, cpus.begin() + first + plan.cores);
  }
  plan.why = fmt::format("{} of {} cores ({} CPUs{}, {} rank{} on this host)", plan.cores, host,
                         cpus.size(), capped ? fmt::format(", cgroup quota {:.2g}", *quota) : "",
                         k, k == 1 ? "" : "s");
  if (!plan.apply) plan.why = "TensorFlow's defaults: " + plan.why;
  return plan;
}

}  // namespace tfmpi::planning
