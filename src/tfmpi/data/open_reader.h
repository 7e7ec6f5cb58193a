// The one place that maps a format name to its reader ("npy", "csv", "hdf5",
// "netcdf").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfmpi/data/csv/csv_reader.h"
#include "tfmpi/data/row_reader.h"

namespace tfmpi::data {

struct ReaderSpec {
  std::string format;              // "npy", "csv", "hdf5" or "netcdf"
  std::string path;
  std::vector<std::string> names;  // HDF5 datasets, NetCDF variables, CSV columns
  CsvOptions csv;                  // CSV only
};

Status OpenRowReader(const ReaderSpec& spec, std::unique_ptr<RowReader>* out);

}  // namespace tfmpi::data
