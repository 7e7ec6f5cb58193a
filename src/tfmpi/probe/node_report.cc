#include "tfmpi/probe/node_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace tfmpi::probe {

using nlohmann::json;

double NodeReport::UsableCores() const {
  double cores = affinity_cpus > 0 ? affinity_cpus : online_cpus;
  if (cpu_quota) cores = std::min(cores, *cpu_quota);
  return cores;
}

std::string ToJson(const NodeReport& r) {
  json gpus = json::array();
  for (const GpuInfo& g : r.gpus) {
    gpus.push_back({{"name", g.name}, {"memory_total_bytes", g.memory_total_bytes},
                    {"memory_free_bytes", g.memory_free_bytes},
                    {"utilization_percent", g.utilization_percent}});
  }
  json j = {{"hostname", r.hostname}, {"online_cpus", r.online_cpus},
            {"affinity_cpus", r.affinity_cpus}, {"cpu_quota", nullptr},
            {"quota_source", r.quota_source}, {"load1", r.load1},
            {"mem_total_bytes", r.mem_total_bytes}, {"mem_available_bytes", r.mem_available_bytes},
            {"gpus", gpus}, {"bench_gflops", r.bench_gflops}, {"bench_seconds", r.bench_seconds}};
  if (r.cpu_quota) j["cpu_quota"] = *r.cpu_quota;
  return j.dump();
}

std::string ToJson(const std::vector<LinkReport>& links) {
  json j = json::array();
  for (const LinkReport& l : links) {
    j.push_back({{"from", l.from}, {"to", l.to}, {"latency_us", l.latency_us},
                 {"bandwidth_mbyte_s", l.bandwidth_mbyte_s}});
  }
  return j.dump();
}

std::optional<NodeReport> NodeReportFromJson(const std::string& text, std::string* error) {
  try {
    const json j = json::parse(text);
    NodeReport r;
    r.hostname = j.at("hostname").get<std::string>();
    r.online_cpus = j.at("online_cpus").get<int>();
    r.affinity_cpus = j.at("affinity_cpus").get<int>();
    if (!j.at("cpu_quota").is_null()) r.cpu_quota = j.at("cpu_quota").get<double>();
    r.quota_source = j.at("quota_source").get<std::string>();
    r.load1 = j.at("load1").get<double>();
    r.mem_total_bytes = j.at("mem_total_bytes").get<std::uint64_t>();
    r.mem_available_bytes = j.at("mem_available_bytes").get<std::uint64_t>();
    for (const json& g : j.at("gpus")) {
      r.gpus.push_back({g.at("name").get<std::string>(), g.at("memory_total_bytes").get<std::uint64_t>(),
                        g.at("memory_free_bytes").get<std::uint64_t>(),
                        g.at("utilization_percent").get<int>()});
    }
    r.bench_gflops = j.at("bench_gflops").get<double>();
    r.bench_seconds = j.at("bench_seconds").get<double>();
    return r;
  } catch (const json::exception& e) {
    *error = std::string("malformed node probe result: ") + e.what();
    return std::nullopt;
  }
}

std::optional<std::vector<LinkReport>> LinksFromJson(const std::string& text, std::string* error) {
  try {
    std::vector<LinkReport> links;
    for (const json& l : json::parse(text)) {
      links.push_back({l.at("from").get<std::string>(), l.at("to").get<std::string>(),
                       l.at("latency_us").get<double>(), l.at("bandwidth_mbyte_s").get<double>()});
    }
    return links;
  } catch (const json::exception& e) {
    *error = std::string("malformed link probe result: ") + e.what();
    return std::nullopt;
  }
}

std::optional<std::string> FindResultLine(const std::string& output, const std::string& prefix) {
  std::optional<std::string> found;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find(prefix);  // MPI's --tag-output may put a tag first
    if (at != std::string::npos) found = line.substr(at + prefix.size());
  }
  return found;
}

}  // namespace tfmpi::probe
