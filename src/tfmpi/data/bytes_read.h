// This process's count of bytes read from data files by the row readers: the
// bytes of every pread, and for HDF5 the bytes of the selected elements. It
// lets a benchmark check that each of N ranks reads about 1/N of a file.
// (CSV reads its whole file once per process to index its rows, Note
// [Shared CSV indexes]; that pass counts too.)
#pragma once

#include <cstdint>

namespace tfmpi::data {

std::int64_t BytesRead();
void AddBytesRead(std::int64_t bytes);

}  // namespace tfmpi::data
