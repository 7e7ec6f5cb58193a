// Coordinator: rank 0's table of partly reported tensors, the order decisions
// come out in, and the stall report naming the missing ranks.
#include "tfmpi/engine/coordinator.h"

#include <gtest/gtest.h>

#include "tfmpi/common/enforce.h"
#include "contains.h"

namespace tfmpi {
namespace {

using testing::Contains;


TensorMeta Meta(const std::string& name, Shape shape = {3}) {
  TensorMeta m;
  m.name = name;
  m.shape = std::move(shape);
  return m;
}

std::vector<std::string> Names(const std::vector<Response>& rs) {
  std::vector<std::string> out;
  for (const Response& r : rs) out.push_back(r.meta.name);
  return out;
}

TEST(Coordinator, DecidesOnlyOnceEveryRankReported) {
  Coordinator c(3);
  const Clock::time_point t = Clock::now();
  c.Ingest(0, {Meta("a"), Meta("b")}, t);
  c.Ingest(2, {Meta("a")}, t);
  EXPECT_TRUE(c.TakeDecided().empty());
  EXPECT_EQ(c.pending(), 2u);
  c.Ingest(1, {Meta("a")}, t);
  EXPECT_EQ(Names(c.TakeDecided()), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(c.TakeDecided().empty()) << "decisions are taken once";
  EXPECT_EQ(c.pending(), 1u);
}

TEST(Coordinator, DecisionsComeOutInCompletionOrder) {
  Coordinator c(2);
  const Clock::time_point t = Clock::now();
  c.Ingest(0, {Meta("z"), Meta("y"), Meta("x")}, t);
  c.Ingest(1, {Meta("x"), Meta("z"), Meta("y")}, t);
  EXPECT_EQ(Names(c.TakeDecided()), (std::vector<std::string>{"x", "z", "y"}));
}

TEST(Coordinator, SingleRankDecidesImmediately) {
  Coordinator c(1);
  c.Ingest(0, {Meta("a"), Meta("b")}, Clock::now());
  EXPECT_EQ(Names(c.TakeDecided()), (std::vector<std::string>{"a", "b"}));
}

TEST(Coordinator, DisagreementBecomesAnErrorDecision) {
  Coordinator c(2);
  c.Ingest(0, {Meta("a", {3})}, Clock::now());
  c.Ingest(1, {Meta("a", {4})}, Clock::now());
  const auto decided = c.TakeDecided();
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_FALSE(decided[0].ok());
  EXPECT_TRUE(Contains(decided[0].error, {"rank 0 has [3]", "rank 1 has [4]"}));
}

TEST(Coordinator, ANameCanBeReportedAgainAfterItsDecision) {
  Coordinator c(2);
  for (int round = 0; round < 3; ++round) {
    c.Ingest(1, {Meta("a")}, Clock::now());
    c.Ingest(0, {Meta("a")}, Clock::now());
    EXPECT_EQ(Names(c.TakeDecided()), (std::vector<std::string>{"a"}));
  }
}

TEST(Coordinator, DuplicateReportFromOneRankIsAnEnforceError) {
  Coordinator c(3);
  c.Ingest(1, {Meta("a")}, Clock::now());
  EXPECT_THROW(c.Ingest(1, {Meta("a")}, Clock::now()), EnforceError);
}

TEST(Coordinator, StallNamesWhoSubmittedAndWhoIsMissingOnce) {
  Coordinator c(4);
  const Clock::time_point t0 = Clock::now();
  c.Ingest(0, {Meta("grad")}, t0);
  c.Ingest(2, {Meta("grad")}, t0);
  EXPECT_TRUE(c.NewStalls(t0 + std::chrono::seconds(5), std::chrono::seconds(10)).empty());
  const auto stalls = c.NewStalls(t0 + std::chrono::seconds(11), std::chrono::seconds(10));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_TRUE(Contains(stalls[0], {"'grad'", "ranks 0, 2", "ranks 1, 3",
                                   "allreduce(sum) float32[3]"}));
  EXPECT_TRUE(c.NewStalls(t0 + std::chrono::seconds(60), std::chrono::seconds(10)).empty())
      << "reported once";
}

// A rank that has reported nothing since the start is likely still starting
// (a slow host importing TensorFlow), not one whose program took another branch.
TEST(Coordinator, StallNamesAMissingRankThatNeverReportedAsPerhapsStillStarting) {
  Coordinator c(4);
  const Clock::time_point t0 = Clock::now();
  const auto after = std::chrono::seconds(10);
  c.Ingest(1, {Meta("warmup")}, t0);  // rank 1 has run collectives, rank 2 has not
  c.Ingest(0, {Meta("bcast")}, t0);
  c.Ingest(3, {Meta("bcast")}, t0);
  c.Ingest(1, {}, t0);  // an empty report says nothing about the rank's start
  c.Ingest(2, {}, t0);
  const auto stalls = c.NewStalls(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(stalls.size(), 2u);  // bcast (missing ranks 1, 2), warmup (missing 0, 2, 3)
  EXPECT_TRUE(Contains(stalls[0], {"'bcast'", "for ranks 1, 2",
                                   "rank 1 is waiting on other collectives: check that every rank",
                                   "rank 2 has not submitted any collective yet",
                                   "still starting"}));
  EXPECT_TRUE(Contains(stalls[1], {"'warmup'", "for ranks 0, 2, 3; ranks 0, 3 are waiting on other",
                                   "; rank 2 has not submitted any collective yet"}));

  Coordinator only_starting(2);
  only_starting.Ingest(0, {Meta("bcast")}, t0);
  const auto one = only_starting.NewStalls(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(Contains(one[0], {"for rank 1;", "rank 1 has not submitted any collective yet"}));
  EXPECT_EQ(one[0].find("check that every rank submits"), std::string::npos)
      << "a rank still starting has taken no branch yet: " << one[0];
}

// A missing rank that has run collectives and has none pending is busy outside
// them (a slow host computing, a long first trace): named as such, not as a
// rank that took another branch.
TEST(Coordinator, StallNamesAMissingRankWithNothingPendingAsBusy) {
  Coordinator c(3);
  const Clock::time_point t0 = Clock::now();
  const auto after = std::chrono::seconds(10);
  for (int r = 0; r < 3; ++r) c.Ingest(r, {Meta("step1")}, t0);  // every rank ran step 1
  ASSERT_EQ(c.TakeDecided().size(), 1u);
  c.Ingest(0, {Meta("step2")}, t0);  // rank 2 is still computing step 2
  c.Ingest(1, {Meta("step2")}, t0);
  const auto stalls = c.NewStalls(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_TRUE(Contains(stalls[0], {"'step2'", "for rank 2;", "rank 2 has no collective pending",
                                   "still busy before it"}));
  EXPECT_EQ(stalls[0].find("check that every rank submits"), std::string::npos) << stalls[0];
  EXPECT_EQ(stalls[0].find("still starting"), std::string::npos) << stalls[0];

  // The negotiator looks for stalls after a round's reports and before it takes
  // the decisions: a tensor completed in that round is neither a stall nor
  // something its ranks wait on.
  Coordinator d(2);
  d.Ingest(0, {Meta("late")}, t0);
  d.Ingest(0, {Meta("step")}, t0);
  d.Ingest(1, {Meta("step")}, t0 + std::chrono::seconds(11));
  const auto round = d.NewStalls(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(round.size(), 1u) << "'step' is complete";
  EXPECT_TRUE(Contains(round[0], {"'late'", "rank 1 has no collective pending"})) << round[0];
}


// At 1,000 ranks a message listing every rank would be thousands of
// characters: runs of ranks are ranges, in stall warnings and deadlock errors.
TEST(Coordinator, ManyRanksAreNamedAsRanges) {
  Coordinator c(1024);
  const Clock::time_point t0 = Clock::now();
  const auto after = std::chrono::seconds(10);
  for (int r = 0; r < 1024; ++r)
    if (r != 7 && r != 1023) c.Ingest(r, {Meta("grad")}, t0);
  c.Ingest(1023, {Meta("eval")}, t0);
  const auto stalls = c.NewStalls(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(stalls.size(), 2u);  // eval (waiting for ranks 0-1022), grad (for 7 and 1023)
  EXPECT_TRUE(Contains(stalls[1], {"'grad'", "submitted by ranks 0-6, 8-1022 has waited",
                                   "for ranks 7, 1023;", "rank 1023 is waiting on other",
                                   "rank 7 has not submitted any collective yet"}))
      << stalls[1];
  EXPECT_TRUE(Contains(stalls[0], {"'eval'", "submitted by rank 1023 has", "for ranks 0-1022;",
                                   "ranks 0-6, 8-1022 are waiting on other"}))
      << stalls[0];
  EXPECT_LT(stalls[0].size(), 800u) << stalls[0];

  c.Ingest(7, {Meta("eval")}, t0);  // now every rank waits: a deadlock
  EXPECT_TRUE(c.TakeDeadlocked(t0, after).empty());
  const auto failed = c.TakeDeadlocked(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(Names(failed), (std::vector<std::string>{"eval", "grad"}));
  EXPECT_TRUE(Contains(failed[0].error, {"submitted by ranks 7, 1023 was never submitted by "
                                         "ranks 0-6, 8-1022,"}))
      << failed[0].error;
  EXPECT_TRUE(Contains(failed[1].error, {"submitted by ranks 0-6, 8-1022 was never submitted by "
                                         "ranks 7, 1023,"}))
      << failed[1].error;
}

// Note [Deadlock]: every rank waits for a tensor the others never submit.
TEST(Coordinator, DeadlockFailsEveryWaitingTensorNamingTheMissingRanks) {
  Coordinator c(3);
  const Clock::time_point t0 = Clock::now();
  const auto after = std::chrono::seconds(10);
  c.Ingest(0, {Meta("step5/grad")}, t0);
  c.Ingest(1, {Meta("step5/grad")}, t0);
  c.Ingest(2, {Meta("eval/loss")}, t0);
  EXPECT_TRUE(c.TakeDecided().empty());
  EXPECT_TRUE(c.TakeDeadlocked(t0, after).empty());
  EXPECT_TRUE(c.TakeDeadlocked(t0 + std::chrono::seconds(9), after).empty());
  const auto failed = c.TakeDeadlocked(t0 + std::chrono::seconds(11), after);
  ASSERT_EQ(Names(failed), (std::vector<std::string>{"eval/loss", "step5/grad"}));
  EXPECT_TRUE(Contains(failed[1].error, {"'step5/grad'", "submitted by ranks 0, 1",
                                         "never submitted by rank 2", "ran different sequences"}));
  EXPECT_TRUE(Contains(failed[0].error, {"'eval/loss'", "never submitted by ranks 0, 1"}));
  EXPECT_EQ(c.pending(), 0u);
}

// A tensor completing anywhere is progress: the clock starts again.
TEST(Coordinator, ProgressRestartsTheDeadlockClock) {
  Coordinator c(2);
  const Clock::time_point t0 = Clock::now();
  const auto after = std::chrono::seconds(10);
  c.Ingest(0, {Meta("a")}, t0);
  c.Ingest(1, {Meta("b")}, t0);
  EXPECT_TRUE(c.TakeDeadlocked(t0, after).empty());
  const Clock::time_point t8 = t0 + std::chrono::seconds(8);
  c.Ingest(0, {Meta("c")}, t8);
  c.Ingest(1, {Meta("c")}, t8);
  EXPECT_EQ(Names(c.TakeDecided()), std::vector<std::string>{"c"});
  EXPECT_TRUE(c.TakeDeadlocked(t8, after).empty());
  EXPECT_TRUE(c.TakeDeadlocked(t0 + std::chrono::seconds(17), after).empty());
  EXPECT_EQ(c.TakeDeadlocked(t0 + std::chrono::seconds(19), after).size(), 2u);
}

// A rank with nothing outstanding is busy, not blocked (e.g. rank 0 writing a
// checkpoint while the others wait in a broadcast): never a deadlock.
TEST(Coordinator, ASlowRankWithNothingPendingIsNotADeadlock) {
  Coordinator c(3);
  const Clock::time_point t0 = Clock::now();
  c.Ingest(1, {Meta("bcast")}, t0);
  c.Ingest(2, {Meta("bcast")}, t0);
  for (int s = 0; s <= 3600; s += 600)
    EXPECT_TRUE(c.TakeDeadlocked(t0 + std::chrono::seconds(s), std::chrono::seconds(10)).empty());
  c.Ingest(0, {Meta("bcast")}, t0 + std::chrono::seconds(3600));
  EXPECT_EQ(Names(c.TakeDecided()), std::vector<std::string>{"bcast"});
}

// Ranks that submit in different orders complete once each has submitted all.
TEST(Coordinator, DifferentSubmissionOrdersAreNotADeadlock) {
  Coordinator c(2);
  const Clock::time_point t0 = Clock::now();
  c.Ingest(0, {Meta("x")}, t0);
  c.Ingest(1, {Meta("y")}, t0);
  EXPECT_TRUE(c.TakeDeadlocked(t0, std::chrono::seconds(10)).empty());
  c.Ingest(0, {Meta("y")}, t0 + std::chrono::seconds(1));
  c.Ingest(1, {Meta("x")}, t0 + std::chrono::seconds(1));
  EXPECT_EQ(c.TakeDecided().size(), 2u);
  EXPECT_TRUE(c.TakeDeadlocked(t0 + std::chrono::seconds(30), std::chrono::seconds(10)).empty());
  EXPECT_EQ(c.pending(), 0u);
}


// A rank that stops with an error: what it reported can no longer complete.
TEST(Coordinator, WithdrawnReportsNeverComplete) {
  Coordinator c(3);
  const Clock::time_point t0 = Clock::now();
  c.Ingest(1, {Meta("p"), Meta("q")}, t0);
  c.Ingest(2, {Meta("q")}, t0);
  c.Withdraw(1);
  EXPECT_EQ(c.pending(), 1u) << "'p' had only rank 1's report";
  c.Ingest(0, {Meta("p"), Meta("q")}, t0);
  c.Ingest(2, {Meta("p")}, t0);
  EXPECT_TRUE(c.TakeDecided().empty()) << "neither is complete without rank 1";
  c.Ingest(1, {Meta("q")}, t0);  // reported again after the withdrawal: counts
  EXPECT_EQ(Names(c.TakeDecided()), std::vector<std::string>{"q"});
}

}  // namespace
}  // namespace tfmpi
