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

}  // namespace
}  // namespace tfmpi
