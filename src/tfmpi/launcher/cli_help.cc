#include "tfmpi/launcher/cli_help.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace tfmpi::launcher {

namespace {

constexpr const char* kDescription =
    "tfmpirun: run an unchanged TensorFlow/Keras training script data-parallel on N MPI ranks.\n"
    "It checks COMMAND, then runs mpirun (Open MPI or MPICH, detected from `mpirun --version`)\n"
    "with the environment that turns on tfmpi's transparent mode, and waits for it. Its exit\n"
    "status is mpirun's: that of the first rank that failed.";

constexpr const char* kFooter = R"(Environment set for every rank (forwarded with -x by Open MPI, -genv by MPICH):
  TFMPI_TRANSPARENT=1       turns on transparent mode in each Python rank
  PYTHONPATH                tfmpi's start-up hook folder (sitecustomize) is put first
  TFMPI_SEED                --seed, else TFMPI_SEED from the environment, else a random seed
  TFMPI_BATCH_MODE          --batch-mode
  TFMPI_DATA_SHARDING       --data-sharding
  TFMPI_SYNC_BATCHNORM      --sync-batchnorm (1), --no-sync-batchnorm (0)
  TFMPI_ALL_RANKS_OUTPUT=1  --all-ranks-output, --output-filename
  TFMPI_PROBE_SPEEDS        --placement aware: each rank's probed speed relative to the
                            fastest chosen rank, comma-separated in rank order
  TFMPI_VERIFY, TFMPI_VERIFY_DIR, TFMPI_VERIFY_STEPS
                            --verify: which of its two runs, where the records are, K
The rest of the environment reaches every rank on every host too, as on the launching host
(a remote shell would start the ranks with a clean one): every variable except those that
describe this host or session (HOSTNAME, PWD, SHLVL, TMPDIR, SSH_*, DISPLAY, GPU visibility
such as CUDA_VISIBLE_DEVICES) and those of MPI and batch schedulers (OMPI_*, PMIX_*, PMI_*,
HYDRA_*, SLURM_*, PBS_*, LSB_*, ...), which each rank gets from its own launcher. Open MPI:
-x NAME for each; MPICH: -genvlist NAME,... (Hydra's default would pass them all), unless
--mpi-args has its own -genvall, -genvnone or -genvlist.

Flags added for Open MPI: --bind-to none --map-by slot (TensorFlow runs its own thread pools;
ranks that share a host split its cores between them and a rank keeps to a cgroup CPU quota
below its CPUs, TFMPI_THREADS=auto|off, and
TFMPI_BIND_CORES=1 binds each to its own CPUs), --allow-run-as-root when run as root, --oversubscribe when N exceeds the local cores and no
hosts are given; TCP keepalive between mpirun and its daemons (oob_tcp_keepalive_*: a host
whose link is down is given up after 0.6 x TFMPI_PEER_TIMEOUT_SECONDS, default 45) unless
--mpi-args sets it.

Signals: SIGINT, SIGTERM and SIGHUP are passed on to mpirun; 5 s later (or on a second signal)
mpirun and its process group get SIGKILL, so the job ends within 10 s even when a host is lost.

Host pools: --hostfile and -H are checked before anything starts: malformed lines (named
by file:line), hosts listed twice, slots < 1, and -np above the pool's slots (unless
--mpi-args has --oversubscribe) are errors. --placement aware probes every host of the
pool at once through mpirun (tfmpi-probe: cores, cgroup CPU quota, load, memory, GPUs, a
0.5 s compute benchmark, then MPI latency and bandwidth from the first host), leaves out
hosts that do not answer within --probe-timeout, prints a table of hosts, measurements,
scores and the decision on stderr, and runs mpirun with -H on the best N slots only
(ranks fill the chosen hosts slot by slot, in pool order). See docs/placement.md.

COMMAND: must be found on PATH (or be a path to an executable); a name is run by the path it
has here (Open MPI puts its own bin folder first on the ranks' PATH, where a bare `python`
could be another interpreter), so every host needs it at that path. When it is python, python3 or
python3.X, the script must exist (-m MODULE and -c CODE are fine), and -S, -I and -E are
refused: they stop Python from loading the start-up hook, so transparent mode cannot turn on.
A COMMAND that is not Python (e.g. a shell script that runs python) gets the same environment.
Everything after COMMAND is passed to it untouched.

Exit status: mpirun's (128 + N if it was killed by signal N); 2 for a usage error; 127 when mpirun or COMMAND is not found.

Examples:
  tfmpirun -np 4 python train.py --epochs 10
  tfmpirun -np 8 -H node1:4,node2:4 --batch-mode per-rank python train.py
  tfmpirun -np 4 --hostfile pool --placement aware --probe-json probe.json python train.py
  tfmpirun -np 2 --dry-run -- python -m mypackage.train)";

class Formatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (opt->check_lname("num-proc")) return "-np, -n, --num-proc";
    return CLI::Formatter::make_option_name(opt, is_positional);
  }
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: tfmpirun -np N [-H HOST:SLOTS,... | --hostfile FILE] [OPTIONS] [--] COMMAND [ARGS...]\n";
  }
};

}  // namespace

void ConfigureHelp(CLI::App* app) {
  app->description(kDescription);
  app->footer(kFooter);
  auto formatter = std::make_shared<Formatter>();
  formatter->column_width(30);
  app->formatter(formatter);
}

}  // namespace tfmpi::launcher
