// Work-share planning (planning/shares.h, Note [Work shares]).
#include "tfmpi/planning/shares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

namespace tfmpi::planning {
namespace {

std::int64_t Sum(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

TEST(Shares, EqualSpeedsSplitEvenlyLikeTheDefaultSplit) {
  const std::vector<double> f = ShareFractions({2.0, 2.0, 2.0, 2.0});
  for (double x : f) EXPECT_DOUBLE_EQ(x, 0.25);
  EXPECT_EQ(SliceSizes(f, 64), (std::vector<std::int64_t>{16, 16, 16, 16}));
  EXPECT_EQ(Sum(SliceSizes(f, 7)), 7);
}

TEST(Shares, OneSlowRankGetsLess) {
  const std::vector<double> f = ShareFractions({1.0, 1.0, 1.0, 0.25});
  const std::vector<std::int64_t> sizes = SliceSizes(f, 130);
  EXPECT_EQ(Sum(sizes), 130);
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{40, 40, 40, 10}));
}

TEST(Shares, SlicesPartitionEveryBatchSizeInOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(0.0, 3.0);
  for (int n = 1; n <= 16; ++n) {
    std::vector<double> speeds(n);
    for (double& s : speeds) s = speed(rng);
    const std::vector<double> f = ShareFractions(speeds);
    for (std::int64_t b = 0; b <= 100; ++b) {
      const std::vector<std::int64_t> bounds = SliceBounds(f, b);
      ASSERT_EQ(bounds.size(), static_cast<std::size_t>(n + 1));
      EXPECT_EQ(bounds.front(), 0);
      EXPECT_EQ(bounds.back(), b);
      // Where every share is worth 1.5 rows or more no slice is empty, nothing is
      // moved, and each slice is within one row of its share.
      bool roomy = true;
      for (int i = 0; i < n; ++i) roomy = roomy && b * f[i] >= 1.5;
      for (int i = 0; i < n; ++i) {
        EXPECT_LE(bounds[i], bounds[i + 1]);
        if (b >= n) {
          EXPECT_GE(bounds[i + 1] - bounds[i], 1) << "n=" << n << " b=" << b;
        }
        if (roomy) {
          EXPECT_LT(std::abs(static_cast<double>(bounds[i + 1] - bounds[i]) - b * f[i]), 1.0 + 1e-9)
              << "n=" << n << " b=" << b << " rank " << i;
        }
      }
    }
  }
}

TEST(Shares, CutsAreCumulativeAndEndAtExactlyOne) {
  const std::vector<double> c = Cuts({0.1, 0.2, 0.3, 0.4});
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c.front(), 0.0);
  EXPECT_EQ(c.back(), 1.0);  // not 0.1 + 0.2 + 0.3 + 0.4 rounded: the last slice ends at b
  EXPECT_DOUBLE_EQ(c[2], 0.3);
  // The bounds are floor(b * c_i + 0.5) of these cuts, the formula the compiled step uses.
  EXPECT_EQ(SliceBounds({0.1, 0.2, 0.3, 0.4}, 15), (std::vector<std::int64_t>{0, 2, 5, 9, 15}));
  EXPECT_EQ(Cuts({-1.0, 2.0}), (std::vector<double>{0.0, 0.0, 1.0}));
}

TEST(Shares, BatchSmallerThanRanks) {
  const std::vector<std::int64_t> sizes = SliceSizes(ShareFractions({1, 1, 1, 1, 1}), 3);
  EXPECT_EQ(Sum(sizes), 3);
  for (std::int64_t s : sizes) EXPECT_LE(s, 1);
}

TEST(Shares, RankAtSpeedZeroGetsOneRowOfABatchOfNOrMore) {
  const std::vector<double> f = ShareFractions({1.0, 0.0, 1.0});
  EXPECT_EQ(f[1], 0.0);
  EXPECT_EQ(SliceSizes(f, 10), (std::vector<std::int64_t>{5, 1, 4}));
  // ~0 rather than 0: it still gets (almost) nothing.
  EXPECT_EQ(SliceSizes(ShareFractions({1.0, 1e-9, 1.0}), 64)[1], 1);
  // A batch smaller than N leaves some rank without a row.
  EXPECT_EQ(SliceSizes(f, 2), (std::vector<std::int64_t>{1, 0, 1}));
}

