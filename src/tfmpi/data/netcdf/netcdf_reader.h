// NetcdfReader: rows along the first (record) dimension of one or more NetCDF
// variables of equal length (Debian's libnetcdf: NetCDF-4 and classic files),
// one nc_get_vara per run of consecutive rows and variable, straight into the
// output. Every NetCDF call holds Hdf5LibraryMutex() (Note [HDF5 and threads]
// in hdf5_lock.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfmpi/data/named_arrays.h"

namespace tfmpi::data {

class NetcdfReader : public NamedArraysReader {
 public:
  // `variables` are names ("t") or paths in groups ("group/t"), at least one.
  static Status Open(const std::string& path, const std::vector<std::string>& variables,
                     std::unique_ptr<RowReader>* out);
  ~NetcdfReader() override;


 private:
  struct Variable {
    int group = -1;  // ncid of the variable's group
    int id = -1;
  };
  Status OpenVariable(const std::string& name);
  bool ReadBox(std::size_t column, const std::vector<std::uint64_t>& start,
               const std::vector<std::uint64_t>& count, void* out,
               std::string* detail) const override;

  int ncid_ = -1;
  std::vector<Variable> variables_;
};

}  // namespace tfmpi::data
