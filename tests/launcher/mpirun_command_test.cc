// BuildMpirunCommand for Open MPI and MPICH: placement flags, hosts,
// environment forwarding, output options, and where COMMAND goes.
#include "tfmpi/launcher/mpirun_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace tfmpi::launcher {
namespace {

using Words = std::vector<std::string>;

LaunchOptions Options(int np, Words command = {"python", "train.py"}) {
  LaunchOptions o;
  o.num_proc = np;
  o.command = std::move(command);
  o.mpirun = "/usr/bin/mpirun";
  return o;
}

bool Has(const Words& argv, const Words& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

std::string EnvValue(const MpirunCommand& cmd, const std::string& name) {
  for (const auto& [n, v] : cmd.env) {
    if (n == name) return v;
  }
  return "<unset>";
}

TEST(MpirunCommand, OpenMpiBasics) {
  const MpirunCommand cmd = BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi, {}, 8, false);
  const Words& a = cmd.argv;
  EXPECT_EQ(a.front(), "/usr/bin/mpirun");
  EXPECT_TRUE(Has(a, {"-np", "2"}));
  EXPECT_TRUE(Has(a, {"--bind-to", "none", "--map-by", "slot"}));
  EXPECT_FALSE(Has(a, {"--allow-run-as-root"}));
  EXPECT_FALSE(Has(a, {"--oversubscribe"}));
  EXPECT_FALSE(Has(a, {"--tag-output"}));
  EXPECT_TRUE(Has(a, {"-x", "TFMPI_TRANSPARENT"}));
  EXPECT_EQ(Words(a.end() - 2, a.end()), (Words{"python", "train.py"}));
  EXPECT_EQ(EnvValue(cmd, "TFMPI_TRANSPARENT"), "1");
}

TEST(MpirunCommand, OpenMpiRootAndOversubscribe) {
  EXPECT_TRUE(Has(BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi, {}, 8, true).argv, {"--allow-run-as-root"}));
  EXPECT_FALSE(Has(BuildMpirunCommand(Options(4), MpiFlavor::kOpenMpi, {}, 4, false).argv, {"--oversubscribe"}));
  EXPECT_TRUE(Has(BuildMpirunCommand(Options(5), MpiFlavor::kOpenMpi, {}, 4, false).argv, {"--oversubscribe"}));
  EXPECT_TRUE(Has(BuildMpirunCommand(Options(5), MpiFlavor::kOpenMpi, {}, 4, false).argv,
                  {"--mca", "mpi_yield_when_idle", "1"}));
  EXPECT_FALSE(Has(BuildMpirunCommand(Options(4), MpiFlavor::kOpenMpi, {}, 4, false).argv,
                   {"--mca", "mpi_yield_when_idle", "1"}));
  // With hosts, the slots the user gave decide; no oversubscription.
  LaunchOptions hosts = Options(16);
  hosts.hosts = "a:8,b:8";
  EXPECT_FALSE(Has(BuildMpirunCommand(hosts, MpiFlavor::kOpenMpi, {}, 2, false).argv, {"--oversubscribe"}));
  LaunchOptions file = Options(16);
  file.hostfile = "hosts";
  EXPECT_FALSE(Has(BuildMpirunCommand(file, MpiFlavor::kOpenMpi, {}, 2, false).argv, {"--oversubscribe"}));
}

TEST(MpirunCommand, MpichHasNoOpenMpiFlags) {
  const Words a = BuildMpirunCommand(Options(9), MpiFlavor::kMpich, {}, 2, true).argv;
  EXPECT_TRUE(Has(a, {"-np", "9"}));
  for (const char* flag : {"--allow-run-as-root", "--oversubscribe", "--bind-to", "--map-by", "-x"}) {
    EXPECT_FALSE(Has(a, {flag})) << flag;
  }
}

