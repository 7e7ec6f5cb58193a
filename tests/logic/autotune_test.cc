// The autotune search (planning/autotune.h, Note [Autotune]) fed synthetic
// scores.
#include "tfmpi/planning/autotune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace tfmpi::planning {
namespace {

constexpr std::size_t MiB = 1u << 20;

TuningPoint Defaults() { return {262144, 1 * MiB, 64 * MiB}; }

TunerOptions AllTuned() { return DefaultTunerOptions(Defaults(), true, true, true); }

// Runs the search to the end, scoring each window with score(point, window
// index); returns the number of windows.
int RunToEnd(Tuner& t, const std::function<double(const TuningPoint&, int)>& score) {
  int windows = 0;
  while (!t.done()) {
    t.Record(score(t.current(), windows));
    ++windows;
    if (windows > 1000) {
      ADD_FAILURE() << "the search did not end";
      break;
    }
  }
  return windows;
}

// A cost with its minimum at one value per setting: the distance in octaves.
double Bowl(const TuningPoint& p) {
  return 1.0 + std::fabs(std::log2(double(p.message_elements) / 1048576)) * 0.1 +
         std::fabs(std::log2(double(p.direct_threshold) / (4 * MiB))) * 0.1 +
         std::fabs(std::log2(double(p.fusion_threshold) / (16 * MiB))) * 0.1;
}

TEST(Autotune, FindsTheMinimumOfEachSettingAndConfirmsIt) {
  Tuner t(AllTuned());
  EXPECT_EQ(t.current(), Defaults());
  EXPECT_EQ(t.phase(), "message size");
  const int windows = RunToEnd(t, [](const TuningPoint& p, int) { return Bowl(p); });
  EXPECT_EQ(t.best(), (TuningPoint{1048576, 4 * MiB, 16 * MiB}));
  EXPECT_EQ(t.current(), t.best());
  EXPECT_EQ(t.phase(), "done");
  // 5 message sizes, 4 direct and 3 fusion thresholds, 3 windows each, and
  // 3 + 3 windows of confirmation.
  EXPECT_EQ(windows, (5 + 4 + 3) * 3 + 6);
}

TEST(Autotune, EqualScoresKeepTheDefaultsWithoutConfirmation) {
  Tuner t(AllTuned());
  const int windows = RunToEnd(t, [](const TuningPoint&, int) { return 1.0; });
  EXPECT_EQ(t.best(), Defaults());
  EXPECT_EQ(windows, (5 + 4 + 3) * 3);
}

TEST(Autotune, AGainBelowTheMarginIsNotTaken) {
  Tuner t(AllTuned());
  RunToEnd(t, [](const TuningPoint& p, int) {
    return p.message_elements == 4194304 ? 0.98 : 1.0;  // 2% < min_gain (3%)
  });
  EXPECT_EQ(t.best(), Defaults());
}

TEST(Autotune, TheMedianIgnoresOneOutlierWindow) {
  Tuner t(AllTuned());
  int seen = 0;
  RunToEnd(t, [&](const TuningPoint& p, int) {
    // Every third window of 16 M elements is very fast (a fluke).
    if (p.message_elements == 16777216) return ++seen % 3 == 0 ? 0.1 : 1.0;
    return 1.0;
  });
  EXPECT_EQ(t.best(), Defaults());
}

TEST(Autotune, ConfirmationRejectsAGainThatWasOnlyDrift) {
  // The machine gets faster by 1% per window, so every later candidate looks
  // better than the baseline measured before it. Alternating windows in the
  // confirmation see only one window of drift: less than the margin.
  Tuner t(AllTuned());
  bool confirmed = false;
  RunToEnd(t, [&](const TuningPoint&, int w) {
    confirmed |= t.phase() == "confirm";
    return std::pow(0.99, w);
  });
  EXPECT_TRUE(confirmed);
  EXPECT_EQ(t.best(), Defaults());
  EXPECT_EQ(t.current(), Defaults());
}

TEST(Autotune, ACandidateFarSlowerThanItsBaselineGetsOneWindow) {
  Tuner t(AllTuned());
  const int windows = RunToEnd(t, [](const TuningPoint& p, int) {
    return p.message_elements == 16777216 ? 2.0 : 1.0;  // 2x slower: dropped after one window
  });
  EXPECT_EQ(t.best(), Defaults());
  EXPECT_EQ(windows, (5 + 4 + 3) * 3 - 2);
}

TEST(Autotune, FixedSettingsAreNotTuned) {
  Tuner none(DefaultTunerOptions(Defaults(), false, false, false));
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.current(), Defaults());
  EXPECT_FALSE(none.Record(1.0));

