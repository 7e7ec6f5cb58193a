#include "tfmpi/data/csv/csv_reader.h"

#include <charconv>

#include <fmt/format.h>

#include "tfmpi/data/csv/csv_fields.h"
#include "tfmpi/data/row_runs.h"

namespace tfmpi::data {
namespace {

// Rows per pread: bounds the temporary buffer of a long run.
constexpr std::int64_t kMaxRunRows = 4096;

bool ParsePosition(const std::string& s, std::size_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Status CsvReader::Open(const std::string& path, const CsvOptions& options,
                       std::unique_ptr<RowReader>* out) {
  auto reader = std::make_unique<CsvReader>();
  if (options.delimiter == '"' || options.delimiter == '\n' || options.delimiter == '\r') {
    return Status::InvalidArgument(
        fmt::format("{}: the CSV delimiter cannot be a quote or a line break", path));
  }
  reader->path_ = path;
  reader->delimiter_ = options.delimiter;
  TFMPI_RETURN_IF_ERROR(PosixFile::Open(path, &reader->file_));
  TFMPI_RETURN_IF_ERROR(
      SharedCsvIndex(reader->file_, options.index_buffer_bytes, &reader->index_));
  const CsvIndex& starts = *reader->index_;
  const std::int64_t records = static_cast<std::int64_t>(starts.size()) - 1;

  std::vector<std::string> first;
  if (records > 0) {
    std::string bytes(static_cast<std::size_t>(starts[1] - starts[0]), '\0');
    TFMPI_RETURN_IF_ERROR(reader->file_.ReadAt(starts[0], bytes.size(), bytes.data(),
                                               "the first record"));
    CsvSplitError error;
    if (!SplitCsvRecord(bytes, options.delimiter, &first, &error)) {
      return Status::DataLoss(fmt::format("{}: record 0 (byte offset {}): {}", path,
                                          starts[0] + error.offset, error.reason));
    }
  } else if (options.header) {
    return Status::InvalidArgument(
        fmt::format("{}: the file is empty but a header row was expected (header=False "
                    "reads an empty file as 0 rows)",
                    path));
  }
  reader->first_record_ = options.header ? 1 : 0;
  reader->rows_ = records - reader->first_record_;
  reader->fields_per_record_ = first.size();
  std::vector<std::string> names;
  for (std::size_t k = 0; k < first.size(); ++k) {
    names.push_back(options.header ? first[k] : std::to_string(k));
  }
  TFMPI_RETURN_IF_ERROR(reader->SelectColumns(names, options));
  *out = std::move(reader);
  return Status::Ok();
}

Status CsvReader::SelectColumns(const std::vector<std::string>& names,
                                const CsvOptions& options) {
  std::vector<std::string> wanted = options.columns;
  if (wanted.empty()) wanted = names;
  if (wanted.empty() && rows_ == 0 && !options.types.empty()) {
    // An empty headerless file: the columns are whatever the types say.
    for (std::size_t k = 0; k < options.types.size(); ++k) wanted.push_back(std::to_string(k));
  }
  if (!options.types.empty() && options.types.size() != 1 &&
      options.types.size() != wanted.size()) {
    return Status::InvalidArgument(fmt::format("{}: {} types given for {} columns", path(),
                                               options.types.size(), wanted.size()));
  }
  for (std::size_t c = 0; c < wanted.size(); ++c) {
    std::size_t position = names.size();
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (names[k] == wanted[c]) position = k;
    }
    if (position == names.size() && rows_ == 0 && !options.header) {
      ParsePosition(wanted[c], &position);  // nothing to check it against
    } else if (position == names.size() &&
               !(ParsePosition(wanted[c], &position) && position < names.size())) {
      return Status::NotFound(fmt::format("{}: no column '{}' (the columns are: {})", path(),
                                          wanted[c], fmt::join(names, ", ")));
    }
    ColumnSchema column;
    column.name = position < names.size() ? names[position] : wanted[c];
    if (!options.types.empty()) {
      column.type = options.types.size() == 1 ? options.types[0] : options.types[c];
    }
    if (column.type == ElementType::kFloat16) {
      return Status::InvalidArgument(fmt::format(
          "{}: column '{}': float16 is not supported for CSV; read float32 and cast", path(),
          column.name));
    }
    positions_.push_back(position);
    columns_.push_back(std::move(column));
  }
  return Status::Ok();
}

Status CsvReader::ParseRow(std::int64_t row, std::string_view bytes, std::size_t pos,
                           const std::vector<void*>& outputs,
                           std::vector<std::string>* fields) const {
  const std::int64_t offset = (*index_)[static_cast<std::size_t>(row + first_record_)];
  CsvSplitError error;
  if (!SplitCsvRecord(bytes, delimiter_, fields, &error)) {
    return Status::DataLoss(fmt::format("{}: row {} (byte offset {}): {}", path(), row,
                                        offset + static_cast<std::int64_t>(error.offset),
                                        error.reason));
  }
  if (fields->size() != fields_per_record_) {
    return Status::InvalidArgument(fmt::format(
        "{}: row {} (byte offset {}) has {} fields; the {} has {}", path(), row, offset,
        fields->size(), first_record_ ? "header" : "first row", fields_per_record_));
  }
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const ColumnSchema& column = columns_[c];
    const std::string& field = (*fields)[positions_[c]];
    std::size_t size = ElementSize(column.type);
    if (!ParseCsvValue(field, column.type, static_cast<char*>(outputs[c]) + pos * size)) {
      return Status::InvalidArgument(fmt::format(
          "{}: row {} (byte offset {}), column '{}': '{}' does not parse as {}", path(), row,
          offset, column.name, field, ElementTypeName(column.type)));
    }
  }
  return Status::Ok();
}

Status CsvReader::Read(const std::int64_t* indices, std::size_t n,
                       const std::vector<void*>& outputs) const {
  TFMPI_RETURN_IF_ERROR(CheckReadArguments(*this, indices, n, outputs));
  const CsvIndex& starts = *index_;
  std::string buffer;
  std::vector<std::string> fields;
  for (const RowRun& run : CoalesceRows(indices, n, kMaxRunRows)) {
    const std::size_t first = static_cast<std::size_t>(run.first_row + first_record_);
    const std::size_t end = first + static_cast<std::size_t>(run.count);
    const std::int64_t base = starts[first];
    buffer.resize(static_cast<std::size_t>(starts[end] - base));
    std::string what = fmt::format("rows {}..{}", run.first_row, run.first_row + run.count - 1);
    TFMPI_RETURN_IF_ERROR(file_.ReadAt(base, buffer.size(), buffer.data(), what.c_str()));
    for (std::size_t r = first; r < end; ++r) {
      std::string_view bytes(buffer.data() + (starts[r] - base),
                             static_cast<std::size_t>(starts[r + 1] - starts[r]));
      TFMPI_RETURN_IF_ERROR(ParseRow(static_cast<std::int64_t>(r) - first_record_, bytes,
                                     run.output_pos + (r - first), outputs, &fields));
    }
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
