#include "tfmpi/common/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace tfmpi {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
std::atomic<int> g_rank{-1};
std::atomic<int> g_size{0};
std::mutex g_write_mutex;

constexpr const char* kNames[] = {"trace", "debug", "info", "warning", "error", "off"};

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i)
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  return std::nullopt;
}

const char* LogLevelName(LogLevel level) { return kNames[static_cast<int>(level)]; }

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void SetLogRank(int rank, int size) {
  g_rank = rank;
  g_size = size;
}

void LogMessage(LogLevel level, const std::string& message) {
  std::string tag = g_rank >= 0 ? fmt::format("{}/{}", g_rank.load(), g_size.load()) : "-";
  std::string line = fmt::format("[tfmpi {} {}] {}\n", tag, LogLevelName(level), message);
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace tfmpi
