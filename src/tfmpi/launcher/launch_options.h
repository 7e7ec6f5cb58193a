// Command-line options of tfmpirun and their parsing (CLI11).
//
// Note [Where COMMAND starts]
// Everything after the first word that is not an option of ours (or after a
// bare `--`) is COMMAND with its arguments, passed to mpirun untouched:
// `tfmpirun -np 2 python train.py --epochs 3 -np 5` gives -np 2 to us and
// `--epochs 3 -np 5` to train.py. SplitAtCommand finds that word by asking the
// CLI11 app which of our options take a value. horovodrun's `-np` (a
// single-dash long name, which CLI11 cannot declare) is rewritten to
// `--num-proc` in the launcher's part only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfmpi/launcher/mpi_flavor.h"

namespace tfmpi::launcher {

struct LaunchOptions {
  int num_proc = 0;                   // -np / -n / --num-proc
  std::string hosts;                  // -H / --hosts "host:slots,..."
  std::string hostfile;               // --hostfile FILE
  std::string placement = "default";  // --placement default|aware (docs/placement.md)
  std::string probe_json;             // --probe-json FILE (aware placement)
  double probe_timeout = 20;          // --probe-timeout SECONDS (aware placement)
  std::string probe_speeds;           // set by aware placement: TFMPI_PROBE_SPEEDS
  bool verbose = false;               // --verbose
  std::string output_filename;        // --output-filename DIR
  bool tag_output = false;            // --tag-output (also implied by --all-ranks-output)
  bool all_ranks_output = false;      // --all-ranks-output
  std::string batch_mode;             // --batch-mode global|per-rank; empty: not given
  std::string data_sharding;          // --data-sharding elements|files; empty: not given
  bool sync_batchnorm = false;        // --sync-batchnorm (the default, said explicitly)
  bool no_sync_batchnorm = false;     // --no-sync-batchnorm
  std::optional<std::uint32_t> seed;  // --seed N; main() fills in a random one
  std::string mpirun;                 // --mpirun PATH; empty: `mpirun` on PATH
  std::optional<MpiFlavor> mpi_flavor;  // --mpi-flavor; empty: detect
  std::vector<std::string> mpi_args;  // --mpi-args "...", split like a shell
  bool dry_run = false;               // --dry-run
  bool verify = false;                // --verify: a 1-process run, then N ranks compared with it
  int verify_steps = 20;              // --verify-steps K
  std::string verify_dir;             // --verify-dir DIR; empty: a temporary folder
  std::string verify_run;             // set for each of the two runs: "reference" or "compare"
  std::string site_dir;               // --tfmpi-site-dir (hidden; set by the Python shim)
  std::vector<std::string> command;   // COMMAND ARGS...
};

// What ParseArgs decided: launch with `options`, or exit with `exit_code`
// after printing `message` (to stdout for --help/--version, else stderr).
struct ParseResult {
  bool exit = false;
  int exit_code = 0;
  std::string message;
  LaunchOptions options;
};

// Pure: parses argv (argv[0] is the program name) and checks what can be
// checked without the file system: -np >= 1, a COMMAND, --mpi-args quoting,
// a host pool for --placement aware.
ParseResult ParseArgs(int argc, const char* const* argv);
ParseResult ParseArgs(const std::vector<std::string>& args);  // args without argv[0]

}  // namespace tfmpi::launcher
