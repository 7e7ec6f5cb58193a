#include "tfmpi/data/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "tfmpi/data/bytes_read.h"

namespace tfmpi::data {

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

PosixFile::PosixFile(PosixFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      size_(other.size_),
      version_(std::move(other.version_)) {}

PosixFile& PosixFile::operator=(PosixFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
    version_ = std::move(other.version_);
  }
  return *this;
}

Status PosixFile::Open(const std::string& path, PosixFile* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string m = fmt::format("{}: cannot open: {}", path, std::strerror(err));
    return err == ENOENT ? Status::NotFound(m) : Status::InvalidArgument(m);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format("{}: not a regular file", path));
  }
  PosixFile f;
  f.fd_ = fd;
  f.path_ = path;
  f.size_ = static_cast<std::int64_t>(st.st_size);
  f.version_ = fmt::format("{}:{}:{}.{:09}", static_cast<unsigned long long>(st.st_dev),
                           static_cast<unsigned long long>(st.st_ino),
                           static_cast<long long>(st.st_mtim.tv_sec),
                           static_cast<long>(st.st_mtim.tv_nsec));
  *out = std::move(f);
  return Status::Ok();
}

Status PosixFile::ReadSomeAt(std::int64_t offset, std::size_t length, void* out,
                             std::size_t* got) const {
  char* dst = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < length) {
    ssize_t r = ::pread(fd_, dst + done, length - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::Internal(fmt::format("{}: read of {} bytes at byte offset {} failed: {}",
                                          path_, length - done, offset + done,
                                          std::strerror(errno)));
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  AddBytesRead(static_cast<std::int64_t>(done));
  *got = done;
  return Status::Ok();
}

Status PosixFile::ReadAt(std::int64_t offset, std::size_t length, void* out,
                         const char* what) const {
  std::size_t got = 0;
  TFMPI_RETURN_IF_ERROR(ReadSomeAt(offset, length, out, &got));
  if (got != length) {
    return Status::DataLoss(fmt::format(
        "{}: file is truncated: {} needs bytes {}..{} but the file ends at byte {}", path_,
        what, offset, offset + static_cast<std::int64_t>(length), offset + got));
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
