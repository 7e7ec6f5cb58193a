// Hdf5Reader: rows along the first axis of one or more HDF5 datasets of equal
// length (the Debian serial libhdf5), one hyperslab read per run of
// consecutive rows and dataset, straight into the output.
//
// Note [HDF5 and threads]
// Debian's serial libhdf5 is not built thread-safe, and tf.data calls a
// kernel from several threads; every HDF5 call of this reader holds one
// process-wide mutex. The library's automatic error printing is turned off:
// failures come back as Status messages naming the file and dataset.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

class Hdf5Reader : public RowReader {
 public:
  // `datasets` are paths inside the file ("x", "group/y"), at least one.
  static Status Open(const std::string& path, const std::vector<std::string>& datasets,
                     std::unique_ptr<RowReader>* out);
  ~Hdf5Reader() override;

  const std::string& path() const override { return path_; }
  std::int64_t rows() const override { return rows_; }
  const std::vector<ColumnSchema>& columns() const override { return columns_; }
  Status Read(const std::int64_t* indices, std::size_t n,
              const std::vector<void*>& outputs) const override;

 private:
  Status OpenDataset(const std::string& name);

  std::string path_;
  std::int64_t file_ = -1;                 // hid_t
  std::vector<std::int64_t> datasets_;     // hid_t per column
  std::vector<std::int64_t> memory_types_; // hid_t per column, owned
  std::int64_t rows_ = 0;
  std::vector<ColumnSchema> columns_;
};

}  // namespace tfmpi::data
