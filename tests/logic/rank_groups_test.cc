// The wording shared by every message that names ranks (planning/rank_groups.h):
// runs of ranks as ranges, ranks grouped by what they said, and why a rank's
// collectives fail after other ranks left (Note [Ranks that stop early]).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tfmpi/planning/rank_groups.h"

namespace tfmpi {
namespace {

using planning::PeerLeftMessage;

TEST(RankList, RunsOfThreeOrMoreAreRanges) {
  EXPECT_EQ(planning::RankList({}), "");
  EXPECT_EQ(planning::RankList({4}), "4");
  EXPECT_EQ(planning::RankList({0, 1}), "0, 1");
  EXPECT_EQ(planning::RankList({0, 1, 2, 5, 7, 8, 9, 10, 12}), "0-2, 5, 7-10, 12");
  EXPECT_EQ(planning::RankPhrase({4}), "rank 4");
  EXPECT_EQ(planning::RankPhrase({0, 1, 2, 3}), "ranks 0-3");
}

TEST(RankGroups, GroupsInOrderOfFirstAppearance) {
  EXPECT_EQ(planning::RankGroups({"a", "a", "a"}), "");
  EXPECT_EQ(planning::RankGroups({"b", "a", "b", "b"}), "ranks 0, 2, 3 have b; rank 1 has a");
  EXPECT_EQ(planning::RankGroups({"x", "y"}, {3, 7}), "rank 3 has x; rank 7 has y");
}

TEST(PeerLeftMessage, NamesTheRankAndTheErrorItGave) {
  EXPECT_EQ(PeerLeftMessage(0, "'w'", {{3, "ValueError: bad batch"}}),
            "rank 3 stopped with an error: ValueError: bad batch. Rank 0 was still waiting for "
            "'w', which can't complete without it.");
}

// A failure every rank hits alike (out of memory, a missing file) is said once
// for all of them, not once per rank: at 1,000 ranks that was a message of
// thousands of lines' worth on every surviving rank.
TEST(PeerLeftMessage, RanksThatGaveTheSameErrorAreOneGroup) {
  std::map<int, std::string> leavers;
  for (int r = 1; r < 1000; ++r) leavers[r] = r == 500 ? "OSError: disk full" : "MemoryError";
  EXPECT_EQ(PeerLeftMessage(0, "'grad'", leavers),
            "ranks 1-499, 501-999 stopped with an error: MemoryError; rank 500 stopped with an "
            "error: OSError: disk full. Rank 0 was still waiting for 'grad', which can't complete "
            "without them.");
}

TEST(PeerLeftMessage, RanksThatFinishedAreNamedWhenNoneFailed) {
  EXPECT_EQ(PeerLeftMessage(1, "'w'", {{2, ""}, {3, ""}, {4, ""}, {6, ""}}),
            "ranks 2-4, 6 have finished (shut tfmpi down) while rank 1 still waits for 'w': the "
            "ranks ran different numbers of steps or collectives. Check that every rank sees the "
            "same amount of data (with tfmpirun, every rank must read the same batches).");
  EXPECT_EQ(PeerLeftMessage(1, "'w'", {{0, ""}}).rfind("rank 0 has finished", 0), 0u);
  // The rank itself is not one of the others; an error outweighs a finish.
  EXPECT_EQ(PeerLeftMessage(1, "'w'", {{1, ""}}).rfind("another rank has finished", 0), 0u);
  const std::string mixed = PeerLeftMessage(1, "'w'", {{0, ""}, {2, "E"}});
  EXPECT_EQ(mixed.rfind("rank 2 stopped with an error: E. Rank 1 was still waiting", 0), 0u)
      << mixed;
}

}  // namespace
}  // namespace tfmpi
