#include "tfmpi/data/row_runs.h"

namespace tfmpi::data {

std::vector<RowRun> CoalesceRows(const std::int64_t* indices, std::size_t n,
                                 std::int64_t max_rows) {
  std::vector<RowRun> runs;
  for (std::size_t j = 0; j < n; ++j) {
    if (!runs.empty()) {
      RowRun& last = runs.back();
      bool follows = indices[j] == last.first_row + last.count;
      if (follows && (max_rows <= 0 || last.count < max_rows)) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({indices[j], 1, j});
  }
  return runs;
}

}  // namespace tfmpi::data
