#include "tfmpi/launcher/hostfile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace tfmpi::launcher {

namespace {

std::optional<int> ParseCount(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("-0123456789") != std::string::npos) {
    return std::nullopt;
  }
  char* end = nullptr;
  const long value = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return static_cast<int>(value);
}

// One line's host, or a message saying what is wrong with it.
std::optional<PoolHost> ParseLine(const std::string& line, std::string* problem) {
  std::istringstream words(line);
  std::string name;
  words >> name;
  PoolHost host;
  std::optional<int> max_slots;
  const auto colon = name.find(':');
  if (colon != std::string::npos) {  // MPICH host:N
    const auto n = ParseCount(name.substr(colon + 1));
    if (!n) {
      *problem = fmt::format("'{}': expected HOST:N with a whole number N", name);
      return std::nullopt;
    }
    host.slots = n;
    name = name.substr(0, colon);
  }
  host.name = name;
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    const std::string key = word.substr(0, eq);
    const auto value = eq == std::string::npos ? std::nullopt : ParseCount(word.substr(eq + 1));
    if ((key != "slots" && key != "max_slots" && key != "max-slots") || !value) {
      *problem = fmt::format("'{}': expected slots=N or max_slots=N", word);
      return std::nullopt;
    }
    (key == "slots" ? host.slots : max_slots) = value;
  }
  if (name.empty()) {
    *problem = "no host name";
  } else if (host.slots && *host.slots < 1) {
    *problem = fmt::format("host {}: slots must be at least 1 (got {})", name, *host.slots);
  } else if (max_slots && *max_slots < host.slots.value_or(1)) {
    *problem = fmt::format("host {}: max_slots={} is less than its slots ({})", name, *max_slots,
                           host.slots.value_or(1));
  } else {
    return host;
  }
  return std::nullopt;
}

std::optional<HostPool> Finish(HostPool pool, std::vector<std::string> problems,
                               const std::string& where, LaunchError* error) {
  std::map<std::string, int> first_line;  // -H merges repeats before this
  for (const PoolHost& h : pool.hosts) {
    auto [it, fresh] = first_line.emplace(h.name, h.line);
    if (!fresh) {
      problems.push_back(fmt::format("{}:{}: host {} is already listed on line {}; give it once, "
                                     "with all its slots", where, h.line, h.name, it->second));
    }
  }
  if (pool.hosts.empty() && problems.empty()) problems.push_back(fmt::format("{}: no hosts", where));
  if (problems.empty()) return pool;
  std::string message = "bad host list:";
  for (const std::string& p : problems) message += "\n  " + p;
  *error = {kExitUsage, message};
  return std::nullopt;
}

}  // namespace

std::optional<int> HostPool::TotalSlots() const {
  int total = 0;
  for (const PoolHost& h : hosts) {
    if (!h.slots) return std::nullopt;
    total += *h.slots;
  }
  return total;
}

std::optional<HostPool> ParseHostfile(const std::string& text, const std::string& file,
                                      LaunchError* error) {
  HostPool pool;
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string problem;
    if (auto host = ParseLine(line, &problem)) {
      host->line = number;
      pool.hosts.push_back(*host);
    } else {
      problems.push_back(fmt::format("{}:{}: {}", file, number, problem));
    }
  }
  return Finish(std::move(pool), std::move(problems), file, error);
}

std::optional<HostPool> ParseHostList(const std::string& list, LaunchError* error) {
  HostPool pool;
  std::vector<std::string> problems;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::string problem;
    if (item.find_first_of(" \t=") != std::string::npos) {
      problems.push_back(fmt::format("-H: '{}': expected HOST or HOST:SLOTS", item));
    } else if (auto host = ParseLine(item, &problem)) {
      const int slots = host->slots.value_or(1);
      auto same = std::find_if(pool.hosts.begin(), pool.hosts.end(),
                               [&](const PoolHost& h) { return h.name == host->name; });
      if (same != pool.hosts.end()) {
        *same->slots += slots;
      } else {
        host->slots = slots;
        pool.hosts.push_back(*host);
      }
    } else {
      problems.push_back("-H: " + problem);
    }
  }
  return Finish(std::move(pool), std::move(problems), "-H", error);
}

std::optional<LaunchError> CheckPoolSize(const HostPool& pool, int num_proc, bool oversubscribe,
                                         const std::string& what) {
  const std::optional<int> total = pool.TotalSlots();
  if (oversubscribe || !total || num_proc <= *total) return std::nullopt;
  return LaunchError{kExitUsage,
                     fmt::format("-np {} is more than the {} slots of {} ({} host{}); lower -np, add "
                                 "slots, or pass --mpi-args --oversubscribe",
                                 num_proc, *total, what, pool.hosts.size(), pool.hosts.size() == 1 ? "" : "s")};
}

}  // namespace tfmpi::launcher
