#include "tfmpi/engine/timeline.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace tfmpi {

Timeline::~Timeline() { Close(); }

Status Timeline::Open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    return Status::InvalidArgument(fmt::format("TFMPI_TIMELINE: can't open '{}' for writing: {}",
                                               path, std::strerror(errno)));
  origin_ = Clock::now();
  std::fputs("[\n", file_);
  std::fputs(R"({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "tfmpi rank 0"}})",
             file_);
  return Status::Ok();
}

int Timeline::RowFor(const std::string& tensor) {
  auto [it, inserted] = rows_.try_emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (inserted) {
    nlohmann::json meta = {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0},
                           {"tid", it->second}, {"args", {{"name", tensor}}}};
    fmt::print(file_, ",\n{}", meta.dump());
  }
  return it->second;
}

void Timeline::Span(const std::string& tensor, const char* phase, Clock::time_point start,
                    Clock::time_point end, const std::string& args) {
  if (!file_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  using us = std::chrono::duration<double, std::micro>;
  const int tid = RowFor(tensor);
  fmt::print(file_, ",\n{{\"name\": \"{}\", \"ph\": \"X\", \"pid\": 0, \"tid\": {}, "
                    "\"ts\": {:.3f}, \"dur\": {:.3f}{}}}",
             phase, tid, us(start - origin_).count(), us(end - start).count(),
             args.empty() ? "" : ", \"args\": " + args);
}

void Timeline::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace tfmpi
