// The process-wide lock around every call into libhdf5, and into libnetcdf,
// which calls libhdf5 for NetCDF-4 files.
//
// Note [HDF5 and threads]
// Debian's serial libhdf5 and libnetcdf are not built thread-safe, and
// tf.data calls a kernel from several threads; every HDF5 or NetCDF call of
// the readers (hdf5/, netcdf/) holds this one mutex. HDF5's automatic error
// printing is turned off: failures come back as Status messages naming the
// file and dataset.
#pragma once

#include <mutex>

namespace tfmpi::data {

std::mutex& Hdf5LibraryMutex();

}  // namespace tfmpi::data
