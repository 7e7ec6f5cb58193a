#include "tfmpi/data/row_reader.h"

#include <fmt/format.h>

namespace tfmpi::data {

std::size_t ColumnSchema::RowElements() const {
  std::size_t n = 1;
  for (std::int64_t d : row_shape) n *= static_cast<std::size_t>(d);
  return n;
}

Status CheckReadArguments(const RowReader& reader, const std::int64_t* indices,
                          std::size_t n, const std::vector<void*>& outputs) {
  if (outputs.size() != reader.columns().size()) {
    return Status::InvalidArgument(fmt::format("{}: {} output buffers for {} columns",
                                               reader.path(), outputs.size(),
                                               reader.columns().size()));
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (indices[j] < 0 || indices[j] >= reader.rows()) {
      return Status::InvalidArgument(
          fmt::format("{}: row index {} is out of range (the file has {} rows)",
                      reader.path(), indices[j], reader.rows()));
    }
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
