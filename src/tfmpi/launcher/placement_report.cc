#include "tfmpi/launcher/placement_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tfmpi::launcher {

namespace {

std::string Gib(std::uint64_t bytes) { return fmt::format("{:.1f}G", static_cast<double>(bytes) / (1ull << 30)); }

const probe::LinkReport* LinkTo(const ProbeRound& round, std::size_t host) {
  for (const probe::LinkReport& l : round.links) {  // labelled with pool names
    if (l.to == round.hosts[host].name) return &l;
  }
  return nullptr;
}

}  // namespace

std::string FormatPlacementTable(const ProbeRound& round, const planning::PlacementPlan& plan,
                                 int num_proc) {
  std::string out = fmt::format("placement for -np {} over {} host{} (probed in {:.1f} s)\n", num_proc,
                                round.hosts.size(), round.hosts.size() == 1 ? "" : "s", round.seconds);
  out += fmt::format("{:<20} {:>5} {:>4} {:>5} {:>5} {:>6} {:>4} {:>7} {:>6} {:>8} {:>8} {:>4}  {}\n",
                     "host", "slots", "cpus", "quota", "load", "mem", "gpus", "GFLOP/s",
                     "speed", "lat(us)", "MB/s", "use", "note");
  for (std::size_t i = 0; i < round.hosts.size(); ++i) {
    const planning::ProbedHost& h = round.hosts[i];
    const planning::HostDecision& d = plan.hosts[i];
    if (!h.report) {
      out += fmt::format("{:<20} {:>5} {:>4} {:>5} {:>5} {:>6} {:>4} {:>7} {:>6} {:>8} {:>8} {:>4}  {}\n",
                         h.name, h.slots ? std::to_string(*h.slots) : "-", "-", "-", "-", "-", "-", "-",
                         "-", "-", "-", 0, d.reason);
      continue;
    }
    const probe::NodeReport& r = *h.report;
    const probe::LinkReport* link = LinkTo(round, i);
    const bool first = !round.links.empty() && round.links.front().from == h.name;
    out += fmt::format(
        "{:<20} {:>5} {:>4} {:>5} {:>5.2f} {:>6} {:>4} {:>7.2f} {:>6.2f} {:>8} {:>8} {:>4}  {}\n", h.name,
        d.slots, r.affinity_cpus, r.cpu_quota ? fmt::format("{:.2f}", *r.cpu_quota) : "-", r.load1,
        Gib(r.mem_available_bytes), r.gpus.size(), r.bench_gflops, d.relative_speed,
        link ? fmt::format("{:.0f}", link->latency_us) : (first ? "(first)" : "-"),
        link ? fmt::format("{:.0f}", link->bandwidth_mbyte_s) : "-", d.chosen_slots, d.reason);
  }
  if (!round.links_error.empty()) out += fmt::format("links not measured: {}\n", round.links_error);
  if (plan.error) {
    out += fmt::format("no placement: {}\n", *plan.error);
    return out;
  }
  std::string chosen;
  for (const auto& [name, slots] : plan.chosen) chosen += fmt::format("{}{}:{}", chosen.empty() ? "" : ",", name, slots);
  out += fmt::format("chosen: {} (ranks fill them in this order); TFMPI_PROBE_SPEEDS={}\n", chosen,
                     planning::FormatRankSpeeds(plan.rank_speeds));
  return out;
}

std::string PlacementJson(const ProbeRound& round, const planning::PlacementPlan& plan, int num_proc) {
  using nlohmann::json;
  json hosts = json::array();
  for (std::size_t i = 0; i < round.hosts.size(); ++i) {
    const planning::ProbedHost& h = round.hosts[i];
    const planning::HostDecision& d = plan.hosts[i];
    json entry = {{"name", h.name}, {"slots", d.slots}, {"probe", nullptr}, {"error", h.error},
                  {"speed_per_slot", d.speed_per_slot}, {"relative_speed", d.relative_speed},
                  {"usable", d.usable}, {"chosen_slots", d.chosen_slots}, {"reason", d.reason}};
    if (h.report) entry["probe"] = json::parse(probe::ToJson(*h.report));
    hosts.push_back(entry);
  }
  json chosen = json::array();
  for (const auto& [name, slots] : plan.chosen) chosen.push_back({{"host", name}, {"slots", slots}});
  json j = {{"num_proc", num_proc}, {"probe_seconds", round.seconds}, {"hosts", hosts},
            {"links", json::parse(probe::ToJson(round.links))}, {"links_error", round.links_error},
            {"usable_slots", plan.usable_slots}, {"chosen", chosen},
            {"rank_speeds", plan.rank_speeds}, {"error", nullptr}};
  if (plan.error) j["error"] = *plan.error;
  return j.dump(2) + "\n";
}

}  // namespace tfmpi::launcher
