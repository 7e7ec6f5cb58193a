// CsvReader: typed columns of a CSV file (Note [CSV records] in csv_index.h).
// Opening indexes the records (or finds the index made by an earlier opening,
// Note [Shared CSV indexes]); a Read preads the byte range of each run of
// consecutive rows and parses only those records.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfmpi/data/csv/csv_index_cache.h"
#include "tfmpi/data/posix_file.h"
#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

struct CsvOptions {
  char delimiter = ',';
  bool header = true;  // the first record names the columns
  // Columns to read, in output order: header names, or 0-based positions
  // written as decimal ("0", "3"). Empty: every column.
  std::vector<std::string> columns;
  // One type per selected column, or one for all of them. Empty: float32.
  std::vector<ElementType> types;
  std::size_t index_buffer_bytes = 1 << 20;  // the indexing pass's read size
};

class CsvReader : public RowReader {
 public:
  static Status Open(const std::string& path, const CsvOptions& options,
                     std::unique_ptr<RowReader>* out);

  Status Read(const std::int64_t* indices, std::size_t n,
              const std::vector<void*>& outputs) const override;

 private:
  Status SelectColumns(const std::vector<std::string>& header, const CsvOptions& options);
  // Parses data row `row`, whose record is `bytes`, into output position `pos`.
  Status ParseRow(std::int64_t row, std::string_view bytes, std::size_t pos,
                  const std::vector<void*>& outputs, std::vector<std::string>* fields) const;

  PosixFile file_;
  char delimiter_ = ',';
  std::int64_t first_record_ = 0;  // 1 with a header
  std::size_t fields_per_record_ = 0;
  std::shared_ptr<const CsvIndex> index_;  // record byte offsets, then the file size
  std::vector<std::size_t> positions_;  // field position of each selected column
};

}  // namespace tfmpi::data
