// RowReader: random access to the rows of a file, the interface every format
// implements (npy/, csv/, hdf5/, netcdf/). A file holds one or more columns
// (an npy array, CSV columns, HDF5 datasets, NetCDF variables) of equal
// length; row i of a column is an array of `row_shape` elements of `type`,
// stored C-order.
//
// Read() fills, for each column c, outputs[c] with n rows (n * RowBytes(c)
// bytes), row j being file row indices[j]. Indices may come in any order and
// repeat; runs of consecutive indices are read with one I/O call each (Note
// [Coalesced reads] in row_runs.h). Implementations are immutable after
// opening, so Read() may be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/data/element_type.h"

namespace tfmpi::data {

struct ColumnSchema {
  // npy: ""; CSV: header name, or position ("3") without a header; HDF5,
  // NetCDF: the dataset or variable as named when opening.
  std::string name;
  ElementType type = ElementType::kFloat32;
  std::vector<std::int64_t> row_shape;  // empty for a scalar per row

  std::size_t RowElements() const;
  std::size_t RowBytes() const { return RowElements() * ElementSize(type); }
};

class RowReader {
 public:
  virtual ~RowReader() = default;
  const std::string& path() const { return path_; }
  std::int64_t rows() const { return rows_; }
  const std::vector<ColumnSchema>& columns() const { return columns_; }
  virtual Status Read(const std::int64_t* indices, std::size_t n,
                      const std::vector<void*>& outputs) const = 0;

 protected:
  // Set by each implementation's Open, then never changed.
  std::string path_;
  std::int64_t rows_ = 0;
  std::vector<ColumnSchema> columns_;
};

// Checks, before a Read, that every index is in [0, rows) and that there is
// one output per column; the message names the file and the offending index.
Status CheckReadArguments(const RowReader& reader, const std::int64_t* indices,
                          std::size_t n, const std::vector<void*>& outputs);

}  // namespace tfmpi::data