TEST(MpirunCommand, HostsAndHostfileSpelling) {
  LaunchOptions h = Options(4);
  h.hosts = "a:2,b:2";
  EXPECT_TRUE(Has(BuildMpirunCommand(h, MpiFlavor::kOpenMpi, {}, 8, false).argv, {"-H", "a:2,b:2"}));
  EXPECT_TRUE(Has(BuildMpirunCommand(h, MpiFlavor::kMpich, {}, 8, false).argv, {"-hosts", "a:2,b:2"}));
  LaunchOptions f = Options(4);
  f.hostfile = "my hosts";
  EXPECT_TRUE(Has(BuildMpirunCommand(f, MpiFlavor::kOpenMpi, {}, 8, false).argv, {"--hostfile", "my hosts"}));
  EXPECT_TRUE(Has(BuildMpirunCommand(f, MpiFlavor::kMpich, {}, 8, false).argv, {"-f", "my hosts"}));
}

TEST(MpirunCommand, TagOutputSpelling) {
  LaunchOptions o = Options(2);
  o.tag_output = true;
  EXPECT_TRUE(Has(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false).argv, {"--tag-output"}));
  EXPECT_TRUE(Has(BuildMpirunCommand(o, MpiFlavor::kMpich, {}, 8, false).argv, {"-prepend-rank"}));
}

TEST(MpirunCommand, VariablesSet) {
  LaunchOptions o = Options(2);
  o.site_dir = "/pkg/tfmpi/_site";
  o.seed = 7;
  o.batch_mode = "per-rank";
  o.data_sharding = "files";
  o.sync_batchnorm = true;
  o.all_ranks_output = true;
  const MpirunCommand cmd = BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {{"PYTHONPATH", "/mine"}}, 8, false);
  EXPECT_EQ(EnvValue(cmd, "TFMPI_TRANSPARENT"), "1");
  EXPECT_EQ(EnvValue(cmd, "PYTHONPATH"), "/pkg/tfmpi/_site:/mine");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_SEED"), "7");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_BATCH_MODE"), "per-rank");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_DATA_SHARDING"), "files");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_SYNC_BATCHNORM"), "1");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_ALL_RANKS_OUTPUT"), "1");
}

TEST(MpirunCommand, VerifyRunsSetTheirVariables) {
  LaunchOptions o = Options(2);
  o.verify = true;
  o.verify_dir = "/tmp/records";
  o.verify_steps = 9;
  EXPECT_EQ(EnvValue(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false), "TFMPI_VERIFY"), "<unset>");
  o.verify_run = "compare";
  const MpirunCommand cmd = BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false);
  EXPECT_EQ(EnvValue(cmd, "TFMPI_VERIFY"), "compare");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_VERIFY_DIR"), "/tmp/records");
  EXPECT_EQ(EnvValue(cmd, "TFMPI_VERIFY_STEPS"), "9");
}

TEST(MpirunCommand, NoSyncBatchnormSetsZero) {
  LaunchOptions o = Options(2);
  o.no_sync_batchnorm = true;
  EXPECT_EQ(EnvValue(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false), "TFMPI_SYNC_BATCHNORM"), "0");
}

TEST(MpirunCommand, UnsetOptionsSetNothing) {
  const MpirunCommand cmd = BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi, {}, 8, false);
  ASSERT_EQ(cmd.env.size(), 1u);  // only TFMPI_TRANSPARENT
  EXPECT_FALSE(Has(cmd.argv, {"-x", "PYTHONPATH"}));  // not set anywhere: nothing to forward
}

TEST(MpirunCommand, PythonPathPrependedOnce) {
  LaunchOptions o = Options(2);
  o.site_dir = "/s";
  EXPECT_EQ(EnvValue(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false), "PYTHONPATH"), "/s");
  EXPECT_EQ(EnvValue(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {{"PYTHONPATH", ""}}, 8, false), "PYTHONPATH"),
            "/s");
  EXPECT_EQ(EnvValue(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {{"PYTHONPATH", "/a:/s"}}, 8, false),
                     "PYTHONPATH"),
            "/a:/s");
}

