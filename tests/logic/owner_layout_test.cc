// OwnerLayout (Note [Owner layout]): every element of every segment has
// exactly one place in the buffer, rounds respect the size limit, and each
// round takes a piece of every segment in rank order.
#include "tfmpi/planning/owner_layout.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tfmpi::planning {
namespace {

TEST(OwnerLayout, OneRoundWithoutLimitIsTheSegmentsInRankOrder) {
  OwnerLayout l({3, 0, 5}, 0);
  ASSERT_EQ(l.rounds(), 1u);
  EXPECT_EQ(l.total(), 8u);
  EXPECT_EQ(l.counts(0), (std::vector<std::size_t>{3, 0, 5}));
  EXPECT_EQ(l.buffer_offset(2, 0), 3u);
  std::vector<std::size_t> seen;
  l.ForEachPiece(2, 1, 4, [&](std::size_t at, std::size_t from, std::size_t n) {
    seen.insert(seen.end(), {at, from, n});
  });
  EXPECT_EQ(seen, (std::vector<std::size_t>{4, 1, 4}));
}

TEST(OwnerLayout, RoundsTakeAPieceOfEverySegment) {
  OwnerLayout l({10, 6}, 8);  // 16 elements, at most 8 a round: 2 rounds of 5 + 3
  ASSERT_EQ(l.rounds(), 2u);
  EXPECT_EQ(l.counts(0), (std::vector<std::size_t>{5, 3}));
  EXPECT_EQ(l.counts(1), (std::vector<std::size_t>{5, 3}));
  EXPECT_EQ(l.round_offset(1), 8u);
  EXPECT_EQ(l.buffer_offset(1, 1), 13u);
  EXPECT_EQ(l.piece_start(0, 1), 5u);
  // Elements 3..7 of rank 0: 3..4 in round 0 (buffer 3), 5..7 in round 1 (buffer 8).
  std::vector<std::size_t> seen;
  l.ForEachPiece(0, 3, 5, [&](std::size_t at, std::size_t from, std::size_t n) {
    seen.insert(seen.end(), {at, from, n});
  });
  EXPECT_EQ(seen, (std::vector<std::size_t>{3, 3, 2, 8, 5, 3}));
}

TEST(OwnerLayout, AnEmptyGroupIsOneEmptyRound) {
  OwnerLayout l({0, 0}, 4);
  EXPECT_EQ(l.rounds(), 1u);
  EXPECT_EQ(l.total(), 0u);
}

TEST(OwnerLayout, RandomSegmentsMapEveryElementOnceWithinTheLimit) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t ranks = 1 + rng() % 6;
    std::vector<std::size_t> segments(ranks);
    for (auto& s : segments) s = rng() % 3 == 0 ? 0 : rng() % 200;
    const std::size_t limit = rng() % 4 == 0 ? 0 : 1 + rng() % 120;
    OwnerLayout l(segments, limit);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " limit " << limit);
    std::vector<int> hits(l.total(), 0);
    for (std::size_t k = 0; k < l.rounds(); ++k) {
      std::size_t n = 0;
      for (std::size_t c : l.counts(k)) n += c;
      if (limit) {
        EXPECT_LE(n, std::max<std::size_t>(limit, ranks));
      }
      const std::size_t next = k + 1 < l.rounds() ? l.round_offset(k + 1) : l.total();
      EXPECT_EQ(l.round_offset(k) + n, next);
    }
    for (std::size_t r = 0; r < ranks; ++r) {
      // Split the segment into random tensors; their pieces cover it in order.
      std::size_t at = 0, covered = 0;
      while (at < segments[r]) {
        const std::size_t len = 1 + rng() % (segments[r] - at);
        std::size_t expect_from = at;
        l.ForEachPiece(static_cast<int>(r), at, len,
                       [&](std::size_t buf, std::size_t from, std::size_t n) {
                         EXPECT_EQ(from, expect_from);
                         expect_from += n;
                         for (std::size_t i = 0; i < n; ++i) ++hits.at(buf + i);
                         covered += n;
                       });
        at += len;
      }
      EXPECT_EQ(covered, segments[r]);
    }
    for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "element " << i;
  }
}

}  // namespace
}  // namespace tfmpi::planning
