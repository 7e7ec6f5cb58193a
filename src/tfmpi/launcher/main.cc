// tfmpirun: checks the launch, then runs mpirun and watches it. Everything that decides
// something lives in the pure parts (launch_options, command_check,
// mpirun_command); this file only reads the process's surroundings and acts.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tfmpi/launcher/aware_placement.h"
#include "tfmpi/launcher/command_check.h"
#include "tfmpi/launcher/hostfile.h"
#include "tfmpi/launcher/launch_error.h"
#include "tfmpi/launcher/launch_options.h"
#include "tfmpi/launcher/local_cores.h"
#include "tfmpi/launcher/mpi_flavor.h"
#include "tfmpi/launcher/mpirun_command.h"
#include "tfmpi/launcher/supervisor.h"

extern char** environ;

namespace tfmpi::launcher {
namespace {

constexpr int kExitMpiUnknown = 1;
constexpr int kExitDeparts = 3;  // verify.EXIT_DEPARTS

int Fail(const LaunchError& error) {
  std::fprintf(stderr, "tfmpirun: %s\n", error.message.c_str());
  return error.exit_code;
}

Environment CurrentEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::optional<std::string> ResolveMpirun(const std::string& requested, const std::string& path_env,
                                         const FileSystem& fs, LaunchError* error) {
  std::optional<std::string> found = FindExecutable(requested.empty() ? "mpirun" : requested, path_env, fs);
  if (!found && requested.empty()) found = FindExecutable("mpiexec", path_env, fs);
  if (!found) {
    const std::string what = requested.empty() ? "no mpirun or mpiexec on PATH"
                                               : fmt::format("--mpirun {} is not an executable file", requested);
    *error = {kExitNotFound, fmt::format("mpirun not found ({}): install Open MPI (openmpi-bin) or "
                                         "MPICH, or pass --mpirun PATH", what)};
  }
  return found;
}

// The pool from --hostfile or -H, validated (Note [Hostfile syntax]).
std::optional<HostPool> ReadPool(const LaunchOptions& o, LaunchError* error) {
  if (!o.hosts.empty()) return ParseHostList(o.hosts, error);
  std::ifstream in(o.hostfile);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    *error = {kExitUsage, fmt::format("cannot read host file {}", o.hostfile)};
    return std::nullopt;
  }
  return ParseHostfile(text.str(), o.hostfile, error);
}

bool AsksToOversubscribe(const std::vector<std::string>& mpi_args) {
  for (const std::string& a : mpi_args) {
    if (a == "--oversubscribe" || a == "-oversubscribe") return true;
  }
  return false;
}

// tfmpi-probe, installed next to this program.
std::string ProbeProgram() {
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "tfmpi-probe").string();
}

// The folder holding tfmpi's sitecustomize.py: --tfmpi-site-dir, else
// <package>/_site next to the installed <package>/bin/tfmpirun.
std::string ResolveSiteDir(const std::string& requested) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = requested;
  if (dir.empty()) dir = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "_site";
  if (fs::is_regular_file(dir / "sitecustomize.py", ec)) return fs::absolute(dir, ec).string();
  std::fprintf(stderr,
               "tfmpirun: warning: tfmpi's start-up hook was not found%s; ranks get "
               "TFMPI_TRANSPARENT=1 but Python will not turn transparent mode on by itself. "
               "Run the tfmpirun that pip installs with tfmpi.\n",
               requested.empty() ? "" : fmt::format(" in {}", requested).c_str());
  return {};
}

