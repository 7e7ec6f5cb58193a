// Hdf5Reader: rows along the first axis of one or more HDF5 datasets of equal
// length (the Debian serial libhdf5), one hyperslab read per run of
// consecutive rows and dataset, straight into the output. Every HDF5 call
// holds Hdf5LibraryMutex() (Note [HDF5 and threads] in hdf5_lock.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfmpi/data/named_arrays.h"

namespace tfmpi::data {

class Hdf5Reader : public NamedArraysReader {
 public:
  // `datasets` are paths inside the file ("x", "group/y"), at least one.
  static Status Open(const std::string& path, const std::vector<std::string>& datasets,
                     std::unique_ptr<RowReader>* out);
  ~Hdf5Reader() override;


 private:
  Status OpenDataset(const std::string& name);
  bool ReadBox(std::size_t column, const std::vector<std::uint64_t>& start,
               const std::vector<std::uint64_t>& count, void* out,
               std::string* detail) const override;

  std::int64_t file_ = -1;                 // hid_t
  std::vector<std::int64_t> datasets_;     // hid_t per column
  std::vector<std::int64_t> memory_types_; // hid_t per column, owned
};

}  // namespace tfmpi::data
