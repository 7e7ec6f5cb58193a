// Rank-tagged logging to stderr: "[tfmpi 1/4 WARNING] message".
// The level comes from TFMPI_LOG_LEVEL through the parameter registry; the
// rank is filled in once the communicator exists.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

namespace tfmpi {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError, kOff };

std::optional<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void SetLogRank(int rank, int size);  // rank < 0: not yet known
void LogMessage(LogLevel level, const std::string& message);

inline bool LogEnabled(LogLevel level) { return level >= GetLogLevel(); }

}  // namespace tfmpi

#define TFMPI_LOG(level, ...)                                                  \
  do {                                                                         \
    if (::tfmpi::LogEnabled(level))                                           \
      ::tfmpi::LogMessage(level, fmt::format(__VA_ARGS__));                    \
  } while (0)
#define TFMPI_LOG_TRACE(...) TFMPI_LOG(::tfmpi::LogLevel::kTrace, __VA_ARGS__)
#define TFMPI_LOG_DEBUG(...) TFMPI_LOG(::tfmpi::LogLevel::kDebug, __VA_ARGS__)
#define TFMPI_LOG_INFO(...) TFMPI_LOG(::tfmpi::LogLevel::kInfo, __VA_ARGS__)
#define TFMPI_LOG_WARNING(...) TFMPI_LOG(::tfmpi::LogLevel::kWarning, __VA_ARGS__)
#define TFMPI_LOG_ERROR(...) TFMPI_LOG(::tfmpi::LogLevel::kError, __VA_ARGS__)
