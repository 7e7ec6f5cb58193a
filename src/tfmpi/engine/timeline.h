// Timeline: an optional Chrome-trace (Trace Event Format) JSON file, written by
// rank 0, with one row per tensor and one complete ("X") event per phase:
// NEGOTIATE (submitted -> decided on every rank), WAIT (decided -> its group
// starts), FUSE (copy into the fusion buffer), COLLECTIVE (the transport call),
// COPY_OUT (copy back, with averaging). Opens in Perfetto and chrome://tracing.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tfmpi/common/status.h"
#include "tfmpi/engine/request.h"

namespace tfmpi {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  Status Open(const std::string& path);
  bool enabled() const { return file_ != nullptr; }

  // Records one phase of `tensor`; `args` is extra JSON object text or empty.
  void Span(const std::string& tensor, const char* phase, Clock::time_point start,
            Clock::time_point end, const std::string& args = "");
  // Writes the closing bracket and closes the file.
  void Close();

 private:
  int RowFor(const std::string& tensor);
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  Clock::time_point origin_;
  std::unordered_map<std::string, int> rows_;
};

}  // namespace tfmpi