// Builds mpirun's command for `o` and runs it (or prints it, --dry-run).
int RunJob(const LaunchOptions& o, const Environment& env) {
  const MpirunCommand cmd = BuildMpirunCommand(o, *o.mpi_flavor, env, CountLocalCores(), ::geteuid() == 0);
  const std::string line = FormatCommandLine(cmd);
  if (o.verbose) std::fprintf(stderr, "tfmpirun: %s\n", line.c_str());
  if (o.dry_run) {
    std::printf("%s\n", line.c_str());
    return 0;
  }
  for (const auto& [name, value] : cmd.env) ::setenv(name.c_str(), value.c_str(), 1);
  std::string start_error;
  const int status = SuperviseMpirun(cmd.argv, &start_error);  // Note [Stopping the job]
  if (status < 0) return Fail({kExitNotFound, start_error});
  return status;
}

// The exit status of a --verify run whose jobs ended normally: 0 where the
// ranks' training matched the 1-process run, kExitDeparts where it departed
// (rank 0's verdict.json says; rank 0 printed where).
int VerdictStatus(const std::string& dir, int ranks) {
  std::ifstream in(std::filesystem::path(dir) / "verdict.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && text.empty()) {
    std::fprintf(stderr, "tfmpirun --verify: no verdict in %s: rank 0 ran on another host without a "
                 "shared filesystem (its lines above are the verdict), or the script ended before "
                 "tfmpi could compare\n", dir.c_str());
    return kExitDeparts;
  }
  if (text.find("\"status\": 0") != std::string::npos) return 0;
  std::fprintf(stderr, "tfmpirun --verify: the run at %d ranks departs from the 1-process run (rank 0 "
               "says where, above)\n", ranks);
  return kExitDeparts;
}

// Note [Proof runs] (python/tfmpi/transparent/verify.py): COMMAND as one
// process (on the first slot of the hosts, where rank 0 of the second run
// starts, so that rank 0 finds the first run's records without a shared
// filesystem), then at -np N; rank 0 of the second compares and says.
int Verify(LaunchOptions o, const Environment& env) {
  namespace fs = std::filesystem;
  const bool temporary = o.verify_dir.empty();
  if (temporary) {
    const auto tmp = env.find("TMPDIR");
    std::string pattern = (tmp != env.end() && !tmp->second.empty() ? tmp->second : "/tmp");
    pattern += "/tfmpi-verify-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Fail({kExitUsage, fmt::format("--verify: cannot make a folder {}: {}", pattern,
                                           std::strerror(errno))});
    }
    o.verify_dir = pattern;
  } else {
    std::error_code ec;
    fs::create_directories(o.verify_dir, ec);
    o.verify_dir = fs::absolute(o.verify_dir, ec).string();
    if (ec) return Fail({kExitUsage, fmt::format("--verify-dir {}: {}", o.verify_dir, ec.message())});
  }
  const int ranks = o.num_proc;
  LaunchOptions one = o;
  one.num_proc = 1;
  one.verify_run = "reference";
  if (!o.dry_run) {
    std::fprintf(stderr, "tfmpirun --verify: the 1-process run, %d training steps (records in %s)\n",
                 o.verify_steps, o.verify_dir.c_str());
  }
  int status = RunJob(one, env);
  if (status == 0) {
    if (!o.dry_run) std::fprintf(stderr, "tfmpirun --verify: the run at %d ranks, compared step by step\n", ranks);
    o.verify_run = "compare";
    status = RunJob(o, env);
    if (status == 0 && !o.dry_run) status = VerdictStatus(o.verify_dir, ranks);

  } else {
    std::fprintf(stderr, "tfmpirun --verify: the 1-process run failed (exit status %d): nothing to compare\n",
                 status);
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(o.verify_dir, ec);
  }
  return status;
}

