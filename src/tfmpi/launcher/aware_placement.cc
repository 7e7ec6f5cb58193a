#include "tfmpi/launcher/aware_placement.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "tfmpi/launcher/child_processes.h"
#include "tfmpi/launcher/placement_report.h"
#include "tfmpi/planning/placement.h"

namespace tfmpi::launcher {

namespace {

void ProbeNodes(const HostPool& pool, const ProbeSetup& setup, double timeout, ProbeRound* round) {
  std::vector<std::vector<std::string>> commands;
  for (const PoolHost& h : pool.hosts) {
    commands.push_back(NodeProbeCommand(setup, h.name));
    round->hosts.push_back({h.name, h.slots, std::nullopt, "", std::nullopt});
  }
  std::fprintf(stderr, "tfmpirun: probing %zu host%s (timeout %.0f s)...\n", commands.size(),
               commands.size() == 1 ? "" : "s", timeout);
  const auto results = RunAllWithTimeout(commands, timeout, [&](std::size_t i, const ChildResult& r) {
    std::fprintf(stderr, "tfmpirun: probe of %s %s after %.1f s\n", pool.hosts[i].name.c_str(),
                 r.timed_out ? "timed out" : (r.exit_status == 0 ? "done" : "failed"), r.seconds);
  });
  for (std::size_t i = 0; i < results.size(); ++i) {
    planning::ProbedHost& host = round->hosts[i];
    const ChildResult& r = results[i];
    const auto line = probe::FindResultLine(r.output, probe::kNodeLinePrefix);
    std::string parse_error;
    if (r.timed_out) {
      host.error = fmt::format("unreachable: no probe result within {:.0f} s", timeout);
    } else if (r.exit_status != 0 || !line) {
      host.error = fmt::format("unreachable: probe failed (exit {}): {}", r.exit_status, FailureSummary(r.output));
    } else if (auto report = probe::NodeReportFromJson(*line, &parse_error)) {
      host.report = std::move(report);
    } else {
      host.error = parse_error;
    }
  }
}

// One MPI run over the hosts that answered; links labelled with pool names
// (rank k runs on the k-th host of the -H list).
void ProbeLinks(const ProbeSetup& setup, double timeout, ProbeRound* round) {
  std::vector<std::string> reachable;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < round->hosts.size(); ++i) {
    if (round->hosts[i].report) reachable.push_back(round->hosts[i].name), index.push_back(i);
  }
  if (reachable.size() < 2) return;
  std::fprintf(stderr, "tfmpirun: measuring links from %s to %zu other host%s...\n", reachable[0].c_str(),
               reachable.size() - 1, reachable.size() == 2 ? "" : "s");
  const auto results = RunAllWithTimeout({LinkProbeCommand(setup, reachable)}, timeout, nullptr);
  const ChildResult& r = results[0];
  const auto line = probe::FindResultLine(r.output, probe::kLinksLinePrefix);
  std::string parse_error;
  const auto links = line ? probe::LinksFromJson(*line, &parse_error) : std::nullopt;
  if (r.timed_out || !links || links->size() + 1 != reachable.size()) {
    round->links_error = r.timed_out ? fmt::format("timed out after {:.0f} s", timeout)
                                     : (parse_error.empty() ? FailureSummary(r.output) : parse_error);
    return;
  }
  round->links = *links;
  round->hosts[index[0]].latency_us = 0;
  for (std::size_t k = 0; k < round->links.size(); ++k) {
    round->links[k].from = reachable[0];
    round->links[k].to = reachable[k + 1];
    round->hosts[index[k + 1]].latency_us = round->links[k].latency_us;
  }
}

}  // namespace

std::optional<AwarePlacement> PlaceAware(const HostPool& pool, int num_proc, const ProbeSetup& setup,
                                         double timeout_seconds, const std::string& json_file,
                                         LaunchError* error) {
  const auto start = std::chrono::steady_clock::now();
  ProbeRound round;
  ProbeNodes(pool, setup, timeout_seconds, &round);
  ProbeLinks(setup, timeout_seconds, &round);
  round.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  planning::PlacementOptions options;
  options.num_proc = num_proc;
  const planning::PlacementPlan plan = planning::PlanPlacement(round.hosts, options);
  std::fputs(FormatPlacementTable(round, plan, num_proc).c_str(), stderr);
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    out << PlacementJson(round, plan, num_proc);
    if (!out) {
      *error = {kExitUsage, fmt::format("cannot write --probe-json {}", json_file)};
      return std::nullopt;
    }
  }
  if (plan.error) {
    *error = {kExitUsage, fmt::format("--placement aware: {}; see the table above for why hosts were "
                                      "left out. Lower -np or add hosts.", *plan.error)};
    return std::nullopt;
  }
  AwarePlacement placement;
  for (const auto& [name, slots] : plan.chosen) {
    placement.hosts += fmt::format("{}{}:{}", placement.hosts.empty() ? "" : ",", name, slots);
  }
  placement.probe_speeds = planning::FormatRankSpeeds(plan.rank_speeds);
  return placement;
}

}  // namespace tfmpi::launcher
