#include "tfmpi/planning/placement.h"

#include <fmt/format.h>

#include <algorithm>

namespace tfmpi::planning {

namespace {

// Note [Placement scoring]: the one-thread benchmark already shows a quota of
// up to one core, so only ranks beyond the usable cores (at least one) share.
double SpeedPerSlot(const probe::NodeReport& r, int slots) {
  return r.bench_gflops * std::min(1.0, std::max(1.0, r.UsableCores()) / std::max(slots, 1));
}

// The index of the next host to fill (Note [Placement scoring]), or -1.
int NextHost(const std::vector<ProbedHost>& in, const std::vector<HostDecision>& out,
             double tolerance) {
  double fastest = -1;
  for (const HostDecision& d : out) {
    if (d.usable && d.chosen_slots == 0) fastest = std::max(fastest, d.speed_per_slot);
  }
  int best = -1;
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    const HostDecision& d = out[i];
    if (!d.usable || d.chosen_slots != 0 || d.speed_per_slot < fastest * (1 - tolerance)) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const HostDecision& b = out[best];
    const double la = in[i].latency_us.value_or(1e18), lb = in[best].latency_us.value_or(1e18);
    if (d.slots > b.slots || (d.slots == b.slots && la < lb)) best = i;
  }
  return best;
}

}  // namespace

PlacementPlan PlanPlacement(const std::vector<ProbedHost>& in, const PlacementOptions& options) {
  PlacementPlan plan;
  double fastest = 0;
  for (const ProbedHost& h : in) {
    HostDecision d;
    d.name = h.name;
    if (!h.report) {
      d.slots = h.slots.value_or(0);
      d.reason = "left out: " + (h.error.empty() ? std::string("no probe result") : h.error);
      plan.hosts.push_back(d);
      continue;
    }
    const probe::NodeReport& r = *h.report;
    d.slots = h.slots.value_or(std::max(r.affinity_cpus, 1));
    d.speed_per_slot = SpeedPerSlot(r, d.slots);
    const std::uint64_t per_slot = r.mem_available_bytes / static_cast<std::uint64_t>(d.slots);
    if (per_slot < options.min_memory_per_slot_bytes) {
      d.reason = fmt::format("left out: {} MiB available memory per slot, below {} MiB",
                             per_slot >> 20, options.min_memory_per_slot_bytes >> 20);
    } else if (d.speed_per_slot <= 0) {
      d.reason = "left out: the benchmark did not run";
    } else {
      d.usable = true;
      plan.usable_slots += d.slots;
      fastest = std::max(fastest, d.speed_per_slot);
    }
    plan.hosts.push_back(d);
  }
  for (HostDecision& d : plan.hosts) d.relative_speed = fastest > 0 ? d.speed_per_slot / fastest : 0;

  if (plan.usable_slots < options.num_proc) {
    plan.error = fmt::format("-np {} needs {} slots but only {} of the pool's hosts' slots are usable",
                             options.num_proc, options.num_proc, plan.usable_slots);
    return plan;
  }
  int remaining = options.num_proc;
  while (remaining > 0) {
    const int next = NextHost(in, plan.hosts, options.equal_speed_tolerance);
    HostDecision& d = plan.hosts[next];
    d.chosen_slots = std::min(d.slots, remaining);
    remaining -= d.chosen_slots;
    if (d.chosen_slots < d.slots) d.reason = fmt::format("uses {} of {} slots", d.chosen_slots, d.slots);
  }
  double chosen_fastest = 0;
  for (const HostDecision& d : plan.hosts) {
    if (d.chosen_slots > 0) chosen_fastest = std::max(chosen_fastest, d.speed_per_slot);
  }
  for (HostDecision& d : plan.hosts) {
    if (d.chosen_slots > 0) {
      plan.chosen.emplace_back(d.name, d.chosen_slots);
      plan.rank_speeds.insert(plan.rank_speeds.end(), d.chosen_slots, d.speed_per_slot / chosen_fastest);
    } else if (d.usable) {
      d.reason = d.relative_speed < 1 - options.equal_speed_tolerance
                     ? fmt::format("left out: slower ({:.2f} of the fastest); faster hosts hold all "
                                   "{} ranks", d.relative_speed, options.num_proc)
                     : fmt::format("left out: not needed; fewer hosts hold all {} ranks",
                                   options.num_proc);
    }
  }
  return plan;
}

std::string FormatRankSpeeds(const std::vector<double>& speeds) {
  std::string text;
  for (std::size_t i = 0; i < speeds.size(); ++i) text += fmt::format("{}{:.3f}", i ? "," : "", speeds[i]);
  return text;
}

}  // namespace tfmpi::planning
