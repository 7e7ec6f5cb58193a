#include "tfmpi/data/csv/csv_index.h"

#include <fmt/format.h>

namespace tfmpi::data {

Status BuildCsvIndex(const PosixFile& file, std::size_t buffer_bytes,
                     std::vector<std::int64_t>* starts) {
  starts->clear();
  std::vector<char> buffer(buffer_bytes > 0 ? buffer_bytes : 1);
  bool at_record_start = true;
  bool in_quotes = false;
  bool has_content = false;
  std::int64_t record_start = 0;
  std::int64_t offset = 0;
  for (;;) {
    std::size_t got = 0;
    TFMPI_RETURN_IF_ERROR(file.ReadSomeAt(offset, buffer.size(), buffer.data(), &got));
    if (got == 0) break;
    for (std::size_t i = 0; i < got; ++i) {
      char c = buffer[i];
      if (at_record_start) {
        record_start = offset + static_cast<std::int64_t>(i);
        at_record_start = false;
        has_content = false;
      }
      if (c == '"') {
        in_quotes = !in_quotes;
        has_content = true;
      } else if (c == '\n' && !in_quotes) {
        if (has_content) starts->push_back(record_start);
        at_record_start = true;
      } else if (c != '\r') {
        has_content = true;
      }
    }
    offset += static_cast<std::int64_t>(got);
  }
  if (in_quotes) {
    return Status::DataLoss(fmt::format(
        "{}: the record at byte offset {} has a quoted field that is never closed (a "
        "truncated file?)",
        file.path(), record_start));
  }
  if (!at_record_start && has_content) starts->push_back(record_start);
  starts->push_back(offset);
  return Status::Ok();
}

}  // namespace tfmpi::data
