// ParseArgs: horovodrun-style flags, where COMMAND starts, and usage errors.
#include "tfmpi/launcher/launch_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tfmpi::launcher {
namespace {

using Words = std::vector<std::string>;

LaunchOptions Ok(const Words& args) {
  ParseResult r = ParseArgs(args);
  EXPECT_FALSE(r.exit) << r.message;
  return r.options;
}

ParseResult Exit(const Words& args) {
  ParseResult r = ParseArgs(args);
  EXPECT_TRUE(r.exit);
  return r;
}

TEST(LaunchOptions, NumProcSpellings) {
  EXPECT_EQ(Ok({"-np", "4", "python", "t.py"}).num_proc, 4);
  EXPECT_EQ(Ok({"-np=3", "python", "t.py"}).num_proc, 3);
  EXPECT_EQ(Ok({"-n", "2", "python", "t.py"}).num_proc, 2);
  EXPECT_EQ(Ok({"--num-proc", "5", "python", "t.py"}).num_proc, 5);
  EXPECT_EQ(Ok({"--num-proc=6", "python", "t.py"}).num_proc, 6);
}

TEST(LaunchOptions, ArgumentsAfterCommandAreUntouched) {
  LaunchOptions o = Ok({"-np", "2", "python", "train.py", "--epochs", "3", "-np", "5", "--verbose", "--"});
  EXPECT_EQ(o.num_proc, 2);
  EXPECT_FALSE(o.verbose);
  EXPECT_EQ(o.command, (Words{"python", "train.py", "--epochs", "3", "-np", "5", "--verbose", "--"}));
}

TEST(LaunchOptions, DoubleDashSeparatesCommand) {
  LaunchOptions o = Ok({"-np", "2", "--verbose", "--", "python", "-c", "pass"});
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.command, (Words{"python", "-c", "pass"}));
  // After `--` even a word that looks like our option belongs to COMMAND.
  EXPECT_EQ(Ok({"-np", "1", "--", "--dry-run"}).command, Words{"--dry-run"});
}

TEST(LaunchOptions, HorovodrunFlags) {
  LaunchOptions o = Ok({"-np", "8", "-H", "a:4,b:4", "--verbose", "--output-filename", "logs", "python", "t.py"});
  EXPECT_EQ(o.hosts, "a:4,b:4");
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.output_filename, "logs");
  EXPECT_EQ(Ok({"-np", "2", "--hosts=a:1,b:1", "python", "t.py"}).hosts, "a:1,b:1");
  EXPECT_EQ(Ok({"-np", "2", "--hostfile", "hosts.txt", "python", "t.py"}).hostfile, "hosts.txt");
}

TEST(LaunchOptions, InlineValues) {
  LaunchOptions o = Ok({"-Ha:1,b:1", "-np", "2", "--batch-mode=per-rank", "--seed=9", "python", "t.py"});
  EXPECT_EQ(o.hosts, "a:1,b:1");
  EXPECT_EQ(o.batch_mode, "per-rank");
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(Ok({"-np", "2", "--data-sharding=files", "python", "t.py"}).data_sharding, "files");
}

TEST(LaunchOptions, OwnOptions) {
  LaunchOptions o = Ok({"-np", "2", "--tag-output", "--batch-mode", "per-rank", "--sync-batchnorm", "--seed",
                        "42", "--mpirun", "/opt/mpi/bin/mpirun", "--mpi-flavor", "mpich", "--dry-run", "python",
                        "t.py"});
  EXPECT_TRUE(o.tag_output);
  EXPECT_FALSE(o.all_ranks_output);
  EXPECT_EQ(o.batch_mode, "per-rank");
  EXPECT_TRUE(o.sync_batchnorm);
  EXPECT_FALSE(o.no_sync_batchnorm);
  ASSERT_TRUE(o.seed.has_value());
  EXPECT_EQ(*o.seed, 42u);
  EXPECT_EQ(o.mpirun, "/opt/mpi/bin/mpirun");
  EXPECT_EQ(o.mpi_flavor, MpiFlavor::kMpich);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.command, (Words{"python", "t.py"}));
}