int Main(int argc, char** argv) {
  ParseResult parsed = ParseArgs(argc, argv);
  if (parsed.exit) {
    if (parsed.exit_code == 0) {
      std::fputs(parsed.message.c_str(), stdout);
      return 0;
    }
    return Fail({parsed.exit_code, parsed.message});
  }
  LaunchOptions o = std::move(parsed.options);
  const Environment env = CurrentEnvironment();
  const auto path_it = env.find("PATH");
  const std::string path_env = path_it != env.end() ? path_it->second : "/usr/local/bin:/usr/bin:/bin";
  const FileSystem fs = RealFileSystem();

  if (auto error = CheckLaunch(o, path_env, fs)) return Fail(*error);
  std::optional<HostPool> pool;
  LaunchError pool_error;
  if (!o.hosts.empty() || !o.hostfile.empty()) {
    pool = ReadPool(o, &pool_error);
    if (!pool) return Fail(pool_error);
    // Aware placement checks -np against the usable slots once it has probed.
    const std::string what = o.hosts.empty() ? o.hostfile : "-H";
    if (o.placement != "aware") {
      if (auto e = CheckPoolSize(*pool, o.num_proc, AsksToOversubscribe(o.mpi_args), what)) return Fail(*e);
    }
  }
  // Open MPI started by its full path puts its own bin folder first on the
  // ranks' PATH, so a bare `python` there can be another interpreter (the
  // system one, not the user's virtualenv / pyenv one). The command runs by the
  // path it has here instead; the hosts must have it at the same path.
  o.command.front() = ResolveCommand(o.command.front(), path_env, fs);
  LaunchError error;
  const std::optional<std::string> mpirun = ResolveMpirun(o.mpirun, path_env, fs, &error);
  if (!mpirun) return Fail(error);
  o.mpirun = *mpirun;

  if (!o.mpi_flavor) {
    const std::string version = ReadMpirunVersion(o.mpirun);
    o.mpi_flavor = DetectFlavor(version);
    if (!o.mpi_flavor) {
      return Fail({kExitMpiUnknown,
                   fmt::format("cannot tell which MPI {} belongs to; `{} --version` printed:\n{}\n"
                               "Pass --mpi-flavor openmpi or --mpi-flavor mpich.",
                               o.mpirun, o.mpirun, version.substr(0, 400))});
    }
  }
  const char* seed_source = "--seed";
  if (!o.seed && env.count("TFMPI_SEED") != 0) {
    seed_source = "TFMPI_SEED from the environment";
  } else if (!o.seed) {
    std::random_device device;
    o.seed = std::uniform_int_distribution<std::uint32_t>(0, 0x7fffffff)(device);
    seed_source = "picked for this launch";
  }
  o.site_dir = ResolveSiteDir(o.site_dir);
  if (o.placement == "aware") {
    ProbeSetup setup{o.mpirun, *o.mpi_flavor, ::geteuid() == 0, o.mpi_args, ProbeProgram()};
    if (!fs.is_executable(setup.probe_program)) {
      return Fail({kExitNotFound, fmt::format("--placement aware: the probe program {} is missing; "
                                              "reinstall tfmpi", setup.probe_program)});
    }
    const auto placement = PlaceAware(*pool, o.num_proc, setup, o.probe_timeout, o.probe_json, &error);
    if (!placement) return Fail(error);
    o.hostfile.clear();
    o.hosts = placement->hosts;
    o.probe_speeds = placement->probe_speeds;
  }

  if (o.verbose) {
    const std::string seed = o.seed ? std::to_string(*o.seed) : env.at("TFMPI_SEED");
    std::fprintf(stderr, "tfmpirun: MPI: %s (%s)\ntfmpirun: seed: %s (%s)\n", MpiFlavorName(*o.mpi_flavor),
                 o.mpirun.c_str(), seed.c_str(), seed_source);
  }
  if (!o.output_filename.empty() && *o.mpi_flavor == MpiFlavor::kMpich && !o.dry_run) {
    std::error_code ec;  // Hydra does not create the folder of -outfile-pattern
    std::filesystem::create_directories(o.output_filename, ec);
  }
  if (o.verify) return Verify(o, env);
  return RunJob(o, env);
}

}  // namespace
}  // namespace tfmpi::launcher

int main(int argc, char** argv) { return tfmpi::launcher::Main(argc, argv); }