const Environment kUserEnv = {
    {"TFMPI_FUSION_THRESHOLD", "1024"}, {"TFMPI_SEED", "11"}, {"PYTHONPATH", "/mine"},
    {"HOME", "/root"}, {"MY_TFMPI_X", "1"}, {"TF_USE_LEGACY_KERAS", "1"},
    {"VIRTUAL_ENV", "/venv"}, {"PATH", "/venv/bin:/usr/bin"}, {"HOSTNAME", "node1"},
    {"PWD", "/work"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"SLURM_NODEID", "0"},
    {"CUDA_VISIBLE_DEVICES", "0"}, {"SSH_CONNECTION", "x"}, {"BASH_FUNC_f%%", "() { :; }"}};

TEST(MpirunCommand, OpenMpiForwardsTheEnvironmentWithX) {
  LaunchOptions o = Options(2);
  o.site_dir = "/s";
  const Words a = BuildMpirunCommand(o, MpiFlavor::kOpenMpi, kUserEnv, 8, false).argv;
  for (const char* name : {"TFMPI_TRANSPARENT", "TFMPI_FUSION_THRESHOLD", "TFMPI_SEED", "PYTHONPATH",
                           "HOME", "MY_TFMPI_X", "TF_USE_LEGACY_KERAS", "VIRTUAL_ENV", "PATH"}) {
    EXPECT_TRUE(Has(a, {"-x", name})) << name;
  }
  for (const char* name : {"HOSTNAME", "PWD", "OMPI_COMM_WORLD_RANK", "SLURM_NODEID",
                           "CUDA_VISIBLE_DEVICES", "SSH_CONNECTION", "BASH_FUNC_f%%"}) {
    EXPECT_FALSE(Has(a, {"-x", name})) << name;
  }
  EXPECT_EQ(std::count(a.begin(), a.end(), "TFMPI_TRANSPARENT"), 1);
}

TEST(Environment, HostSpecificVariables) {
  for (const char* name : {"HOSTNAME", "SHLVL", "OLDPWD", "DISPLAY", "TMPDIR", "OMPI_MCA_btl",
                           "PMIX_RANK", "PMI_SIZE", "HYDRA_HOST_FILE", "SLURM_PROCID", "PBS_NODEFILE",
                           "SSH_AUTH_SOCK", "XDG_SESSION_ID", "ROCR_VISIBLE_DEVICES"}) {
    EXPECT_TRUE(IsHostSpecific(name)) << name;
  }
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "HOME", "TF_CPP_MIN_LOG_LEVEL",
                           "TF_USE_LEGACY_KERAS", "VIRTUAL_ENV", "DATA_DIR", "TFMPI_SEED",
                           "OMP_NUM_THREADS", "PYTHONHASHSEED", "MPIR_CVAR_ASYNC_PROGRESS",
                           "I_MPI_FABRICS"}) {
    EXPECT_FALSE(IsHostSpecific(name)) << name;
  }
}

TEST(Environment, NamesAShellCannotExportAreNotForwarded) {
  const std::set<std::string> f =
      ForwardedVariables({{"OK_1", "a"}, {"1BAD", "b"}, {"has-dash", "c"}, {"", "d"}});
  EXPECT_EQ(f, (std::set<std::string>{"OK_1"}));
}

TEST(MpirunCommand, MpichForwardsWithGenvAndValues) {
  LaunchOptions o = Options(2);
  o.site_dir = "/s";
  o.seed = 5;  // --seed wins over TFMPI_SEED from the environment
  const Words a = BuildMpirunCommand(o, MpiFlavor::kMpich, kUserEnv, 8, false).argv;
  EXPECT_TRUE(Has(a, {"-genv", "TFMPI_TRANSPARENT", "1"}));
  EXPECT_TRUE(Has(a, {"-genv", "TFMPI_FUSION_THRESHOLD", "1024"}));
  EXPECT_TRUE(Has(a, {"-genv", "TFMPI_SEED", "5"}));
  EXPECT_TRUE(Has(a, {"-genv", "PYTHONPATH", "/s:/mine"}));
  EXPECT_FALSE(Has(a, {"-genv", "HOME"}));  // the rest goes by name
}

