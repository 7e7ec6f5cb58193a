// The row index of a CSV file: the byte offset where each record starts, built
// in one buffered pass over the file.
//
// Note [CSV records]
// A record ends at a newline outside double quotes, so a quoted field may hold
// delimiters, doubled quotes ("") and newlines. A '\r' before the newline
// (CRLF files) belongs to no field. Blank lines (nothing but an optional '\r')
// are not records, as in Python's csv module. Only the index pass reads the
// whole file; afterwards a read of rows [a, b) preads bytes
// [start(a), start(b)) and parses just those records.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/data/posix_file.h"

namespace tfmpi::data {

// starts[i] is the byte offset of record i; a last element, the file size,
// closes the last record. An unterminated quoted field at the end of the file
// is DataLoss naming the byte offset of the quote's record.
Status BuildCsvIndex(const PosixFile& file, std::size_t buffer_bytes,
                     std::vector<std::int64_t>* starts);

}  // namespace tfmpi::data
