#include "tfmpi/launcher/mpirun_command.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "tfmpi/launcher/shell_words.h"

namespace tfmpi::launcher {

namespace {

// PYTHONPATH with `site_dir` first (unchanged if it is already on it).
std::string PrependPath(const std::string& site_dir, const Environment& env) {
  auto found = env.find("PYTHONPATH");
  if (found == env.end() || found->second.empty()) return site_dir;
  const std::string padded = ":" + found->second + ":";
  if (padded.find(":" + site_dir + ":") != std::string::npos) return found->second;
  return site_dir + ":" + found->second;
}

// Variables tfmpirun sets, in a fixed order.
std::vector<std::pair<std::string, std::string>> VariablesToSet(const LaunchOptions& o,
                                                                 const Environment& env) {
  std::vector<std::pair<std::string, std::string>> vars;
  vars.emplace_back("TFMPI_TRANSPARENT", "1");
  if (!o.site_dir.empty()) vars.emplace_back("PYTHONPATH", PrependPath(o.site_dir, env));
  if (o.seed) vars.emplace_back("TFMPI_SEED", std::to_string(*o.seed));
  if (!o.batch_mode.empty()) vars.emplace_back("TFMPI_BATCH_MODE", o.batch_mode);
  if (!o.data_sharding.empty()) vars.emplace_back("TFMPI_DATA_SHARDING", o.data_sharding);
  if (o.sync_batchnorm) vars.emplace_back("TFMPI_SYNC_BATCHNORM", "1");
  if (o.no_sync_batchnorm) vars.emplace_back("TFMPI_SYNC_BATCHNORM", "0");
  if (!o.probe_speeds.empty()) vars.emplace_back("TFMPI_PROBE_SPEEDS", o.probe_speeds);
  if (!o.verify_run.empty()) {
    vars.emplace_back("TFMPI_VERIFY", o.verify_run);
    vars.emplace_back("TFMPI_VERIFY_DIR", o.verify_dir);
    vars.emplace_back("TFMPI_VERIFY_STEPS", std::to_string(o.verify_steps));
  }
  if (o.all_ranks_output || !o.output_filename.empty()) {
    vars.emplace_back("TFMPI_ALL_RANKS_OUTPUT", "1");
  }
  return vars;
}

void Append(std::vector<std::string>* argv, std::initializer_list<std::string> words) {
  argv->insert(argv->end(), words);
}

// Hydra refuses two environment settings (-genvall, -genvnone, -genvlist; the
// -env* ones decide per executable): one in --mpi-args is the user's choice.
bool SetsHydraEnvironment(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const char* flag : {"-genvall", "-genvnone", "-genvlist", "-envall", "-envnone", "-envlist"})
      if (a == flag) return true;
  return false;
}

bool MentionsKeepalive(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a.find("oob_tcp_keepalive") != std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<std::string> KeepaliveArgs(const Environment& env) {
  double timeout = 45;
  auto found = env.find("TFMPI_PEER_TIMEOUT_SECONDS");
  if (found != env.end()) {
    char* end = nullptr;
    const double v = std::strtod(found->second.c_str(), &end);
    if (end != found->second.c_str() && *end == '\0' && std::isfinite(v) && v >= 0) timeout = v;
  }
  if (timeout <= 0) return {};
  const long probes = std::max(2L, std::lround(std::ceil(0.6 * timeout)));
  return {"--mca", "oob_tcp_keepalive_time", "1", "--mca", "oob_tcp_keepalive_intvl", "1",
          "--mca", "oob_tcp_keepalive_probes", std::to_string(probes)};
}

MpirunCommand BuildMpirunCommand(const LaunchOptions& o, MpiFlavor flavor,
                                 const Environment& env_in, int local_cores, bool is_root) {
  MpirunCommand cmd;
  cmd.env = VariablesToSet(o, env_in);
  Environment final_env = env_in;
  for (const auto& [name, value] : cmd.env) final_env[name] = value;

  // See Note [Forwarding the environment] (environment.h).
  const std::set<std::string> forwarded = ForwardedVariables(final_env);

  std::vector<std::string>& argv = cmd.argv;
  argv.push_back(o.mpirun.empty() ? "mpirun" : o.mpirun);
  Append(&argv, {"-np", std::to_string(o.num_proc)});
  const bool has_hosts = !o.hosts.empty() || !o.hostfile.empty();
  if (flavor == MpiFlavor::kOpenMpi) {
    if (is_root) argv.push_back("--allow-run-as-root");
    if (!o.hosts.empty()) Append(&argv, {"-H", o.hosts});
    if (!o.hostfile.empty()) Append(&argv, {"--hostfile", o.hostfile});
    // See Note [Open MPI placement flags].
    if (!has_hosts && o.num_proc > local_cores) {
      // More ranks than cores: ranks waiting in MPI must yield the core
      // instead of spinning, or they starve the ranks that compute.
      argv.push_back("--oversubscribe");
      Append(&argv, {"--mca", "mpi_yield_when_idle", "1"});
    }
    Append(&argv, {"--bind-to", "none", "--map-by", "slot"});
    if (!MentionsKeepalive(o.mpi_args)) {  // Note [Losing a host]
      const std::vector<std::string> keepalive = KeepaliveArgs(final_env);
      argv.insert(argv.end(), keepalive.begin(), keepalive.end());
    }
    if (o.tag_output) argv.push_back("--tag-output");
    if (!o.output_filename.empty()) Append(&argv, {"--output-filename", o.output_filename});
    for (const std::string& name : forwarded) Append(&argv, {"-x", name});
  } else {
    if (!o.hosts.empty()) Append(&argv, {"-hosts", o.hosts});
    if (!o.hostfile.empty()) Append(&argv, {"-f", o.hostfile});
    if (o.tag_output) argv.push_back("-prepend-rank");
    if (!o.output_filename.empty()) {
      Append(&argv, {"-outfile-pattern", o.output_filename + "/rank.%r.stdout",
                     "-errfile-pattern", o.output_filename + "/rank.%r.stderr"});
    }
    // tfmpi's own variables with their values, the rest by name: -genvlist
    // also stops Hydra passing the host-specific ones, which it would by
    // default (Note [Forwarding the environment]).
    std::string names;
    for (const std::string& name : forwarded) {
      if (name.rfind("TFMPI_", 0) == 0 || name == "PYTHONPATH") {
        Append(&argv, {"-genv", name, final_env[name]});
      } else {
        names += (names.empty() ? "" : ",") + name;
      }
    }
    // Names hold no comma (ForwardedVariables keeps [A-Za-z0-9_] names only);
    // a setting of the user's own in --mpi-args decides instead.
    if (!SetsHydraEnvironment(o.mpi_args)) {
      if (names.empty()) {
        argv.push_back("-genvnone");
      } else {
        Append(&argv, {"-genvlist", names});
      }
    }
  }
  argv.insert(argv.end(), o.mpi_args.begin(), o.mpi_args.end());
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return cmd;
}

std::string FormatCommandLine(const MpirunCommand& command) {
  std::string line;
  for (const auto& [name, value] : command.env) line += name + "=" + ShellQuote(value) + " ";
  for (std::size_t i = 0; i < command.argv.size(); ++i) {
    if (i > 0) line += ' ';
    line += ShellQuote(command.argv[i]);
  }
  return line;
}

}  // namespace tfmpi::launcher
