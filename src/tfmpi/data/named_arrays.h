// NamedArraysReader: the part that HDF5 and NetCDF readers share. Their files
// hold named arrays (datasets, variables); the reader reads several of them
// together, rows along the first axis, so all must have the same length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

class NamedArraysReader : public RowReader {
 protected:
  // NotFound for a missing file (as every reader says it), InvalidArgument
  // when no array is named. `kind` is "HDF5 dataset", "NetCDF variable".
  static Status CheckFileAndNames(const std::string& path, const std::vector<std::string>& names,
                                  const char* kind);

  // Adds the array `column.name` of dimensions `dims`: row_shape is dims[1:];
  // a scalar, or a first dimension unlike the first array's, is an error.
  // `kind` is "dataset", "variable".
  Status AddArray(const char* kind, ColumnSchema column, const std::vector<std::int64_t>& dims);
};

}  // namespace tfmpi::data