TEST(Shares, EverySliceHasARowWhenTheBatchHasNRows) {
  // Ranks 1 and 2 nearly idle; short batches of every size: every slice >= 1,
  // the slices partition the batch in order, and nothing moves where no slice was empty.
  const std::vector<double> f = ShareFractions({1.0, 0.001, 0.001, 1.0});
  for (std::int64_t b = 4; b <= 200; ++b) {
    const std::vector<std::int64_t> sizes = SliceSizes(f, b);
    EXPECT_EQ(Sum(sizes), b);
    for (std::int64_t s : sizes) EXPECT_GE(s, 1) << "b=" << b;
  }
  EXPECT_EQ(SliceBounds({0.1, 0.2, 0.3, 0.4}, 15), (std::vector<std::int64_t>{0, 2, 5, 9, 15}));
  EXPECT_EQ(SliceSizes({0.0, 0.0, 1.0}, 3), (std::vector<std::int64_t>{1, 1, 1}));
  EXPECT_EQ(SliceSizes({1.0, 0.0, 0.0}, 5), (std::vector<std::int64_t>{3, 1, 1}));
}

TEST(Shares, NoUsableSpeedMeansEqualShares) {
  for (const std::vector<double>& speeds : {std::vector<double>{0, 0}, {-1, NAN}, {INFINITY, 1}}) {
    const std::vector<double> f = ShareFractions(speeds);
    double total = 0;
    for (double x : f) total += x;
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
  EXPECT_EQ(ShareFractions({0, 0}), (std::vector<double>{0.5, 0.5}));
}

TEST(Shares, PredictedStepIsTheSlowestSlice) {
  EXPECT_DOUBLE_EQ(PredictedStepSeconds({0.5, 0.5}, 10, {1.0, 2.0}), 10.0);
  EXPECT_DOUBLE_EQ(PredictedStepSeconds(ShareFractions({1.0, 0.5}), 12, {1.0, 2.0}), 8.0);
}

TEST(Rebalancer, MovesWorkAwayFromARankThatSlowsDown) {
  Rebalancer r({0.5, 0.5}, {});
  EXPECT_FALSE(r.Observe({1.0, 1.0}, {50, 50}, 100));  // equal: nothing to gain
  // Rank 1 becomes three times slower: followed once a second window confirms it.
  EXPECT_FALSE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  EXPECT_TRUE(r.awaiting_confirmation());
  EXPECT_TRUE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  EXPECT_FALSE(r.awaiting_confirmation());
  EXPECT_GT(r.fractions()[0], 0.6);
  const double after_one = r.fractions()[1];
  // Further measurements converge towards 3:1.
  for (int i = 0; i < 10; ++i) {
    const auto sizes = SliceSizes(r.fractions(), 100);
    r.Observe({sizes[0] * 0.02, sizes[1] * 0.06}, {sizes[0], sizes[1]}, 100);
  }
  EXPECT_NEAR(r.fractions()[1], 0.25, 0.02);
  EXPECT_LE(r.fractions()[1], after_one + 1e-12);
}

TEST(Rebalancer, HysteresisIgnoresSmallDifferences) {
  Rebalancer r({0.5, 0.5}, {0.5, 0.05});
  for (int i = 0; i < 4; ++i) {  // 4% slower in every window: predicted gain < 5%
    EXPECT_FALSE(r.Observe({1.0, 1.04}, {50, 50}, 100));
    EXPECT_FALSE(r.awaiting_confirmation());
  }
  EXPECT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
  // 25% slower (a predicted gain of 11%): the same windows move work.
  EXPECT_FALSE(r.Observe({1.0, 1.25}, {50, 50}, 100));
  EXPECT_TRUE(r.Observe({1.0, 1.25}, {50, 50}, 100));
}

TEST(Rebalancer, UnmeasuredRankKeepsWorkAndSlowestRankSetsThePace) {
  Rebalancer r({0.5, 0.5, 0.0}, {1.0, 0.0});
  // Rank 2 computed nothing: assumed as fast as the slowest measured rank.
  EXPECT_FALSE(r.Observe({1.0, 2.0, 0.0}, {50, 50, 0}, 120));
  EXPECT_TRUE(r.Observe({1.0, 2.0, 0.0}, {50, 50, 0}, 120));
  EXPECT_GT(r.fractions()[2], 0.0);
  EXPECT_EQ(r.seconds_per_sample()[2], 0.0);
}

TEST(Rebalancer, SmoothingWeighsTheNewestMeasurement) {
  Rebalancer r({0.5, 0.5}, {0.5, 1.0});
  r.Observe({1.0, 1.0}, {10, 10}, 20);
  r.Observe({3.0, 1.0}, {10, 10}, 20);
  EXPECT_DOUBLE_EQ(r.seconds_per_sample()[0], 0.5 * 0.3 + 0.5 * 0.1);
}

// Note [Changes on trial]: two equally fast ranks whose step is all fixed
// cost (seconds do not grow with samples); rank 1 measures a little slower.
// The proportional model keeps proposing to give rank 1 less; each change is
// measured, does not pay, and is undone, with longer and longer holds.
TEST(Rebalancer, AChangeThatDoesNotPayIsUndone) {
  Rebalancer r({0.8, 0.2}, {0.5, 0.05, 5});
  int changes = 0;
  double least = 1.0;
  for (int i = 0; i < 60; ++i) {
    const auto sizes = SliceSizes(r.fractions(), 100);
    if (r.Observe({1.0, 1.2}, {sizes[0], sizes[1]}, 100)) ++changes;
    least = std::min(least, r.fractions()[1]);
  }
  EXPECT_GE(least, 0.15);  // no run-away: one trial step at most below 0.2
  EXPECT_NEAR(r.fractions()[1], 0.2, 1e-12);
  EXPECT_LE(changes, 8);  // trials after holds of 5, 10, 20, 40: each tried and undone
  EXPECT_GE(changes, 2);
}

TEST(Rebalancer, AHostThatSlowsDownEndsTheHold) {
  Rebalancer r({0.5, 0.5}, {0.5, 0.05, 5});
  // A trial on noise: proposed, measured no faster, undone; the hold begins.
  ASSERT_FALSE(r.Observe({1.0, 1.2}, {50, 50}, 100));
  ASSERT_TRUE(r.Observe({1.0, 1.2}, {50, 50}, 100));
  const auto tried = SliceSizes(r.fractions(), 100);
  ASSERT_TRUE(r.Observe({1.2, 1.2}, {tried[0], tried[1]}, 100));
  ASSERT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
  EXPECT_FALSE(r.Observe({1.0, 1.1}, {50, 50}, 100));  // held
  // Rank 1's host becomes busy: three times slower. The step is much slower
  // than when the hold began, so the shares follow once it is confirmed.
  EXPECT_FALSE(r.Observe({1.0, 3.3}, {50, 50}, 100));
  EXPECT_TRUE(r.Observe({1.0, 3.3}, {50, 50}, 100));
  EXPECT_GT(r.fractions()[0], 0.6);
}

TEST(Rebalancer, AChangeMeasuredWhileAHostSlowsDownIsKept) {
  Rebalancer r({0.5, 0.5}, {0.5, 0.05, 5});
  ASSERT_FALSE(r.Observe({1.0, 1.5}, {50, 50}, 100));  // rank 1 starts to slow down
  ASSERT_TRUE(r.Observe({1.0, 1.5}, {50, 50}, 100));
  const std::vector<double> tried = r.fractions();
  const auto sizes = SliceSizes(tried, 100);
  // It slowed down further while the change was on trial: the step is slower
  // than before, but not because of the change. It is kept (not undone), and
  // rank 1 may be given even less.
  r.Observe({sizes[0] * 0.02, sizes[1] * 0.05}, {sizes[0], sizes[1]}, 100);
  EXPECT_GE(r.fractions()[0], tried[0]);
}

// Note [Confirmed changes]: one window of two identical input-bound ranks
// measures rank 0 six times busier (its prefetch buffer was emptier); the
// windows around it measure them equal. Nothing moves.
TEST(Rebalancer, OneTransientWindowMovesNothing) {
  Rebalancer r({0.5, 0.5}, {});
  EXPECT_FALSE(r.Observe({0.84, 0.13}, {384, 384}, 256));
  EXPECT_TRUE(r.awaiting_confirmation());  // this window alone would move work
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(r.Observe({1.0, 1.0}, {384, 384}, 256));
    EXPECT_FALSE(r.awaiting_confirmation());
  }
  EXPECT_FALSE(r.Observe({1.0, 1.0}, {384, 384}, 256));
  EXPECT_FALSE(r.Observe({1.82, 5.84}, {1280, 1280}, 256));  // later, over a pass start
  EXPECT_FALSE(r.Observe({1.0, 1.0}, {384, 384}, 256));
  EXPECT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
}

