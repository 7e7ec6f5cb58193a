#include "tfmpi/data/hdf5_lock.h"

namespace tfmpi::data {

std::mutex& Hdf5LibraryMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace tfmpi::data