TEST(LaunchOptions, Verify) {
  LaunchOptions o = Ok({"-np", "3", "--verify", "--verify-steps", "7", "--verify-dir", "/tmp/v", "python", "t.py"});
  EXPECT_TRUE(o.verify);
  EXPECT_EQ(o.verify_steps, 7);
  EXPECT_EQ(o.verify_dir, "/tmp/v");
  EXPECT_TRUE(o.verify_run.empty());  // set by the launcher for each of its two runs
  EXPECT_EQ(Ok({"-np", "2", "--verify", "python", "t.py"}).verify_steps, 20);
}

TEST(LaunchOptions, Defaults) {
  LaunchOptions o = Ok({"-np", "1", "./run.sh"});
  EXPECT_FALSE(o.seed.has_value());
  EXPECT_FALSE(o.mpi_flavor.has_value());
  EXPECT_TRUE(o.batch_mode.empty());
  EXPECT_TRUE(o.data_sharding.empty());
  EXPECT_TRUE(o.mpi_args.empty());
  EXPECT_FALSE(o.tag_output);
  EXPECT_FALSE(o.dry_run);
}

TEST(LaunchOptions, AllRanksOutputImpliesTagOutput) {
  LaunchOptions o = Ok({"-np", "2", "--all-ranks-output", "python", "t.py"});
  EXPECT_TRUE(o.all_ranks_output);
  EXPECT_TRUE(o.tag_output);
}

