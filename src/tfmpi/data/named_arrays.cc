#include "tfmpi/data/named_arrays.h"

#include <mutex>

#include <fmt/format.h>

#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/hdf5_lock.h"
#include "tfmpi/data/posix_file.h"
#include "tfmpi/data/row_runs.h"

namespace tfmpi::data {

Status NamedArraysReader::CheckFileAndNames(const std::string& path,
                                            const std::vector<std::string>& names,
                                            const char* kind) {
  PosixFile probe;
  TFMPI_RETURN_IF_ERROR(PosixFile::Open(path, &probe));
  if (names.empty()) {
    return Status::InvalidArgument(fmt::format("{}: name at least one {}", path, kind));
  }
  return Status::Ok();
}

Status NamedArraysReader::AddArray(const char* kind, ColumnSchema column,
                                   const std::vector<std::int64_t>& dims) {
  if (dims.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} '{}': is a scalar; rows are read along a first axis", path_, kind,
                    column.name));
  }
  if (!columns_.empty() && dims[0] != rows_) {
    return Status::InvalidArgument(
        fmt::format("{}: {} '{}': has {} rows but {} '{}' has {}; all {}s read together need "
                    "the same first dimension",
                    path_, kind, column.name, dims[0], kind, columns_[0].name, rows_, kind));
  }
  kind_ = kind;
  rows_ = dims[0];
  column.row_shape.assign(dims.begin() + 1, dims.end());
  columns_.push_back(std::move(column));
  return Status::Ok();
}

Status NamedArraysReader::Read(const std::int64_t* indices, std::size_t n,
                               const std::vector<void*>& outputs) const {
  TFMPI_RETURN_IF_ERROR(CheckReadArguments(*this, indices, n, outputs));
  const std::vector<RowRun> runs = CoalesceRows(indices, n);
  std::lock_guard<std::mutex> lock(Hdf5LibraryMutex());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const ColumnSchema& column = columns_[c];
    std::vector<std::uint64_t> start(column.row_shape.size() + 1, 0);
    std::vector<std::uint64_t> count(column.row_shape.begin(), column.row_shape.end());
    count.insert(count.begin(), 0);
    for (const RowRun& run : runs) {
      start[0] = static_cast<std::uint64_t>(run.first_row);
      count[0] = static_cast<std::uint64_t>(run.count);
      char* out = static_cast<char*>(outputs[c]) + run.output_pos * column.RowBytes();
      std::string detail;
      if (!ReadBox(c, start, count, out, &detail)) {
        return Status::DataLoss(fmt::format(
            "{}: {} '{}': reading rows {}..{} failed (the file is truncated or corrupt){}{}",
            path_, kind_, column.name, run.first_row, run.first_row + run.count - 1,
            detail.empty() ? "" : ": ", detail));
      }
      AddBytesRead(run.count * static_cast<std::int64_t>(column.RowBytes()));
    }
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
