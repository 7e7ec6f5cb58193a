// Coalescing of row indices into runs of consecutive rows.
//
// Note [Coalesced reads]
// A reader is handed the indices of one chunk (tf.data batches the index
// dataset), in the order the rows are wanted. Unshuffled, a chunk is one run;
// under element-level sharding it is a few runs (a rank's slices of each
// global batch); shuffled, runs are mostly of length 1. Each run becomes one
// I/O call (a pread of a byte range, an HDF5 hyperslab), whose rows land in
// consecutive output positions, so a run is read straight into the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tfmpi::data {

struct RowRun {
  std::int64_t first_row = 0;  // file row of the run's first element
  std::int64_t count = 0;      // rows in the run
  std::size_t output_pos = 0;  // position of the run's first row in the output

  bool operator==(const RowRun& o) const {
    return first_row == o.first_row && count == o.count && output_pos == o.output_pos;
  }
};

// Maximal runs of indices[j+1] == indices[j] + 1, in output order; a run is
// cut where it would exceed max_rows (0: no limit).
std::vector<RowRun> CoalesceRows(const std::int64_t* indices, std::size_t n,
                                 std::int64_t max_rows = 0);

}  // namespace tfmpi::data
