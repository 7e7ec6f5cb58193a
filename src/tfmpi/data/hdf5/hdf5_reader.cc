#include "tfmpi/data/hdf5/hdf5_reader.h"

#include <hdf5.h>

#include <mutex>

#include <fmt/format.h>

#include "tfmpi/data/hdf5_lock.h"

namespace tfmpi::data {
namespace {

static_assert(sizeof(hid_t) == sizeof(std::int64_t), "hid_t is stored as int64");

void SilenceHdf5Errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

// Closes an HDF5 id with its close function when it goes out of scope.
class Closer {
 public:
  Closer(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Closer() {
    if (id_ >= 0) close_(id_);
  }
  Closer(const Closer&) = delete;
  Closer& operator=(const Closer&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The element type of a dataset's file type and the memory type to read it
// as (owned by the caller), or an error naming what is unsupported.
Status MemoryTypeOf(const std::string& where, hid_t file_type, ElementType* type,
                    hid_t* memory_type) {
  H5T_class_t cls = H5Tget_class(file_type);
  std::size_t size = H5Tget_size(file_type);
  std::string name;
  hid_t native = -1;
  if (cls == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(file_type) == H5T_SGN_2;
    name = fmt::format("{}int{}", is_signed ? "" : "u", size * 8);
    switch (size) {
      case 1: native = is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8; break;
      case 2: native = is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16; break;
      case 4: native = is_signed ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32; break;
      case 8: native = is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64; break;
    }
  } else if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
    name = size == 4 ? "float32" : "float64";
    native = size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
  } else if (cls == H5T_ENUM && size == 1 && H5Tget_nmembers(file_type) == 2) {
    // h5py's bool: an enum of FALSE=0, TRUE=1 over int8.
    name = "bool";
    *memory_type = H5Tget_native_type(file_type, H5T_DIR_ASCEND);
  }
  if (native >= 0) *memory_type = H5Tcopy(native);
  auto parsed = ParseElementType(name);
  if (!parsed || *memory_type < 0) {
    const char* kind = cls == H5T_FLOAT ? "floating point" : cls == H5T_STRING ? "string"
                       : cls == H5T_COMPOUND ? "compound" : cls == H5T_ENUM ? "enum"
                       : "non-numeric";
    return Status::InvalidArgument(fmt::format(
        "{}: unsupported element type ({} of {} bytes); use bool, int8..int64, "
        "uint8..uint64, float32 or float64",
        where, kind, size));
  }
  *type = *parsed;
  return Status::Ok();
}

}  // namespace

Status Hdf5Reader::Open(const std::string& path, const std::vector<std::string>& datasets,
                        std::unique_ptr<RowReader>* out) {
  TFMPI_RETURN_IF_ERROR(CheckFileAndNames(path, datasets, "HDF5 dataset"));
  // Declared before the lock: a reader that fails to open is destroyed (and
  // its destructor locks) after the lock is released.
  auto reader = std::unique_ptr<Hdf5Reader>(new Hdf5Reader());
  std::lock_guard<std::mutex> lock(Hdf5LibraryMutex());
  SilenceHdf5Errors();
  reader->path_ = path;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return Status::DataLoss(fmt::format("{}: not an HDF5 file (no HDF5 signature)", path));
  }
  reader->file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (reader->file_ < 0) {
    return Status::DataLoss(
        fmt::format("{}: HDF5 cannot open the file: it is truncated or corrupt", path));
  }
  for (const std::string& name : datasets) TFMPI_RETURN_IF_ERROR(reader->OpenDataset(name));
  *out = std::move(reader);
  return Status::Ok();
}

Status Hdf5Reader::OpenDataset(const std::string& name) {
  std::string where = fmt::format("{}: dataset '{}'", path_, name);
  hid_t dataset = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
  if (dataset < 0) {
    return Status::NotFound(fmt::format("{}: no dataset '{}' in the file", path_, name));
  }
  datasets_.push_back(dataset);
  Closer space(H5Dget_space(dataset), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Closer file_type(H5Dget_type(dataset), H5Tclose);
  ColumnSchema column;
  column.name = name;
  hid_t memory_type = -1;
  TFMPI_RETURN_IF_ERROR(MemoryTypeOf(where, file_type.get(), &column.type, &memory_type));
  memory_types_.push_back(memory_type);
  return AddArray("dataset", std::move(column), std::vector<std::int64_t>(dims.begin(), dims.end()));
}

Hdf5Reader::~Hdf5Reader() {
  std::lock_guard<std::mutex> lock(Hdf5LibraryMutex());
  for (hid_t t : memory_types_) H5Tclose(t);
  for (hid_t d : datasets_) H5Dclose(d);
  if (file_ >= 0) H5Fclose(file_);
}

bool Hdf5Reader::ReadBox(std::size_t column, const std::vector<std::uint64_t>& start,
                         const std::vector<std::uint64_t>& count, void* out,
                         std::string* /*detail*/) const {
  const std::vector<hsize_t> first(start.begin(), start.end());
  const std::vector<hsize_t> span(count.begin(), count.end());
  const hid_t dataset = datasets_[column];
  Closer file_space(H5Dget_space(dataset), H5Sclose);
  Closer memory_space(H5Screate_simple(static_cast<int>(span.size()), span.data(), nullptr),
                      H5Sclose);
  return H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, first.data(), nullptr,
                             span.data(), nullptr) >= 0 &&
         H5Dread(dataset, memory_types_[column], memory_space.get(), file_space.get(),
                 H5P_DEFAULT, out) >= 0;
}

}  // namespace tfmpi::data