// Note [Changes on trial]: two transient windows in a row propose a change
// on identical ranks that are input-bound (time grows with samples, plus a
// fixed cost per step). On trial the step is much slower, which could also
// be a host that became busy; but the trial window itself says the
// fractions before were better, so the change is undone.
TEST(Rebalancer, AChangeThatMakesTheStepMuchSlowerIsUndone) {
  Rebalancer r({0.5, 0.5}, {0.5, 0.05, 5});
  ASSERT_FALSE(r.Observe({0.84, 0.13}, {384, 384}, 256));
  ASSERT_TRUE(r.Observe({0.84, 0.13}, {384, 384}, 256));
  const auto sizes = SliceSizes(r.fractions(), 256);
  ASSERT_GT(sizes[1], 200);
  // 2 ms per sample and 15 ms per step on both ranks; 3 steps in the window.
  const auto busy = [](std::int64_t s) { return 3 * (0.015 + 0.002 * static_cast<double>(s)); };
  EXPECT_TRUE(r.Observe({busy(sizes[0]), busy(sizes[1])}, {3 * sizes[0], 3 * sizes[1]}, 256));
  EXPECT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
  // The hold that follows is measured against the step this window predicts
  // for the restored shares, not the transient's: an ordinary window does
  // not end it, and two more transients in a row then move nothing.
  EXPECT_FALSE(r.Observe({1.0, 1.0}, {384, 384}, 256));
  EXPECT_FALSE(r.Observe({0.84, 0.13}, {384, 384}, 256));
  EXPECT_FALSE(r.Observe({0.84, 0.13}, {384, 384}, 256));
  EXPECT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
}

