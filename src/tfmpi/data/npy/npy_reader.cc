#include "tfmpi/data/npy/npy_reader.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "tfmpi/data/npy/npy_header.h"
#include "tfmpi/data/row_runs.h"

namespace tfmpi::data {

Status NpyReader::Open(const std::string& path, std::unique_ptr<RowReader>* out) {
  auto reader = std::make_unique<NpyReader>();
  reader->path_ = path;
  TFMPI_RETURN_IF_ERROR(PosixFile::Open(path, &reader->file_));
  const PosixFile& file = reader->file_;

  std::string prefix(12, '\0');
  std::size_t got = 0;
  TFMPI_RETURN_IF_ERROR(file.ReadSomeAt(0, prefix.size(), prefix.data(), &got));
  prefix.resize(got);
  std::int64_t dict_offset = 0, header_end = 0;
  TFMPI_RETURN_IF_ERROR(ParseNpyPreamble(path, prefix, &dict_offset, &header_end));
  std::string dict(static_cast<std::size_t>(header_end - dict_offset), '\0');
  TFMPI_RETURN_IF_ERROR(file.ReadAt(dict_offset, dict.size(), dict.data(), "the npy header"));
  NpyHeader header;
  TFMPI_RETURN_IF_ERROR(ParseNpyDict(path, dict, &header));

  ColumnSchema column;
  column.type = header.type;
  column.row_shape.assign(header.shape.begin() + 1, header.shape.end());
  reader->rows_ = header.shape[0];
  reader->data_offset_ = header_end;
  std::int64_t expected = header_end + reader->rows_ * static_cast<std::int64_t>(column.RowBytes());
  if (file.size() < expected) {
    return Status::DataLoss(fmt::format(
        "{}: file is truncated: its header says {} rows of {} bytes (data up to byte {}) but "
        "the file has {} bytes",
        path, reader->rows_, column.RowBytes(), expected, file.size()));
  }
  reader->columns_.push_back(std::move(column));
  *out = std::move(reader);
  return Status::Ok();
}

Status NpyReader::Read(const std::int64_t* indices, std::size_t n,
                       const std::vector<void*>& outputs) const {
  TFMPI_RETURN_IF_ERROR(CheckReadArguments(*this, indices, n, outputs));
  const std::size_t row_bytes = columns_[0].RowBytes();
  char* out = static_cast<char*>(outputs[0]);
  for (const RowRun& run : CoalesceRows(indices, n)) {
    std::string what = fmt::format("rows {}..{}", run.first_row, run.first_row + run.count - 1);
    TFMPI_RETURN_IF_ERROR(file_.ReadAt(
        data_offset_ + run.first_row * static_cast<std::int64_t>(row_bytes),
        static_cast<std::size_t>(run.count) * row_bytes, out + run.output_pos * row_bytes,
        what.c_str()));
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
