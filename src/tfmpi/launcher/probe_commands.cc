#include "tfmpi/launcher/probe_commands.h"

#include <fmt/format.h>

#include <sstream>

namespace tfmpi::launcher {

namespace {

std::vector<std::string> Start(const ProbeSetup& s, int np, const std::string& hosts) {
  std::vector<std::string> argv = {s.mpirun, "-np", std::to_string(np)};
  if (s.flavor == MpiFlavor::kOpenMpi) {
    if (s.is_root) argv.push_back("--allow-run-as-root");
    // Unbound: bound to core 0, probes of several hosts sharing a machine
    // (or a rank bound next to them) would measure one core's share.
    argv.insert(argv.end(), {"-H", hosts, "--bind-to", "none", "--map-by", "slot"});
  } else {
    argv.insert(argv.end(), {"-hosts", hosts});
  }
  argv.insert(argv.end(), s.mpi_args.begin(), s.mpi_args.end());
  argv.push_back(s.probe_program);
  return argv;
}

}  // namespace

std::vector<std::string> NodeProbeCommand(const ProbeSetup& s, const std::string& host) {
  std::vector<std::string> argv = Start(s, 1, host + ":1");
  argv.insert(argv.end(), {"node", "--seconds", fmt::format("{}", s.bench_seconds)});
  return argv;
}

std::vector<std::string> LinkProbeCommand(const ProbeSetup& s, const std::vector<std::string>& hosts) {
  std::string list;
  for (const std::string& h : hosts) list += (list.empty() ? "" : ",") + h + ":1";
  std::vector<std::string> argv = Start(s, static_cast<int>(hosts.size()), list);
  argv.insert(argv.end(), {"links", "--seconds", fmt::format("{}", s.link_seconds)});
  return argv;
}

std::string FailureSummary(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::string line;
  bool after_dashes = false;
  while (std::getline(in, line)) {
    const bool dashes = line.size() >= 10 && line.find_first_not_of('-') == std::string::npos;
    if (line.find_first_not_of(" \t\r") == std::string::npos || dashes) {
      after_dashes = after_dashes || dashes;
      continue;
    }
    if (after_dashes) return line.substr(0, 200);
    lines.push_back(line.substr(0, 200));
  }
  std::string tail;
  for (std::size_t i = lines.size() > 2 ? lines.size() - 2 : 0; i < lines.size(); ++i) {
    tail += (tail.empty() ? "" : "; ") + lines[i];
  }
  return tail;
}

}  // namespace tfmpi::launcher