TEST(LaunchOptions, MpiArgsAreSplitLikeAShell) {
  LaunchOptions o = Ok({"-np", "2", "--mpi-args", "-x FOO --mca btl 'self,tcp' \"a b\"", "python", "t.py"});
  EXPECT_EQ(o.mpi_args, (Words{"-x", "FOO", "--mca", "btl", "self,tcp", "a b"}));
  EXPECT_EQ(Ok({"-np", "2", "--mpi-args=--report-bindings", "python", "t.py"}).mpi_args,
            Words{"--report-bindings"});
  // A value that looks like an option is still the value, not COMMAND or an error.
  LaunchOptions dashed = Ok({"--mpi-args", "--oversubscribe", "-np", "2", "python", "t.py"});
  EXPECT_EQ(dashed.mpi_args, Words{"--oversubscribe"});
  EXPECT_EQ(dashed.command, (Words{"python", "t.py"}));
  ParseResult r = Exit({"-np", "2", "--mpi-args", "'unterminated", "python", "t.py"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.message.find("unterminated"), std::string::npos);
}

TEST(LaunchOptions, HiddenSiteDir) {
  EXPECT_EQ(Ok({"--tfmpi-site-dir", "/x/_site", "-np", "2", "python", "t.py"}).site_dir, "/x/_site");
  EXPECT_EQ(Exit({"--help"}).message.find("tfmpi-site-dir"), std::string::npos);
}

TEST(LaunchOptions, HelpDocumentsEveryOptionAndVariable) {
  ParseResult r = Exit({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"-np", "--num-proc", "--hosts", "--hostfile", "--verbose", "--output-filename",
                           "--tag-output", "--all-ranks-output", "--batch-mode", "--data-sharding", "--sync-batchnorm",
                           "--no-sync-batchnorm", "--verify", "--verify-steps", "--verify-dir", "--seed",
                           "--mpirun", "--mpi-flavor", "--mpi-args", "--dry-run", "--version", "TFMPI_TRANSPARENT",
                           "PYTHONPATH", "TFMPI_SEED", "TFMPI_BATCH_MODE", "TFMPI_DATA_SHARDING", "TFMPI_SYNC_BATCHNORM",
                           "TFMPI_ALL_RANKS_OUTPUT", "COMMAND"}) {
    EXPECT_NE(r.message.find(word), std::string::npos) << word;
  }
}

TEST(LaunchOptions, Version) {
  ParseResult r = Exit({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.message.find("tfmpirun"), std::string::npos);
}

TEST(LaunchOptions, UsageErrors) {
  struct Case {
    Words args;
    const char* expected;
  };
  const Case cases[] = {
      {{"python", "t.py"}, "-np N is required"},
      {{"-np", "0", "python", "t.py"}, "at least 1"},
      {{"-np", "-2", "python", "t.py"}, "at least 1"},
      {{"-np", "two", "python", "t.py"}, "num-proc"},
      {{"-np", "2"}, "no COMMAND"},
      {{"-np", "2", "--"}, "no COMMAND"},
      {{"-np", "2", "--bogus", "python", "t.py"}, "--bogus"},
      {{"-np", "2", "--batch-mode", "huge", "python", "t.py"}, "batch-mode"},
      {{"-np", "2", "--data-sharding", "rows", "python", "t.py"}, "data-sharding"},
      {{"-np", "2", "--data-sharding", "files", "--batch-mode", "per-rank", "python", "t.py"},
       "--data-sharding files works with global batches"},
      {{"-np", "2", "--seed", "-1", "python", "t.py"}, "seed"},
      {{"-np", "2", "--seed", "4294967296", "python", "t.py"}, "seed"},
      {{"-np", "2", "--mpi-flavor", "lam", "python", "t.py"}, "mpi-flavor"},
      {{"-np", "2", "-H", "a:1", "--hostfile", "h", "python", "t.py"}, "excludes"},
      {{"-np", "2", "--sync-batchnorm", "--no-sync-batchnorm", "python", "t.py"}, "excludes"},
      {{"-np", "1", "--verify", "python", "t.py"}, "--verify compares N ranks with one process"},
      {{"-np", "2", "--verify-steps", "5", "python", "t.py"}, "go with --verify"},
      {{"-np", "2", "--verify", "--verify-steps", "0", "python", "t.py"}, "verify-steps"},
  };
  for (const Case& c : cases) {
    ParseResult r = ParseArgs(c.args);
    EXPECT_TRUE(r.exit) << c.expected;
    EXPECT_EQ(r.exit_code, 2) << c.expected;
    EXPECT_NE(r.message.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in: " << r.message;
  }
}

TEST(LaunchOptions, ArgvEntryPointSkipsProgramName) {
  const char* argv[] = {"tfmpirun", "-np", "3", "python", "-m", "pkg"};
  ParseResult r = ParseArgs(6, argv);
  ASSERT_FALSE(r.exit) << r.message;
  EXPECT_EQ(r.options.num_proc, 3);
  EXPECT_EQ(r.options.command, (Words{"python", "-m", "pkg"}));
}

}  // namespace
}  // namespace tfmpi::launcher

namespace tfmpi::launcher {
namespace {

TEST(LaunchOptions, PlacementDefaultsAndAware) {
  const LaunchOptions plain = Ok({"-np", "2", "python", "t.py"});
  EXPECT_EQ(plain.placement, "default");
  EXPECT_DOUBLE_EQ(plain.probe_timeout, 20);
  const LaunchOptions aware = Ok({"-np", "2", "--hostfile", "pool", "--placement", "aware", "--probe-json",
                                  "p.json", "--probe-timeout", "5", "python", "t.py"});
  EXPECT_EQ(aware.placement, "aware");
  EXPECT_EQ(aware.probe_json, "p.json");
  EXPECT_DOUBLE_EQ(aware.probe_timeout, 5);
  EXPECT_EQ(Ok({"-np", "2", "-H", "a:2", "--placement=aware", "python", "t.py"}).placement, "aware");
}

TEST(LaunchOptions, PlacementUsageErrors) {
  EXPECT_NE(Exit({"-np", "2", "--placement", "aware", "python", "t.py"}).message.find("needs a pool"),
            std::string::npos);
  EXPECT_EQ(Exit({"-np", "2", "--placement", "best", "python", "t.py"}).exit_code, 2);
  EXPECT_NE(Exit({"-np", "2", "--hostfile", "h", "--probe-json", "x", "python", "t.py"})
                .message.find("go with --placement aware"),
            std::string::npos);
  EXPECT_EQ(Exit({"-np", "2", "-H", "a:2", "--placement", "aware", "--probe-timeout", "0", "python", "t.py"})
                .exit_code,
            2);
}

}  // namespace
}  // namespace tfmpi::launcher
