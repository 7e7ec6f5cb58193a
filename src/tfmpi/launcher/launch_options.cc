#include "tfmpi/launcher/launch_options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "tfmpi/launcher/cli_help.h"
#include "tfmpi/launcher/launch_error.h"
#include "tfmpi/launcher/shell_words.h"

namespace tfmpi::launcher {

namespace {

constexpr const char* kSeeHelp = "Run 'tfmpirun --help' for usage.";

// Raw values whose conversion CLI11 cannot do for us.
struct RawOptions {
  std::string mpi_flavor;
  std::string mpi_args;
  std::int64_t seed = -1;
};

std::unique_ptr<CLI::App> MakeApp(LaunchOptions* o, RawOptions* raw) {
  auto app = std::make_unique<CLI::App>();
  app->name("tfmpirun");
  ConfigureHelp(app.get());

  const char* placement = "Placement (horovodrun-compatible)";
  app->add_option("-n,--num-proc", o->num_proc, "Number of ranks (processes) to start; required")
      ->type_name("N")->group(placement);
  auto* hosts = app->add_option("-H,--hosts", o->hosts,
                                "Hosts and their slots, e.g. node1:4,node2:4\n(Open MPI -H, MPICH -hosts)")
                    ->option_text("HOST:SLOTS,...")->group(placement);
  app->add_option("--hostfile", o->hostfile,
                  "Host file, checked, then passed to mpirun as is: Open MPI\n"
                  "--hostfile (lines 'host slots=N'), MPICH -f (lines 'host:N')")
      ->option_text("FILE")->excludes(hosts)->group(placement);
  const char* aware = "Choosing hosts";
  app->add_option("--placement", o->placement,
                  "default: MPI's own mapping over the given hosts. aware:\n"
                  "probe every host (speed, quota, load, memory, GPUs, links),\n"
                  "run on the best N slots only, print the table and the\n"
                  "decision, set TFMPI_PROBE_SPEEDS (docs/placement.md)")
      ->option_text("default|aware")->check(CLI::IsMember({"default", "aware"}))->group(aware);
  app->add_option("--probe-json", o->probe_json, "With --placement aware: also write the probes and\nthe decision as JSON to FILE")
      ->option_text("FILE")->group(aware);
  app->add_option("--probe-timeout", o->probe_timeout,
                  "With --placement aware: a host whose probe takes longer\nis left out (default 20)")
      ->option_text("SECONDS")->check(CLI::Range(1.0, 3600.0))->group(aware);

  const char* training = "Training (sets TFMPI_* for every rank)";
  app->add_option("--batch-mode", o->batch_mode,
                  "global (default): split each batch across the ranks, the\n"
                  "1-process math; per-rank: every rank takes whole batches.\n"
                  "Sets TFMPI_BATCH_MODE")
      ->option_text("global|per-rank")->check(CLI::IsMember({"global", "per-rank"}))->group(training);
  app->add_option("--data-sharding", o->data_sharding,
                  "elements (default): each rank decodes only the samples of\n"
                  "its slices, the 1-process math; files: each rank reads only\n"
                  "its files (record readers), batches change composition.\n"
                  "Sets TFMPI_DATA_SHARDING (docs/transparent.md)")
      ->option_text("elements|files")->check(CLI::IsMember({"elements", "files"}))->group(training);
  CLI::Option* sync_bn =
      app->add_flag("--sync-batchnorm", o->sync_batchnorm,
                    "BatchNormalization moments over the global batch, the\n"
                    "1-process math (the default). Sets TFMPI_SYNC_BATCHNORM=1")
          ->group(training);
  app->add_flag("--no-sync-batchnorm", o->no_sync_batchnorm,
                "BatchNormalization moments over each rank's slice, as\n"
                "other frameworks do: not the 1-process run. Sets\n"
                "TFMPI_SYNC_BATCHNORM=0")
      ->excludes(sync_bn)->group(training);
  app->add_option("--seed", raw->seed,
                  "Seed shared by all ranks, 0..4294967295. Sets TFMPI_SEED;\n"
                  "default: TFMPI_SEED if set, else a random seed per launch\n"
                  "(--verbose shows it)")
      ->option_text("N")->check(CLI::Range(std::int64_t{0}, std::int64_t{UINT32_MAX}))->group(training);

  const char* proof = "Proof (docs/transparent.md, The proof kit)";
  app->add_flag("--verify", o->verify,
                "Run COMMAND as one process, then at N ranks with the same\n"
                "seed and op determinism, and print step by step how far\n"
                "the N-rank run's loss, weights and layer outputs are from\n"
                "the 1-process run's; exit status 3 where they depart")
      ->group(proof);
  app->add_option("--verify-steps", o->verify_steps,
                  "With --verify: the training steps compared (default 20)")
      ->option_text("K")->check(CLI::Range(1, 1000000))->group(proof);
  app->add_option("--verify-dir", o->verify_dir,
                  "With --verify: keep the 1-process run's records in DIR\n"
                  "(default: a temporary folder, removed afterwards)")
      ->type_name("DIR")->group(proof);

  const char* output = "Output";
  app->add_flag("--tag-output", o->tag_output,
                "Prefix each output line with its rank\n(Open MPI --tag-output, MPICH -prepend-rank)")
      ->group(output);
  app->add_flag("--all-ranks-output", o->all_ranks_output,
                "Ranks other than 0 print too (by default they are quiet);\n"
                "implies --tag-output. Sets TFMPI_ALL_RANKS_OUTPUT=1")
      ->group(output);
  app->add_option("--output-filename", o->output_filename,
                  "Each rank's stdout and stderr go to files under DIR\n"
                  "(Open MPI --output-filename; MPICH DIR/rank.N.stdout).\n"
                  "Sets TFMPI_ALL_RANKS_OUTPUT=1")
      ->type_name("DIR")->group(output);
  app->add_flag("--verbose", o->verbose, "Print the MPI flavour, the seed and the mpirun command line\nbefore launching")
      ->group(output);

  const char* mpi = "MPI";
  app->add_option("--mpirun", o->mpirun, "mpirun to run (default: mpirun on PATH)")
      ->type_name("PATH")->group(mpi);
  app->add_option("--mpi-flavor", raw->mpi_flavor,
                  "Skip detecting the MPI from `mpirun --version`")
      ->option_text("openmpi|mpich")->check(CLI::IsMember({"openmpi", "mpich"}))->group(mpi);
  app->add_option("--mpi-args", raw->mpi_args,
                  "Extra mpirun arguments, split as a shell would and placed\njust before COMMAND")
      ->type_name("\"ARGS\"")->group(mpi);
  app->add_flag("--dry-run", o->dry_run, "Print the mpirun command line (with the variables it sets)\nand exit 0 without launching")
      ->group(mpi);

  app->add_option("--tfmpi-site-dir", o->site_dir, "Folder of tfmpi's start-up hook (set by the shim)")
      ->group("");  // hidden
  app->set_version_flag("--version", std::string("tfmpirun (tfmpi) ") + TFMPI_VERSION_STRING);
  return app;
}

bool TakesValue(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  return opt != nullptr && opt->get_expected_min() > 0 && opt->get_type_size_min() > 0;
}

// See Note [Where COMMAND starts]. Returns the index of COMMAND's first word in
// `args` (args.size() when there is none); rewrites -np in args[0, index).
std::size_t SplitAtCommand(const CLI::App& app, std::vector<std::string>* args, bool* dashdash) {
  std::vector<std::string>& a = *args;
  *dashdash = false;
  for (std::size_t i = 0; i < a.size();) {
    std::string& word = a[i];
    if (word == "--") {
      *dashdash = true;
      return i;
    }
    if (word.size() < 2 || word[0] != '-') return i;  // COMMAND (a lone "-" too)
    if (word == "-np") word = "--num-proc";
    if (word.rfind("-np=", 0) == 0) word = "--num-proc=" + word.substr(4);
    const bool inline_value = word.find('=') != std::string::npos || (word[1] != '-' && word.size() > 2);
    const std::string name = word.substr(0, word.find('='));
    i += (!inline_value && TakesValue(app, name)) ? 2 : 1;
  }
  return a.size();
}

}  // namespace

ParseResult ParseArgs(const std::vector<std::string>& args_in) {
  ParseResult result;
  LaunchOptions& o = result.options;
  RawOptions raw;
  std::unique_ptr<CLI::App> app = MakeApp(&o, &raw);

  std::vector<std::string> args = args_in;
  bool dashdash = false;
  const std::size_t split = SplitAtCommand(*app, &args, &dashdash);
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(split + (dashdash ? 1 : 0)), args.end());
  std::vector<std::string> ours(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(split));
  std::reverse(ours.begin(), ours.end());  // CLI11 takes a vector in reverse order

