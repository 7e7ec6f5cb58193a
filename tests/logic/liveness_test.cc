// Liveness decisions of the peer watchdog (planning/liveness.h, Note [Lost peers]).
#include "tfmpi/planning/liveness.h"

#include <gtest/gtest.h>

#include <set>

namespace tfmpi::planning {
namespace {

using Clock = LivenessTracker::Clock;
using std::chrono::milliseconds;

TEST(HeartbeatPeers, RingNeighbours) {
  EXPECT_TRUE(HeartbeatPeers(0, 1).empty());
  EXPECT_EQ(HeartbeatPeers(0, 2), (std::vector<int>{1}));
  EXPECT_EQ(HeartbeatPeers(1, 2), (std::vector<int>{0}));
  EXPECT_EQ(HeartbeatPeers(0, 3), (std::vector<int>{2, 1}));
  EXPECT_EQ(HeartbeatPeers(4, 5), (std::vector<int>{3, 0}));
}

TEST(HeartbeatPeers, EveryRankIsWatchedByItsNeighboursWhoWatchIt) {
  for (int size = 2; size <= 16; ++size) {
    std::vector<std::set<int>> watched_by(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r)
      for (int p : HeartbeatPeers(r, size)) watched_by[static_cast<std::size_t>(p)].insert(r);
    for (int r = 0; r < size; ++r) {
      const std::vector<int> peers = HeartbeatPeers(r, size);
      // Symmetric: a rank expects heartbeats exactly from the ranks it sends to.
      EXPECT_EQ(watched_by[static_cast<std::size_t>(r)], std::set<int>(peers.begin(), peers.end()));
      EXPECT_EQ(peers.size(), size == 2 ? 1u : 2u);
    }
  }
}

TEST(LivenessTracker, SilentAtHalfTheTimeoutThenLostOnce) {
  const Clock::time_point t0{};
  LivenessTracker t({1, 3}, 10, t0);
  t.Heard(1, t0 + milliseconds(4000));
  t.Heard(3, t0 + milliseconds(4000));
  EXPECT_EQ(t.Check(t0 + milliseconds(8000)).event, LivenessEvent::kNone);
  t.Heard(3, t0 + milliseconds(8000));
  LivenessVerdict v = t.Check(t0 + milliseconds(9100));
  EXPECT_EQ(v.event, LivenessEvent::kSilent);
  EXPECT_EQ(v.peer, 1);
  EXPECT_NEAR(v.silent_seconds, 5.1, 1e-9);
  EXPECT_EQ(t.Check(t0 + milliseconds(9200)).event, LivenessEvent::kNone);  // reported once
  t.Heard(3, t0 + milliseconds(13000));
  v = t.Check(t0 + milliseconds(14000));
  EXPECT_EQ(v.event, LivenessEvent::kLost);
  EXPECT_EQ(v.peer, 1);
  EXPECT_EQ(t.Check(t0 + milliseconds(15000)).event, LivenessEvent::kNone);
}

TEST(LivenessTracker, HearingAgainResetsTheWarning) {
  const Clock::time_point t0{};
  LivenessTracker t({0}, 4, t0);
  EXPECT_EQ(t.Check(t0 + milliseconds(2500)).event, LivenessEvent::kSilent);
  t.Heard(0, t0 + milliseconds(3000));
  EXPECT_EQ(t.Check(t0 + milliseconds(3500)).event, LivenessEvent::kNone);
  EXPECT_EQ(t.Check(t0 + milliseconds(5100)).event, LivenessEvent::kSilent);
  EXPECT_EQ(t.Check(t0 + milliseconds(7100)).event, LivenessEvent::kLost);
}

TEST(LivenessTracker, LostOutranksSilentAndEachPeerIsReported) {
  const Clock::time_point t0{};
  LivenessTracker t({2, 5}, 10, t0);
  t.Heard(5, t0 + milliseconds(4000));
  LivenessVerdict v = t.Check(t0 + milliseconds(10000));  // 2 lost, 5 silent
  EXPECT_EQ(v.event, LivenessEvent::kLost);
  EXPECT_EQ(v.peer, 2);
  v = t.Check(t0 + milliseconds(10001));
  EXPECT_EQ(v.event, LivenessEvent::kSilent);
  EXPECT_EQ(v.peer, 5);
}

TEST(LivenessTracker, ZeroTimeoutNeverReports) {
  LivenessTracker t({1}, 0, Clock::time_point{});
  EXPECT_EQ(t.Check(Clock::time_point{} + std::chrono::hours(1)).event, LivenessEvent::kNone);
}

TEST(LivenessTracker, IntervalIsATenthOfTheTimeoutBetween10msAnd1s) {
  EXPECT_EQ(LivenessTracker::Interval(45), milliseconds(1000));
  EXPECT_EQ(LivenessTracker::Interval(5), milliseconds(500));
  EXPECT_EQ(LivenessTracker::Interval(0.01), milliseconds(10));
}

}  // namespace
}  // namespace tfmpi::planning
