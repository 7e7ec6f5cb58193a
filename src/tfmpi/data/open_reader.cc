#include "tfmpi/data/open_reader.h"

#include <fmt/format.h>

#include "tfmpi/data/hdf5/hdf5_reader.h"
#include "tfmpi/data/netcdf/netcdf_reader.h"
#include "tfmpi/data/npy/npy_reader.h"

namespace tfmpi::data {

Status OpenRowReader(const ReaderSpec& spec, std::unique_ptr<RowReader>* out) {
  if (spec.format == "npy") return NpyReader::Open(spec.path, out);
  if (spec.format == "hdf5") return Hdf5Reader::Open(spec.path, spec.names, out);
  if (spec.format == "netcdf") return NetcdfReader::Open(spec.path, spec.names, out);
  if (spec.format == "csv") {
    CsvOptions options = spec.csv;
    if (options.columns.empty()) options.columns = spec.names;
    return CsvReader::Open(spec.path, options, out);
  }
  return Status::InvalidArgument(fmt::format(
      "{}: unknown row reader format '{}' (use npy, csv, hdf5 or netcdf)", spec.path, spec.format));
}

}  // namespace tfmpi::data
