// CSV record indexes shared within a process.
//
// Note [Shared CSV indexes]
// tfmpi.data opens a file when it builds a dataset (to describe it), and each
// read-op kernel opens it again (one kernel per pipeline: each rank's index
// filter, each rebuilt pipeline). For CSV, opening reads the whole file to
// index its records, so the index is shared: the last kCachedIndexes
// indexes are kept, keyed by the file's device, inode, size and
// modification time, so a file rewritten in place is indexed afresh. The
// index does not depend on the delimiter or columns (Note [CSV records]).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/data/posix_file.h"

namespace tfmpi::data {

using CsvIndex = std::vector<std::int64_t>;  // BuildCsvIndex's record starts

// The index of `file`, built with BuildCsvIndex on a miss; thread-safe.
Status SharedCsvIndex(const PosixFile& file, std::size_t buffer_bytes,
                      std::shared_ptr<const CsvIndex>* out);

}  // namespace tfmpi::data
