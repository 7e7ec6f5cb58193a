// A read-only file descriptor (move-only) with positioned reads that count
// towards BytesRead() and report short reads as a truncated file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tfmpi/common/status.h"

namespace tfmpi::data {

class PosixFile {
 public:
  PosixFile() = default;
  ~PosixFile();
  PosixFile(PosixFile&& other) noexcept;
  PosixFile& operator=(PosixFile&& other) noexcept;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  // NotFound for a missing file, InvalidArgument for a directory or an
  // unreadable file; the message names the path.
  static Status Open(const std::string& path, PosixFile* out);

  const std::string& path() const { return path_; }
  std::int64_t size() const { return size_; }
  // The file's identity and version when opened: "device:inode:mtime_ns".
  const std::string& version() const { return version_; }

  // Reads exactly `length` bytes at `offset` (several preads if needed).
  // Reading past the end is DataLoss "truncated", naming `what`.
  Status ReadAt(std::int64_t offset, std::size_t length, void* out,
                const char* what) const;
  // Reads up to `length` bytes at `offset`; *got says how many (0 at the end).
  Status ReadSomeAt(std::int64_t offset, std::size_t length, void* out,
                    std::size_t* got) const;

 private:
  int fd_ = -1;
  std::string path_;
  std::int64_t size_ = 0;
  std::string version_;
};

}  // namespace tfmpi::data
