// EngineOptions and the TFMPI_* parameters that fill them.
#pragma once

#include <cstddef>
#include <string>

#include "tfmpi/common/logging.h"
#include "tfmpi/common/params.h"

namespace tfmpi {

struct EngineOptions {
  std::size_t fusion_threshold = 64u << 20;
  std::size_t direct_threshold = 1u << 20;
  double cycle_time_ms = 1.0;
  std::size_t cache_capacity = 1024;
  std::string timeline_path;
  double stall_warning_seconds = 60;
  double stall_timeout_seconds = 10;  // Note [Deadlock]
  double peer_timeout_seconds = 45;   // Note [Lost peers]
  std::size_t max_message_elements = 2147483647;
  LogLevel log_level = LogLevel::kWarning;
};

// The registry of every TFMPI_* knob the engine reads.
const ParamRegistry& EngineParams();

// Resolves every parameter through `lookup` (normally the environment).
Status ResolveEngineOptions(const EnvLookup& lookup, EngineOptions* out);

}  // namespace tfmpi