// Hydra's default passes every variable, host-specific ones too: the rest of
// the environment is named with -genvlist (Note [Forwarding the environment]).
TEST(MpirunCommand, MpichNamesTheRestOfTheEnvironmentButNotHostSpecificVariables) {
  const Environment env = {{"HOME", "/home/u"}, {"PATH", "/bin"}, {"HOSTNAME", "node7"},
                           {"CUDA_VISIBLE_DEVICES", "1"}, {"PMI_RANK", "3"}, {"TFMPI_SEED", "5"}};
  const Words a = BuildMpirunCommand(Options(2), MpiFlavor::kMpich, env, 8, false).argv;
  EXPECT_TRUE(Has(a, {"-genvlist", "HOME,PATH"}));
  EXPECT_TRUE(Has(a, {"-genv", "TFMPI_SEED", "5"}));
  EXPECT_FALSE(Has(a, {"-genvnone"}));  // Hydra refuses two environment settings
  // Nothing left to name: no variable passes but tfmpi's own.
  const Words none = BuildMpirunCommand(Options(2), MpiFlavor::kMpich, {{"HOSTNAME", "n"}}, 8,
                                        false).argv;
  EXPECT_TRUE(Has(none, {"-genvnone"}));
  EXPECT_FALSE(Has(none, {"-genvlist"}));
  EXPECT_TRUE(Has(none, {"-genv", "TFMPI_TRANSPARENT", "1"}));  // tfmpi's own still go
}

// Hydra refuses a second environment setting: one in --mpi-args replaces ours.
TEST(MpirunCommand, MpichLeavesTheEnvironmentSettingToMpiArgs) {
  for (const char* flag : {"-genvall", "-genvnone", "-genvlist", "-envall"}) {
    LaunchOptions o = Options(2);
    o.mpi_args = {flag};
    if (std::string(flag) == "-genvlist") o.mpi_args.push_back("A,B");
    const Words a = BuildMpirunCommand(o, MpiFlavor::kMpich, kUserEnv, 8, false).argv;
    EXPECT_EQ(std::count_if(a.begin(), a.end(), [](const std::string& w) {
                return w == "-genvall" || w == "-genvnone" || w == "-genvlist" || w == "-envall";
              }), 1) << flag;
    EXPECT_TRUE(Has(a, {"-genv", "TFMPI_TRANSPARENT", "1"})) << flag;
  }
}

TEST(MpirunCommand, OutputFilename) {
  LaunchOptions o = Options(2);
  o.output_filename = "logs";
  const MpirunCommand ompi = BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false);
  EXPECT_TRUE(Has(ompi.argv, {"--output-filename", "logs"}));
  EXPECT_EQ(EnvValue(ompi, "TFMPI_ALL_RANKS_OUTPUT"), "1");
  EXPECT_TRUE(Has(BuildMpirunCommand(o, MpiFlavor::kMpich, {}, 8, false).argv,
                  {"-outfile-pattern", "logs/rank.%r.stdout", "-errfile-pattern", "logs/rank.%r.stderr"}));
}

TEST(MpirunCommand, MpiArgsThenCommandLast) {
  LaunchOptions o = Options(2, {"python", "train.py", "--epochs", "3"});
  o.mpi_args = {"--mca", "btl", "self,tcp"};
  for (MpiFlavor flavor : {MpiFlavor::kOpenMpi, MpiFlavor::kMpich}) {
    const Words a = BuildMpirunCommand(o, flavor, kUserEnv, 8, false).argv;
    EXPECT_EQ(Words(a.end() - 7, a.end()),
              (Words{"--mca", "btl", "self,tcp", "python", "train.py", "--epochs", "3"}));
  }
}

TEST(MpirunCommand, DefaultMpirunName) {
  LaunchOptions o = Options(1);
  o.mpirun.clear();
  EXPECT_EQ(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false).argv.front(), "mpirun");
}

