// The probe command lines (Note [Probing through mpirun]) and what a failed
// probe's output says.
#include "tfmpi/launcher/probe_commands.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tfmpi::launcher {
namespace {

using Words = std::vector<std::string>;

bool Has(const Words& argv, const Words& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

ProbeSetup ProbeSetupFor(MpiFlavor flavor) {
  ProbeSetup s;
  s.mpirun = "/usr/bin/mpirun";
  s.flavor = flavor;
  s.is_root = true;
  s.mpi_args = {"--mca", "btl", "tcp,self"};
  s.probe_program = "/opt/tfmpi/bin/tfmpi-probe";
  return s;
}

TEST(ProbeCommands, OpenMpiNodeProbe) {
  const Words a = NodeProbeCommand(ProbeSetupFor(MpiFlavor::kOpenMpi), "node2");
  EXPECT_EQ(a.front(), "/usr/bin/mpirun");
  EXPECT_TRUE(Has(a, {"-np", "1"}));
  EXPECT_TRUE(Has(a, {"-H", "node2:1"}));
  EXPECT_TRUE(Has(a, {"--allow-run-as-root"}));
  EXPECT_TRUE(Has(a, {"--bind-to", "none"}));
  EXPECT_TRUE(Has(a, {"--mca", "btl", "tcp,self", "/opt/tfmpi/bin/tfmpi-probe", "node", "--seconds", "0.5"}));
}

TEST(ProbeCommands, LinkProbeOneRankPerHost) {
  const Words a = LinkProbeCommand(ProbeSetupFor(MpiFlavor::kOpenMpi), {"a", "b", "c"});
  EXPECT_TRUE(Has(a, {"-np", "3"}));
  EXPECT_TRUE(Has(a, {"-H", "a:1,b:1,c:1"}));
  EXPECT_TRUE(Has(a, {"links", "--seconds", "1"}));
}

TEST(ProbeCommands, MpichSpelling) {
  const Words a = LinkProbeCommand(ProbeSetupFor(MpiFlavor::kMpich), {"a", "b"});
  EXPECT_TRUE(Has(a, {"-hosts", "a:1,b:1"}));
  EXPECT_FALSE(Has(a, {"--allow-run-as-root"}));
  EXPECT_FALSE(Has(a, {"--bind-to", "none"}));
}

TEST(ProbeCommands, FailureSummary) {
  EXPECT_EQ(FailureSummary("one\n\ntwo\nthree\n  \n"), "two; three");
  EXPECT_EQ(FailureSummary(""), "");
  EXPECT_EQ(FailureSummary("-----------------\nORTE was unable to start daemons.\nThis usually...\n"),
            "ORTE was unable to start daemons.");
}

}  // namespace
}  // namespace tfmpi::launcher
