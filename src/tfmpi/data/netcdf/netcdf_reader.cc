#include "tfmpi/data/netcdf/netcdf_reader.h"

#include <netcdf.h>

#include <mutex>

#include <fmt/format.h>

#include "tfmpi/data/hdf5_lock.h"

namespace tfmpi::data {
namespace {

const char* ElementNameOf(nc_type type) {
  switch (type) {
    case NC_BYTE: return "int8";
    case NC_UBYTE: return "uint8";
    case NC_SHORT: return "int16";
    case NC_USHORT: return "uint16";
    case NC_INT: return "int32";
    case NC_UINT: return "uint32";
    case NC_INT64: return "int64";
    case NC_UINT64: return "uint64";
    case NC_FLOAT: return "float32";
    case NC_DOUBLE: return "float64";
    default: return nullptr;
  }
}

}  // namespace

Status NetcdfReader::Open(const std::string& path, const std::vector<std::string>& variables,
                          std::unique_ptr<RowReader>* out) {
  TFMPI_RETURN_IF_ERROR(CheckFileAndNames(path, variables, "NetCDF variable"));
  // Before the lock: a reader that fails to open is destroyed after it.
  auto reader = std::unique_ptr<NetcdfReader>(new NetcdfReader());
  std::lock_guard<std::mutex> lock(Hdf5LibraryMutex());
  reader->path_ = path;
  int rc = nc_open(path.c_str(), NC_NOWRITE, &reader->ncid_);
  if (rc != NC_NOERR) {
    reader->ncid_ = -1;
    return Status::DataLoss(fmt::format(
        "{}: NetCDF cannot open the file (not NetCDF, truncated or corrupt): {}", path,
        nc_strerror(rc)));
  }
  for (const std::string& name : variables) TFMPI_RETURN_IF_ERROR(reader->OpenVariable(name));
  *out = std::move(reader);
  return Status::Ok();
}

Status NetcdfReader::OpenVariable(const std::string& name) {
  std::string where = fmt::format("{}: variable '{}'", path_, name);
  Variable v;
  v.group = ncid_;
  std::size_t slash = name.rfind('/');
  std::string leaf = slash == std::string::npos ? name : name.substr(slash + 1);
  if (slash != std::string::npos && slash > 0) {
    std::string group = name[0] == '/' ? name.substr(0, slash) : "/" + name.substr(0, slash);
    if (nc_inq_grp_full_ncid(ncid_, group.c_str(), &v.group) != NC_NOERR) {
      return Status::NotFound(fmt::format("{}: no group '{}' in the file", path_, group));
    }
  }
  if (nc_inq_varid(v.group, leaf.c_str(), &v.id) != NC_NOERR) {
    return Status::NotFound(fmt::format("{}: no variable '{}' in the file", path_, name));
  }
  nc_type type;
  int rank = 0;
  if (nc_inq_vartype(v.group, v.id, &type) != NC_NOERR ||
      nc_inq_varndims(v.group, v.id, &rank) != NC_NOERR) {
    return Status::DataLoss(fmt::format("{}: cannot read its description", where));
  }
  ColumnSchema column;
  column.name = name;
  const char* element = ElementNameOf(type);
  if (element == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "{}: unsupported NetCDF type {} (char, string or a user type); use byte, short, "
        "int, int64, their unsigned forms, float or double",
        where, static_cast<int>(type)));
  }
  column.type = *ParseElementType(element);
  std::vector<int> dim_ids(static_cast<std::size_t>(rank > 0 ? rank : 0));
  if (rank > 0) nc_inq_vardimid(v.group, v.id, dim_ids.data());
  std::vector<std::int64_t> dims;
  for (int d : dim_ids) {
    std::size_t length = 0;
    nc_inq_dimlen(v.group, d, &length);
    dims.push_back(static_cast<std::int64_t>(length));
  }
  TFMPI_RETURN_IF_ERROR(AddArray("variable", std::move(column), dims));
  variables_.push_back(v);
  return Status::Ok();
}

NetcdfReader::~NetcdfReader() {
  if (ncid_ < 0) return;
  std::lock_guard<std::mutex> lock(Hdf5LibraryMutex());
  nc_close(ncid_);
}

bool NetcdfReader::ReadBox(std::size_t column, const std::vector<std::uint64_t>& start,
                           const std::vector<std::uint64_t>& count, void* out,
                           std::string* detail) const {
  const std::vector<std::size_t> first(start.begin(), start.end());
  const std::vector<std::size_t> span(count.begin(), count.end());
  int rc = nc_get_vara(variables_[column].group, variables_[column].id, first.data(),
                       span.data(), out);
  if (rc != NC_NOERR) *detail = nc_strerror(rc);
  return rc == NC_NOERR;
}

}  // namespace tfmpi::data