TEST(Rebalancer, AChangeThatPaysIsKept) {
  Rebalancer r({0.5, 0.5}, {1.0, 0.05, 5});
  ASSERT_FALSE(r.Observe({1.0, 3.0}, {50, 50}, 100));  // rank 1 is 3x slower
  ASSERT_TRUE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  const std::vector<double> tried = r.fractions();
  const auto sizes = SliceSizes(tried, 100);
  // Measured with the new split, the step is faster: the change stays.
  r.Observe({sizes[0] * 0.02, sizes[1] * 0.06}, {sizes[0], sizes[1]}, 100);
  EXPECT_EQ(r.fractions(), tried);
}

TEST(Rebalancer, AChangeIsJudgedOnlyOnceTheSamplesFollowIt) {
  Rebalancer r({0.5, 0.5}, {1.0, 0.05, 5});
  ASSERT_FALSE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  ASSERT_TRUE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  const std::vector<double> tried = r.fractions();
  // The input pipeline still cuts with the old shares: nothing is judged yet.
  EXPECT_FALSE(r.Observe({1.0, 3.0}, {50, 50}, 100));
  EXPECT_EQ(r.fractions(), tried);
  // Then it follows, and the step is no faster (fixed cost): undone.
  const auto sizes = SliceSizes(tried, 100);
  EXPECT_TRUE(r.Observe({3.0, 3.0}, {sizes[0], sizes[1]}, 100));
  EXPECT_EQ(r.fractions(), (std::vector<double>{0.5, 0.5}));
}

}  // namespace
}  // namespace tfmpi::planning
