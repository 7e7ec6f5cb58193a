#include "tfmpi/data/named_arrays.h"

#include <fmt/format.h>

#include "tfmpi/data/posix_file.h"

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
  rows_ = dims[0];
  column.row_shape.assign(dims.begin() + 1, dims.end());
  columns_.push_back(std::move(column));
  return Status::Ok();
}

}  // namespace tfmpi::data