  auto fail = [&result](std::string message) {
    result.exit = true;
    result.exit_code = kExitUsage;
    result.message = std::move(message);
    return result;
  };
  try {
    app->parse(ours);
  } catch (const CLI::CallForHelp&) {
    result.exit = true;
    result.message = app->help();
    return result;
  } catch (const CLI::CallForVersion& e) {
    result.exit = true;
    result.message = std::string(e.what()) + "\n";
    return result;
  } catch (const CLI::ParseError& e) {
    return fail(fmt::format("{}\n{}", e.what(), kSeeHelp));
  }

  if (app->count("--num-proc") == 0) {
    return fail(fmt::format("-np N is required: the number of ranks to start.\n{}", kSeeHelp));
  }
  if (o.num_proc < 1) {
    return fail(fmt::format("-np must be at least 1 (got {}).\n{}", o.num_proc, kSeeHelp));
  }
  if (o.command.empty()) {
    return fail(fmt::format("no COMMAND given: what should each rank run? e.g. "
                            "tfmpirun -np {} python train.py\n{}", o.num_proc, kSeeHelp));
  }
  const bool aware = o.placement == "aware";
  if (aware && o.hosts.empty() && o.hostfile.empty()) {
    return fail(fmt::format("--placement aware needs a pool of hosts to choose from: "
                            "--hostfile FILE or -H HOST:SLOTS,...\n{}", kSeeHelp));
  }
  if (!aware && (app->count("--probe-json") > 0 || app->count("--probe-timeout") > 0)) {
    return fail(fmt::format("--probe-json and --probe-timeout go with --placement aware\n{}", kSeeHelp));
  }
  if (!o.verify && (app->count("--verify-steps") > 0 || app->count("--verify-dir") > 0)) {
    return fail(fmt::format("--verify-steps and --verify-dir go with --verify\n{}", kSeeHelp));
  }
  if (o.verify && o.num_proc < 2) {
    return fail(fmt::format("--verify compares N ranks with one process: give -np 2 or more\n{}",
                            kSeeHelp));
  }
  if (o.data_sharding == "files" && o.batch_mode == "per-rank") {
    return fail(fmt::format("--data-sharding files works with global batches (the default batch mode), "
                            "not with --batch-mode per-rank\n{}", kSeeHelp));
  }
  if (raw.seed >= 0) o.seed = static_cast<std::uint32_t>(raw.seed);
  if (!raw.mpi_flavor.empty()) o.mpi_flavor = ParseMpiFlavor(raw.mpi_flavor);
  if (!raw.mpi_args.empty()) {
    std::string error;
    auto words = SplitShellWords(raw.mpi_args, &error);
    if (!words) return fail(fmt::format("--mpi-args \"{}\": {}", raw.mpi_args, error));
    o.mpi_args = std::move(*words);
  }
  if (o.all_ranks_output) o.tag_output = true;
  return result;
}

ParseResult ParseArgs(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return ParseArgs(args);
}

}  // namespace tfmpi::launcher
