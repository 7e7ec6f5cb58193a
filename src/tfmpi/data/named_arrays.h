// NamedArraysReader: the part that HDF5 and NetCDF readers share. Their files
// hold named arrays (datasets, variables); the reader reads several of them
// together, rows along the first axis, so all must have the same length. A
// Read becomes one ReadBox per run of consecutive rows (Note [Coalesced
// reads]) and array, under Hdf5LibraryMutex() (Note [HDF5 and threads]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

class NamedArraysReader : public RowReader {
 public:
  Status Read(const std::int64_t* indices, std::size_t n,
              const std::vector<void*>& outputs) const final;

 protected:
  // Reads the box of array `column` that starts at `start` and spans `count`
  // (one entry per dimension) into `out`; on failure returns false and may
  // set *detail to the library's words.
  virtual bool ReadBox(std::size_t column, const std::vector<std::uint64_t>& start,
                       const std::vector<std::uint64_t>& count, void* out,
                       std::string* detail) const = 0;

  // NotFound for a missing file (as every reader says it), InvalidArgument
  // when no array is named. `kind` is "HDF5 dataset", "NetCDF variable".
  static Status CheckFileAndNames(const std::string& path, const std::vector<std::string>& names,
                                  const char* kind);

  // Adds the array `column.name` of dimensions `dims`: row_shape is dims[1:];
  // a scalar, or a first dimension unlike the first array's, is an error.
  // `kind` is "dataset", "variable".
  Status AddArray(const char* kind, ColumnSchema column, const std::vector<std::int64_t>& dims);

 private:
  const char* kind_ = "array";  // "dataset", "variable": set by AddArray
};

}  // namespace tfmpi::data