TEST(MpirunCommand, FormatCommandLineIsPasteable) {
  LaunchOptions o = Options(2, {"python", "-c", "print('hi there')"});
  o.seed = 3;
  const std::string line = FormatCommandLine(BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false));
  EXPECT_EQ(line.rfind("TFMPI_TRANSPARENT=1 TFMPI_SEED=3 /usr/bin/mpirun -np 2 ", 0), 0u) << line;
  EXPECT_NE(line.find("python -c 'print('\\''hi there'\\'')'"), std::string::npos) << line;
}

// Note [Losing a host]: the keepalive follows TFMPI_PEER_TIMEOUT_SECONDS.
TEST(MpirunCommand, OpenMpiKeepaliveFollowsThePeerTimeout) {
  const Words defaults = {"--mca", "oob_tcp_keepalive_time", "1", "--mca",
                          "oob_tcp_keepalive_intvl", "1", "--mca", "oob_tcp_keepalive_probes", "27"};
  EXPECT_TRUE(Has(BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi, {}, 8, false).argv, defaults));
  const MpirunCommand twenty = BuildMpirunCommand(
      Options(2), MpiFlavor::kOpenMpi, {{"TFMPI_PEER_TIMEOUT_SECONDS", "20"}}, 8, false);
  EXPECT_TRUE(Has(twenty.argv, {"oob_tcp_keepalive_probes", "12"}));
  EXPECT_EQ(KeepaliveArgs({{"TFMPI_PEER_TIMEOUT_SECONDS", "junk"}}), KeepaliveArgs({}));
  EXPECT_EQ(KeepaliveArgs({{"TFMPI_PEER_TIMEOUT_SECONDS", "1"}})[8], "2");
}

TEST(MpirunCommand, NoKeepaliveWhenOffForMpichOrSetByTheUser) {
  auto mentions = [](const Words& argv) {
    return std::any_of(argv.begin(), argv.end(), [](const std::string& w) {
      return w.find("oob_tcp_keepalive") != std::string::npos;
    });
  };
  EXPECT_FALSE(mentions(BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi,
                                           {{"TFMPI_PEER_TIMEOUT_SECONDS", "0"}}, 8, false).argv));
  EXPECT_FALSE(mentions(BuildMpirunCommand(Options(2), MpiFlavor::kMpich, {}, 8, false).argv));
  LaunchOptions own = Options(2);
  own.mpi_args = {"--mca", "oob_tcp_keepalive_time", "30"};
  const Words argv = BuildMpirunCommand(own, MpiFlavor::kOpenMpi, {}, 8, false).argv;
  EXPECT_EQ(std::count(argv.begin(), argv.end(), std::string("oob_tcp_keepalive_time")), 1);
}

}  // namespace
}  // namespace tfmpi::launcher

namespace tfmpi::launcher {
namespace {

TEST(MpirunCommand, ProbeSpeedsReachTheRanks) {
  LaunchOptions o = Options(2);
  o.hosts = "a:1,b:1";
  o.probe_speeds = "1.000,0.950";
  const MpirunCommand open_mpi = BuildMpirunCommand(o, MpiFlavor::kOpenMpi, {}, 8, false);
  EXPECT_EQ(EnvValue(open_mpi, "TFMPI_PROBE_SPEEDS"), "1.000,0.950");
  EXPECT_TRUE(Has(open_mpi.argv, {"-x", "TFMPI_PROBE_SPEEDS"}));
  EXPECT_TRUE(Has(open_mpi.argv, {"-H", "a:1,b:1"}));
  const MpirunCommand mpich = BuildMpirunCommand(o, MpiFlavor::kMpich, {}, 8, false);
  EXPECT_TRUE(Has(mpich.argv, {"-genv", "TFMPI_PROBE_SPEEDS", "1.000,0.950"}));
  EXPECT_EQ(EnvValue(BuildMpirunCommand(Options(2), MpiFlavor::kOpenMpi, {}, 8, false), "TFMPI_PROBE_SPEEDS"),
            "<unset>");
}

}  // namespace
}  // namespace tfmpi::launcher
