#include <gtest/gtest.h>

#include <vector>

#include "tfmpi/data/row_runs.h"

namespace tfmpi::data {
namespace {

std::vector<RowRun> Runs(const std::vector<std::int64_t>& indices, std::int64_t max_rows = 0) {
  return CoalesceRows(indices.data(), indices.size(), max_rows);
}

TEST(CoalesceRows, EmptyGivesNoRuns) { EXPECT_TRUE(Runs({}).empty()); }

TEST(CoalesceRows, ConsecutiveIndicesAreOneRun) {
  EXPECT_EQ(Runs({5, 6, 7, 8}), (std::vector<RowRun>{{5, 4, 0}}));
}

TEST(CoalesceRows, GapsDescentsAndRepeatsStartNewRuns) {
  EXPECT_EQ(Runs({0, 1, 4, 5, 6, 3, 3, 2}),
            (std::vector<RowRun>{{0, 2, 0}, {4, 3, 2}, {3, 1, 5}, {3, 1, 6}, {2, 1, 7}}));
}

TEST(CoalesceRows, RunsAreCutAtTheLimit) {
  EXPECT_EQ(Runs({0, 1, 2, 3, 4}, 2),
            (std::vector<RowRun>{{0, 2, 0}, {2, 2, 2}, {4, 1, 4}}));
}

TEST(CoalesceRows, RanksSlicesOfGlobalBatchesAreFewRuns) {
  // Rank 1 of 4 with global batch 8: rows 2,3 of every batch of 8.
  std::vector<std::int64_t> indices;
  for (int b = 0; b < 3; ++b) {
    indices.push_back(8 * b + 2);
    indices.push_back(8 * b + 3);
  }
  EXPECT_EQ(Runs(indices), (std::vector<RowRun>{{2, 2, 0}, {10, 2, 2}, {18, 2, 4}}));
}

}  // namespace
}  // namespace tfmpi::data