  Tuner fusion_only(DefaultTunerOptions(Defaults(), false, false, true));
  EXPECT_EQ(fusion_only.phase(), "fusion threshold");
  RunToEnd(fusion_only, [](const TuningPoint& p, int) {
    EXPECT_EQ(p.message_elements, 262144u);
    EXPECT_EQ(p.direct_threshold, MiB);
    return Bowl(p);
  });
  EXPECT_EQ(fusion_only.best(), (TuningPoint{262144, MiB, 16 * MiB}));
}

TEST(Autotune, AStartOutsideTheCandidatesIsMeasuredToo) {
  TunerOptions o = AllTuned();
  o.start.message_elements = 524288;  // the default at 4 ranks
  Tuner t(o);
  EXPECT_EQ(t.current().message_elements, 524288u);
  const int windows = RunToEnd(t, [](const TuningPoint&, int) { return 1.0; });
  EXPECT_EQ(windows, (6 + 4 + 3) * 3);
  EXPECT_EQ(t.best().message_elements, 524288u);
}

TEST(Autotune, RecordSaysWhenTheSettingsChange) {
  Tuner t(AllTuned());
  EXPECT_FALSE(t.Record(1.0));
  EXPECT_FALSE(t.Record(1.0));
  EXPECT_TRUE(t.Record(1.0));  // third window: the next candidate
  EXPECT_NE(t.current(), Defaults());
}

TEST(Autotune, FinishBeforeAConfirmationKeepsTheStart) {
  Tuner t(AllTuned());
  // Finish the message size dimension with 1 M elements best, then stop.
  while (t.phase() == "message size") t.Record(Bowl(t.current()));
  EXPECT_EQ(t.best().message_elements, 1048576u);
  t.Record(1.0);
  t.Finish();
  EXPECT_TRUE(t.done());
  EXPECT_EQ(t.current(), Defaults());
  EXPECT_FALSE(t.Record(0.1));
  EXPECT_EQ(t.current(), Defaults());
}

TEST(Autotune, FinishAfterACompleteConfirmationKeepsItsResult) {
  Tuner t(AllTuned());
  RunToEnd(t, [](const TuningPoint& p, int) { return Bowl(p); });
  const TuningPoint kept = t.best();
  EXPECT_NE(kept, Defaults());
  t.Finish();
  EXPECT_EQ(t.current(), kept);
}

TEST(Autotune, FinishDuringTheConfirmationKeepsTheStart) {
  Tuner t(AllTuned());
  while (t.phase() != "confirm") t.Record(Bowl(t.current()));
  t.Record(2.0);  // the start point, once
  t.Record(1.0);  // the new point, faster, but once
  t.Finish();
  EXPECT_EQ(t.current(), Defaults());
}

FusionItem Sum(std::size_t bytes) {
  return {CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, bytes, false};
}

TEST(SamePlan, NothingSeenIsNeverTheSame) {
  EXPECT_FALSE(SamePlan({}, Defaults(), Defaults()));
}

TEST(SamePlan, SmallTensorsRunTheSameCallsUnderEveryCandidate) {
  const std::vector<std::vector<FusionItem>> cycles = {{Sum(400), Sum(4000), Sum(40)}};
  const TunerOptions o = AllTuned();
  for (std::size_t m : o.message_elements)
    for (std::size_t d : o.direct_thresholds)
      for (std::size_t f : o.fusion_thresholds)
        EXPECT_TRUE(SamePlan(cycles, Defaults(), {m, d, f})) << Describe({m, d, f});
}

TEST(SamePlan, MessageSizesDifferOnlyWhereACollectiveIsLongerThanTheShorter) {
  // 300,000 float32 elements, direct (1.2 MB >= 1 MiB).
  const std::vector<std::vector<FusionItem>> cycles = {{Sum(400), Sum(1200000)}};
  EXPECT_FALSE(SamePlan(cycles, {262144, MiB, 64 * MiB}, {1048576, MiB, 64 * MiB}));
  EXPECT_TRUE(SamePlan(cycles, {1048576, MiB, 64 * MiB}, {4194304, MiB, 64 * MiB}));
  // An allgather's length is not known from one rank's items.
  const std::vector<std::vector<FusionItem>> gather = {
      {{CollectiveKind::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 40, false}}};
  EXPECT_FALSE(SamePlan(gather, {1048576, MiB, 64 * MiB}, {4194304, MiB, 64 * MiB}));
  EXPECT_TRUE(SamePlan(gather, {1048576, MiB, 64 * MiB}, {1048576, 4 * MiB, 64 * MiB}));
  // Broadcasts are chunked by bytes: 1 MiB of float32 is 1,048,576 units.
  const std::vector<std::vector<FusionItem>> bcast = {
      {{CollectiveKind::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, MiB, false}}};
  EXPECT_FALSE(SamePlan(bcast, {262144, MiB, 64 * MiB}, {1048576, MiB, 64 * MiB}));
  EXPECT_TRUE(SamePlan(bcast, {1048576, MiB, 64 * MiB}, {4194304, MiB, 64 * MiB}));
}

