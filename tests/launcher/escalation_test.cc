// tfmpirun's escalation timeline and exit status (launcher/escalation.h,
// Note [Stopping the job]).
#include "tfmpi/launcher/escalation.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace tfmpi::launcher {
namespace {

using Clock = Escalation::Clock;
using std::chrono::milliseconds;

TEST(Escalation, NothingToDoBeforeASignal) {
  Escalation e;
  EXPECT_FALSE(e.kill_at().has_value());
  EXPECT_FALSE(e.KillDue(Clock::now() + std::chrono::hours(1)));
  EXPECT_EQ(e.first_signal(), 0);
}

TEST(Escalation, FirstSignalIsForwardedAndKillFollowsAfterTheGrace) {
  Escalation e(milliseconds(5000));
  const Clock::time_point t0{};
  EXPECT_EQ(e.OnSignal(SIGTERM, t0), Escalation::Action::kForward);
  EXPECT_EQ(e.first_signal(), SIGTERM);
  EXPECT_FALSE(e.KillDue(t0 + milliseconds(4999)));
  EXPECT_TRUE(e.KillDue(t0 + milliseconds(5000)));
}

TEST(Escalation, SecondSignalKillsAtOnce) {
  Escalation e(milliseconds(5000));
  const Clock::time_point t0{};
  e.OnSignal(SIGINT, t0);
  EXPECT_EQ(e.OnSignal(SIGINT, t0 + milliseconds(100)), Escalation::Action::kKill);
  EXPECT_TRUE(e.KillDue(t0 + milliseconds(100)));
  EXPECT_EQ(e.first_signal(), SIGINT);
}

TEST(Escalation, DefaultGraceLeavesTimeToEndWithinTenSeconds) {
  EXPECT_LE(kKillGrace, milliseconds(6000));
}

int Exited(int code) { return (code & 0xff) << 8; }  // a wait status, as waitpid fills it
int Killed(int sig) { return sig & 0x7f; }

TEST(ExitStatus, MpirunsCodeOr128PlusItsSignal) {
  ASSERT_TRUE(WIFEXITED(Exited(3)));
  ASSERT_TRUE(WIFSIGNALED(Killed(SIGKILL)));
  EXPECT_EQ(ExitStatusFor(Exited(0), 0), 0);
  EXPECT_EQ(ExitStatusFor(Exited(3), 0), 3);
  EXPECT_EQ(ExitStatusFor(Exited(3), SIGTERM), 3);
  EXPECT_EQ(ExitStatusFor(Killed(SIGKILL), 0), 128 + SIGKILL);
  EXPECT_EQ(ExitStatusFor(Killed(SIGKILL), SIGINT), 128 + SIGKILL);
}

TEST(ExitStatus, AStoppedJobNeverReportsSuccess) {
  EXPECT_EQ(ExitStatusFor(Exited(0), SIGTERM), 128 + SIGTERM);
  EXPECT_EQ(ExitStatusFor(Exited(0), SIGINT), 128 + SIGINT);
}

}  // namespace
}  // namespace tfmpi::launcher
