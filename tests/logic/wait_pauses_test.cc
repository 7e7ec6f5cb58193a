// The schedule of pauses while a collective waits for a late peer
// (Note [Pauses that follow the wait], planning/wait_pauses.h).
#include "tfmpi/planning/wait_pauses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tfmpi::planning {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// The pauses a rank sleeps through while waiting `total` for a peer.
std::vector<microseconds> PausesOver(microseconds total) {
  std::vector<microseconds> pauses;
  microseconds waited = WaitPauses::kSpin, pause = WaitPauses::kFirstPause;
  while (waited < total) {
    pauses.push_back(pause);
    waited += pause;
    pause = WaitPauses::Next(pause, waited);
  }
  return pauses;
}

TEST(WaitPauses, DoubleFromTheFirstPauseUpToTheShortWaitCap) {
  EXPECT_EQ(WaitPauses::Next(microseconds{10}, microseconds{70}), microseconds{20});
  EXPECT_EQ(WaitPauses::Next(microseconds{20}, microseconds{90}), microseconds{40});
  EXPECT_EQ(WaitPauses::Next(microseconds{40}, microseconds{130}), microseconds{50});
  EXPECT_EQ(WaitPauses::Next(microseconds{50}, microseconds{180}), microseconds{50});
}

TEST(WaitPauses, GrowWithTheTimeWaited) {
  // after 2 ms a pause may be 2 ms / 16; after 8 ms, 8 ms / 16
  EXPECT_EQ(WaitPauses::Next(microseconds{100}, milliseconds{2}), microseconds{125});
  EXPECT_EQ(WaitPauses::Next(microseconds{400}, milliseconds{8}), microseconds{500});
}

TEST(WaitPauses, NeverExceedTheMaximum) {
  EXPECT_EQ(WaitPauses::Next(WaitPauses::kMaxPause, std::chrono::seconds{30}),
            WaitPauses::kMaxPause);
  for (microseconds p : PausesOver(std::chrono::seconds{2})) EXPECT_LE(p, WaitPauses::kMaxPause);
}

TEST(WaitPauses, NeverShrinkAndNeverGoBelowTheFirstPause) {
  EXPECT_EQ(WaitPauses::Next(microseconds{0}, microseconds{0}), WaitPauses::kFirstPause);
  const std::vector<microseconds> pauses = PausesOver(std::chrono::seconds{1});
  for (std::size_t i = 1; i < pauses.size(); ++i) EXPECT_GE(pauses[i], pauses[i - 1]);
}

TEST(WaitPauses, ALatePeerIsSeenSoonAfterItArrives) {
  // The latency a pause adds (the peer spins through it) stays within the
  // short-wait cap or a sixteenth of the time waited before it, whichever is larger.
  microseconds waited = WaitPauses::kSpin;
  for (microseconds p : PausesOver(std::chrono::seconds{1})) {
    EXPECT_LE(p, std::max(WaitPauses::kShortWaitPause, waited / WaitPauses::kWaitFraction))
        << "after " << waited.count() << " us";
    waited += p;
  }
}

TEST(WaitPauses, ALongWaitWakesTheRankRarely) {
  // 40 ms of waiting (a peer's step far behind): each wakeup costs a context
  // switch, so there are few, and far fewer than with a fixed 50 us pause
  const std::size_t wakeups = PausesOver(milliseconds{40}).size();
  EXPECT_LT(wakeups, 100u);
  EXPECT_GT(wakeups, 10u);
  // a wait of seconds wakes it at most 1,000 times a second once the pauses are full
  EXPECT_LT(PausesOver(std::chrono::seconds{10}).size(), 10'300u);
}

}  // namespace
}  // namespace tfmpi::planning