TEST(SamePlan, ThresholdsDifferWhereTheyRegroupATensor) {
  const std::vector<std::vector<FusionItem>> cycles = {{Sum(400), Sum(2 * MiB), Sum(3 * MiB)}};
  // 1 MiB: both big ones direct; 4 MiB: both fused (5 MiB + 400 B in one 64 MiB buffer).
  EXPECT_FALSE(SamePlan(cycles, {1u << 30, MiB, 64 * MiB}, {1u << 30, 4 * MiB, 64 * MiB}));
  EXPECT_TRUE(SamePlan(cycles, {1u << 30, 4 * MiB, 64 * MiB}, {1u << 30, 16 * MiB, 64 * MiB}));
  // Fusion 4 MiB splits that bucket in two; 16 MiB does not.
  EXPECT_FALSE(SamePlan(cycles, {1u << 30, 4 * MiB, 64 * MiB}, {1u << 30, 4 * MiB, 4 * MiB}));
  EXPECT_TRUE(SamePlan(cycles, {1u << 30, 4 * MiB, 64 * MiB}, {1u << 30, 4 * MiB, 16 * MiB}));
  // A group of one runs in place either way (the 2 MiB tensor alone, direct or
  // not); a second cycle where they differ is enough.
  const std::vector<std::vector<FusionItem>> two = {{Sum(2 * MiB)}, {Sum(400), Sum(2 * MiB)}};
  EXPECT_TRUE(SamePlan({two[0]}, {1u << 30, MiB, 64 * MiB}, {1u << 30, 4 * MiB, 64 * MiB}));
  EXPECT_FALSE(SamePlan(two, {1u << 30, MiB, 64 * MiB}, {1u << 30, 4 * MiB, 64 * MiB}));
}

TEST(Autotune, CandidatesWithTheSamePlanAreNotMeasured) {
  // A 400 B and a 1.2 MB (300,000 float32 elements) tensor: every message
  // size differs from the start (262144 elements chunk the big one); direct
  // thresholds of 4 and 16 MiB fuse the two, 256 KiB runs them as 1 MiB does;
  // no fusion threshold splits 400 B.
  const std::vector<std::vector<FusionItem>> cycles = {{Sum(400), Sum(1200000)}};
  TunerOptions o = AllTuned();
  o.same_plan = [&](const TuningPoint& a, const TuningPoint& b) { return SamePlan(cycles, a, b); };
  Tuner t(o);
  EXPECT_EQ(t.phase(), "message size");
  const int windows = RunToEnd(t, [](const TuningPoint& p, int) {
    return p.message_elements >= 1048576 ? 0.5 : 1.0;
  });
  // Measured: 5 message sizes, the direct baseline, 4 and 16 MiB (3 windows
  // each), then the confirmation (6); skipped: 256 KiB direct, both fusion
  // candidates.
  EXPECT_EQ(t.best().message_elements, 1048576u);
  EXPECT_EQ(windows, (5 + 3) * 3 + 6);
  EXPECT_EQ(t.skipped(), 3);
}

TEST(Autotune, NothingToMeasureWhenEveryCandidateIsTheSame) {
  const std::vector<std::vector<FusionItem>> cycles = {{Sum(400), Sum(40)}};
  TunerOptions o = AllTuned();
  o.same_plan = [&](const TuningPoint& a, const TuningPoint& b) { return SamePlan(cycles, a, b); };
  Tuner t(o);
  EXPECT_TRUE(t.done());
  EXPECT_EQ(t.current(), Defaults());
  EXPECT_EQ(t.skipped(), 4 + 3 + 2);
}

TEST(Autotune, DescribesAPoint) {
  EXPECT_EQ(Describe(Defaults()), "message 262144 elements, direct 1 MiB, fusion 64 MiB");
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 2, 3}), 2.5);
}

}  // namespace
}  // namespace tfmpi::planning
