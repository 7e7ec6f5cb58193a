// NpyReader: the rows of a C-ordered .npy array along its first axis, read with
// one pread per run of consecutive rows, straight into the output.
#pragma once

#include <memory>

#include "tfmpi/data/posix_file.h"
#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

class NpyReader : public RowReader {
 public:
  // Reads and checks the header; a file shorter than its shape says is
  // DataLoss (truncated) here, not on a later Read.
  static Status Open(const std::string& path, std::unique_ptr<RowReader>* out);

  Status Read(const std::int64_t* indices, std::size_t n,
              const std::vector<void*>& outputs) const override;

 private:
  PosixFile file_;
  std::int64_t data_offset_ = 0;
};

}  // namespace tfmpi::data
